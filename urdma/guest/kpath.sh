#!/bin/sh
# Runs INSIDE the guest (host side: test-kpath.sh).  The kernel's own path
# query: ibacm with this project's provider and acme_plus_kernel_only, an
# rdma_cm AF_IB rdma_resolve_route (urdma-kpath) answered through ib_sa's
# netlink request (and, before ibacm starts, the SA fallback timing out
# cleanly); then rmmod urdma while ibacm holds the device open
# (uverbs disassociation), and a clean kernel log.
IP=/usr/sbin/ip
fail=0
for m in configfs ib_core ib_uverbs ib_umad ib_cm iw_cm rdma_cm rdma_ucm dummy urdma; do
	modprobe $m || { echo "FAILED: modprobe $m"; fail=1; }
done
$IP link add d0 type dummy
$IP link set d0 address 52:54:00:12:34:56
$IP link set d0 up
rdma link add urdma0 type urdma netdev d0 || fail=1
GID=fe80::5054:ff:fe12:3456

# No ibacm yet: nobody listens on netlink, so ib_sa sends an SA MAD that
# nobody answers; the query must time out cleanly (ETIMEDOUT, -110) rather
# than hang, which needs the MAD's send completion.
echo "# urdma-kpath $GID $GID 2000 (no ibacm: must fail with a timeout)"
if urdma-kpath $GID $GID 2000; then echo "FAILED: resolved without ibacm"; fail=1; fi

cat >/etc/rdma/ibacm_opts.cfg <<EOC
log_file /var/log/ibacm.log
log_level 2
provider_lib_path /usr/lib/x86_64-linux-gnu/ibacm
provider urdma default
acme_plus_kernel_only yes
support_ips_in_addr_cfg 1
addr_file /etc/rdma/ibacm_addr.cfg
urdma_discovery no
urdma_metrics_file none
EOC
printf 'guest urdma0 1 default\n' >/etc/rdma/ibacm_addr.cfg
ibacm -O /etc/rdma/ibacm_opts.cfg || fail=1
sleep 3
echo "# ib_acme -f g -s $GID -d $GID"
ib_acme -f g -s $GID -d $GID
echo "# urdma-kpath $GID $GID"
urdma-kpath $GID $GID || { echo "FAILED: kernel path query"; fail=1; }
echo "-- ibacm log: the kernel's netlink request"
grep -E 'acm_nl_' /var/log/ibacm.log | cut -d' ' -f2-

echo "-- carrier off and on: ibacm sees the port events"
$IP link set d0 down
sleep 2
$IP link set d0 up
sleep 3
grep -E 'acm_event_handler|port_down|port_up|acm_port_up|acm_port_down' /var/log/ibacm.log | cut -d' ' -f2- | tail -n 6
echo "# urdma-kpath again after the port came back"
out=$(urdma-kpath $GID $GID) || { echo "FAILED: kernel path query after link up"; fail=1; }
echo "$out" | tail -n 1

echo "-- rmmod urdma with ibacm holding urdma0"
rmmod urdma || { echo "FAILED: rmmod"; fail=1; }
sleep 1
ls /sys/class/infiniband/
tail -n 5 /var/log/ibacm.log
kill $(pidof ibacm) 2>/dev/null
sleep 1
echo "-- kernel log"
bad=$(dmesg | grep -E 'WARNING|BUG|Oops|Call Trace|blocked for more')
if [ -n "$bad" ]; then dmesg | tail -n 80; fail=1; else echo "no WARNING/BUG/Oops/Call Trace"; fi
[ $fail = 0 ] && echo "KPATH OK" || echo "KPATH FAILED"
exit $fail
