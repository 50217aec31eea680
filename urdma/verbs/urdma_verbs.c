/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * liburdma-rdmav34.so: the user-space verbs provider libibverbs loads for a
 * kernel urdma device.
 *
 * libibverbs finds providers through "driver urdma" lines in
 * the files in /etc/libibverbs.d and dlopen()s lib<name>-rdmav34.so from its
 * provider directory; our constructor then registers the device ops below.
 * For each uverbs device it sees, the library asks every registered provider
 * whether the device is theirs (match table + uverbs ABI range) and, if so,
 * asks it to allocate the device; opening the device asks the provider for a
 * context, and the context's ops serve the verbs.
 *
 * The urdma kernel driver sends and expects no driver-specific data (udata)
 * with any command, so every op here is the plain core uverbs command, sent
 * by libibverbs' own ibv_cmd_* helpers.  The provider implements only what a
 * client of a urdma device needs (ibacm, librdmacm, ibv_devinfo):
 *   device alloc/free, context alloc/free, query_device(_ex), query_port,
 *   alloc_pd/dealloc_pd (librdmacm allocates a PD per device).
 * ibv_query_gid and ibv_query_pkey need no op: the library answers them from
 * the kernel (ioctl) or sysfs.  Every other verb is left to the library's
 * default, which fails with EOPNOTSUPP/ENOSYS instead of crashing.
 *
 * The private ABI is declared by the project in private_abi.h (Debian ships
 * no driver.h); see there for the layout facts and where they come from.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "private_abi.h"

#define URDMA_EXPORT __attribute__((visibility("default")))

#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* The provider's device: the library's verbs_device first, then our state (none
 * yet).  Allocated here, freed by uninit_device when the library drops its
 * last reference. */
struct urdma_device {
	struct pabi_verbs_device vdev;
};

/* The provider's context; the library's verbs_context (public in verbs.h) is
 * embedded and must end with struct ibv_context, which it does. */
struct urdma_context {
	struct verbs_context vctx;
};

/*
 * Which devices are ours: by name.  An out-of-tree kernel driver reports
 * RDMA_DRIVER_UNKNOWN over netlink (so a driver-id match is impossible) and a
 * virtual device has no parent PCI device/modalias, so libibverbs offers the
 * string "rdma_device:N<ibdev name>" to this fnmatch() pattern.  Any name that
 * contains "urdma" matches (urdma0, urdma_a, ...), wherever the word is.
 */
static const struct pabi_match_ent urdma_match_table[] = {
	{ .u.modalias = "rdma_device:*Nurdma*", .kind = PABI_MATCH_MODALIAS },
	{ .kind = PABI_MATCH_SENTINEL },
};

/* ----------------------------------------------------------------------- */
/* Context ops                                                             */

static int urdma_query_device_ex(struct ibv_context *context,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr, size_t attr_size)
{
	/* NULL resp: the library uses its own response buffer; we need none of
	 * the raw fields. */
	return ibv_cmd_query_device_any(context, input, attr, attr_size, NULL, NULL);
}

static int urdma_query_port(struct ibv_context *context, uint8_t port_num,
			    struct ibv_port_attr *port_attr)
{
	struct pabi_cmd_query_port cmd;

	memset(&cmd, 0, sizeof(cmd));
	return ibv_cmd_query_port(context, port_num, port_attr, &cmd, sizeof(cmd));
}

static struct ibv_pd *urdma_alloc_pd(struct ibv_context *context)
{
	struct pabi_cmd_alloc_pd cmd;
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_alloc_pd(context, pd, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return pd;
}

static int urdma_dealloc_pd(struct ibv_pd *pd)
{
	int ret = ibv_cmd_dealloc_pd(pd);

	/* On failure the PD still exists in the kernel: keep the memory so the
	 * caller may retry, as the verbs contract says. */
	if (ret)
		return ret;
	free(pd);
	return 0;
}

static void urdma_free_context(struct ibv_context *context)
{
	struct urdma_context *ctx = container_of(context, struct urdma_context, vctx.context);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct pabi_context_ops urdma_context_ops = {
	.alloc_pd = urdma_alloc_pd,
	.dealloc_pd = urdma_dealloc_pd,
	.free_context = urdma_free_context,
	.query_device_ex = urdma_query_device_ex,
	.query_port = urdma_query_port,
};

/* ----------------------------------------------------------------------- */
/* Device ops                                                              */

static struct verbs_context *urdma_alloc_context(struct ibv_device *ibdev, int cmd_fd,
						 void *private_data)
{
	struct pabi_cmd_get_context cmd;
	struct ib_uverbs_get_context_resp resp;
	struct urdma_context *ctx;
	int ret;

	(void)private_data; /* only used by providers with driver-specific open attrs */

	/* Owns cmd_fd from here: closes it itself if it fails. */
	ctx = _verbs_init_and_alloc_context(
		ibdev, cmd_fd, sizeof(*ctx),
		(struct verbs_context *)(uintptr_t)offsetof(struct urdma_context, vctx),
		RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_get_context(&ctx->vctx, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		verbs_uninit_context(&ctx->vctx); /* closes cmd_fd */
		free(ctx);
		errno = ret;
		return NULL;
	}

	verbs_set_ops(&ctx->vctx, &urdma_context_ops);
	return &ctx->vctx;
}

static struct pabi_verbs_device *urdma_alloc_device(struct pabi_sysfs_dev *sysfs_dev)
{
	struct urdma_device *dev;

	(void)sysfs_dev; /* the library copies what it needs into the device */
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->vdev;
}

static void urdma_uninit_device(struct pabi_verbs_device *vdev)
{
	free(container_of(vdev, struct urdma_device, vdev));
}

/*
 * Exported under the name rdma-core's own providers use for this structure
 * (verbs_provider_<name>) so that abi_check can find it with dlsym() and
 * compare it with what the library stored in a matched device.  Nothing else
 * is exported (-fvisibility=hidden).
 */
URDMA_EXPORT const struct pabi_verbs_device_ops verbs_provider_urdma = {
	.name = "urdma",
	/*
	 * uverbs ABI range: the whole uint32 range, [0, UINT32_MAX].  The number
	 * is the kernel driver's own uverbs_abi_ver (0 if it sets none); it
	 * versions driver-specific udata, and urdma exchanges none, so every
	 * value is acceptable and the kernel side is free to pick any (0 or 1).
	 */
	.match_min_abi_version = 0,
	.match_max_abi_version = UINT32_MAX,
	.match_table = urdma_match_table,
	.alloc_context = urdma_alloc_context,
	.alloc_device = urdma_alloc_device,
	.uninit_device = urdma_uninit_device,
};

/* dlopen() runs this; libibverbs then offers its unmatched devices to us. */
static void __attribute__((constructor)) urdma_register_driver(void)
{
	verbs_register_driver_34(&verbs_provider_urdma);
}
