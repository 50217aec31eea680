#!/bin/sh
# Build the guest's initramfs (gzip'ed newc cpio) for run.sh:
#
#   initramfs.sh OUT.cpio.gz [EXTRA_DIR]
#
# It holds busybox-static, the host's own ibacm, ib_acme, ibv_devinfo,
# rdma and ip (iproute2: call it as /usr/sbin/ip, busybox's sh runs its own
# `ip` applet for a bare `ip`) with the libraries ldd names, the kernel
# modules the RDMA stack needs from the kernel.sh image (with their
# dependencies from modules.dep), target/urdma/urdma.ko, the verbs provider
# from target/urdma if it was built, and EXTRA_DIR copied over the root as
# a tree (e.g. EXTRA_DIR/usr/lib/x86_64-linux-gnu/ibacm/libibacm_urdma.so).
# Programs and shared objects in EXTRA_DIR get their ldd libraries too.
#
#   URDMA_GUEST_BINS  more host programs to include (space-separated)
#   URDMA_TARGET      where the module was built (default target/urdma)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=$1
extra=${2:-}
target=${URDMA_TARGET:-$top/target/urdma}

kimg=$("$here/kernel.sh")
kver=$("$here/kver.sh")
[ -f "$target/urdma.ko" ] || { echo "initramfs.sh: $target/urdma.ko missing: make urdma" >&2; exit 1; }
if [ -f "$target/urdma.kver" ] && [ "$(cat "$target/urdma.kver")" != "$kver" ]; then
	echo "initramfs.sh: urdma.ko was built for $(cat "$target/urdma.kver"), the guest runs $kver: make urdma" >&2
	exit 1
fi
[ -x /bin/busybox ] || DEBIAN_FRONTEND=noninteractive apt-get install -y busybox-static >&2
command -v cpio >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y cpio >&2

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

# Debian 12's merged /usr, so that host paths (/lib/..., /usr/lib/...) and
# the dynamic loader's /lib64 path resolve the same way in the guest.
mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib/x86_64-linux-gnu" "$root/usr/lib64"
for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/run" "$root/var/log" \
	"$root/etc/libibverbs.d" "$root/etc/rdma" "$root/root" "$root/guest"
ln -s ../run "$root/var/run"

# Copy a host file to the same path in the guest (a /usr-less path goes
# under /usr, as on the host).
put() {
	src=$1
	dst=$src
	case $dst in /usr/*) ;; *) dst=/usr$dst ;; esac
	mkdir -p "$root$(dirname "$dst")"
	cp -L "$src" "$root$dst"
}

# A program or shared object and every library ldd names for it.
with_libs() {
	put "$1"
	ldd "$1" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p' |
	while read -r lib; do
		[ -e "$root/usr${lib#/usr}" ] || put "$lib"
	done
}

cp /bin/busybox "$root/usr/bin/busybox"
for b in /usr/sbin/ibacm /usr/bin/ib_acme /usr/bin/ibv_devinfo /usr/bin/rdma /usr/sbin/ip ${URDMA_GUEST_BINS:-}; do
	with_libs "$(command -v "$b")"
done
# ibacm's own providers (acmp) and whatever else the host has there.
for so in /usr/lib/x86_64-linux-gnu/ibacm/*.so; do
	[ -e "$so" ] && with_libs "$so"
done

# Kernel modules and their dependencies, in a tree depmod understands.
mdir=lib/modules/$kver
mkdir -p "$root/usr/$mdir/extra"
for m in configfs ib_core ib_uverbs ib_umad ib_cm iw_cm rdma_cm rdma_ucm veth dummy ${URDMA_GUEST_MODULES:-}; do
	line=$(grep -E "(^|/)$m\.ko(\.xz)?:" "$kimg/$mdir/modules.dep") || {
		echo "initramfs.sh: no module $m in $kimg" >&2; exit 1; }
	for f in $(echo "$line" | tr -d ':'); do
		mkdir -p "$root/usr/$mdir/$(dirname "$f")"
		cp "$kimg/$mdir/$f" "$root/usr/$mdir/$f"
	done
done
cp "$kimg/$mdir/modules.order" "$kimg/$mdir/modules.builtin" "$kimg/$mdir/modules.builtin.modinfo" "$root/usr/$mdir/" 2>/dev/null || true
cp "$target/urdma.ko" "$root/usr/$mdir/extra/urdma.ko"
depmod -b "$root/usr" "$kver"

# The verbs provider (urdma/verbs), where libibverbs looks for it.
if [ -f "$target/liburdma-rdmav34.so" ] && [ -f "$target/urdma.driver" ]; then
	cp "$target/liburdma-rdmav34.so" "$root/usr/lib/x86_64-linux-gnu/libibverbs/" 2>/dev/null ||
		{ mkdir -p "$root/usr/lib/x86_64-linux-gnu/libibverbs" &&
		  cp "$target/liburdma-rdmav34.so" "$root/usr/lib/x86_64-linux-gnu/libibverbs/"; }
	cp "$target/urdma.driver" "$root/etc/libibverbs.d/urdma.driver"
fi

if [ -n "$extra" ]; then
	(cd "$extra" && find . -mindepth 1 | cpio -pdm --quiet "$root")
	find "$extra" -type f | while read -r f; do
		ldd "$f" >/dev/null 2>&1 || continue	# not a dynamic ELF file
		ldd "$f" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' | while read -r lib; do
			[ -e "$root/usr${lib#/usr}" ] || put "$lib"
		done
	done
fi

printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
echo guest >"$root/etc/hostname"
cp "$here/init" "$root/init"
chmod 755 "$root/init"

(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -6 >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
