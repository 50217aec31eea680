// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * urdma: a virtual InfiniBand device on top of an Ethernet netdev, for
 * running the stock ibacm daemon (and this project's provider) against a
 * real kernel RDMA stack.
 *
 * Devices are made like rxe/siw devices are:
 *
 *     rdma link add urdma0 type urdma netdev dummy0
 *     rdma link delete urdma0
 *
 * Each device has one InfiniBand port.  Its identity comes from the netdev's
 * MAC: GID 0 is fe80::/64 + the modified EUI-64 of the MAC (the same
 * interface id the netdev's own IPv6 link-local address uses), and the node
 * and port GUID are that EUI-64.  The port is ACTIVE while the netdev is up
 * with carrier, DOWN otherwise; the device is removed when its netdev is.
 *
 * Nothing is ever transmitted.  The verbs exist so that ib_core's MAD, SA
 * and CM layers attach to the port (which is what makes rdma_cm send its
 * path queries for AF_IB addresses to ibacm over netlink) and so that user
 * space can open the device through uverbs: posted sends complete at once
 * with success, posted receives wait forever (or until the QP enters the
 * error state, which flushes them).  No memory is ever read or written on
 * behalf of a work request, so memory regions are bookkeeping only.
 *
 * Module parameters:
 *   lid  - the LID every port added afterwards reports (default 0: urdma
 *          ports have no subnet manager to assign one).  For tests that
 *          need a non-zero LID.
 *
 * User space: uverbs ABI version URDMA_UVERBS_ABI_VERSION, no driver
 * specific udata in any command.  Device names must contain "urdma",
 * because the libibverbs provider (urdma/verbs) matches devices by name.
 */

#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/etherdevice.h>
#include <linux/if_arp.h>
#include <linux/rtnetlink.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_mad.h>
#include <rdma/rdma_netlink.h>

#define URDMA_UVERBS_ABI_VERSION 1

/* The SM LID query_port reports: ib_sa needs a valid unicast one to build
 * the address handle it sends SA queries to (nobody answers them). */
#define URDMA_SM_LID 1

#define URDMA_MAX_QP 1024
#define URDMA_MAX_QP_WR 4096
#define URDMA_MAX_SGE 32
#define URDMA_MAX_CQ 1024
#define URDMA_MAX_CQE 16384
#define URDMA_MAX_MR 4096
#define URDMA_MAX_PD 1024
#define URDMA_MAX_AH 4096

/* The "all keys" lkey of the device; MR keys count up from above it. */
#define URDMA_LOCAL_DMA_LKEY 0

static ushort lid;
module_param(lid, ushort, 0444);
MODULE_PARM_DESC(lid, "LID of ports added afterwards (default 0)");

struct urdma_dev {
	struct ib_device ibdev;
	/* Entry in urdma_devices; protected by RTNL. */
	struct list_head list;
	struct net_device *ndev;	/* held (dev_hold) until dealloc */
	netdevice_tracker ndev_tracker;
	/* Set (under RTNL) once ib_register_device has returned. */
	bool registered;
	/* The netdev started unregistering before we were registered. */
	bool ndev_gone;
	/* Port state as last seen from the netdev; written under RTNL. */
	bool port_active;
	u16 lid;
	__be64 guid;		/* modified EUI-64 of the MAC */
	spinlock_t port_lock;	/* port_cap_flags */
	u32 port_cap_flags;
	atomic_t next_qpn;
	atomic_t next_key;
};

struct urdma_ucontext {
	struct ib_ucontext ibuc;
};

struct urdma_pd {
	struct ib_pd ibpd;
};

struct urdma_ah {
	struct ib_ah ibah;
	struct rdma_ah_attr attr;
};

struct urdma_cq {
	struct ib_cq ibcq;
	spinlock_t lock;
	struct ib_wc *ring;	/* ibcq.cqe + 1 slots */
	u32 size;
	u32 head;		/* next to poll */
	u32 count;
	bool armed;
	bool overflowed;
};

struct urdma_qp {
	struct ib_qp ibqp;
	spinlock_t lock;	/* state and the receive queue */
	enum ib_qp_state state;
	enum ib_sig_type sq_sig_type;
	struct ib_qp_attr attr;	/* what modify_qp was last told */
	int attr_mask;
	struct ib_qp_cap cap;
	/* Posted receives, kept only to be flushed in the error state. */
	u64 *rq;
	u32 rq_size;
	u32 rq_head;
	u32 rq_count;
};

struct urdma_mr {
	struct ib_mr ibmr;
};

static LIST_HEAD(urdma_devices);

static inline struct urdma_dev *to_udev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct urdma_dev, ibdev);
}

