#!/usr/bin/env bash
# Documents the workspace with private items and all features (the modules' docs are the map) and
# fails on a broken intra-doc link, or on a public item's link to a private one (broken without
# --document-private-items), so src/lib.rs and the module docs cannot drift from the code again.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links -D rustdoc::private_intra_doc_links" \
    cargo doc --workspace --no-deps --document-private-items --all-features
