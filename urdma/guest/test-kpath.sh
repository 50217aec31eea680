#!/bin/sh
# Host side of kpath.sh: builds urdma-kpath (tools/kpath.c), puts it and
# this project's ibacm provider (target/release, `cargo build --release`)
# into the guest and runs kpath.sh there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
prov=${URDMA_IBACM_PROVIDER:-$top/target/release/libibacm_urdma.so}
[ -f "$prov" ] || { echo "test-kpath.sh: $prov missing: cargo build --release" >&2; exit 1; }
extra=$(mktemp -d)
trap 'rm -rf "$extra"' EXIT
mkdir -p "$extra/usr/bin" "$extra/usr/lib/x86_64-linux-gnu/ibacm"
gcc -O2 -Wall -o "$extra/usr/bin/urdma-kpath" "$here/tools/kpath.c" -lrdmacm -libverbs
cp "$prov" "$extra/usr/lib/x86_64-linux-gnu/ibacm/libibacm_urdma.so"
exec "$here/run.sh" "$here/kpath.sh" "$extra"
