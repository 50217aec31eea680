/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The project's own declarations of the part of libibverbs' private provider
 * ABI ("IBVERBS_PRIVATE_34", rdma-core 34..?, Debian 12 ships 44) that the urdma
 * verbs provider uses.
 *
 * Why this file exists: Debian ships no <infiniband/driver.h> (libibverbs-dev
 * installs only the public headers), and rdma-core's code is not to be copied
 * into this project.  So this header declares, in its own words, only what the
 * provider touches, with opaque padding wherever it does not need a field.
 * Every size and offset the provider relies on is pinned with _Static_assert;
 * the numbers are the ones measured on x86_64 against rdma-core 44
 * (docs/real-urdma-stack.md, "The user-space verbs provider") and were
 * cross-read against rdma-core v44.0's public source (libibverbs/driver.h,
 * init.c, device.c, cmd_*.c) to understand what each field means.  Where a
 * number comes from is said next to it.
 *
 * The private ABI is only stable within one IBVERBS_PRIVATE_xx version: the
 * library refuses (at dlopen, by symbol version) a provider built for another
 * one, because every entry point below is bound to the version node
 * IBVERBS_PRIVATE_34.  The layouts are x86_64 (LP64) facts; the asserts make a
 * build for another ABI fail loudly instead of corrupting memory.
 *
 * The public parts (struct ibv_device, struct verbs_context, the attribute
 * structs) come from the installed <infiniband/verbs.h> (libibverbs-dev 44),
 * and the kernel's uverbs command layouts from <rdma/ib_user_verbs.h>
 * (linux-libc-dev): those are the real, shipped definitions.
 */
#ifndef URDMA_VERBS_PRIVATE_ABI_H
#define URDMA_VERBS_PRIVATE_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>

#if !defined(__x86_64__) || !defined(__LP64__)
/* The sizes below were measured on x86_64 only. */
#error "urdma/verbs/private_abi.h: layouts are only known for x86_64"
#endif

/* Version of the private ABI these declarations describe; libibverbs 44 exports
 * its provider entry points under the version node "IBVERBS_PRIVATE_34"
 * (objdump -T /usr/lib/x86_64-linux-gnu/libibverbs.so.1). */
#define URDMA_PABI_VERSION_NODE "IBVERBS_PRIVATE_34"
/* Providers are found as lib<name>-rdmav34.so (dynamic_driver.c, and the
 * string "lib%s-rdmav34.so" inside libibverbs.so.1). */
#define URDMA_PABI_PROVIDER_SUFFIX "-rdmav34.so"

/* ------------------------------------------------------------------------ */
/* Opaque helpers                                                           */

/* libibverbs threads its devices on an intrusive doubly linked list (ccan's
 * list_node: two pointers).  We never walk it; we only need its size. */
struct pabi_list_node {
	void *next;
	void *prev;
};
_Static_assert(sizeof(struct pabi_list_node) == 16, "list node: 2 pointers");

/* libibverbs' description of one device found in sysfs/netlink
 * ("struct verbs_sysfs_dev").  The provider never needs to look inside it (we
 * match by table, not with a match_device callback), so it stays opaque here.
 * abi_check.c reads three fields of it at run time to validate the layout,
 * with the offsets below (derived from the v44.0 field list on LP64: list node
 * 16, provider_data 8, match pointer 8, flags 4, sysfs_name[64], dev_t (8,
 * aligned), ibdev_name[64], ...). */
struct pabi_sysfs_dev;
#define PABI_SYSFS_DEV_OFF_MATCH 24
#define PABI_SYSFS_DEV_OFF_SYSFS_NAME 36
#define PABI_SYSFS_DEV_OFF_IBDEV_NAME 112

/* ------------------------------------------------------------------------ */
/* Device matching table ("struct verbs_match_ent", 24 bytes measured)      */

enum pabi_match_kind {
	PABI_MATCH_SENTINEL = 0, /* ends the table */
	PABI_MATCH_PCI = 1,
	PABI_MATCH_MODALIAS = 2, /* fnmatch() pattern against a modalias string */
	PABI_MATCH_DRIVER_ID = 3, /* netlink's enum rdma_driver_id */
};

