/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * urdma-fake-uverbs: a host-only test harness that lets the real libibverbs
 * and the real provider run against a *pretend* urdma device, on a machine
 * with no RDMA kernel support at all.
 *
 *   urdma-fake-uverbs CDEV_PATH LOG_PATH -- PROGRAM [ARGS...]
 *
 * Why: the provider's ops can only really be tested under a kernel with a urdma
 * device (the QEMU guest does that).  On the host we can still check that the
 * library matches our device, builds it with our layout, opens it through our
 * alloc_context, and that every uverbs command our ops make it send has the
 * size the kernel expects (no udata) and reaches the right handler.
 *
 * How: the caller (host_check.sh) builds, in a private mount namespace, a fake
 * sysfs tree (SYSFS_PATH) describing uverbs0 -> urdma0, and a character device
 * node CDEV_PATH (/dev/infiniband/uverbs0, really the "null" device).  This
 * program forks PROGRAM under a seccomp filter that turns every write() and
 * ioctl() into a user notification (SECCOMP_RET_USER_NOTIF).  The parent looks
 * at each one: if the file descriptor is CDEV_PATH it plays the kernel's
 * uverbs write() ABI (and answers ioctl() with ENOTTY, which makes libibverbs
 * fall back to write(), as on a kernel without the ioctl interface); any other
 * fd continues to the real kernel.  The child is stopped in the syscall while
 * we answer, so responses are written (process_vm_writev) before it resumes:
 * no races.  Each command is logged to LOG_PATH as
 *   "<name> in_words=<n> out_words=<n>" (and a verdict), for host_check.sh.
 *
 * Limits: only the write() path is exercised (a real 6.1 kernel is reached
 * through ioctl for get_context and query_port); the answers are invented
 * constants, and the async event fd is an eventfd.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "private_abi.h"

static FILE *logf_;
static struct stat cdev_st;
static unsigned next_pd_handle = 7;
static unsigned live_pds;
static int bad;

static int install_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
		       SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

