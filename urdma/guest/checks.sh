#!/bin/sh
# The guest test tier; runs INSIDE the guest (host side: tier.sh, which
# puts the provider, the tools and the configuration files in place).
# Real urdma devices, the stock ibacm/ib_acme/libibverbs/librdmacm, the
# provider from the daemon's default directory, no LD_PRELOAD.
#
# Prints `TIER-OK CHECK` or `TIER-FAIL CHECK: detail` per check, on failure
# (or with /etc/rdma/tier-always-logs) the kernel and daemon logs between
# `TIER-LOG-BEGIN FILE` and `TIER-LOG-END`, and `TIER-DONE` at the end;
# anything else is narration.  Exit 0 iff every check passed.
#
# Two hosts in one guest:
#   A  the initial namespace: urdma0 on dummy d0 (MAC ...:56, MTU 9000)
#      and urdma1 on veth va (MAC ...:57); ibacm with /etc/rdma/*.cfg
#   B  namespace nb: urdma2 on veth vb (MAC ...:58); its own ibacm, with
#      /tmp/b/run as its /run (ibacm and its clients meet at fixed /run
#      paths) and /etc/rdma/b/*.cfg
# ib_core's netns_mode=0 (exclusive) lets urdma2 move into nb, where only
# B's daemon sees it.
unset LD_PRELOAD
IP=/usr/sbin/ip		# iproute2; busybox's ip applet has no veth or netns
GA0=fe80::5054:ff:fe12:3456	# urdma0
GA=fe80::5054:ff:fe12:3457	# urdma1
GB=fe80::5054:ff:fe12:3458	# urdma2
GH=fe80::5054:ff:fe12:3499	# guest-h: the hosts file's, nobody runs it
DETAILS=/var/log/tier-details.log
nfail=0

ok() { echo "TIER-OK $*"; }
fail() { nfail=$((nfail + 1)); echo "TIER-FAIL $*"; }
# Command output as one short line, for a FAILED detail.
oneline() { tr '\n' ' ' | sed 's/[[:space:]][[:space:]]*/ /g' | cut -c1-400; }
# Everything run is also recorded in full, for the logs.
note() { echo "$*" >>$DETAILS; }
# Centiseconds since boot.
now() { cut -d' ' -f1 /proc/uptime | tr -d .; }
# Runs a command as host B: its network namespace, its /run.
inb() { $IP netns exec nb sh -c 'mount --bind /tmp/b/run /run && exec "$@"' sh "$@"; }
on() { h=$1; shift; if [ "$h" = b ]; then inb "$@"; else "$@"; fi; }

# resolve CHECK HOST WANT ARGS...: `ib_acme ARGS` on HOST (a or b) must
# print a path with every `field: value` of WANT (`;`-separated).
resolve() {
	name=$1 h=$2 want=$3
	shift 3
	out=$(on "$h" ib_acme "$@" 2>&1)
	rc=$?
	note "# [$h] ib_acme $* -> exit $rc"; note "$out"
	missing=
	IFS=';'
	for w in $want; do
		echo "$out" | grep -qx "  $w" || missing="$missing $w;"
	done
	unset IFS
	if [ $rc = 0 ] && [ -z "$missing" ]; then
		ok "$name"
	else
		fail "$name: ib_acme $* (exit $rc; missing$missing): $(echo "$out" | grep -v '^Service:' | oneline)"
	fi
}
# until_acme HOST ok|fail SECONDS ARGS...: polls `ib_acme ARGS` on HOST
# until it succeeds (ok) or fails (fail); false if it never did.
until_acme() {
	h=$1 want=$2 n=$(($3 * 5))
	shift 3
	while [ $n -gt 0 ]; do
		if on "$h" ib_acme "$@" >/dev/null 2>&1; then
			[ "$want" = ok ] && return 0
		else
			[ "$want" = fail ] && return 0
		fi
		sleep 0.2
		n=$((n - 1))
	done
	return 1
}
# up HOST GUID SECONDS: waits until the daemon of HOST lists an urdma
# endpoint of the port with node GUID GUID (0x...).
up() {
	n=$(($3 * 5))
	while [ $n -gt 0 ]; do
		on "$1" ib_acme -e 2>/dev/null | grep -q ",$2,1,0xffff,[0-9]*,urdma," && return 0
		sleep 0.2
		n=$((n - 1))
	done
	return 1
}
alive() { kill -0 "$1" 2>/dev/null; }
stop() { kill "$1" 2>/dev/null; n=50; while alive "$1" && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done; }
dump() {
	echo "TIER-LOG-BEGIN $1"
	cat "$2" 2>/dev/null
	echo "TIER-LOG-END"
}

