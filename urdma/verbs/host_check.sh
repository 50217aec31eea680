#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Host checks of the urdma verbs provider (run by `make -C urdma/verbs check`).
# Needs no RDMA kernel support: the last part builds a pretend urdma device in a
# private mount namespace (fake sysfs + /dev/infiniband node) and answers its
# uverbs commands with urdma-fake-uverbs.  Nothing outside that namespace and
# a temp directory is touched.  Exit status 0 when everything that could run
# passed; parts that cannot run here print SKIP.
set -u
OUT=${OUT:?OUT= the build directory}
PROV=$OUT/liburdma-rdmav34.so
fail=0
say() { printf '%s\n' "$*"; }
bad() { say "FAIL $*"; fail=1; }

# 1. The provider binds to the private ABI version node, and exports nothing
#    but its ops structure.
say "== 1. dynamic symbols"
syms=$(objdump -T "$PROV") || bad "objdump"
for s in verbs_register_driver_34 _verbs_init_and_alloc_context verbs_uninit_context \
	verbs_set_ops ibv_cmd_get_context ibv_cmd_query_device_any ibv_cmd_query_port \
	ibv_cmd_alloc_pd ibv_cmd_dealloc_pd; do
	if printf '%s\n' "$syms" | grep -Eq "\*UND\*.*\(IBVERBS_PRIVATE_34\) +$s\$"; then
		say "ok   $s@IBVERBS_PRIVATE_34"
	else
		bad "$s is not an undefined IBVERBS_PRIVATE_34 reference"
	fi
done
exported=$(printf '%s\n' "$syms" | awk '$2 == "g" && $4 != "*UND*" { print $NF }')
[ "$exported" = verbs_provider_urdma ] && say "ok   only export: verbs_provider_urdma" \
	|| bad "unexpected exports: $exported"
grep -qx 'driver urdma' "$OUT/urdma.driver" && say "ok   urdma.driver: driver urdma" \
	|| bad "urdma.driver content"

# 2. The running libibverbs against private_abi.h (no device here).
say "== 2. urdma-abi-check (no device)"
"$OUT/urdma-abi-check" --provider "$PROV" || bad "urdma-abi-check"

# 3. ibv_devices with the provider offered through the environment.  With no
#    RDMA device at all libibverbs never even loads drivers, so this only
#    shows that nothing breaks; part 4 shows it loads and matches.
say "== 3. ibv_devices with RDMAV_DRIVERS (absolute path, then library path)"
# Same result as without the provider, and no crash (status >= 128).  On a
# host with no RDMA support at all ibv_devices itself fails ("Function not
# implemented": no /sys/class/infiniband_verbs) with or without us.
ibv_devices > /dev/null 2>&1; base=$?
say "info ibv_devices without the provider: exit $base"
RDMAV_DRIVERS=${PROV%-rdmav34.so} ibv_devices; rc=$?
[ $rc = $base ] && [ $rc -lt 128 ] && say "ok   ibv_devices (RDMAV_DRIVERS=/abs/liburdma) exit $rc, as without it" \
	|| bad "ibv_devices exit $rc (without provider: $base)"
LD_LIBRARY_PATH=$OUT RDMAV_DRIVERS=urdma ibv_devices > /dev/null 2>&1; rc=$?
[ $rc = $base ] && [ $rc -lt 128 ] && say "ok   ibv_devices (LD_LIBRARY_PATH, RDMAV_DRIVERS=urdma) exit $rc, as without it" \
	|| bad "ibv_devices exit $rc (without provider: $base)"

# 4. A pretend device.
say "== 4. fake urdma device (private mount namespace, seccomp-answered uverbs)"
if [ -d /sys/module/ib_core ] || [ -d /sys/class/infiniband_verbs ]; then
	say "SKIP kernel RDMA present: libibverbs would ask the kernel, not the fake sysfs"
elif [ "$(id -u)" != 0 ] || ! unshare -m --propagation private true 2>/dev/null; then
	say "SKIP needs root and unshare -m"
