/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * urdma-abi-check: checks what can be checked at run time of the libibverbs in
 * use against the project's private-ABI declarations (private_abi.h), and of
 * the provider against a urdma device when one exists.
 *
 *   urdma-abi-check [--provider PATH] [--require-device] [--no-verbs]
 *
 * Checks, in order (each prints "ok", "WARN" or "FAIL"):
 *  1. which libibverbs is loaded (its real file name carries rdma-core's
 *     version: libibverbs.so.1.14.<rdma-core>.0); the layouts were measured on
 *     44, and rdma-core 40..56 declare the same facts (source reading only).
 *  2. every private entry point the provider uses exists under the version
 *     node IBVERBS_PRIVATE_34 (dlvsym), and the registration symbol of any
 *     other private ABI is absent (sanity of the version reading).
 *  3. the provider (PATH, default: the installed one) dlopen()s with
 *     RTLD_NOW (all its symbols bind) and its exported verbs_provider_urdma
 *     looks like ours.
 *  4. for every device whose name contains "urdma": the library stored our
 *     ops at verbs_device+664 and a sysfs description at +696 whose name fields
 *     (+36, +112) and match pointer (+24) agree with the device and with our
 *     match table -- i.e. the library and private_abi.h agree on the layout;
 *     then, unless --no-verbs, open, query_device(_ex), query_port, query_gid,
 *     query_pkey, alloc_pd/dealloc_pd, an unsupported verb failing cleanly,
 *     close.
 * Exit status: 0 when nothing FAILed.  Without a urdma device, part 4 is
 * skipped (a FAIL with --require-device).
 */
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private_abi.h"

#define DEFAULT_PROVIDER "/usr/lib/x86_64-linux-gnu/libibverbs/liburdma" URDMA_PABI_PROVIDER_SUFFIX

static int failures;

static void result(const char *what, int ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void result(const char *what, int ok, const char *fmt, ...)
{
	char detail[512] = "";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("%s %s%s%s\n", ok > 0 ? "ok  " : ok == 0 ? "FAIL" : "WARN", what,
	       detail[0] ? ": " : "", detail);
	if (ok == 0)
		failures++;
}

/* 1. The library's identity. */
static void *check_library(void)
{
	struct link_map *lm = NULL;
	char real[PATH_MAX];
	const char *base;
	unsigned a, b, ver, d;
	void *h;

	h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libibverbs.so.1", RTLD_NOW);
	if (!h) {
		result("libibverbs.so.1 loads", 0, "%s", dlerror());
		return NULL;
	}
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm || !realpath(lm->l_name, real)) {
		result("libibverbs identity", -1, "cannot resolve its file name");
		return h;
	}
	base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
	if (sscanf(base, "libibverbs.so.%u.%u.%u.%u", &a, &b, &ver, &d) != 4) {
		result("libibverbs identity", -1, "%s: version not in the file name", real);
	} else if (ver == 44) {
		result("libibverbs is rdma-core 44 (layouts measured on it)", 1, "%s", real);
	} else if (ver >= 40 && ver <= 56) {
		result("libibverbs rdma-core version", -1,
		       "%s: %u, same layout facts by source reading, not measured", real, ver);
	} else {
		result("libibverbs rdma-core version", 0,
		       "%s: %u, private layouts unknown (known: 44, read: 40..56)", real, ver);
	}
	return h;
}