static int send_fd(int sock, int fd)
{
	char buf[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte = 0;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			      .msg_controllen = sizeof(buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	char buf[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			      .msg_controllen = sizeof(buf) };
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, 0) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static int peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

static int poke(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec l = { (void *)buf, len }, r = { (void *)(uintptr_t)addr, len };

	return process_vm_writev(pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

static int is_fake_cdev(pid_t pid, int fd)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	if (stat(path, &st))
		return 0;
	return st.st_dev == cdev_st.st_dev && st.st_ino == cdev_st.st_ino;
}

/* Check the command is exactly header + core request (no udata) and asks for
 * exactly the core response. */
static void expect(const char *name, unsigned in_words, unsigned out_words, unsigned want_in,
		   unsigned want_out)
{
	int ok = in_words == want_in && out_words == want_out;

	fprintf(logf_, "%s in_words=%u out_words=%u %s (want %u/%u)\n", name, in_words, out_words,
		ok ? "OK" : "BAD", want_in, want_out);
	if (!ok)
		bad++;
}

/* Play ib_uverbs' write() for one command; returns the syscall's result
 * (bytes "written") or a negative errno. */
static long uverbs_write(int notify_fd, struct seccomp_notif *req)
{
	pid_t pid = req->pid;
	uint64_t buf = req->data.args[1];
	size_t len = req->data.args[2];
	unsigned char cmd[256];
	struct ib_uverbs_cmd_hdr hdr;
	uint64_t resp_ptr;

	if (len < sizeof(hdr) || len > sizeof(cmd) || peek(pid, buf, cmd, len))
		return -EFAULT;
	memcpy(&hdr, cmd, sizeof(hdr));

	if (hdr.command & IB_USER_VERBS_CMD_FLAG_EXTENDED) {
		/* Extended: header, ex_hdr {response, provider words, ...}, core. */
		struct ib_uverbs_ex_cmd_hdr ex;
		unsigned op = hdr.command & IB_USER_VERBS_CMD_COMMAND_MASK;

		if (len < sizeof(hdr) + sizeof(ex))
			return -EINVAL;
		memcpy(&ex, cmd + sizeof(hdr), sizeof(ex));
		if (op == IB_USER_VERBS_EX_CMD_QUERY_DEVICE) {
			struct ib_uverbs_ex_query_device_resp r;
			size_t out = hdr.out_words * 8;

			fprintf(logf_, "EX_QUERY_DEVICE in_words=%u out_words=%u provider=%u/%u %s\n",
				hdr.in_words, hdr.out_words, ex.provider_in_words,
				ex.provider_out_words,
				ex.provider_in_words || ex.provider_out_words ? "BAD" : "OK");
			if (ex.provider_in_words || ex.provider_out_words)
				bad++;
			memset(&r, 0, sizeof(r));
			r.base.node_guid = htobe64(0x5254000000123456ULL);
			r.base.sys_image_guid = r.base.node_guid;
			r.base.max_pd = 64;
			r.base.phys_port_cnt = 1;
			r.base.max_pkeys = 1;
			r.response_length = offsetof(struct ib_uverbs_ex_query_device_resp, odp_caps);
			if (out > sizeof(r))
				out = sizeof(r);
			if (poke(pid, ex.response, &r, out))
				return -EFAULT;
			return len;
		}
		fprintf(logf_, "EX_%u unsupported\n", op);
		return -ENOSYS;
	}

	if (len != hdr.in_words * 4u) {
		fprintf(logf_, "cmd %u BAD length %zu vs in_words %u\n", hdr.command, len,
			hdr.in_words);
		bad++;
		return -EINVAL;
	}
	memcpy(&resp_ptr, cmd + sizeof(hdr), sizeof(resp_ptr));

	switch (hdr.command) {
	case IB_USER_VERBS_CMD_GET_CONTEXT: {
		struct ib_uverbs_get_context_resp r = { 0 };
		struct seccomp_notif_addfd add = { 0 };
		int efd, child_fd;

		expect("GET_CONTEXT", hdr.in_words, hdr.out_words,
		       (sizeof(hdr) + sizeof(struct ib_uverbs_get_context)) / 4,
		       sizeof(struct ib_uverbs_get_context_resp) / 4);
		/* The async event fd the kernel would create: an eventfd put into
		 * the child's fd table. */
		efd = eventfd(0, EFD_CLOEXEC);
		add.id = req->id;
		add.srcfd = efd;
		add.newfd_flags = O_CLOEXEC;
		child_fd = ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
		close(efd);
		if (child_fd < 0)
			return -EMFILE;
		r.async_fd = child_fd;
		r.num_comp_vectors = 1;
		return poke(pid, resp_ptr, &r, sizeof(r)) ? -EFAULT : (long)len;
	}
	case IB_USER_VERBS_CMD_QUERY_DEVICE: {
		struct ib_uverbs_query_device_resp r = { 0 };

		expect("QUERY_DEVICE", hdr.in_words, hdr.out_words,
		       (sizeof(hdr) + sizeof(struct ib_uverbs_query_device)) / 4, sizeof(r) / 4);
		r.node_guid = htobe64(0x5254000000123456ULL);
		r.sys_image_guid = r.node_guid;
		r.max_pd = 64;
		r.phys_port_cnt = 1;
		r.max_pkeys = 1;
		return poke(pid, resp_ptr, &r, sizeof(r)) ? -EFAULT : (long)len;
	}
	case IB_USER_VERBS_CMD_QUERY_PORT: {
		struct ib_uverbs_query_port_resp r = { 0 };
		struct ib_uverbs_query_port q;

		memcpy(&q, cmd + sizeof(hdr), sizeof(q));
		expect("QUERY_PORT", hdr.in_words, hdr.out_words,
		       (sizeof(hdr) + sizeof(struct ib_uverbs_query_port)) / 4, sizeof(r) / 4);
		fprintf(logf_, "QUERY_PORT port_num=%u\n", q.port_num);
		if (q.port_num != 1)
			return -EINVAL;
		r.state = IBV_PORT_ACTIVE;
		r.max_mtu = IBV_MTU_4096;
		r.active_mtu = IBV_MTU_4096;
		r.gid_tbl_len = 1;
		r.pkey_tbl_len = 1;
		r.lid = 1;
		r.sm_lid = 1;
		r.phys_state = 5; /* LinkUp */
		r.link_layer = IBV_LINK_LAYER_INFINIBAND;
		r.active_width = 1;
		r.active_speed = 1;
		return poke(pid, resp_ptr, &r, sizeof(r)) ? -EFAULT : (long)len;
	}
	case IB_USER_VERBS_CMD_ALLOC_PD: {
		struct ib_uverbs_alloc_pd_resp r = { 0 };

		expect("ALLOC_PD", hdr.in_words, hdr.out_words,
		       (sizeof(hdr) + sizeof(struct ib_uverbs_alloc_pd)) / 4, sizeof(r) / 4);
		r.pd_handle = next_pd_handle++;
		live_pds++;
		fprintf(logf_, "ALLOC_PD handle=%u\n", r.pd_handle);
		return poke(pid, resp_ptr, &r, sizeof(r)) ? -EFAULT : (long)len;
	}
	case IB_USER_VERBS_CMD_DEALLOC_PD: {
		struct ib_uverbs_dealloc_pd d;

		memcpy(&d, cmd + sizeof(hdr), sizeof(d));
		expect("DEALLOC_PD", hdr.in_words, hdr.out_words,
		       (sizeof(hdr) + sizeof(struct ib_uverbs_dealloc_pd)) / 4, 0);
		fprintf(logf_, "DEALLOC_PD handle=%u\n", d.pd_handle);
		if (!live_pds || d.pd_handle >= next_pd_handle)
			return -EINVAL;
		live_pds--;
		return len;
	}
	default:
		fprintf(logf_, "cmd %u unsupported in_words=%u\n", hdr.command, hdr.in_words);
		return -ENOSYS;
	}
}

static void supervise(int notify_fd, pid_t child)
{
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	struct seccomp_notif_sizes sizes;

	if (syscall(__NR_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes)) {
		perror("SECCOMP_GET_NOTIF_SIZES");
		exit(2);
	}
	req = calloc(1, sizes.seccomp_notif > sizeof(*req) ? sizes.seccomp_notif : sizeof(*req));
	resp = calloc(1, sizes.seccomp_notif_resp > sizeof(*resp) ? sizes.seccomp_notif_resp
								     : sizeof(*resp));
	for (;;) {
		long ret;

		struct pollfd p = { .fd = notify_fd, .events = POLLIN };

		/* POLLHUP once no task uses the filter any more (child exited). */
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (!(p.revents & POLLIN))
			break;
		memset(req, 0, sizes.seccomp_notif);
		if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_RECV, req)) {
			if (errno == EINTR)
				continue;
			break; /* child gone: ENOENT or the fd hung up */
		}
		memset(resp, 0, sizes.seccomp_notif_resp);
		resp->id = req->id;
		if ((pid_t)req->pid != child || !is_fake_cdev(req->pid, (int)req->data.args[0])) {
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		} else if (req->data.nr == __NR_ioctl) {
			resp->error = -ENOTTY; /* no ioctl uverbs: use write() */
		} else {
			ret = uverbs_write(notify_fd, req);
			if (ret < 0)
				resp->error = (int)ret;
			else
				resp->val = ret;
		}
		fflush(logf_);
		if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_SEND, resp) && errno != ENOENT)
			perror("SECCOMP_IOCTL_NOTIF_SEND");
	}
}

