#!/usr/bin/env bash
# make dist: what ships, into target/dist/: the provider and urdma-acm built
# for glibc 2.28 (scripts/zigbuild.sh, profile deb) for x86-64 (in
# target/dist/) and arm64 (in target/dist/aarch64/), and for each
# architecture the .deb (cargo-deb) and .rpm (rpmbuild,
# rpm/ibacm-urdma.spec) packed from exactly those two files (no rebuild, no
# strip), with their debug symbols apart (-dbgsym, -debuginfo), so that
# scripts/check-dist.sh checks what users install.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=target/dist
# What each architecture packs is staged here (the paths Cargo.toml's
# assets and the .spec name), then the stage is thrown away.
stage=$dist/pkg

for arch in x86_64 aarch64; do
    scripts/zigbuild.sh --arch "$arch" --profile deb -p ibacm-urdma -p urdma-acm
done
# Packers that scripts/deps.sh --test installs; here too, so that make dist
# works alone.
cargo deb --version > /dev/null 2>&1 || cargo install --locked cargo-deb
command -v rpmbuild > /dev/null || { echo "dist.sh: rpmbuild not found (apt-get install rpm)" >&2; exit 1; }
# This machine's objcopy reads x86-64 files only.
command -v aarch64-linux-gnu-objcopy > /dev/null \
    || { echo "dist.sh: aarch64-linux-gnu-objcopy not found (apt-get install binutils-aarch64-linux-gnu)" >&2; exit 1; }

# Fresh each time: a stale package of another version must not linger.
rm -rf "$dist"
mkdir -p "$dist/man" "$dist/completions"
version=$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "ibacm-urdma"))')
maintainer=$(sed -n 's/^maintainer = "\(.*\)"$/\1/p' Cargo.toml)
# RPM ships man pages gzipped (rpmbuild's brp-compress); -n: reproducible.
for page in docs/man/ibacm_urdma.7 docs/man/urdma-acm.8; do
    gzip -9n < "$page" > "$dist/man/$(basename "$page").gz"
done

# ARCH (x86_64, aarch64) OUT DEBARCH: the architecture's two binaries into
# OUT, and its four packages into target/dist.
pack() {
    local arch=$1 out=$2 debarch=$3 zig=target/zig/$1-unknown-linux-gnu/deb f id ids=() debug objcopy=objcopy
    [ "$arch" = x86_64 ] || objcopy=$arch-linux-gnu-objcopy
    mkdir -p "$out"
    rm -rf "$stage"
    mkdir -p "$stage"
    # Debug symbols apart, named by build ID (/usr/lib/debug/.build-id/,
    # where gdb and the distributions' tools look): the binaries shipped
    # keep only what they need and a link to their debug file.
    for f in libibacm_urdma.so urdma-acm; do
        id=$(readelf -n "$zig/$f" | awk '/Build ID:/ { print $3 }')
        [ ${#id} = 40 ] || { echo "dist.sh: $zig/$f has no build ID" >&2; exit 1; }
        ids+=("$id")
        debug=$stage/debug/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
        mkdir -p "$(dirname "$debug")"
        "$objcopy" --only-keep-debug --compress-debug-sections=zlib "$zig/$f" "$debug"
        chmod 0644 "$debug"
        "$objcopy" --strip-unneeded --add-gnu-debuglink="$debug" "$zig/$f" "$out/$f"
    done
    # 0644: the mode the provider is installed with (a library, not a program).
    chmod 0644 "$out/libibacm_urdma.so"
    chmod 0755 "$out/urdma-acm"
    cp -p "$out/libibacm_urdma.so" "$out/urdma-acm" "$stage/"

    # --no-build: the assets are the files above; --no-strip: they are
    # already stripped, and the .deb must carry the same bytes. arm64 is a
    # variant of Cargo.toml's package: the provider's multiarch directory.
    local variant=()
    [ "$debarch" = amd64 ] || variant=(--variant "$debarch")
    cargo deb -p ibacm-urdma "${variant[@]}" --target "$arch-unknown-linux-gnu" \
        --no-build --no-strip --quiet --output "$dist/" > /dev/null
    # The debug symbols' .deb, as Debian's own -dbgsym packages are made: the
    # debug files, the documentation directory of the package they belong to.
    local root
    root=$(mktemp -d)
    chmod 0755 "$root"
    cp -a "$stage/debug/usr" "$root/"
    mkdir -p "$root/usr/share/doc" "$root/DEBIAN"
    ln -s ibacm-urdma "$root/usr/share/doc/ibacm-urdma-dbgsym"
    cat > "$root/DEBIAN/control" << CONTROL
Package: ibacm-urdma-dbgsym
Source: ibacm-urdma
Version: $version
Auto-Built-Package: debug-symbols
Architecture: $debarch
Maintainer: $maintainer
Installed-Size: $(du -sk "$root/usr" | cut -f1)
Depends: ibacm-urdma (= $version)
Section: debug
Priority: optional
Description: debug symbols for ibacm-urdma
Build-Ids: ${ids[*]}
CONTROL
    dpkg-deb --root-owner-group -Zxz -b "$root" "$dist/ibacm-urdma-dbgsym_${version}_$debarch.deb" > /dev/null
    rm -rf "$root"
    # rpm/ibacm-urdma.spec packs the same files, and the debug files as the
    # -debuginfo package; rpmbuild's scratch tree is thrown away.
    local top
    top=$(mktemp -d)
    rpmbuild -bb --quiet --target "$arch" --define "_topdir $top" --define "_sourcedir $PWD" \
        --define "cargo_version $version" rpm/ibacm-urdma.spec > /dev/null
    mv "$top/RPMS/$arch"/ibacm-urdma-*.rpm "$dist/"
    rm -rf "$top" "$stage"
    for f in "$dist/ibacm-urdma_${version}_$debarch.deb" "$dist/ibacm-urdma-$version-1.$arch.rpm" \
        "$dist/ibacm-urdma-dbgsym_${version}_$debarch.deb" "$dist/ibacm-urdma-debuginfo-$version-1.$arch.rpm"; do
        [ -f "$f" ] || { echo "dist.sh: $f was not made" >&2; exit 1; }
    done
}

# Completions from the shipped build itself, so that they match its
# options (the same for both architectures: the x86-64 one runs here).
acm=target/zig/x86_64-unknown-linux-gnu/deb/urdma-acm
"$acm" completions bash > "$dist/completions/urdma-acm"
"$acm" completions zsh > "$dist/completions/_urdma-acm"
"$acm" completions fish > "$dist/completions/urdma-acm.fish"

pack x86_64 "$dist" amd64
pack aarch64 "$dist/aarch64" arm64
rm -rf "$dist/man" "$dist/completions"
stat -c '%n (%s bytes)' "$dist"/libibacm_urdma.so "$dist"/urdma-acm "$dist"/aarch64/* "$dist"/*.deb "$dist"/*.rpm
