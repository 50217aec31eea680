#!/bin/sh
# Boot Debian's kernel (kernel.sh) under QEMU, software emulation only, with
# the urdma initramfs (initramfs.sh), run SCRIPT in the guest as root
# (/bin/sh, busybox) and print what it prints; exit with its exit status.
#
#   run.sh SCRIPT [EXTRA_DIR]
#
# EXTRA_DIR is copied over the guest's root (see initramfs.sh); SCRIPT's
# directory is not: put what the script needs in EXTRA_DIR.
#
#   URDMA_GUEST_TIMEOUT  seconds before the guest is killed (default 300)
#   URDMA_GUEST_APPEND   more kernel command line
#   URDMA_GUEST_VERBOSE  1: print the whole console (boot messages too)
#   URDMA_CACHE          cache root (default /var/cache/ibacm-urdma)
#
# The kernel and the base initramfs are cached (the initramfs by a hash of
# everything that goes into it); the script travels in a second, tiny cpio
# archive appended to it, so changing only the script rebuilds nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: run.sh SCRIPT [EXTRA_DIR]" >&2; exit 2; }
script=$1
extra=${2:-}
[ -z "$extra" ] || extra=$(cd "$extra" && pwd)
cache=${URDMA_CACHE:-/var/cache/ibacm-urdma}
target=${URDMA_TARGET:-$top/target/urdma}
export URDMA_TARGET="$target"

command -v qemu-system-x86_64 >/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y qemu-system-x86 >&2
kimg=$("$here/kernel.sh")
kver=$("$here/kver.sh")

# The initramfs's inputs: if none changed, the cached archive is reused.
key=$(
	{
		cat "$here/initramfs.sh" "$here/init"
		echo "$kver ${URDMA_GUEST_BINS:-} ${URDMA_GUEST_MODULES:-}"
		for f in "$target/urdma.ko" "$target/liburdma-rdmav34.so" "$target/urdma.driver"; do
			[ -f "$f" ] && sha256sum "$f"
		done
		[ -z "$extra" ] || (cd "$extra" && find . -type f | LC_ALL=C sort | xargs -r sha256sum; find . -type l | LC_ALL=C sort)
		for b in /usr/sbin/ibacm /usr/bin/ib_acme /usr/bin/ibv_devinfo /usr/bin/rdma /usr/sbin/ip /bin/busybox; do
			ls -lL "$b"
		done
	} | sha256sum | cut -c1-16
)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root/guest"
cp "$script" "$work/root/guest/run"
(cd "$work/root" && find . | cpio -o -H newc --quiet -R 0:0) | gzip -1 >"$work/script.cpio.gz"

mkdir -p "$cache/initramfs"
base=$cache/initramfs/$key.cpio.gz
(
	# Runs in parallel share the cache; the lock covers build and copy.
	flock 9
	if [ ! -f "$base" ]; then
		# Few archives are kept: the inputs of older ones are mostly gone.
		ls -t "$cache"/initramfs/*.cpio.gz 2>/dev/null | tail -n +4 | xargs -r rm -f
		"$here/initramfs.sh" "$base" "$extra" >/dev/null
	fi
	# The kernel unpacks concatenated archives in order, later files winning.
	cat "$base" "$work/script.cpio.gz" >"$work/initrd"
) 9>"$cache/initramfs/.lock"

log=$work/console.log
set +e
nice -n 19 timeout "${URDMA_GUEST_TIMEOUT:-300}" qemu-system-x86_64 \
	-accel tcg -smp 1 -nic none -m 1G \
	-kernel "$kimg/boot/vmlinuz-$kver" -initrd "$work/initrd" \
	-append "console=ttyS0 panic=-1 quiet ${URDMA_GUEST_APPEND:-}" \
	-nographic -no-reboot </dev/null >"$log" 2>&1
qrc=$?
set -e
# Plain text: no carriage returns, no terminal resets from the firmware
# and the kernel's console (they precede the first marker on its line).
tr -d '\r' <"$log" | sed 's/\x1bc//g; s/\x1b\[[0-9;?]*[A-Za-z]//g' >"$log.txt"

if [ "${URDMA_GUEST_VERBOSE:-0}" = 1 ]; then
	cat "$log.txt"
else
	sed -n '/URDMA-GUEST-BEGIN$/,/^URDMA-GUEST-EXIT [0-9]*$/{/URDMA-GUEST-BEGIN$/d;/^URDMA-GUEST-EXIT [0-9]*$/d;p}' "$log.txt"
fi
rc=$(sed -n 's/^URDMA-GUEST-EXIT \([0-9]*\)$/\1/p' "$log.txt" | tail -n 1)
if [ -z "$rc" ]; then
	echo "run.sh: the guest did not finish (qemu exit $qrc); console tail:" >&2
	tail -n 40 "$log.txt" >&2
	exit 125
fi
exit "$rc"