else
	T=$(mktemp -d /tmp/urdma-verbs-check.XXXXXX)
	unshare -m --propagation private sh -c '
		set -eu
		T=$1 OUT=$2
		# sysfs as libibverbs 44 reads it without netlink.
		C=$T/sys/class
		mkdir -p $C/infiniband_verbs/uverbs0 $C/infiniband_verbs/uverbs1
		echo 6 > $C/infiniband_verbs/abi_version
		echo urdma0 > $C/infiniband_verbs/uverbs0/ibdev
		echo 1:3 > $C/infiniband_verbs/uverbs0/dev
		echo 1 > $C/infiniband_verbs/uverbs0/abi_version
		# a device that is not ours: must stay unmatched
		echo other0 > $C/infiniband_verbs/uverbs1/ibdev
		echo 1:3 > $C/infiniband_verbs/uverbs1/dev
		echo 0 > $C/infiniband_verbs/uverbs1/abi_version
		for d in urdma0 other0; do
			mkdir -p $C/infiniband/$d/ports/1/gids $C/infiniband/$d/ports/1/pkeys \
				$C/infiniband/$d/ports/1/gid_attrs/types
			echo "1: CA" > $C/infiniband/$d/node_type
			echo 5254:00ff:fe12:3456 > $C/infiniband/$d/node_guid
			echo 5254:00ff:fe12:3456 > $C/infiniband/$d/sys_image_guid
			echo 0.1.0 > $C/infiniband/$d/fw_ver
			echo fe80:0000:0000:0000:5254:00ff:fe12:3456 > $C/infiniband/$d/ports/1/gids/0
			echo 0xffff > $C/infiniband/$d/ports/1/pkeys/0
			echo "IB/RoCE v1" > $C/infiniband/$d/ports/1/gid_attrs/types/0
			echo InfiniBand > $C/infiniband/$d/ports/1/link_layer
		done
		# /dev with the uverbs nodes (really the null device, 1:3).
		mkdir $T/dev
		mount -t tmpfs -o mode=755 urdma-dev $T/dev
		for n in null zero full random urandom tty; do
			[ -e /dev/$n ] || continue
			touch $T/dev/$n; mount --bind /dev/$n $T/dev/$n
		done
		ln -s /proc/self/fd $T/dev/fd
		mkdir $T/dev/infiniband
		mknod $T/dev/infiniband/uverbs0 c 1 3
		mknod $T/dev/infiniband/uverbs1 c 1 3
		mount --bind $T/dev /dev
		# Install as the guest does, next to all of Debian'\''s providers.
		mkdir $T/etc $T/prov
		cp /etc/libibverbs.d/* $T/etc/ 2>/dev/null || true
		cp $OUT/urdma.driver $T/etc/
		cp /usr/lib/x86_64-linux-gnu/libibverbs/* $T/prov/ 2>/dev/null || true
		cp $OUT/liburdma-rdmav34.so $T/prov/
		mount --bind $T/etc /etc/libibverbs.d
		mount --bind $T/prov /usr/lib/x86_64-linux-gnu/libibverbs
		export SYSFS_PATH=$T/sys IBV_SHOW_WARNINGS=1
		rc=0
		echo "-- ibv_devices"
		$OUT/urdma-fake-uverbs /dev/infiniband/uverbs0 $T/log.devices -- ibv_devices \
			> $T/out.devices 2>&1 || rc=1
		cat $T/out.devices
		echo "-- ibv_devinfo -v -d urdma0"
		$OUT/urdma-fake-uverbs /dev/infiniband/uverbs0 $T/log.devinfo -- \
			ibv_devinfo -v -d urdma0 > $T/out.devinfo 2>&1 || rc=1
		cat $T/out.devinfo
		cat $T/log.devinfo
		echo "-- urdma-abi-check --require-device (installed provider)"
		$OUT/urdma-fake-uverbs /dev/infiniband/uverbs0 $T/log.check -- \
			$OUT/urdma-abi-check --require-device || rc=1
		cat $T/log.check
		# Negative control, then the two environment routes libibverbs 44
		# honours (RDMAV_DRIVERS / IBV_DRIVERS; its config directory is
		# fixed at build time, there is no variable for it): without our
		# .driver file and our library in the provider directory, urdma0
		# must disappear, and come back through the environment.
		rm $T/etc/urdma.driver $T/prov/liburdma-rdmav34.so
		echo "-- without the provider installed: urdma0 must not be listed"
		$OUT/urdma-fake-uverbs /dev/infiniband/uverbs0 $T/log.none -- ibv_devices \
			> $T/out.none 2>&1 || true
		cat $T/out.none
		if grep -q "^ *urdma0 " $T/out.none; then echo "FAIL listed without provider"; rc=1; fi
		echo "-- RDMAV_DRIVERS=$OUT/liburdma"
		RDMAV_DRIVERS=$OUT/liburdma $OUT/urdma-fake-uverbs /dev/infiniband/uverbs0 \
			$T/log.env1 -- ibv_devinfo -d urdma0 > $T/out.env1 2>&1 || rc=1
		grep -E "hca_id|state|link_layer" $T/out.env1
		grep -q "hca_id:.*urdma0" $T/out.env1 || { echo "FAIL RDMAV_DRIVERS=/abs"; rc=1; }
		echo "-- LD_LIBRARY_PATH=$OUT RDMAV_DRIVERS=urdma"
		LD_LIBRARY_PATH=$OUT RDMAV_DRIVERS=urdma $OUT/urdma-fake-uverbs \
			/dev/infiniband/uverbs0 $T/log.env2 -- ibv_devinfo -d urdma0 \
			> $T/out.env2 2>&1 || rc=1
		grep -E "hca_id" $T/out.env2
		grep -q "hca_id:.*urdma0" $T/out.env2 || { echo "FAIL LD_LIBRARY_PATH"; rc=1; }
		# Leaks: only "definite" ones count; libibverbs keeps every device it
		# built (ours included) cached for the life of the process, reachable
		# only through interior list pointers ("possibly lost").
		if command -v valgrind > /dev/null; then
			echo "-- valgrind urdma-abi-check --require-device --provider (RDMAV_DRIVERS)"
			RDMAV_DRIVERS=$OUT/liburdma $OUT/urdma-fake-uverbs /dev/infiniband/uverbs0 \
				$T/log.vg -- valgrind -q --error-exitcode=9 --leak-check=full \
				--errors-for-leak-kinds=definite --show-possibly-lost=no $OUT/urdma-abi-check --require-device \
				--provider $OUT/liburdma-rdmav34.so > $T/out.vg 2>&1; vrc=$?
			grep -E "^(FAIL|PASSED|FAILED)|==[0-9]+==" $T/out.vg | head -40
			[ $vrc = 0 ] || { echo "FAIL valgrind exit $vrc"; rc=1; }
		fi
		grep -q "urdma0" $T/out.devices || { echo "FAIL urdma0 not listed"; rc=1; }
		if grep -q "other0" $T/out.devices && ! grep -q "no userspace device-specific driver found for other0" $T/out.devices; then
			echo "FAIL other0 listed"; rc=1
		fi
		grep -q "BAD" $T/log.* && { echo "FAIL bad command sizes"; rc=1; }
		exit $rc
	' sh "$T" "$OUT" || bad "fake device checks"
	rm -rf "$T"
fi

[ $fail = 0 ] && say "host_check: PASSED" || say "host_check: FAILED"
exit $fail
