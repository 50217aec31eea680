#!/usr/bin/env bash
# Installs what building and testing need on Debian 12, if missing: the
# daemon and clients (ibacm, ib_acme, librdmacm), the headers bindgen reads,
# libclang for bindgen, the namespace tools of the end-to-end tests, nftables
# (packet loss in tests/loss.rs), valgrind and python3 (make memcheck),
# dnsmasq (the DNS server of tests/names.rs).
set -euo pipefail

packages=(ibacm libibverbs-dev libibumad-dev librdmacm-dev rdmacm-utils libclang-dev
          gcc g++ binutils iproute2 util-linux make man-db groff-base nftables valgrind python3
          dnsmasq-base)
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
for c in rustfmt clippy; do
    cargo "${c/rustfmt/fmt}" --version > /dev/null 2>&1 || rustup component add "$c"
done
# The fuzz smoke of the test command.
cargo fuzz --version > /dev/null 2>&1 || cargo install --locked cargo-fuzz
# The Debian package (scripts/package-test.sh).
cargo deb --version > /dev/null 2>&1 || cargo install --locked cargo-deb
