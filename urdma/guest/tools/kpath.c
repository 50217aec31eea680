// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * kpath SGID DGID: resolve a route between two GIDs through rdma_cm with
 * AF_IB addresses, the way an RDMA application does, and print the path
 * record it got.  With ibacm running with acme_plus_kernel_only, librdmacm
 * cannot get the route from ibacm itself, so the kernel asks for it: ib_sa
 * sends a netlink RDMA_NL_LS request, which ibacm (and its provider)
 * answers.  Exit 0 on RDMA_CM_EVENT_ROUTE_RESOLVED, 1 otherwise.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>

static int parse_gid(const char *s, struct sockaddr_ib *sib)
{
	memset(sib, 0, sizeof(*sib));
	sib->sib_family = AF_IB;
	sib->sib_pkey = htons(0xffff);
	return inet_pton(AF_INET6, s, &sib->sib_addr) == 1 ? 0 : -1;
}

static int wait_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	int ok;

	if (rdma_get_cm_event(ch, &ev)) {
		perror("rdma_get_cm_event");
		return -1;
	}
	ok = ev->event == want;
	printf("event %s status %d\n", rdma_event_str(ev->event), ev->status);
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_ib src, dst;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char sgid[INET6_ADDRSTRLEN], dgid[INET6_ADDRSTRLEN];
	int timeout = argc > 3 ? atoi(argv[3]) : 5000;
	int i;

	if (argc < 3 || parse_gid(argv[1], &src) || parse_gid(argv[2], &dst)) {
		fprintf(stderr, "usage: kpath SGID DGID [TIMEOUT_MS]\n");
		return 2;
	}
	/* Port space TCP, as librdmacm's own AF_IB users set it. */
	dst.sib_sid = htobe64(RDMA_IB_IP_PS_TCP | 7471);
	dst.sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | 0xffff);

	ch = rdma_create_event_channel();
	if (!ch) {
		perror("rdma_create_event_channel");
		return 1;
	}
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		perror("rdma_create_id");
		return 1;
	}
	if (rdma_resolve_addr(id, (struct sockaddr *)&src,
			      (struct sockaddr *)&dst, timeout)) {
		perror("rdma_resolve_addr");
		return 1;
	}
	if (wait_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED))
		return 1;
	printf("device %s port %u\n", ibv_get_device_name(id->verbs->device),
	       id->port_num);
	if (rdma_resolve_route(id, timeout)) {
		perror("rdma_resolve_route");
		return 1;
	}
	if (wait_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED))
		return 1;
	for (i = 0; i < id->route.num_paths; i++) {
		struct ibv_sa_path_rec *p = &id->route.path_rec[i];

		inet_ntop(AF_INET6, &p->sgid, sgid, sizeof(sgid));
		inet_ntop(AF_INET6, &p->dgid, dgid, sizeof(dgid));
		printf("path sgid %s dgid %s slid %u dlid %u pkey 0x%x mtu %u rate %u sl %u\n",
		       sgid, dgid, ntohs(p->slid), ntohs(p->dlid),
		       ntohs(p->pkey), p->mtu, p->rate, p->sl);
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}
