/* ibv_query_port is a static inline in <infiniband/verbs.h> that picks the
 * device's extended entry point or the compat symbol; only C compiled
 * against the header makes that choice the way the daemon does. */
#include <infiniband/verbs.h>

int urdma_acm_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}
