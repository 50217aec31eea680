#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, the end-to-end
# suites (real ibacm, ib_acme and librdmacm on simulated urdma devices,
# which needs root for its network and mount namespaces), a short fuzzing
# smoke run, the packages, the compatibility matrix of Debian releases, the
# guest tier (a real urdma kernel device under QEMU), and the end-to-end
# suites under memcheck.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The test-only build that injects faults (tests/supervision.rs).
cargo clippy --all-targets --features fault-injection -- -D warnings
# The documentation, private items included, with broken links denied.
scripts/doc.sh
# The end-to-end tests load the simulator and the librdmacm client, which
# `cargo test` of the root package does not build by itself.
cargo build --workspace
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace 2>&1 | tee "$log"
# A short run of each fuzz target (make fuzz runs them longer).
make --no-print-directory fuzz-smoke
# What ships: the glibc 2.28 build, the .deb and the .rpm (make dist), for
# x86-64 and arm64, checked for machine, symbol versions, libraries,
# exports, lintian and contents.
make --no-print-directory dist
scripts/check-dist.sh
# The .deb installed, an end-to-end scenario run from the installed paths,
# removed.
scripts/package-test.sh
# The compatibility matrix: the .deb in Debian 11, 12, 13 and unstable,
# and the arm64 .deb in Debian 12 for arm64 under qemu-user, under each
# release's own daemon, clients and librdmacm (the simulator and its
# librdmacm client built for the oldest glibc and both architectures too).
scripts/zigbuild.sh --profile deb -p urdma-sim
scripts/zigbuild.sh --arch aarch64 --profile deb -p urdma-sim
scripts/matrix.sh 2>&1 | tee -a "$log"
# The guest tier: Debian's own kernel under QEMU with the real urdma kernel
# device and libibverbs provider (make urdma), nothing preloaded: the
# provider on a kernel device, two hosts by discovery, the port following
# the netdev, the kernel's own path query through netlink, doctor.
make --no-print-directory urdma
urdma/guest/tier.sh 2>&1 | tee -a "$log"
# The module alone, in a guest of its own (about 20 s): devices made,
# deleted and re-added ten times, the netdev removed and rmmod with devices
# present, the lid parameter; a kernel WARNING, BUG or Oops fails it.
urdma/guest/run.sh urdma/guest/smoke.sh
# The end-to-end suites once more, every daemon under valgrind memcheck
# (about 6 minutes): no invalid access, no definite leak through the provider.
scripts/memcheck.sh
# One closing line for the whole suite: the last line cargo prints is the
# summary of a crate without doc tests, which says 0.
awk '/^test result:/ { p += $4; f += $6 }
     /^(matrix|guest): [0-9]+ passed, [0-9]+ failed$/ { p += $2; f += $4 }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
