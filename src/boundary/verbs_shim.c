/* ibv_query_port is a static inline in <infiniband/verbs.h> that picks the
 * provider's extended entry point or the compat symbol; compiling it in C is
 * the only way to get that choice right for every device. */
#include <infiniband/verbs.h>

int urdma_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

int urdma_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	return ibv_query_gid(ctx, port, index, gid);
}