int main(int argc, char **argv)
{
	int sv[2], notify_fd, status;
	pid_t child;

	if (argc < 5 || strcmp(argv[3], "--")) {
		fprintf(stderr, "usage: %s CDEV_PATH LOG_PATH -- PROGRAM [ARGS...]\n", argv[0]);
		return 2;
	}
	if (stat(argv[1], &cdev_st) || !S_ISCHR(cdev_st.st_mode)) {
		fprintf(stderr, "%s: not a character device\n", argv[1]);
		return 2;
	}
	logf_ = fopen(argv[2], "w");
	if (!logf_ || socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("setup");
		return 2;
	}
	fflush(NULL);
	child = fork();
	if (child < 0) {
		perror("fork");
		return 2;
	}
	if (child == 0) {
		int fd;

		close(sv[0]);
		fd = install_filter();
		if (fd < 0) {
			perror("seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)");
			_exit(3);
		}
		/* sendmsg is not filtered, so this cannot deadlock. */
		if (send_fd(sv[1], fd))
			_exit(3);
		close(fd);
		close(sv[1]);
		execvp(argv[4], argv + 4);
		_exit(127);
	}
	close(sv[1]);
	notify_fd = recv_fd(sv[0]);
	close(sv[0]);
	if (notify_fd < 0) {
		waitpid(child, &status, 0);
		fprintf(stderr, "could not get the seccomp listener (child status %d)\n", status);
		return 3;
	}
	supervise(notify_fd, child);
	waitpid(child, &status, 0);
	fprintf(logf_, "child exit %d, bad commands %d, pds left %u\n",
		WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), bad, live_pds);
	fclose(logf_);
	if (bad || live_pds)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