static inline struct urdma_cq *to_ucq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct urdma_cq, ibcq);
}

static inline struct urdma_qp *to_uqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct urdma_qp, ibqp);
}

static inline struct urdma_ah *to_uah(struct ib_ah *ibah)
{
	return container_of(ibah, struct urdma_ah, ibah);
}

/*
 * Modified EUI-64 of a MAC: ff:fe in the middle and the universal/local bit
 * flipped (RFC 4291 appendix A), so that 52:54:00:12:34:56 gives
 * 5054:00ff:fe12:3456, as in the netdev's fe80:: address.
 */
static __be64 urdma_eui64(const u8 *mac)
{
	u8 eui[8];

	eui[0] = mac[0] ^ 0x02;
	eui[1] = mac[1];
	eui[2] = mac[2];
	eui[3] = 0xff;
	eui[4] = 0xfe;
	eui[5] = mac[3];
	eui[6] = mac[4];
	eui[7] = mac[5];
	return *(__be64 *)eui;
}

static bool urdma_ndev_up(struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev);
}

/* ---------------------------------------------------------------- device */

static int urdma_query_device(struct ib_device *ibdev,
			      struct ib_device_attr *attr,
			      struct ib_udata *udata)
{
	struct urdma_dev *udev = to_udev(ibdev);

	/* No driver-specific input is defined: refuse what we'd ignore. */
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;

	memset(attr, 0, sizeof(*attr));
	attr->fw_ver = 1;
	attr->sys_image_guid = udev->guid;
	attr->max_mr_size = U64_MAX;
	attr->page_size_cap = PAGE_SIZE;
	attr->max_qp = URDMA_MAX_QP;
	attr->max_qp_wr = URDMA_MAX_QP_WR;
	attr->device_cap_flags = IB_DEVICE_PORT_ACTIVE_EVENT |
				 IB_DEVICE_SYS_IMAGE_GUID |
				 IB_DEVICE_RC_RNR_NAK_GEN;
	/* User unregistration is what makes `rdma link delete` work. */
	attr->kernel_cap_flags = IBK_LOCAL_DMA_LKEY | IBK_ALLOW_USER_UNREG;
	attr->max_send_sge = URDMA_MAX_SGE;
	attr->max_recv_sge = URDMA_MAX_SGE;
	attr->max_sge_rd = URDMA_MAX_SGE;
	attr->max_cq = URDMA_MAX_CQ;
	attr->max_cqe = URDMA_MAX_CQE;
	attr->max_mr = URDMA_MAX_MR;
	attr->max_pd = URDMA_MAX_PD;
	attr->max_qp_rd_atom = 16;
	attr->max_qp_init_rd_atom = 16;
	attr->max_res_rd_atom = 16 * URDMA_MAX_QP;
	attr->atomic_cap = IB_ATOMIC_NONE;
	attr->max_ah = URDMA_MAX_AH;
	attr->max_pkeys = 1;
	attr->local_ca_ack_delay = 15;
	return 0;
}

static int urdma_query_port(struct ib_device *ibdev, u32 port,
			    struct ib_port_attr *attr)
{
	struct urdma_dev *udev = to_udev(ibdev);
	unsigned int mtu = READ_ONCE(udev->ndev->mtu);
	enum ib_mtu ibmtu;
	unsigned long flags;

	/* The largest IB MTU that fits the netdev's, as a real link would. */
	if (mtu >= 4096)
		ibmtu = IB_MTU_4096;
	else if (mtu >= 2048)
		ibmtu = IB_MTU_2048;
	else if (mtu >= 1024)
		ibmtu = IB_MTU_1024;
	else if (mtu >= 512)
		ibmtu = IB_MTU_512;
	else
		ibmtu = IB_MTU_256;

