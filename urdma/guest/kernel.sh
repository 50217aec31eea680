#!/bin/sh
# Fetch Debian's kernel image of the same ABI as the headers the module is
# built against (kver.sh), unpacked into a cache directory; nothing under
# the host's /boot changes.  Prints the cache directory, which holds
# boot/vmlinuz-$KVER and lib/modules/$KVER.
#
#   URDMA_CACHE  cache root (default /var/cache/ibacm-urdma)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
kver=$("$here/kver.sh")
[ -n "$kver" ] || { echo "kernel.sh: cannot determine the kernel ABI" >&2; exit 1; }
cache=${URDMA_CACHE:-/var/cache/ibacm-urdma}/kernel/$kver
if [ -f "$cache/.done" ]; then echo "$cache"; exit 0; fi
# Concurrent runs: one downloads, the others wait and reuse it.
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9
if [ -f "$cache/.done" ]; then echo "$cache"; exit 0; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get -o APT::Sandbox::User=root download "linux-image-$kver" >&2) || {
	apt-get update >&2
	(cd "$tmp" && apt-get -o APT::Sandbox::User=root download "linux-image-$kver" >&2)
}
rm -rf "$cache"
mkdir -p "$cache"
dpkg-deb -x "$tmp"/linux-image-*.deb "$cache"
# The package ships no modules.dep (its postinst runs depmod): make it,
# for initramfs.sh to resolve module dependencies.
depmod -b "$cache" "$kver"
[ -f "$cache/boot/vmlinuz-$kver" ] && [ -f "$cache/lib/modules/$kver/modules.dep" ] || {
	echo "kernel.sh: unexpected package layout in $cache" >&2; exit 1; }
touch "$cache/.done"
echo "$cache"
