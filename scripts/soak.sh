#!/usr/bin/env bash
# Soak: SOAK_SECONDS (default 600) of mixed load through the real daemon
# (cache hits, misses to a live peer, NODELAY requests, lookups of dead
# peers, port down/up events on both hosts), with discovery authenticated,
# sampling the daemon's RSS.
# Prints a table per kind of request, the RSS series and a verdict; exits
# non-zero unless every request was answered once, RSS stayed flat
# after the warm-up and neither host counted a datagram as replayed. The
# scenario is the test `soak_...` in tests/soak.rs.
# Needs root (network and mount namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
export SOAK_SECONDS="${SOAK_SECONDS:-600}"
cargo build --workspace
echo "soak: ${SOAK_SECONDS} s on $(nproc) cores, $(uname -r)"
cargo test --test soak -- --exact --nocapture --test-threads 1 \
    soak_mixed_load_is_all_answered_with_flat_memory