/* 2. The entry points, by symbol version. */
static void check_symbols(void *h)
{
	void *p;

#define X(sym)                                                                 \
	p = dlvsym(h, #sym, URDMA_PABI_VERSION_NODE);                          \
	result(#sym "@" URDMA_PABI_VERSION_NODE, p != NULL, "%s",              \
	       p ? "" : "missing");
	URDMA_PABI_SYMBOLS
#undef X

	/* The register symbol embeds the private ABI number; a library of
	 * another private ABI (e.g. rdma-core 33: verbs_register_driver_33) has
	 * no _34 and the provider would not load at all. */
	p = dlsym(h, "verbs_register_driver_33");
	result("no verbs_register_driver_33 (older private ABI)", p == NULL, "%s",
	       p ? "present: unexpected library" : "");
}

/* 3. The provider plugin. */
static const struct pabi_verbs_device_ops *check_provider(const char *path)
{
	const struct pabi_verbs_device_ops *ops;
	void *ph;

	/* RTLD_NOW: any symbol the provider needs that the library lacks (or has
	 * under another version) fails here, as it would in libibverbs'
	 * own dlopen.  The constructor registers the driver, as in real use. */
	ph = dlopen(path, RTLD_NOW);
	if (!ph) {
		result("provider dlopen(RTLD_NOW)", 0, "%s", dlerror());
		return NULL;
	}
	result("provider dlopen(RTLD_NOW)", 1, "%s", path);
	ops = dlsym(ph, "verbs_provider_urdma");
	if (!ops) {
		result("provider exports verbs_provider_urdma", 0, "%s", dlerror());
		return NULL;
	}
	result("provider ops: name", ops->name && !strcmp(ops->name, "urdma"), "%s",
	       ops->name ? ops->name : "(null)");
	result("provider ops: callbacks", ops->alloc_device && ops->uninit_device &&
	       ops->alloc_context, "%s", "");
	result("provider ops: match table",
	       ops->match_table && ops->match_table[0].kind == PABI_MATCH_MODALIAS &&
		       ops->match_table[1].kind == PABI_MATCH_SENTINEL,
	       "%s", ops->match_table ? ops->match_table[0].u.modalias : "(none)");
	printf("info provider uverbs ABI range: %u..%u\n", ops->match_min_abi_version,
	       ops->match_max_abi_version);
	return ops;
}

/* 4a. Layout facts visible in a device the library built with our provider. */
static int check_device_layout(struct ibv_device *dev,
			       const struct pabi_verbs_device_ops *ops)
{
	const struct pabi_verbs_device *vdev = (const struct pabi_verbs_device *)dev;
	const char *sysfs = (const char *)vdev->sysfs;
	char what[256];
	int ok = 1;

	snprintf(what, sizeof(what), "%s: verbs_device.ops (+664) is our provider",
		 dev->name);
	result(what, vdev->ops == ops, "%p vs %p", (const void *)vdev->ops, (const void *)ops);
	ok &= vdev->ops == ops;
	snprintf(what, sizeof(what), "%s: verbs_device.refcount (+672) >= 1", dev->name);
	result(what, vdev->refcount >= 1 && vdev->refcount < 1000, "%d", vdev->refcount);
	snprintf(what, sizeof(what), "%s: verbs_device.sysfs (+696) set", dev->name);
	result(what, sysfs != NULL, "%s", "");
	if (!sysfs)
		return 0;
	snprintf(what, sizeof(what), "%s: sysfs_dev ibdev_name (+%d)", dev->name,
		 PABI_SYSFS_DEV_OFF_IBDEV_NAME);
	result(what, !strncmp(sysfs + PABI_SYSFS_DEV_OFF_IBDEV_NAME, dev->name,
			      IBV_SYSFS_NAME_MAX), "%s", "");
	snprintf(what, sizeof(what), "%s: sysfs_dev sysfs_name (+%d) = %s", dev->name,
		 PABI_SYSFS_DEV_OFF_SYSFS_NAME, dev->dev_name);
	result(what, !strncmp(sysfs + PABI_SYSFS_DEV_OFF_SYSFS_NAME, dev->dev_name,
			      IBV_SYSFS_NAME_MAX), "%s", "");
	snprintf(what, sizeof(what), "%s: sysfs_dev match (+%d) is our table entry",
		 dev->name, PABI_SYSFS_DEV_OFF_MATCH);
	result(what,
	       *(const struct pabi_match_ent *const *)(sysfs + PABI_SYSFS_DEV_OFF_MATCH) ==
		       &ops->match_table[0],
	       "%s", "");
	printf("info %s: node_type %s, transport %s\n", dev->name,
	       ibv_node_type_str(dev->node_type),
	       dev->transport_type == IBV_TRANSPORT_IB ? "IB" : "not IB");
	return ok;
}

/* 4b. The ops, end to end through the kernel. */
static void check_device_verbs(struct ibv_device *dev)
{
	struct ibv_device_attr_ex attr_ex;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_context *ctx;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	char what[256];
	int ret, cmd_fd, async_fd;
	__be16 pkey;

#define R(ok, ...)                                                             \
	do {                                                                   \
		result(what, (ok), __VA_ARGS__);                               \
	} while (0)

	snprintf(what, sizeof(what), "%s: ibv_open_device", dev->name);
	ctx = ibv_open_device(dev);
	R(ctx != NULL, "%s", ctx ? "" : strerror(errno));
	if (!ctx)
		return;

	snprintf(what, sizeof(what), "%s: ibv_query_device", dev->name);
	ret = ibv_query_device(ctx, &attr);
	R(ret == 0, "%s; ports %u, max_pd %d, guid %016llx", ret ? strerror(ret) : "ok",
	  attr.phys_port_cnt, attr.max_pd, (unsigned long long)be64toh(attr.node_guid));

	snprintf(what, sizeof(what), "%s: ibv_query_device_ex", dev->name);
	ret = ibv_query_device_ex(ctx, NULL, &attr_ex);
	R(ret == 0, "%s", ret ? strerror(ret) : "");

	snprintf(what, sizeof(what), "%s: ibv_query_port(1)", dev->name);
	ret = ibv_query_port(ctx, 1, &port);
	R(ret == 0, "%s; state %s, lid %u, sm_lid %u, gid_tbl %d, pkey_tbl %u, link_layer %u",
	  ret ? strerror(ret) : "ok", ibv_port_state_str(port.state), port.lid, port.sm_lid,
	  port.gid_tbl_len, port.pkey_tbl_len, port.link_layer);

	snprintf(what, sizeof(what), "%s: ibv_query_gid(1, 0)", dev->name);
	ret = ibv_query_gid(ctx, 1, 0, &gid);
	R(ret == 0, "%s; %016llx:%016llx", ret ? strerror(errno) : "ok",
	  (unsigned long long)be64toh(gid.global.subnet_prefix),
	  (unsigned long long)be64toh(gid.global.interface_id));

	snprintf(what, sizeof(what), "%s: ibv_query_pkey(1, 0)", dev->name);
	ret = ibv_query_pkey(ctx, 1, 0, &pkey);
	R(ret == 0, "%s; 0x%04x", ret ? strerror(errno) : "ok", be16toh(pkey));

	snprintf(what, sizeof(what), "%s: ibv_alloc_pd", dev->name);
	pd = ibv_alloc_pd(ctx);
	R(pd != NULL, "%s", pd ? "" : strerror(errno));
	if (pd) {
		snprintf(what, sizeof(what), "%s: ibv_dealloc_pd", dev->name);
		ret = ibv_dealloc_pd(pd);
		R(ret == 0, "%s", ret ? strerror(ret) : "");
	}

	/* An op the provider leaves NULL keeps the library's default, which
	 * must fail cleanly (the slot indices of the ops we do set are right if
	 * the calls above reached us and this one did not). */
	snprintf(what, sizeof(what), "%s: unsupported ibv_create_cq fails cleanly", dev->name);
	errno = 0;
	cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	R(cq == NULL, "errno %d (%s)", errno, strerror(errno));
	if (cq)
		ibv_destroy_cq(cq);

	/* free_context (slot 39) is ours if closing the device releases the
	 * command and async fds (our op calls verbs_uninit_context; the
	 * library's default does nothing). */
	cmd_fd = ctx->cmd_fd;
	async_fd = ctx->async_fd;
	snprintf(what, sizeof(what), "%s: ibv_close_device", dev->name);
	ret = ibv_close_device(ctx);
	R(ret == 0, "%s", "");
	snprintf(what, sizeof(what), "%s: close released cmd_fd %d and async_fd %d",
		 dev->name, cmd_fd, async_fd);
	R(fcntl(cmd_fd, F_GETFD) == -1 && errno == EBADF &&
		  (async_fd < 0 || (fcntl(async_fd, F_GETFD) == -1 && errno == EBADF)),
	  "%s", "");
#undef R
}

int main(int argc, char **argv)
{
	const struct pabi_verbs_device_ops *ops = NULL;
	const char *provider = DEFAULT_PROVIDER;
	int require_device = 0, verbs = 1, found = 0, n = 0, i;
	struct ibv_device **list;
	void *h;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--provider") && i + 1 < argc)
			provider = argv[++i];
		else if (!strcmp(argv[i], "--require-device"))
			require_device = 1;
		else if (!strcmp(argv[i], "--no-verbs"))
			verbs = 0;
		else {
			fprintf(stderr,
				"usage: %s [--provider PATH] [--require-device] [--no-verbs]\n",
				argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	h = check_library();
	if (h)
		check_symbols(h);
	ops = check_provider(provider);

	list = ibv_get_device_list(&n);
	if (!list) {
		result("ibv_get_device_list", require_device ? 0 : -1, "%s", strerror(errno));
		n = 0;
	}
	for (i = 0; i < n; i++) {
		struct ibv_device *dev = list[i];

		if (!strstr(ibv_get_device_name(dev), "urdma"))
			continue;
		found++;
		if (!ops) {
			result("device checks", 0, "%s: provider not loaded", dev->name);
			continue;
		}
		if (check_device_layout(dev, ops) && verbs)
			check_device_verbs(dev);
	}
	if (list)
		ibv_free_device_list(list);
	if (!found)
		result("a urdma device", require_device ? 0 : -1, "none found (%d devices): %s",
		       n, require_device ? "required" : "device checks skipped");

	printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
	return failures ? 1 : 0;
}
