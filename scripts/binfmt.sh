#!/usr/bin/env bash
# Lets this amd64 machine run the programs of an arm64 root filesystem:
# installs Debian's qemu-user-static if it is missing and registers its
# aarch64 interpreter with the kernel's binfmt_misc, as systemd-binfmt
# would at boot (a build machine or container may have no systemd). The
# F flag has the kernel open the interpreter now, so that it also runs
# inside chroots that do not hold it. Idempotent.
# Usage: scripts/binfmt.sh arm64
set -euo pipefail
arch=${1:?usage: binfmt.sh arm64}
[ "$arch" = arm64 ] || { echo "binfmt.sh: only arm64 (qemu-aarch64)" >&2; exit 1; }
conf=/usr/lib/binfmt.d/qemu-aarch64.conf
misc=/proc/sys/fs/binfmt_misc
if [ ! -e "$conf" ]; then
    # One apt at a time with rootfs.sh, which installs debootstrap.
    lock=${URDMA_ROOTFS_CACHE:-/var/cache/ibacm-urdma/rootfs}/.lock-apt
    mkdir -p "$(dirname "$lock")"
    (
        flock 8
        [ -e "$conf" ] && exit 0
        echo "binfmt.sh: installing qemu-user-static" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends qemu-user-static > /dev/null
    ) 8> "$lock"
fi
[ -e "$misc/register" ] || mount -t binfmt_misc binfmt_misc "$misc"
if [ ! -e "$misc/qemu-aarch64" ]; then
    # The file is one registration line, in the kernel's own format.
    grep -v '^#' "$conf" > "$misc/register" 2> /dev/null || [ -e "$misc/qemu-aarch64" ] \
        || { echo "binfmt.sh: the kernel refused $conf" >&2; exit 1; }
fi
grep -qx enabled "$misc/qemu-aarch64" || { echo "binfmt.sh: qemu-aarch64 is not enabled" >&2; exit 1; }
