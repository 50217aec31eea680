#!/usr/bin/env bash
# make dist: what ships, into target/dist/: the provider and urdma-acm built
# for glibc 2.28 (scripts/zigbuild.sh, profile deb: no debug info), and the
# .deb (cargo-deb) and .rpm (rpmbuild, rpm/ibacm-urdma.spec) packed from
# exactly those two files (no rebuild, no strip),
# so that scripts/check-dist.sh checks what users install.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=target/dist
zig=target/zig/x86_64-unknown-linux-gnu/deb

scripts/zigbuild.sh --profile deb -p ibacm-urdma -p urdma-acm
# Packers that scripts/deps.sh --test installs; here too, so that make dist
# works alone.
cargo deb --version > /dev/null 2>&1 || cargo install --locked cargo-deb
command -v rpmbuild > /dev/null || { echo "dist.sh: rpmbuild not found (apt-get install rpm)" >&2; exit 1; }

# Fresh each time: a stale package of another version must not linger.
rm -rf "$dist"
mkdir -p "$dist/man" "$dist/completions"
# 0644: the mode the provider is installed with (a library, not a program).
install -m 0644 "$zig/libibacm_urdma.so" "$dist/"
install -m 0755 "$zig/urdma-acm" "$dist/"
# RPM ships man pages gzipped (rpmbuild's brp-compress); -n: reproducible.
for page in docs/man/ibacm_urdma.7 docs/man/urdma-acm.8; do
    gzip -9n < "$page" > "$dist/man/$(basename "$page").gz"
done
# Completions from the shipped binary itself, so they match its options.
"$dist/urdma-acm" completions bash > "$dist/completions/urdma-acm"
"$dist/urdma-acm" completions zsh > "$dist/completions/_urdma-acm"
"$dist/urdma-acm" completions fish > "$dist/completions/urdma-acm.fish"

# --no-build: the assets are the files above; --no-strip: zig's output is
# already stripped, and the .deb must carry the same bytes.
deb=$(cargo deb -p ibacm-urdma --no-build --no-strip --quiet --output "$dist/" | tail -n 1)
# rpm/ibacm-urdma.spec packs the same files; rpmbuild's scratch tree is
# thrown away.
version=$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "ibacm-urdma"))')
top=$(mktemp -d)
rpmbuild -bb --quiet --target x86_64 --define "_topdir $top" --define "_sourcedir $PWD" \
    --define "cargo_version $version" rpm/ibacm-urdma.spec > /dev/null
mv "$top"/RPMS/x86_64/ibacm-urdma-*.rpm "$dist/"
rm -rf "$top"
rpm=$(echo "$dist"/ibacm-urdma-*.x86_64.rpm)
[ -f "$deb" ] && [ -f "$rpm" ] || { echo "dist.sh: no .deb or .rpm in $dist" >&2; exit 1; }
rm -rf "$dist/man" "$dist/completions"
stat -c '%n (%s bytes)' "$dist/libibacm_urdma.so" "$dist/urdma-acm" "$deb" "$rpm"
