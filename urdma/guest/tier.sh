#!/bin/sh
# The guest test tier (issue 19): this project's ibacm provider and
# urdma-acm on REAL urdma kernel devices, under Debian's own kernel in one
# QEMU guest (run.sh), with the stock ibacm, ib_acme, libibverbs and
# librdmacm and no LD_PRELOAD anywhere.  checks.sh, run inside the guest,
# does the checking; this side builds what is missing, assembles the
# guest's extra files, boots the guest once and turns its report into
#
#   guest: ok: CHECK
#   guest: FAILED: CHECK: detail
#   guest: N passed, M failed
#
# exiting non-zero if any check failed or the guest did not finish.  On
# failure the guest dumps its kernel log and the daemons' logs; they are
# kept under $URDMA_TIER_LOGS (default target/urdma/tier-logs, replaced by
# every run) and their paths printed.
#
#   URDMA_TIER_LOGS     where the logs go
#   URDMA_TIER_ALWAYS_LOGS=1  dump the guest's logs even when all passed
#   URDMA_GUEST_TIMEOUT (run.sh) seconds before the guest is killed; the
#                       tier sets 240 unless given, to stay under 5 minutes;
#                       the guest gives up on its checks 20 s before
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
target=${URDMA_TARGET:-$top/target/urdma}
logs=${URDMA_TIER_LOGS:-$target/tier-logs}
start=$(date +%s)

# --- what the guest needs, built only if missing ----------------------------
# The module and the verbs provider (and urdma-abi-check): `make urdma`.
if [ ! -f "$target/urdma.ko" ] || [ ! -f "$target/liburdma-rdmav34.so" ] ||
	[ ! -x "$target/urdma-abi-check" ] ||
	[ "$(cat "$target/urdma.kver" 2>/dev/null)" != "$("$here/kver.sh")" ]; then
	make -C "$top" urdma >&2
fi
# The portable provider and urdma-acm, as shipped (`make dist`): the tier
# tests what users install, not a debug build.
if [ ! -f "$top/target/dist/libibacm_urdma.so" ] || [ ! -x "$top/target/dist/urdma-acm" ]; then
	make -C "$top" dist >&2
fi
# urdma-rai: a plain librdmacm client (it needs no simulator on a real
# device).
if [ ! -x "$top/target/release/urdma-rai" ]; then
	(cd "$top" && nice -n 19 cargo build --release -p urdma-sim --bin urdma-rai) >&2
fi
# The AF_IB rdma_resolve_route client, rebuilt when its source changed.
kpath=$target/urdma-kpath
if [ ! -x "$kpath" ] || [ "$here/tools/kpath.c" -nt "$kpath" ]; then
	gcc -O2 -Wall -o "$kpath" "$here/tools/kpath.c" -lrdmacm -libverbs
fi

# --- the guest's extra files ---------------------------------------------------
extra=$(mktemp -d)
out=$(mktemp)
err=$(mktemp)
trap 'rm -rf "$extra" "$out" "$err"' EXIT
lib=$extra/usr/lib/x86_64-linux-gnu
mkdir -p "$extra/usr/bin" "$lib/ibacm" "$extra/etc/rdma/b"
# The daemon's compiled-in provider directory: no provider_lib_path below.
cp "$top/target/dist/libibacm_urdma.so" "$lib/ibacm/libibacm_urdma.so"
cp "$top/target/dist/urdma-acm" "$top/target/release/urdma-rai" \
	"$target/urdma-abi-check" "$kpath" "$extra/usr/bin/"

# Host A (the initial namespace): urdma0 on a dummy netdev (addresses of
# its own, a hosts file) and urdma1 on one end of a veth pair.  Host B (the
# namespace nb): urdma2 on the other end, an empty hosts file.  The key
# file is written by the guest (a fresh key every run, mode 0600).
opts() {	# opts LOG HOSTS [MORE...]
	printf '%s\n' "log_file $1" "log_level 2" "provider urdma default" \
		"support_ips_in_addr_cfg 1" "urdma_hosts_file $2" \
		"urdma_auth_key_file /etc/rdma/urdma.key" "urdma_discovery yes"
	shift 2
	printf '%s\n' "$@"
}
# urdma_mtu 2048 below urdma0's 4096 (d0 has MTU 9000): the path's MTU is
# the smaller, 2048, which the kernel path check then sees.  A pending
# discovery waits up to 3 s x 3 tries, so an answer that comes from the
# port going down is told apart from one that comes from a timeout.
opts /var/log/ibacm-a.log /etc/rdma/ibacm_urdma_hosts.data \
	"urdma_mtu 2048" "urdma_timeout 3000" "urdma_retries 2" >"$extra/etc/rdma/ibacm_opts.cfg"