	/* ib_query_port cleared *attr. */
	if (READ_ONCE(udev->port_active)) {
		attr->state = IB_PORT_ACTIVE;
		attr->phys_state = IB_PORT_PHYS_STATE_LINK_UP;
	} else {
		attr->state = IB_PORT_DOWN;
		attr->phys_state = IB_PORT_PHYS_STATE_DISABLED;
	}
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = ibmtu;
	attr->phys_mtu = ib_mtu_enum_to_int(ibmtu);
	attr->gid_tbl_len = 1;
	spin_lock_irqsave(&udev->port_lock, flags);
	attr->port_cap_flags = udev->port_cap_flags;
	spin_unlock_irqrestore(&udev->port_lock, flags);
	attr->max_msg_sz = 1U << 31;
	attr->pkey_tbl_len = 1;
	attr->lid = udev->lid;
	attr->sm_lid = URDMA_SM_LID;
	attr->lmc = 0;
	attr->max_vl_num = 1;
	attr->sm_sl = 0;
	attr->subnet_timeout = 18;
	attr->active_width = IB_WIDTH_4X;
	attr->active_speed = IB_SPEED_EDR;
	return 0;
}

static int urdma_modify_port(struct ib_device *ibdev, u32 port, int mask,
			     struct ib_port_modify *props)
{
	struct urdma_dev *udev = to_udev(ibdev);
	unsigned long flags;

	/* ib_cm and umad advertise themselves in the capability mask. */
	spin_lock_irqsave(&udev->port_lock, flags);
	udev->port_cap_flags |= props->set_port_cap_mask;
	udev->port_cap_flags &= ~props->clr_port_cap_mask;
	spin_unlock_irqrestore(&udev->port_lock, flags);
	return 0;
}

static int urdma_get_port_immutable(struct ib_device *ibdev, u32 port,
				    struct ib_port_immutable *immutable)
{
	/* Full IB capabilities, MAD included: without them ib_mad, ib_sa and
	 * rdma_cm ignore the port and the kernel never asks ibacm for paths. */
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_IB;
	immutable->pkey_tbl_len = 1;
	immutable->gid_tbl_len = 1;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer urdma_get_link_layer(struct ib_device *ibdev,
						 u32 port)
{
	return IB_LINK_LAYER_INFINIBAND;
}

static int urdma_query_gid(struct ib_device *ibdev, u32 port, int index,
			   union ib_gid *gid)
{
	if (index != 0)
		return -EINVAL;
	gid->global.subnet_prefix = cpu_to_be64(0xfe80000000000000ULL);
	gid->global.interface_id = to_udev(ibdev)->guid;
	return 0;
}

static int urdma_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			    u16 *pkey)
{
	if (index != 0)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

static int urdma_alloc_ucontext(struct ib_ucontext *ibuc,
				struct ib_udata *udata)
{
	return 0;
}

static void urdma_dealloc_ucontext(struct ib_ucontext *ibuc)
{
}

/* Nothing is mapped into user space, so there is nothing to revoke when
 * the device goes away under an open context; having the op at all is what
 * lets ib_core unregister such a device (and move it between namespaces). */
static void urdma_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

static int urdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	return 0;
}

static int urdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	return 0;
}

/* ------------------------------------------------------------------- AH */

static int urdma_create_ah(struct ib_ah *ibah,
			   struct rdma_ah_init_attr *init_attr,
			   struct ib_udata *udata)
{
	struct urdma_ah *ah = to_uah(ibah);

	/* May be called in atomic context: no allocation here. */
	ah->attr = *init_attr->ah_attr;
	/* ib_core holds the GID attribute reference for the AH itself. */
	ah->attr.grh.sgid_attr = NULL;
	return 0;
}

static int urdma_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	*attr = to_uah(ibah)->attr;
	/* The caller owns no reference: hand out none. */
	attr->grh.sgid_attr = NULL;
	return 0;
}

static int urdma_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}

/* ------------------------------------------------------------------- CQ */