struct pabi_match_ent {
	void *driver_data;
	union {
		/* For PABI_MATCH_MODALIAS.  libibverbs also offers the device's
		 * *name* to the same fnmatch() as the string
		 * "rdma_device:N<ibdev name>" (rdma-core calls that pattern
		 * kind VERBS_NAME_MATCH: "rdma_device:*N<prefix>*"), which is how
		 * an out-of-tree device whose driver id is RDMA_DRIVER_UNKNOWN
		 * and which may have no parent device/modalias gets matched. */
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind; /* enum pabi_match_kind */
};
_Static_assert(sizeof(struct pabi_match_ent) == 24, "verbs_match_ent is 24 bytes (doc)");
_Static_assert(offsetof(struct pabi_match_ent, u) == 8, "match_ent.u");
_Static_assert(offsetof(struct pabi_match_ent, kind) == 20, "match_ent.kind");

/* ------------------------------------------------------------------------ */
/* Provider description ("struct verbs_device_ops", 72 bytes measured)      */

struct pabi_verbs_device;

struct pabi_verbs_device_ops {
	const char *name;
	/* Inclusive range of the *device's* uverbs ABI version, i.e. the
	 * number in /sys/class/infiniband_verbs/uverbsN/abi_version (the kernel
	 * driver's ib_device_ops.uverbs_abi_ver; 0 when the driver sets none).
	 * Checked after the table match; a device outside it is refused with a
	 * warning on stderr. */
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct pabi_match_ent *match_table;
	/* Only for statically linked libibverbs; NULL for a plugin. */
	const struct pabi_verbs_device_ops **static_providers;
	/* Optional extra matcher; NULL means "the table decides". */
	bool (*match_device)(struct pabi_sysfs_dev *sysfs_dev);
	struct verbs_context *(*alloc_context)(struct ibv_device *device, int cmd_fd,
					       void *private_data);
	/* For ibv_import_device(); NULL: not supported. */
	struct verbs_context *(*import_context)(struct ibv_device *device, int cmd_fd);
	struct pabi_verbs_device *(*alloc_device)(struct pabi_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct pabi_verbs_device *device);
};
_Static_assert(sizeof(struct pabi_verbs_device_ops) == 72, "verbs_device_ops is 72 bytes (doc)");
_Static_assert(offsetof(struct pabi_verbs_device_ops, match_min_abi_version) == 8, "ops.min_abi");
_Static_assert(offsetof(struct pabi_verbs_device_ops, match_table) == 16, "ops.match_table");
_Static_assert(offsetof(struct pabi_verbs_device_ops, match_device) == 32, "ops.match_device");
_Static_assert(offsetof(struct pabi_verbs_device_ops, alloc_context) == 40, "ops.alloc_context");
_Static_assert(offsetof(struct pabi_verbs_device_ops, alloc_device) == 56, "ops.alloc_device");
_Static_assert(offsetof(struct pabi_verbs_device_ops, uninit_device) == 64, "ops.uninit_device");

/* ------------------------------------------------------------------------ */
/* The device ("struct verbs_device", 712 bytes measured, sysfs at 696)     */

/* The provider allocates this (inside its own struct) in alloc_device; the
 * library then fills ops, refcount, the list node and sysfs, and the public
 * ibv_device part, so the allocation must be at least this big and the
 * offsets must be the library's. */
struct pabi_verbs_device {
	struct ibv_device device; /* must be first: the library casts */
	const struct pabi_verbs_device_ops *ops;
	int refcount; /* C11 atomic_int in the library; same size and alignment */
	struct pabi_list_node entry;
	struct pabi_sysfs_dev *sysfs;
	uint64_t core_support;
};
/* struct ibv_device is public: 2 pointers + 2 enums + 64 + 64 + 256 + 256. */
_Static_assert(sizeof(struct ibv_device) == 664, "public ibv_device is 664 bytes");
_Static_assert(offsetof(struct pabi_verbs_device, ops) == 664, "verbs_device.ops");
_Static_assert(offsetof(struct pabi_verbs_device, refcount) == 672, "verbs_device.refcount");
_Static_assert(offsetof(struct pabi_verbs_device, entry) == 680, "verbs_device.entry");
_Static_assert(offsetof(struct pabi_verbs_device, sysfs) == 696, "verbs_device.sysfs at 696 (doc)");
_Static_assert(sizeof(struct pabi_verbs_device) == 712, "verbs_device is 712 bytes (doc)");

/* ------------------------------------------------------------------------ */
/* Context operations ("struct verbs_context_ops", 608 bytes = 76 slots)    */

/* The library copies every non-NULL slot into the context (verbs_set_ops), so
 * unused slots are left NULL and the library keeps its own defaults (which
 * answer EOPNOTSUPP/ENOSYS).  Slots are alphabetical in rdma-core; the indices
 * used here are the measured ones from the doc. */
typedef void (*pabi_unused_op)(void);

struct pabi_context_ops {
	pabi_unused_op slots_0_4[5];
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context); /* slot 5 */
	pabi_unused_op slots_6_25[20];
	int (*dealloc_pd)(struct ibv_pd *pd); /* slot 26 */
	pabi_unused_op slots_27_38[12];
	void (*free_context)(struct ibv_context *context); /* slot 39 */
	pabi_unused_op slots_40_57[18];
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size); /* slot 58 */
	pabi_unused_op slot_59;
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr); /* slot 60 */
	pabi_unused_op slots_61_75[15];
};
#define PABI_SLOT(member) (offsetof(struct pabi_context_ops, member) / sizeof(void *))
_Static_assert(sizeof(struct pabi_context_ops) == 608, "verbs_context_ops is 608 bytes (doc)");
_Static_assert(sizeof(struct pabi_context_ops) / sizeof(void *) == 76, "76 slots (doc)");
_Static_assert(PABI_SLOT(alloc_pd) == 5, "alloc_pd is slot 5 (doc)");
_Static_assert(PABI_SLOT(dealloc_pd) == 26, "dealloc_pd is slot 26 (doc)");
_Static_assert(PABI_SLOT(free_context) == 39, "free_context is slot 39 (doc)");
_Static_assert(PABI_SLOT(query_device_ex) == 58, "query_device_ex is slot 58 (doc)");
_Static_assert(PABI_SLOT(query_port) == 60, "query_port is slot 60 (doc)");

