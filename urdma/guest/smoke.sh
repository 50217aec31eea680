#!/bin/sh
# First smoke test of the urdma kernel module; runs INSIDE the guest:
#
#   urdma/guest/run.sh urdma/guest/smoke.sh
#
# Creates, inspects, deletes and re-adds devices, follows carrier changes,
# removes a netdev and the module with devices present, and fails if the
# kernel logged a warning, BUG or oops.
IP=/usr/sbin/ip		# iproute2; busybox's ip applet has no veth
fail=0
run() { echo "# $*"; "$@" || { echo "FAILED ($?): $*"; fail=1; }; }
must_fail() { echo "# $* (must fail)"; if "$@"; then echo "FAILED: succeeded"; fail=1; fi; }
port() {
	p=/sys/class/infiniband/$1/ports/1
	for f in state phys_state link_layer gids/0 pkeys/0 lid sm_lid rate; do
		echo "$1 $f: $(cat $p/$f)"
	done
}
expect_state() {
	s=$(cat /sys/class/infiniband/$1/ports/1/state)
	echo "$1 state: $s"
	case $s in *"$2"*) ;; *) echo "FAILED: expected $2"; fail=1 ;; esac
}

echo "kernel $(uname -r)"
for m in configfs ib_core ib_uverbs ib_umad ib_cm iw_cm rdma_cm rdma_ucm dummy veth urdma; do
	modprobe $m || { echo "FAILED: modprobe $m"; fail=1; }
done

run $IP link add d0 type dummy
run $IP link set d0 address 52:54:00:12:34:56
run $IP link set d0 up
run rdma link add urdma0 type urdma netdev d0
run rdma link show
port urdma0
echo "node_type: $(cat /sys/class/infiniband/urdma0/node_type)"
echo "node_guid: $(cat /sys/class/infiniband/urdma0/node_guid)"
for u in /sys/class/infiniband_verbs/uverbs*; do echo "$(basename $u): ibdev $(cat $u/ibdev) abi_version $(cat $u/abi_version)"; done
ls /sys/class/infiniband_mad /dev/infiniband | tr '\n' ' '; echo
[ "$(cat /sys/class/infiniband/urdma0/ports/1/gids/0)" = "fe80:0000:0000:0000:5054:00ff:fe12:3456" ] ||
	{ echo "FAILED: GID"; fail=1; }

must_fail rdma link add urdma9 type urdma netdev d0
must_fail rdma link add foo0 type urdma netdev d0

run $IP link set d0 down
expect_state urdma0 DOWN
run $IP link set d0 up
expect_state urdma0 ACTIVE

run rdma link delete urdma0
run rdma link show
run rdma link add urdma0 type urdma netdev d0
expect_state urdma0 ACTIVE

if [ -f /etc/libibverbs.d/urdma.driver ]; then
	run ibv_devinfo -v
fi

echo "-- 10 delete/add cycles"
i=0
while [ $i -lt 10 ]; do
	rdma link delete urdma0 && rdma link add urdma0 type urdma netdev d0 || { echo "FAILED: cycle $i"; fail=1; }
	i=$((i + 1))
done
expect_state urdma0 ACTIVE

echo "-- netdev removed with the device present"
run $IP link del d0
sleep 1
run rdma link show
[ -e /sys/class/infiniband/urdma0 ] && { echo "FAILED: urdma0 outlived d0"; fail=1; }

echo "-- veth: carrier follows the peer"
run $IP link add v0 type veth peer name v1
run $IP link set v0 address 52:54:00:12:34:57
run $IP link set v0 up
run rdma link add urdma1 type urdma netdev v0
expect_state urdma1 DOWN
run $IP link set v1 up
sleep 1
expect_state urdma1 ACTIVE
run rdma link add urdma2 type urdma netdev v1
port urdma2
run rdma link show

echo "-- rmmod with devices present"
run rmmod urdma
run rdma link show
ls /sys/class/infiniband/
echo "-- the lid parameter: ports added afterwards report it"
run modprobe urdma lid=5
run rdma link add urdma3 type urdma netdev v1
lid=$(cat /sys/class/infiniband/urdma3/ports/1/lid)
echo "urdma3 lid: $lid"
[ "$lid" = 0x5 ] || { echo "FAILED: expected lid 0x5"; fail=1; }
run rdma link show
run rmmod urdma

echo "-- kernel log"
bad=$(dmesg | grep -E 'WARNING|BUG|Oops|Call Trace')
if [ -n "$bad" ]; then echo "$bad"; dmesg | tail -n 80; fail=1; else echo "no WARNING/BUG/Oops/Call Trace"; fi
dmesg | grep -i urdma
[ $fail = 0 ] && echo "SMOKE OK" || echo "SMOKE FAILED"
exit $fail