dump_all() {
	dmesg >/var/log/dmesg
	dump dmesg /var/log/dmesg
	dump details.log $DETAILS
	for f in ibacm-a.log ibacm-a.out ibacm-b.log ibacm-b.out ibacm-k.log ibacm-k.out; do
		[ -e /var/log/$f ] && dump $f /var/log/$f
	done
}

echo "kernel $(uname -r)"
# A check that hangs: the logs still get out before QEMU is killed.
deadline=$(cat /etc/rdma/tier-deadline 2>/dev/null || echo 220)
(
	sleep "$deadline"
	kill -STOP $$	# no more check output into the dumps
	echo "TIER-FAIL watchdog: the checks were still running after ${deadline}s (see details.log for the last step)"
	dump_all
	sync
	poweroff -f
) &
WD=$!
# --- setup --------------------------------------------------------------------
modprobe configfs
modprobe ib_core netns_mode=0 || fail "setup: modprobe ib_core netns_mode=0"
for m in ib_uverbs ib_umad ib_cm iw_cm rdma_cm rdma_ucm dummy veth urdma; do
	modprobe $m || fail "setup: modprobe $m"
done
{
	set -x
	$IP link add d0 type dummy
	$IP link set d0 address 52:54:00:12:34:56 mtu 9000 up
	$IP addr add 10.1.0.1/24 dev d0
	$IP addr add fd01::1/64 dev d0 nodad
	$IP netns add nb
	$IP link add va type veth peer name vb netns nb
	$IP link set va address 52:54:00:12:34:57
	$IP addr add 10.0.0.1/24 dev va
	$IP addr add fd00::1/64 dev va nodad
	$IP link set va up
	$IP -n nb link set lo up
	$IP -n nb link set vb address 52:54:00:12:34:58
	$IP -n nb addr add 10.0.0.2/24 dev vb
	$IP -n nb addr add fd00::2/64 dev vb nodad
	$IP -n nb link set vb up
	rdma link add urdma0 type urdma netdev d0
	rdma link add urdma1 type urdma netdev va
	# The netdev vb is only found from nb; the device is registered in
	# the initial namespace all the same and must be moved.  (Creating it
	# before moving vb would not do: a namespace move is a
	# NETDEV_UNREGISTER, on which the module deletes the netdev's device.)
	$IP netns exec nb rdma link add urdma2 type urdma netdev vb
	rdma dev set urdma2 netns nb
	set +x
} >>$DETAILS 2>&1
mkdir -p /tmp/b/run
# One key for both hosts, mode 0600 or the provider keeps discovery off.
umask 077
printf '# KEY-ID HEX-KEY\n1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >/etc/rdma/urdma.key
chmod 600 /etc/rdma/urdma.key
umask 022
note "$(rdma link show; echo; inb rdma link show)"
if [ "$(inb ls /sys/class/infiniband)" = urdma2 ] && [ "$(ls /sys/class/infiniband | tr '\n' ' ')" = "urdma0 urdma1 " ]; then
	ok "setup: urdma0, urdma1 in the initial namespace, urdma2 (on vb) in nb only (ib_core netns_mode=0, rdma dev set urdma2 netns nb)"
else
	fail "setup: devices per namespace: A has $(ls /sys/class/infiniband | oneline), B has $(inb ls /sys/class/infiniband | oneline) (see details.log)"
fi

