#!/usr/bin/env bash
# Installs, if missing, what building and running the demo needs on Debian
# 12 (scripts/demo.sh): the daemon and its client ib_acme (ibacm), librdmacm,
# the headers bindgen reads, libclang for bindgen, a C compiler and the
# namespace tools. `deps.sh --test` adds what only the test command uses
# (scripts/test.sh): rustfmt and clippy, make and binutils, nftables (packet loss in
# tests/loss.rs), valgrind and python3 (make memcheck), dnsmasq (the DNS
# server of tests/names.rs), man (tests/man_pages.rs), cargo-fuzz (the fuzz
# smoke), cargo-deb, lintian, rpm and rpmlint (make dist and its checks),
# debootstrap (the compatibility matrix), qemu-user-static, Rust's aarch64
# standard library and binutils for aarch64 (make dist's arm64 build and
# the matrix's arm64 root filesystem), Debian's kernel headers, QEMU, busybox, cpio,
# ibverbs-utils and kmod (depmod, modprobe: make urdma and its guest tier),
# and zig with cargo-zigbuild (the glibc 2.28 build; scripts/zigbuild.sh
# installs those from PyPI itself), and prometheus (promtool: the metrics and
# the example alerting rules checked in tests/tool/prometheus.rs), ufw
# (package-test.sh reads the shipped application profile with it) and gdb
# (check-dist.sh reads the shipped provider with the -dbgsym's symbols).
set -euo pipefail

packages=(ibacm libibverbs-dev libibumad-dev librdmacm-dev libclang-dev gcc iproute2 util-linux)
test=false
[ "${1:-}" = --test ] && test=true
if $test; then
    packages+=(g++ binutils make man-db groff-base nftables valgrind python3 dnsmasq-base
               lintian rpm rpmlint debootstrap linux-headers-amd64 qemu-system-x86 busybox-static cpio
               ibverbs-utils kmod prometheus ufw gdb qemu-user-static
               binutils-aarch64-linux-gnu)
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps.sh: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
command -v cargo > /dev/null || { echo "deps.sh: cargo not found; install a Rust toolchain (rustup)" >&2; exit 1; }
$test || exit 0
for c in rustfmt clippy; do
    cargo "${c/rustfmt/fmt}" --version > /dev/null 2>&1 || rustup component add "$c"
done
rustup target list --installed | grep -qx aarch64-unknown-linux-gnu \
    || rustup target add aarch64-unknown-linux-gnu
cargo fuzz --version > /dev/null 2>&1 || cargo install --locked cargo-fuzz
cargo deb --version > /dev/null 2>&1 || cargo install --locked cargo-deb