static int urdma_create_cq(struct ib_cq *ibcq,
			   const struct ib_cq_init_attr *attr,
			   struct ib_udata *udata)
{
	struct urdma_cq *cq = to_ucq(ibcq);

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > URDMA_MAX_CQE)
		return -EINVAL;

	cq->size = attr->cqe + 1;
	cq->ring = kvcalloc(cq->size, sizeof(*cq->ring), GFP_KERNEL);
	if (!cq->ring)
		return -ENOMEM;
	spin_lock_init(&cq->lock);
	ibcq->cqe = attr->cqe;
	return 0;
}

static int urdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	kvfree(to_ucq(ibcq)->ring);
	return 0;
}

/*
 * Queue one completion and, if the CQ was armed, call its completion
 * handler, outside the CQ lock: the handler may poll or post again.
 */
static void urdma_cq_push(struct urdma_cq *cq, const struct ib_wc *wc)
{
	unsigned long flags;
	bool notify = false;

	spin_lock_irqsave(&cq->lock, flags);
	if (cq->count < cq->size) {
		cq->ring[(cq->head + cq->count) % cq->size] = *wc;
		cq->count++;
		if (cq->armed) {
			cq->armed = false;
			notify = true;
		}
	} else if (!cq->overflowed) {
		/* A consumer that never polls; the entry is dropped. */
		cq->overflowed = true;
		pr_info_ratelimited("urdma: %s: CQ overflow, completion dropped\n",
				    dev_name(&cq->ibcq.device->dev));
	}
	spin_unlock_irqrestore(&cq->lock, flags);

	if (notify && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

static int urdma_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc)
{
	struct urdma_cq *cq = to_ucq(ibcq);
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	while (n < num && cq->count) {
		wc[n++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

static int urdma_req_notify_cq(struct ib_cq *ibcq,
			       enum ib_cq_notify_flags flags)
{
	struct urdma_cq *cq = to_ucq(ibcq);
	unsigned long irqflags;
	int ret = 0;

	spin_lock_irqsave(&cq->lock, irqflags);
	cq->armed = true;
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && cq->count)
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return ret;
}

/* Remove a dying QP's completions, so no poller sees a freed QP. */
static void urdma_cq_forget_qp(struct urdma_cq *cq, struct ib_qp *qp)
{
	unsigned long flags;
	u32 i, kept = 0;

	spin_lock_irqsave(&cq->lock, flags);
	for (i = 0; i < cq->count; i++) {
		struct ib_wc *wc = &cq->ring[(cq->head + i) % cq->size];

		if (wc->qp != qp)
			cq->ring[(cq->head + kept++) % cq->size] = *wc;
	}
	cq->count = kept;
	spin_unlock_irqrestore(&cq->lock, flags);
}

/* ------------------------------------------------------------------- QP */

static int urdma_create_qp(struct ib_qp *ibqp,
			   struct ib_qp_init_attr *init,
			   struct ib_udata *udata)
{
	struct urdma_dev *udev = to_udev(ibqp->device);
	struct urdma_qp *qp = to_uqp(ibqp);
	struct ib_qp_cap *cap = &init->cap;

	switch (init->qp_type) {
	case IB_QPT_SMI:
	case IB_QPT_GSI:
		if (udata)
			return -EINVAL;
		break;
	case IB_QPT_RC:
	case IB_QPT_UC:
	case IB_QPT_UD:
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->srq || init->create_flags)
		return -EOPNOTSUPP;
	if (cap->max_send_wr > URDMA_MAX_QP_WR ||
	    cap->max_recv_wr > URDMA_MAX_QP_WR ||
	    cap->max_send_sge > URDMA_MAX_SGE ||
	    cap->max_recv_sge > URDMA_MAX_SGE)
		return -EINVAL;

	qp->rq_size = max_t(u32, cap->max_recv_wr, 1);
	qp->rq = kvcalloc(qp->rq_size, sizeof(*qp->rq), GFP_KERNEL);
	if (!qp->rq)
		return -ENOMEM;
	spin_lock_init(&qp->lock);
	qp->state = IB_QPS_RESET;
	qp->sq_sig_type = init->sq_sig_type;
	cap->max_inline_data = 0;
	qp->cap = *cap;

	/* Special QPs have their fixed numbers; one port, so one of each. */
	if (init->qp_type == IB_QPT_SMI)
		ibqp->qp_num = 0;
	else if (init->qp_type == IB_QPT_GSI)
		ibqp->qp_num = 1;
	else
		ibqp->qp_num = 2 + (u32)atomic_inc_return(&udev->next_qpn) %
				   (0xffffff - 1);
	return 0;
}

static int urdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct urdma_qp *qp = to_uqp(ibqp);

	if (ibqp->send_cq)
		urdma_cq_forget_qp(to_ucq(ibqp->send_cq), ibqp);
	if (ibqp->recv_cq && ibqp->recv_cq != ibqp->send_cq)
		urdma_cq_forget_qp(to_ucq(ibqp->recv_cq), ibqp);
	kvfree(qp->rq);
	return 0;
}

static void urdma_flush_rq(struct urdma_qp *qp)
{
	struct ib_wc wc = {
		.status = IB_WC_WR_FLUSH_ERR,
		.opcode = IB_WC_RECV,
		.qp = &qp->ibqp,
	};
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&qp->lock, flags);
		if (!qp->rq_count) {
			spin_unlock_irqrestore(&qp->lock, flags);
			return;
		}
		wc.wr_id = qp->rq[qp->rq_head];
		qp->rq_head = (qp->rq_head + 1) % qp->rq_size;
		qp->rq_count--;
		spin_unlock_irqrestore(&qp->lock, flags);
		urdma_cq_push(to_ucq(qp->ibqp.recv_cq), &wc);
	}
}