# --- 1: the device as libibverbs sees it -----------------------------------------
out=$(ibv_devinfo -v -d urdma0 2>&1)
rc=$?
note "# ibv_devinfo -v -d urdma0 -> exit $rc"; note "$out"
# rdma-core prints the GID with inet_ntop (fe80::...) or in full groups.
if [ $rc = 0 ] && echo "$out" | grep -q 'link_layer:[[:space:]]*InfiniBand' &&
	echo "$out" | grep -q 'state:[[:space:]]*PORT_ACTIVE' &&
	echo "$out" | grep -Eq "GID\[ *0\]:[[:space:]]*($GA0|fe80:0000:0000:0000:5054:00ff:fe12:3456)\$"; then
	ok "1 ibv_devinfo: urdma0 InfiniBand, PORT_ACTIVE, GID 0 $GA0"
else
	fail "1 ibv_devinfo: urdma0 (exit $rc): $(echo "$out" | grep -E 'hca_id|state|link_layer|GID' | oneline)"
fi
out=$(urdma-abi-check --require-device 2>&1)
rc=$?
note "# urdma-abi-check --require-device -> exit $rc"; note "$out"
if [ $rc = 0 ]; then ok "1 urdma-abi-check --require-device"
else fail "1 urdma-abi-check --require-device: exit $rc: $(echo "$out" | tail -n 5 | oneline)"; fi

# --- 2: ibacm with the provider, host A ----------------------------------------
ibacm -P -O /etc/rdma/ibacm_opts.cfg -A /etc/rdma/ibacm_addr.cfg >/var/log/ibacm-a.out 2>&1 &
PA=$!
if up a 0x505400fffe123456 20 && up a 0x505400fffe123457 5; then
	out=$(ib_acme -e 2>&1)
	note "# ib_acme -e"; note "$out"
	if grep -q 'assign default prov urdma to urdma0/1' /var/log/ibacm-a.log &&
		echo "$out" | grep -q ',0x505400fffe123456,1,0xffff,[0-9]*,urdma,.*guest-a0' ; then
		ok "2 ibacm loads the provider from its default directory; ib_acme -e: urdma0 port 1 prov urdma"
	else
		fail "2 ibacm loads the provider; ib_acme -e: $(echo "$out" | oneline)"
	fi
	W="dgid: $GH;dlid: 7"
	resolve "2 ib_acme -f n guest-a0 -> guest-h (hosts file)" a "$W" -f n -s guest-a0 -d guest-h
	resolve "2 ib_acme -f i 10.1.0.1 -> 10.1.0.9 (hosts file)" a "$W" -f i -s 10.1.0.1 -d 10.1.0.9
	resolve "2 ib_acme -f i fd01::1 -> fd01::9 (hosts file)" a "$W" -f i -s fd01::1 -d fd01::9
	resolve "2 ib_acme -f g $GA0 -> $GH (hosts file)" a "$W" -f g -s $GA0 -d $GH
	out=$(ib_acme -v -f i -s 10.1.0.1 -d 10.1.0.9 2>&1)
	rc=$?
	note "# ib_acme -v -f i -s 10.1.0.1 -d 10.1.0.9 -> exit $rc"; note "$out"
	if [ $rc = 0 ] && echo "$out" | grep -qx "  dgid: $GH" && echo "$out" | grep -q 'SA verification: success'; then
		ok "2 ib_acme -v: SA verification answered by the provider"
	else
		fail "2 ib_acme -v (exit $rc): $(echo "$out" | oneline)"
	fi
else
	fail "2 ibacm (host A) serves urdma0 and urdma1 with urdma: $(ib_acme -e 2>&1 | oneline) $(grep -iE 'urdma|error|fail' /var/log/ibacm-a.log /var/log/ibacm-a.out 2>/dev/null | tail -n 5 | oneline)"
fi

