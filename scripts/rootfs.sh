#!/usr/bin/env bash
# Prints the path of a minimal root filesystem of Debian release $1
# (bullseye, bookworm, trixie, sid) for architecture $2 (amd64, the
# default, or arm64) holding that release's own ibacm, ib_acme and
# librdmacm, made with debootstrap from Debian's packages the first time and
# cached after that (URDMA_ROOTFS_CACHE, default /var/cache/ibacm-urdma/rootfs;
# delete a release's folder to refresh it). The compatibility matrix
# (scripts/matrix.sh) runs the provider in them; the arm64 build links
# against the arm64 root's libibverbs (scripts/zigbuild.sh).
#
# An arm64 root runs its programs through qemu-user (Debian's
# qemu-user-static, registered with the kernel's binfmt_misc by
# scripts/binfmt.sh), debootstrap's second stage included.
set -euo pipefail
suite=${1:?usage: rootfs.sh SUITE [amd64|arm64]}
arch=${2:-amd64}
cache=${URDMA_ROOTFS_CACHE:-/var/cache/ibacm-urdma/rootfs}
case $arch in
    amd64) dir=$cache/$suite ;;
    arm64) dir=$cache/$suite-arm64 ;;
    *) echo "rootfs.sh: architecture $arch: amd64 or arm64" >&2; exit 1 ;;
esac
name=${dir##*/}
# Only ibacm and rdmacm-utils by name: their dependencies bring libibverbs and
# librdmacm (the library of librdmacm clients) under each release's own
# package names (trixie's carry a t64 suffix). Debian 12 for amd64 also
# holds the node exporter, whose serving of the provider's metrics from its
# textfile directory (no path edited) the matrix checks there alone.
include=ibacm,rdmacm-utils
[ "$suite-$arch" != bookworm-amd64 ] || include=$include,prometheus-node-exporter
marker=$dir/.urdma-rootfs-complete
# The kernel forgets binfmt_misc's registrations at every boot; the cache
# stays.
[ "$arch" = amd64 ] || "$(dirname "$0")/binfmt.sh" "$arch"
made() { [ "$(cat "$marker" 2> /dev/null)" = "$include" ]; }
if made; then
    echo "$dir"
    exit 0
fi
mkdir -p "$cache"
# One maker per cache: two runs started together (the matrix makes all
# releases at once) wait for each other instead of sharing apt's lock or a
# half-made folder.
exec 9> "$cache/.lock-$name"
flock 9
if made; then
    echo "$dir"
    exit 0
fi
if ! command -v debootstrap > /dev/null; then
    (
        flock 8
        command -v debootstrap > /dev/null && exit 0
        echo "rootfs.sh: installing debootstrap" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends debootstrap > /dev/null
    ) 8> "$cache/.lock-apt"
fi
rm -rf "$dir.partial" "$dir"
echo "rootfs.sh: debootstrap $suite $arch (once; cached in $dir)" >&2
if ! debootstrap --arch="$arch" --variant=minbase --include="$include" "$suite" "$dir.partial" > "$cache/$name.log" 2>&1; then
    tail -20 "$cache/$name.log" >&2
    echo "rootfs.sh: debootstrap of $suite $arch failed (log: $cache/$name.log)" >&2
    exit 1
fi
# Nothing of the package cache is needed again.
rm -rf "$dir.partial/var/cache/apt/archives/"*.deb
echo "$include" > "$dir.partial/.urdma-rootfs-complete"
mv "$dir.partial" "$dir"
echo "$dir"