static int urdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			   int mask, struct ib_udata *udata)
{
	struct urdma_qp *qp = to_uqp(ibqp);
	unsigned long flags;
	bool to_err;

	if (mask & ~IB_QP_ATTR_STANDARD_BITS)
		return -EOPNOTSUPP;

	/* No transport, but the state machine is the verbs one, so that
	 * user space sees the errors a real device gives. */
	spin_lock_irqsave(&qp->lock, flags);
	if (mask & IB_QP_STATE) {
		enum ib_qp_state cur = (mask & IB_QP_CUR_STATE) ?
				       attr->cur_qp_state : qp->state;

		if (!ib_modify_qp_is_ok(cur, attr->qp_state, ibqp->qp_type,
					mask)) {
			spin_unlock_irqrestore(&qp->lock, flags);
			return -EINVAL;
		}
		qp->state = attr->qp_state;
	}
	to_err = qp->state == IB_QPS_ERR;
	if (mask & IB_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IB_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IB_QP_QKEY)
		qp->attr.qkey = attr->qkey;
	if (mask & IB_QP_PATH_MTU)
		qp->attr.path_mtu = attr->path_mtu;
	if (mask & IB_QP_DEST_QPN)
		qp->attr.dest_qp_num = attr->dest_qp_num;
	if (mask & IB_QP_RQ_PSN)
		qp->attr.rq_psn = attr->rq_psn;
	if (mask & IB_QP_SQ_PSN)
		qp->attr.sq_psn = attr->sq_psn;
	if (mask & IB_QP_ACCESS_FLAGS)
		qp->attr.qp_access_flags = attr->qp_access_flags;
	qp->attr_mask |= mask & (IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY |
				 IB_QP_PATH_MTU | IB_QP_DEST_QPN |
				 IB_QP_RQ_PSN | IB_QP_SQ_PSN |
				 IB_QP_ACCESS_FLAGS);
	if (qp->state == IB_QPS_RESET) {
		/* Reset discards the receive queue without completions. */
		qp->rq_head = 0;
		qp->rq_count = 0;
	}
	spin_unlock_irqrestore(&qp->lock, flags);

	if (to_err)
		urdma_flush_rq(qp);
	return 0;
}

static int urdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			  int mask, struct ib_qp_init_attr *init)
{
	struct urdma_qp *qp = to_uqp(ibqp);
	unsigned long flags;

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	spin_lock_irqsave(&qp->lock, flags);
	*attr = qp->attr;
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	spin_unlock_irqrestore(&qp->lock, flags);
	attr->cap = qp->cap;

	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_type;
	return 0;
}