# --- 3: two hosts, by discovery ----------------------------------------------------
inb ibacm -P -O /etc/rdma/b/ibacm_opts.cfg -A /etc/rdma/b/ibacm_addr.cfg >/var/log/ibacm-b.out 2>&1 &
PB=$!
if up b 0x505400fffe123458 20; then
	resolve "3 discovery A -> B: name guest-b" a "dgid: $GB" -f n -s guest-a -d guest-b
	resolve "3 discovery A -> B: IPv4 10.0.0.2" a "dgid: $GB" -f i -s 10.0.0.1 -d 10.0.0.2
	resolve "3 discovery A -> B: IPv6 fd00::2" a "dgid: $GB" -f i -s fd00::1 -d fd00::2
	resolve "3 discovery B -> A: name guest-a" b "dgid: $GA" -f n -s guest-b -d guest-a
	resolve "3 discovery B -> A: IPv4 10.0.0.1" b "dgid: $GA" -f i -s 10.0.0.2 -d 10.0.0.1
	resolve "3 discovery B -> A: IPv6 fd00::1" b "dgid: $GA" -f i -s fd00::2 -d fd00::1
	# Each daemon opened its own namespace's devices only, and both
	# providers sign and check discovery with the shared key.
	signed=$(grep -l 'discovery: authenticated, signing with key 1 of 1' /var/log/ibacm-a.log /var/log/ibacm-b.log | wc -l)
	opened_b=$(sed -n 's/.*acm_open_dev: \(urdma[0-9]*\) opened$/\1/p' /var/log/ibacm-b.log | tr '\n' ' ')
	if [ "$signed" = 2 ] && [ "$opened_b" = "urdma2 " ]; then
		ok "3 B's ibacm opened urdma2 only; both providers sign discovery with the shared key file"
	else
		fail "3 B's ibacm opened: $opened_b; providers signing with the key: $signed of 2"
	fi
else
	fail "3 ibacm (host B, namespace nb) serves urdma2 with urdma: $(inb ib_acme -e 2>&1 | oneline) $(grep -iE 'urdma|error|fail' /var/log/ibacm-b.log /var/log/ibacm-b.out 2>/dev/null | tail -n 5 | oneline)"
fi

# --- 5 (part): librdmacm's rdma_getaddrinfo, while the daemon serves it -------
# (acme_plus_kernel_only, for the kernel's path query below, shuts
# librdmacm out, so this runs first.)
out=$(urdma-rai -s 10.1.0.1 10.1.0.9 2>&1)
rc=$?
note "# urdma-rai -s 10.1.0.1 10.1.0.9 -> exit $rc"; note "$out"
if [ $rc = 0 ] && echo "$out" | grep -q 'route_len=72' && echo "$out" | grep -q "^route .* dgid=$GH .*dlid=7 "; then
	ok "5 rdma_getaddrinfo(10.1.0.9): route_len=72, dgid $GH dlid 7"
else
	fail "5 rdma_getaddrinfo(10.1.0.9) (exit $rc): $(echo "$out" | oneline)"
fi
out=$(urdma-rai -s 10.0.0.1 10.0.0.2 2>&1)
rc=$?
note "# urdma-rai -s 10.0.0.1 10.0.0.2 -> exit $rc"; note "$out"
if [ $rc = 0 ] && echo "$out" | grep -q 'route_len=72' && echo "$out" | grep -q "^route .* dgid=$GB "; then
	ok "5 rdma_getaddrinfo(10.0.0.2, discovered): route_len=72, dgid $GB"
else
	fail "5 rdma_getaddrinfo(10.0.0.2, discovered) (exit $rc): $(echo "$out" | oneline)"
fi

# --- 4: the port going down and up; a device deleted under the daemon -------
# A request waiting on discovery: 10.0.0.99 has a neighbour entry (so no
# ARP failure answers it) for a MAC nobody has, so only the 3 s x 3 tries
# timeout, or the port going down, can end it.
$IP neigh replace 10.0.0.99 lladdr 52:54:00:00:00:99 dev va nud permanent
ib_acme -f i -s 10.0.0.1 -d 10.0.0.99 >/tmp/pending.out 2>&1 &
apid=$!
sleep 1
if alive $apid; then
	t0=$(now)
	$IP link set va down
	n=100
	while alive $apid && [ $n -gt 0 ]; do sleep 0.05; n=$((n - 1)); done
	t1=$(now)
	if alive $apid; then
		fail "4 link down answers a request pending on discovery: ib_acme still waiting $(((t1 - t0) * 10)) ms after ip link set va down"
		wait $apid
		arc=$?
	else
		wait $apid
		arc=$?
		note "# pending ib_acme -f i -s 10.0.0.1 -d 10.0.0.99 -> exit $arc after link down"; note "$(cat /tmp/pending.out)"
		# Well before the first retry (3 s after the request), and not
		# the discovery timeout's error.
		if [ $arc != 0 ] && [ $((t1 - t0)) -le 200 ] && ! grep -q 'timed out' /tmp/pending.out; then
			ok "4 link down answers a request pending on discovery: error after $(((t1 - t0) * 10)) ms ($(grep -o 'failed:.*' /tmp/pending.out | head -n 1))"
		else
			fail "4 link down answers a request pending on discovery: exit $arc after $(((t1 - t0) * 10)) ms: $(oneline </tmp/pending.out)"
		fi
	fi