# The same daemon for the kernel's path queries: librdmacm may not ask it.
opts /var/log/ibacm-k.log /etc/rdma/ibacm_urdma_hosts.data \
	"urdma_mtu 2048" "acme_plus_kernel_only yes" >"$extra/etc/rdma/ibacm_opts_kernel.cfg"
opts /var/log/ibacm-b.log /etc/rdma/b/hosts >"$extra/etc/rdma/b/ibacm_opts.cfg"
cat >"$extra/etc/rdma/ibacm_addr.cfg" <<'EOF'
# host A: urdma0 (dummy d0) and urdma1 (veth va)
guest-a0    urdma0 1 default
10.1.0.1    urdma0 1 default
fd01::1     urdma0 1 default
guest-a     urdma1 1 default
10.0.0.1    urdma1 1 default
fd00::1     urdma1 1 default
EOF
cat >"$extra/etc/rdma/b/ibacm_addr.cfg" <<'EOF'
# host B: urdma2 (veth vb, namespace nb)
guest-b     urdma2 1 default
10.0.0.2    urdma2 1 default
fd00::2     urdma2 1 default
EOF
# A host nobody runs (MAC 52:54:00:12:34:99), with a LID to make DLID
# visible in every path to it.  Nothing about host B: B is found by
# discovery only.
cat >"$extra/etc/rdma/ibacm_urdma_hosts.data" <<'EOF'
guest-h     fe80::5054:ff:fe12:3499 lid=7
10.1.0.9    fe80::5054:ff:fe12:3499 lid=7
fd01::9     fe80::5054:ff:fe12:3499 lid=7
EOF
: >"$extra/etc/rdma/b/hosts"
[ "${URDMA_TIER_ALWAYS_LOGS:-0}" = 1 ] && touch "$extra/etc/rdma/tier-always-logs"
# The guest's own deadline, before QEMU's: a hung check still gets the
# guest's logs out (checks.sh's watchdog dumps them and powers off).
timeout=${URDMA_GUEST_TIMEOUT:-240}
deadline=$((timeout - 20))
[ "$deadline" -ge 10 ] || deadline=$((timeout / 2))
echo "$deadline" >"$extra/etc/rdma/tier-deadline"

# --- one boot -------------------------------------------------------------------
rc=0
URDMA_GUEST_TIMEOUT=$timeout "$here/run.sh" "$here/checks.sh" "$extra" >"$out" 2>"$err" || rc=$?

# --- the report -----------------------------------------------------------------
# The guest prints `TIER-OK name`, `TIER-FAIL name: detail` and, on
# failure, logs between `TIER-LOG-BEGIN file` and `TIER-LOG-END`; the rest
# is its narration, kept in guest.out.
rm -rf "$logs"
mkdir -p "$logs"
cat "$out" >"$logs/guest.out"
cat "$err" >"$logs/run.stderr"	# run.sh's own messages (the console tail of a guest that hung)
awk -v dir="$logs" '
	/^TIER-LOG-BEGIN / { f = dir "/" $2; printf "" > f; next }
	/^TIER-LOG-END$/ { if (f != "") close(f); f = ""; next }
	f != "" { print >> f }
' "$out"
passed=$(grep -c '^TIER-OK ' "$out" || true)
failed=$(grep -c '^TIER-FAIL ' "$out" || true)
sed -n 's/^TIER-OK \(.*\)/guest: ok: \1/p; s/^TIER-FAIL \(.*\)/guest: FAILED: \1/p' "$out"
if ! grep -q '^TIER-DONE$' "$out"; then
	# run.sh exits 125 when the guest never printed its exit status.
	failed=$((failed + 1))
	echo "guest: FAILED: the guest did not finish (run.sh exit $rc): $(grep -v '^TIER-' "$err" | tail -n 3 | tr '\n' ' ' | cut -c1-300)"
elif [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
	# Every check it reported passed, yet the script itself failed.
	failed=1
	echo "guest: FAILED: checks.sh: exit $rc"
fi
elapsed=$(($(date +%s) - start))
if [ "$failed" != 0 ] || [ "$rc" != 0 ]; then
	echo "guest: logs (wall time ${elapsed}s):"
	for f in "$logs"/*; do echo "  $f"; done
	if [ -f "$logs/dmesg" ]; then
		echo "guest: kernel log tail ($logs/dmesg):"
		tail -n 30 "$logs/dmesg" | sed 's/^/  /'
	fi
else
	echo "guest: wall time ${elapsed}s; guest output in $logs/guest.out"
fi
echo "guest: $passed passed, $failed failed"
[ "$failed" = 0 ]
