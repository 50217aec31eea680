#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests, the end-to-end
# suite, and a short fuzzing smoke run (real ibacm, ib_acme and librdmacm on simulated urdma devices, which
# needs root for its network and mount namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The end-to-end tests load the simulator and the librdmacm client, which
# `cargo test` of the root package does not build by itself.
cargo build --workspace
cargo test --workspace
# A short run of each fuzz target (make fuzz runs them longer).
make --no-print-directory fuzz-smoke
