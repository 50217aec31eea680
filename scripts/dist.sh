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
version=$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "ibacm-urdma"))')
# Debug symbols apart, named by build ID (/usr/lib/debug/.build-id/, where
# gdb and the distributions' tools look): the binaries shipped keep only
# what they need and a link to their debug file.
ids=()
for f in libibacm_urdma.so urdma-acm; do
    id=$(readelf -n "$zig/$f" | awk '/Build ID:/ { print $3 }')
    [ ${#id} = 40 ] || { echo "dist.sh: $zig/$f has no build ID" >&2; exit 1; }
    ids+=("$id")
    out=$dist/debug/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    mkdir -p "$(dirname "$out")"
    objcopy --only-keep-debug --compress-debug-sections=zlib "$zig/$f" "$out"
    chmod 0644 "$out"
    objcopy --strip-unneeded --add-gnu-debuglink="$out" "$zig/$f" "$dist/$f"
done
# 0644: the mode the provider is installed with (a library, not a program).
chmod 0644 "$dist/libibacm_urdma.so"
chmod 0755 "$dist/urdma-acm"
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
# The debug symbols' .deb, as Debian's own -dbgsym packages are made: the
# debug files, the documentation directory of the package they belong to.
stage=$(mktemp -d)
chmod 0755 "$stage"
cp -a "$dist/debug/usr" "$stage/"
mkdir -p "$stage/usr/share/doc" "$stage/DEBIAN"
ln -s ibacm-urdma "$stage/usr/share/doc/ibacm-urdma-dbgsym"
maintainer=$(sed -n 's/^maintainer = "\(.*\)"$/\1/p' Cargo.toml)
cat > "$stage/DEBIAN/control" << CONTROL
Package: ibacm-urdma-dbgsym
Source: ibacm-urdma
Version: $version
Auto-Built-Package: debug-symbols
Architecture: amd64
Maintainer: $maintainer
Installed-Size: $(du -sk "$stage/usr" | cut -f1)
Depends: ibacm-urdma (= $version)
Section: debug
Priority: optional
Description: debug symbols for ibacm-urdma
Build-Ids: ${ids[*]}
CONTROL
dpkg-deb --root-owner-group -Zxz -b "$stage" "$dist/ibacm-urdma-dbgsym_${version}_amd64.deb" > /dev/null
rm -rf "$stage"
# rpm/ibacm-urdma.spec packs the same files, and the debug files as the
# -debuginfo package; rpmbuild's scratch tree is thrown away.
top=$(mktemp -d)
rpmbuild -bb --quiet --target x86_64 --define "_topdir $top" --define "_sourcedir $PWD" \
    --define "cargo_version $version" rpm/ibacm-urdma.spec > /dev/null
mv "$top"/RPMS/x86_64/ibacm-urdma-*.rpm "$dist/"
rm -rf "$top"
rpm=$dist/ibacm-urdma-$version-1.x86_64.rpm
[ -f "$deb" ] && [ -f "$rpm" ] || { echo "dist.sh: no .deb or .rpm in $dist" >&2; exit 1; }
rm -rf "$dist/man" "$dist/completions" "$dist/debug"
stat -c '%n (%s bytes)' "$dist/libibacm_urdma.so" "$dist/urdma-acm" "$deb" "$rpm" \
    "$dist"/ibacm-urdma-dbgsym_*.deb "$dist"/ibacm-urdma-debuginfo-*.rpm