else
	wait $apid
	fail "4 link down answers a request pending on discovery: it was not pending (answered within 1 s): $(oneline </tmp/pending.out)"
	$IP link set va down
fi
note "$(cat /sys/class/infiniband/urdma1/ports/1/state)"
if until_acme a fail 10 -f i -s 10.0.0.1 -d 10.0.0.2; then
	ok "4 port down: resolution of 10.0.0.2 fails"
else
	fail "4 port down: 10.0.0.2 still resolves 10 s after ip link set va down"
fi
$IP link set va up
if until_acme a ok 15 -f i -s 10.0.0.1 -d 10.0.0.2; then
	resolve "4 port up again: 10.0.0.2 resolves" a "dgid: $GB" -f i -s 10.0.0.1 -d 10.0.0.2
else
	fail "4 port up again: 10.0.0.2 does not resolve 15 s after ip link set va up: $(ib_acme -f i -s 10.0.0.1 -d 10.0.0.2 2>&1 | oneline)"
fi

# rdma link delete under the running daemon: uverbs disassociates the
# daemon's context; the daemon must survive and go on serving urdma1.
if rdma link delete urdma0 >>$DETAILS 2>&1; then
	sleep 2
	out=$(ib_acme -e 2>&1)
	rc=$?
	note "# ib_acme -e after rdma link delete urdma0 -> exit $rc"; note "$out"
	if alive $PA && [ $rc = 0 ] && echo "$out" | grep -q ',0x505400fffe123457,1,0xffff,[0-9]*,urdma,'; then
		# What ibacm 44 makes of it, reported: it logs the async event
		# and, as it does not pass it to providers, keeps the port and
		# endpoint of the deleted device.
		what=
		grep -q 'catastrophic error for urdma0' /var/log/ibacm-a.log && what=" ibacm logged 'local catastrophic error for urdma0'"
		echo "$out" | grep -q ',0x505400fffe123456,' && what="$what; ib_acme -e still lists urdma0's endpoint"
		ok "4 rdma link delete urdma0 under ibacm: the daemon lives, ib_acme -e answers;$what"
	else
		fail "4 rdma link delete urdma0 under ibacm: daemon $(alive $PA && echo alive || echo dead), ib_acme -e exit $rc: $(echo "$out" | oneline)"
	fi
	resolve "4 after deleting urdma0 the daemon still serves urdma1: 10.0.0.2" a "dgid: $GB" -f i -s 10.0.0.1 -d 10.0.0.2
else
	fail "4 rdma link delete urdma0: $(tail -n 1 $DETAILS)"
fi
rdma link add urdma0 type urdma netdev d0 >>$DETAILS 2>&1 || fail "4 rdma link add urdma0 again"
sleep 3
out=$(ib_acme -f n -s guest-a0 -d guest-h 2>&1)
rc=$?
note "# after re-adding urdma0: ib_acme -f n -s guest-a0 -d guest-h -> exit $rc"; note "$out"
note "$(grep -iE 'urdma0|device' /var/log/ibacm-a.log | tail -n 20)"
# Whether the daemon opened the new device is in its log: a second
# "acm_open_dev: urdma0 opened".  ibacm 44 opens devices only when it
# starts, so a restart (below) serves the new device; reported, not failed.
opens=$(grep -c 'acm_open_dev: urdma0 opened$' /var/log/ibacm-a.log)
if [ $rc = 0 ] && echo "$out" | grep -qx "  dgid: $GH"; then
	answers="answers for guest-a0"