static enum ib_wc_opcode urdma_wc_opcode(enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_WR_RDMA_READ:
		return IB_WC_RDMA_READ;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return IB_WC_COMP_SWAP;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return IB_WC_FETCH_ADD;
	case IB_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case IB_WR_REG_MR:
		return IB_WC_REG_MR;
	default:
		return IB_WC_SEND;
	}
}

/*
 * Sends go nowhere but complete successfully: ib_mad frees a MAD only on
 * its send completion, and a send that never completes leaves an SA
 * client blocked instead of timing out.
 */
static int urdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
			   const struct ib_send_wr **bad_wr)
{
	struct urdma_qp *qp = to_uqp(ibqp);
	enum ib_qp_state state = READ_ONCE(qp->state);

	for (; wr; wr = wr->next) {
		struct ib_wc wc = { .qp = ibqp };
		u32 len = 0;
		int i;

		if (state != IB_QPS_RTS && state != IB_QPS_SQD &&
		    state != IB_QPS_ERR) {
			*bad_wr = wr;
			return -EINVAL;
		}
		if (wr->num_sge > qp->cap.max_send_sge) {
			*bad_wr = wr;
			return -EINVAL;
		}
		for (i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;

		wc.wr_id = wr->wr_id;	/* also carries wr_cqe */
		wc.opcode = urdma_wc_opcode(wr->opcode);
		wc.byte_len = len;
		if (state == IB_QPS_ERR)
			wc.status = IB_WC_WR_FLUSH_ERR;
		else
			wc.status = IB_WC_SUCCESS;
		if (state == IB_QPS_ERR ||
		    (wr->send_flags & IB_SEND_SIGNALED) ||
		    qp->sq_sig_type == IB_SIGNAL_ALL_WR)
			urdma_cq_push(to_ucq(ibqp->send_cq), &wc);
	}
	return 0;
}

static int urdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
			   const struct ib_recv_wr **bad_wr)
{
	struct urdma_qp *qp = to_uqp(ibqp);
	unsigned long flags;
	int ret = 0;

	spin_lock_irqsave(&qp->lock, flags);
	if (qp->state == IB_QPS_RESET) {
		ret = -EINVAL;
		*bad_wr = wr;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if (wr->num_sge > qp->cap.max_recv_sge) {
			ret = -EINVAL;
			*bad_wr = wr;
			break;
		}
		if (qp->rq_count == qp->rq_size) {
			ret = -ENOMEM;
			*bad_wr = wr;
			break;
		}
		qp->rq[(qp->rq_head + qp->rq_count) % qp->rq_size] = wr->wr_id;
		qp->rq_count++;
	}
out:
	spin_unlock_irqrestore(&qp->lock, flags);
	/* In the error state a receive completes at once, flushed (this is
	 * what ib_drain_rq waits for). */
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		urdma_flush_rq(qp);
	return ret;
}

/* ------------------------------------------------------------------- MR */

static struct ib_mr *urdma_new_mr(struct ib_pd *ibpd)
{
	struct urdma_dev *udev = to_udev(ibpd->device);
	struct urdma_mr *mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	u32 key;

	if (!mr)
		return ERR_PTR(-ENOMEM);
	/* Keys only have to be distinct; nothing ever checks them. */
	key = (atomic_inc_return(&udev->next_key) & 0xffffff) << 8;
	if (!key)
		key = 1 << 8;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	return &mr->ibmr;
}

static struct ib_mr *urdma_get_dma_mr(struct ib_pd *ibpd, int access)
{
	return urdma_new_mr(ibpd);
}

/* No pinning: the device never touches the memory it is given. */
static struct ib_mr *urdma_reg_user_mr(struct ib_pd *ibpd, u64 start,
				       u64 length, u64 iova, int access,
				       struct ib_udata *udata)
{
	struct ib_mr *mr = urdma_new_mr(ibpd);

	if (!IS_ERR(mr)) {
		mr->iova = iova;
		mr->length = length;
	}
	return mr;
}

static int urdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	kfree(container_of(ibmr, struct urdma_mr, ibmr));
	return 0;
}

/* ------------------------------------------------------ device lifetime */

/*
 * Called by ib_core as the last step of unregistration, whoever started it
 * (rdma link delete, the netdev going away, rmmod).
 */
