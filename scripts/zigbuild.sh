#!/usr/bin/env bash
# Builds workspace packages for glibc 2.28 (RHEL/Rocky 8, the oldest glibc of
# the distributions the provider supports) with cargo-zigbuild: zig links
# against its own stubs of that glibc's symbol versions, so no symbol newer
# than GLIBC_2.28 can be taken in by accident, whatever the build machine
# runs. Usage: scripts/zigbuild.sh [--arch x86_64|aarch64] [--profile NAME]
# [cargo build args...] (e.g. -p urdma-acm). Output:
# target/zig/ARCH-unknown-linux-gnu/NAME/ (ARCH defaults to x86_64, NAME to
# release; make dist uses deb, the shipped profile, for both).
#
# Why zig rather than building in an old root filesystem: Debian's registry
# no longer serves a release with glibc 2.28 (buster), and zig's pinned
# glibc target makes the floor exact and independent of the host.
set -euo pipefail
profile=release
arch=x86_64
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --arch) arch=$2; shift 2 ;;
        --arch=*) arch=${1#*=}; shift ;;
        --profile) profile=$2; shift 2 ;;
        --profile=*) profile=${1#*=}; shift ;;
        *) args+=("$1"); shift ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# From PyPI: both wheels carry their binaries (nothing is compiled).
ZIG_VERSION=0.15.2
ZIGBUILD_VERSION=0.24.0
if ! python3 -m ziglang version 2> /dev/null | grep -qx "$ZIG_VERSION" \
    || ! cargo-zigbuild --version 2> /dev/null | grep -q "$ZIGBUILD_VERSION"; then
    echo "zigbuild.sh: installing ziglang $ZIG_VERSION and cargo-zigbuild $ZIGBUILD_VERSION (PyPI)" >&2
    python3 -m pip install --quiet --root-user-action=ignore --disable-pip-version-check \
        "ziglang==$ZIG_VERSION" "cargo-zigbuild==$ZIGBUILD_VERSION"
fi
triple=$arch-unknown-linux-gnu
# The only libraries linked besides glibc's: libibverbs (the provider and
# urdma-acm query ports) and librdmacm (the test client urdma-rai). A folder
# of just their link names, so that zig finds them without seeing the host's
# own glibc in /usr/lib. For arm64 they are the arm64 libraries of
# Debian 12's root filesystem (the one the matrix runs arm64 in): the same
# sonames and symbol versions as on amd64.
case $arch in
    x86_64) sysroot= ;;
    aarch64)
        sysroot=$(scripts/rootfs.sh bookworm arm64)
        rustup target list --installed | grep -qx "$triple" || rustup target add "$triple"
        ;;
    *) echo "zigbuild.sh: --arch $arch: x86_64 or aarch64" >&2; exit 1 ;;
esac
libs=$root/target/zig/syslibs/$arch
mkdir -p "$libs"
for l in ibverbs rdmacm; do
    so=$sysroot/usr/lib/$arch-linux-gnu/lib$l.so.1
    [ -e "$so" ] || { echo "zigbuild.sh: $so missing (scripts/deps.sh, scripts/rootfs.sh)" >&2; exit 1; }
    ln -sfn "$(readlink -f "$so")" "$libs/lib$l.so"
done
# Headers: zig's glibc 2.28 headers first; /usr/include only after them, for
# <infiniband/*.h>, which bindgen and the verbs shim need.
# A build ID: the name under which debuggers find the split debug symbols
# (/usr/lib/debug/.build-id/, make dist).
export RUSTFLAGS="-L native=$libs -C link-arg=-Wl,--build-id=sha1"
export BINDGEN_EXTRA_CLANG_ARGS="-idirafter /usr/include"
export "CFLAGS_${triple//-/_}=-idirafter /usr/include"
exec cargo zigbuild --profile "$profile" --target "$triple.2.28" --target-dir target/zig "${args[@]}"