else
	answers="no right answer for guest-a0 (exit $rc: $(echo "$out" | grep -E 'failed:|dgid:' | head -n 1 | oneline))"
fi
if ! alive $PA; then
	fail "4 urdma0 re-added: the daemon died"
elif [ "$opens" -ge 2 ]; then
	ok "4 urdma0 re-added: the running ibacm opened it again; $answers"
else
	ok "4 urdma0 re-added: the running ibacm does not open it (no new acm_open_dev; it opens devices only at start), $answers from the endpoint it kept (same GID); a restart serves it (5)"
fi

# --- 5: the kernel's path query --------------------------------------------------
# The kernel asks only a daemon of the initial namespace, and only if
# librdmacm cannot ask it itself (acme_plus_kernel_only).
stop $PA
alive $PA && { kill -9 $PA; fail "5 ibacm (host A) did not stop on SIGTERM"; }
ibacm -P -O /etc/rdma/ibacm_opts_kernel.cfg -A /etc/rdma/ibacm_addr.cfg >/var/log/ibacm-k.out 2>&1 &
PK=$!
if up a 0x505400fffe123456 20; then
	out=$(urdma-kpath $GA0 $GH 2>&1)
	rc=$?
	note "# urdma-kpath $GA0 $GH -> exit $rc"; note "$out"
	# The provider's path to guest-h: its LID from the hosts file, MTU
	# min(urdma_mtu 2048, urdma0's 4096) = 2048 (4), the port's 4x EDR =
	# 100 Gb/s (16).
	want="path sgid $GA0 dgid $GH slid 0 dlid 7 pkey 0xffff mtu 4 rate 16 sl 0"
	if [ $rc = 0 ] && echo "$out" | grep -q 'event RDMA_CM_EVENT_ROUTE_RESOLVED status 0' &&
		echo "$out" | grep -qx "$want" && grep -q 'acm_nl_' /var/log/ibacm-k.log; then
		ok "5 kernel rdma_resolve_route (AF_IB) via netlink and ibacm: ROUTE_RESOLVED, dlid 7 mtu 4 rate 16"
	else
		fail "5 kernel rdma_resolve_route (AF_IB) (exit $rc; want '$want'): $(echo "$out" | oneline) $(grep -c acm_nl_ /var/log/ibacm-k.log) acm_nl_ log lines"
	fi
else
	fail "5 ibacm with acme_plus_kernel_only serves urdma0: $(ib_acme -e 2>&1 | oneline)"
fi

# --- 6: urdma-acm doctor --------------------------------------------------------
out=$(urdma-acm doctor 2>&1)
rc=$?
note "# urdma-acm doctor -> exit $rc"; note "$out"
if [ $rc = 0 ] && echo "$out" | grep -A1 -x 'urdma0 (node GUID 0x505400fffe123456)' |
	grep -qx "  port 1: served by urdma (InfiniBand, ACTIVE, GID 0 $GA0, P_Keys 0xffff)"; then
	ok "6 urdma-acm doctor: exit 0, urdma0 port 1 served by urdma"
else
	fail "6 urdma-acm doctor (exit $rc): $(echo "$out" | oneline)"
fi

# --- 7: the kernel log ---------------------------------------------------------
stop $PK
stop $PB
alive $PB && fail "7 ibacm (host B) did not stop on SIGTERM"
sleep 1
dmesg >/var/log/dmesg
bad=$(grep -E 'WARNING|BUG|Oops|Call Trace|blocked for more' /var/log/dmesg)
if [ -z "$bad" ]; then ok "7 dmesg: no WARNING/BUG/Oops/Call Trace"
else fail "7 dmesg: $(echo "$bad" | head -n 3 | oneline)"; fi

kill $WD 2>/dev/null
if [ $nfail != 0 ] || [ -f /etc/rdma/tier-always-logs ]; then
	dump_all
fi
echo "TIER-DONE"
[ $nfail = 0 ]