static void urdma_dealloc_driver(struct ib_device *ibdev)
{
	struct urdma_dev *udev = to_udev(ibdev);

	/* Also reached from ib_dealloc_device on newlink's error paths,
	 * possibly before the netdev was claimed. */
	if (!udev->ndev)
		return;
	rtnl_lock();
	list_del(&udev->list);
	rtnl_unlock();
	netdev_put(udev->ndev, &udev->ndev_tracker);
	udev->ndev = NULL;
}

static const struct ib_device_ops urdma_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = URDMA_UVERBS_ABI_VERSION,

	.alloc_pd = urdma_alloc_pd,
	.alloc_ucontext = urdma_alloc_ucontext,
	.create_ah = urdma_create_ah,
	.create_cq = urdma_create_cq,
	.create_qp = urdma_create_qp,
	.dealloc_driver = urdma_dealloc_driver,
	.dealloc_pd = urdma_dealloc_pd,
	.dealloc_ucontext = urdma_dealloc_ucontext,
	.dereg_mr = urdma_dereg_mr,
	.destroy_ah = urdma_destroy_ah,
	.destroy_cq = urdma_destroy_cq,
	.destroy_qp = urdma_destroy_qp,
	.disassociate_ucontext = urdma_disassociate_ucontext,
	.get_dma_mr = urdma_get_dma_mr,
	.get_link_layer = urdma_get_link_layer,
	.get_port_immutable = urdma_get_port_immutable,
	.modify_port = urdma_modify_port,
	.modify_qp = urdma_modify_qp,
	.poll_cq = urdma_poll_cq,
	.post_recv = urdma_post_recv,
	.post_send = urdma_post_send,
	.query_ah = urdma_query_ah,
	.query_device = urdma_query_device,
	.query_gid = urdma_query_gid,
	.query_pkey = urdma_query_pkey,
	.query_port = urdma_query_port,
	.query_qp = urdma_query_qp,
	.reg_user_mr = urdma_reg_user_mr,
	.req_notify_cq = urdma_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, urdma_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, urdma_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, urdma_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, urdma_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, urdma_ucontext, ibuc),
};

static struct urdma_dev *urdma_find(struct net_device *ndev)
{
	struct urdma_dev *udev;

	ASSERT_RTNL();
	list_for_each_entry(udev, &urdma_devices, list)
		if (udev->ndev == ndev)
			return udev;
	return NULL;
}

static void urdma_port_event(struct urdma_dev *udev, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &udev->ibdev,
		.event = type,
		.element.port_num = 1,
	};

	ib_dispatch_event(&ev);
}

/* Follow the netdev's carrier; under RTNL. */
static void urdma_update_port(struct urdma_dev *udev)
{
	bool up = urdma_ndev_up(udev->ndev);

	ASSERT_RTNL();
	if (up == udev->port_active)
		return;
	WRITE_ONCE(udev->port_active, up);
	urdma_port_event(udev, up ? IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR);
}