/* ------------------------------------------------------------------------ */
/* uverbs write() command buffers handed to the ibv_cmd_* helpers           */

/* The ibv_cmd_* helpers take "header + core request [+ driver data]" buffers;
 * the size passed with them tells the library how much driver-specific data
 * (udata) follows the core request: exactly the core size means none, which is
 * what the urdma kernel driver expects.  The library fills the header and the
 * response pointer itself.  Built from the kernel's own uapi structs. */
struct pabi_cmd_get_context {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
};
_Static_assert(sizeof(struct pabi_cmd_get_context) ==
		       sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_get_context),
	       "get_context: header + core, no udata");

struct pabi_cmd_query_port {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
	__u8 port_num; /* the library writes these two on the write() path */
	__u8 reserved[7];
};
_Static_assert(sizeof(struct pabi_cmd_query_port) ==
		       sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_query_port),
	       "query_port: header + core, no udata");
_Static_assert(offsetof(struct pabi_cmd_query_port, port_num) ==
		       sizeof(struct ib_uverbs_cmd_hdr) + offsetof(struct ib_uverbs_query_port, port_num),
	       "query_port.port_num");

struct pabi_cmd_alloc_pd {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
};
_Static_assert(sizeof(struct pabi_cmd_alloc_pd) ==
		       sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_alloc_pd),
	       "alloc_pd: header + core, no udata");
_Static_assert(sizeof(struct ib_uverbs_get_context_resp) == 8, "get_context resp core");
_Static_assert(sizeof(struct ib_uverbs_alloc_pd_resp) == 4, "alloc_pd resp core");

/* ------------------------------------------------------------------------ */
/* Entry points, all exported by libibverbs.so.1 under IBVERBS_PRIVATE_34    */

/* Registers a provider; called from the plugin's constructor during dlopen. */
void verbs_register_driver_34(const struct pabi_verbs_device_ops *ops);

/* calloc(alloc_size), then initialise the verbs_context found context_offset
 * bytes into it (the offset is passed disguised as a pointer).  Takes ownership
 * of cmd_fd: on failure it closes it and returns NULL. */
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id);
/* Undo the above (closes cmd_fd and async_fd); the caller frees its memory. */
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx, const struct pabi_context_ops *ops);

/* These return 0 or a positive errno value. */
int ibv_cmd_get_context(struct verbs_context *context, struct pabi_cmd_get_context *cmd,
			size_t cmd_size, struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
/* resp/resp_size may be NULL: the library then uses its own buffer. */
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr, struct pabi_cmd_query_port *cmd,
		       size_t cmd_size);
/* Fills pd->handle and pd->context. */
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct pabi_cmd_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);

/* The list abi_check.c verifies with dlvsym(..., URDMA_PABI_VERSION_NODE). */
#define URDMA_PABI_SYMBOLS                                                     \
	X(verbs_register_driver_34)                                            \
	X(_verbs_init_and_alloc_context)                                       \
	X(verbs_uninit_context)                                                \
	X(verbs_set_ops)                                                       \
	X(ibv_cmd_get_context)                                                 \
	X(ibv_cmd_query_device_any)                                            \
	X(ibv_cmd_query_port)                                                  \
	X(ibv_cmd_alloc_pd)                                                    \
	X(ibv_cmd_dealloc_pd)

#endif /* URDMA_VERBS_PRIVATE_ABI_H */