static int urdma_newlink(const char *name, struct net_device *ndev)
{
	struct urdma_dev *udev;
	bool gone;
	int err;

	/* The user-space provider recognises its devices by name. */
	if (!strstr(name, "urdma"))
		return -EINVAL;
	if (ndev->type != ARPHRD_ETHER || ndev->addr_len != ETH_ALEN)
		return -EINVAL;

	udev = ib_alloc_device(urdma_dev, ibdev);
	if (!udev)
		return -ENOMEM;

	udev->lid = lid;
	udev->guid = urdma_eui64(ndev->dev_addr);
	spin_lock_init(&udev->port_lock);
	atomic_set(&udev->next_qpn, 0);
	atomic_set(&udev->next_key, 0);
	INIT_LIST_HEAD(&udev->list);

	udev->ibdev.node_type = RDMA_NODE_IB_CA;
	udev->ibdev.node_guid = udev->guid;
	udev->ibdev.phys_port_cnt = 1;
	udev->ibdev.num_comp_vectors = 1;
	udev->ibdev.local_dma_lkey = URDMA_LOCAL_DMA_LKEY;
	snprintf(udev->ibdev.node_desc, sizeof(udev->ibdev.node_desc),
		 "urdma %s", netdev_name(ndev));
	ib_set_device_ops(&udev->ibdev, &urdma_dev_ops);

	/*
	 * Claim the netdev while holding RTNL, so that the notifier (which
	 * runs under RTNL) either sees the entry or ran before we looked at
	 * the netdev's registration state.  RTNL is not held across
	 * ib_register_device: clients such as ipoib take it there.
	 */
	rtnl_lock();
	if (ndev->reg_state != NETREG_REGISTERED || urdma_find(ndev)) {
		rtnl_unlock();
		ib_dealloc_device(&udev->ibdev);
		return -EEXIST;
	}
	netdev_hold(ndev, &udev->ndev_tracker, GFP_KERNEL);
	udev->ndev = ndev;
	udev->port_active = urdma_ndev_up(ndev);
	list_add_tail(&udev->list, &urdma_devices);
	rtnl_unlock();

	err = ib_device_set_netdev(&udev->ibdev, ndev, 1);
	if (err)
		goto err_unlist;

	err = ib_register_device(&udev->ibdev, name, NULL);
	if (err)
		goto err_unlist;
	/* From here on ib_core owns udev: dealloc_driver unlists it. */

	rtnl_lock();
	udev->registered = true;
	gone = udev->ndev_gone || ndev->reg_state != NETREG_REGISTERED;
	if (!gone)
		urdma_update_port(udev);
	rtnl_unlock();

	if (gone) {
		ib_unregister_device(&udev->ibdev);
		return -ENODEV;
	}
	dev_info(&udev->ibdev.dev, "urdma on %s, port %s\n",
		 netdev_name(ndev), udev->port_active ? "ACTIVE" : "DOWN");
	return 0;

err_unlist:
	/* dealloc_driver unlists the device and releases the netdev. */
	ib_dealloc_device(&udev->ibdev);
	return err;
}

static struct rdma_link_ops urdma_link_ops = {
	.type = "urdma",
	.newlink = urdma_newlink,
};

static int urdma_netdev_event(struct notifier_block *nb, unsigned long event,
			      void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);
	struct urdma_dev *udev = urdma_find(ndev);

	if (!udev)
		return NOTIFY_DONE;

	switch (event) {
	case NETDEV_UNREGISTER:
		/*
		 * The netdev waits for our reference; unregister the IB device
		 * asynchronously (we hold RTNL, which unregistration may
		 * need).  A device still registering unregisters itself.
		 */
		if (udev->registered)
			ib_unregister_device_queued(&udev->ibdev);
		else
			udev->ndev_gone = true;
		break;
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		if (udev->registered)
			urdma_update_port(udev);
		break;
	default:
		break;
	}
	return NOTIFY_DONE;
}

static struct notifier_block urdma_netdev_nb = {
	.notifier_call = urdma_netdev_event,
};

static int __init urdma_init(void)
{
	int err;

	err = register_netdevice_notifier(&urdma_netdev_nb);
	if (err)
		return err;
	rdma_link_register(&urdma_link_ops);
	return 0;
}

static void __exit urdma_exit(void)
{
	/* No new devices: this waits for a newlink in progress. */
	rdma_link_unregister(&urdma_link_ops);

	/*
	 * Unregister what is left.  Each device stays listed until its
	 * dealloc_driver ran; the struct device reference keeps it in memory
	 * while another unregistration (a queued one) may be finishing it.
	 */
	for (;;) {
		struct urdma_dev *udev;
		struct ib_device *ibdev;

		rtnl_lock();
		udev = list_first_entry_or_null(&urdma_devices,
						struct urdma_dev, list);
		if (udev)
			get_device(&udev->ibdev.dev);
		rtnl_unlock();
		if (!udev)
			break;
		ibdev = &udev->ibdev;
		ib_unregister_device(ibdev);
		put_device(&ibdev->dev);
	}

	unregister_netdevice_notifier(&urdma_netdev_nb);
}

module_init(urdma_init);
module_exit(urdma_exit);

MODULE_DESCRIPTION("urdma: virtual InfiniBand device on an Ethernet netdev");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_ALIAS_RDMA_LINK("urdma");
