#!/usr/bin/env bash
# Debian packages this needs: lintian rpm rpmlint gdb binutils-aarch64-linux-gnu (installed below if missing;
# objdump and readelf come with binutils, which gcc pulls in).
#
# Checks what `make dist` built (target/dist, or DIR), for x86-64 and for
# arm64 (aarch64/): the provider and urdma-acm are built for the
# architecture, and, as files and inside the .deb and the .rpm, need no glibc symbol
# newer than 2.28 and no library but glibc's and libibverbs, the provider
# exports provider_query alone, the .deb is lintian-clean, and both packages
# hold exactly the expected files with the expected modes and metadata.
# Every failure is reported (naming the file, and the symbol or library);
# the exit status is 1 if there was any.
#
# Usage: scripts/check-dist.sh [DIR]
#        scripts/check-dist.sh --so FILE   (the ELF checks of one provider
#        build, e.g. target/release/libibacm_urdma.so, which must fail)
set -euo pipefail
cd "$(dirname "$0")/.."

GLIBC_MAX=2.28
# glibc's own libraries, the compiler runtime, and libibverbs: what every
# supported distribution has (the .deb and .rpm depend on nothing else).
ALLOWED_LIBS=" libc.so.6 libpthread.so.0 libdl.so.2 libm.so.6 librt.so.1 libgcc_s.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1 libibverbs.so.1 "

failures=0
fail() { echo "check-dist: FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "check-dist: ok: $*"; }

# The machine every ELF file checked must be built for (readelf -h's
# words), and the objdump that reads it, set per architecture below.
machine=
objdump=objdump
# FILE [LABEL]: the machine, symbol versions, libraries, and (for the
# provider) exports.
check_elf() {
    local f=$1 label=${2:-$1} bad lib n0=$failures m
    [ -f "$f" ] || { fail "$label: missing"; return; }
    m=$(readelf -h "$f" | sed -n 's/^ *Machine: *//p')
    [ -z "$machine" ] || [ "$m" = "$machine" ] || fail "$label is built for $m, not $machine"
    # A newer symbol version is what makes an older glibc's loader refuse
    # the file; compared as numbers (2.3 < 2.28 < 2.34). GLIBC_PRIVATE and
    # other non-numeric versions are never acceptable.
    bad=$("$objdump" -T "$f" | awk -v max="$GLIBC_MAX" '
        match($0, /GLIBC_[^ )]+/) {
            v = substr($0, RSTART + 6, RLENGTH - 6); split(max, m, ".")
            if (v !~ /^[0-9]+(\.[0-9]+)*$/) { print $NF " (GLIBC_" v ")"; next }
            n = split(v, a, ".")
            if (a[1] > m[1] || (a[1] == m[1] && a[2] > m[2])) print $NF " (GLIBC_" v ")"
        }')
    [ -z "$bad" ] || fail "$label needs glibc newer than $GLIBC_MAX for: ${bad//$'\n'/, }"
    for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [[ $ALLOWED_LIBS == *" $lib "* ]] || fail "$label needs $lib (only glibc's and libibverbs.so.1 are allowed)"
    done
    if [[ $f == *.so ]]; then
        # Defined dynamic symbols: lines that start with an address and are
        # not *UND*. The daemon looks up provider_query alone.
        bad=$("$objdump" -T "$f" | awk '/^[0-9a-f]+ / && !/\*UND\*/ && $NF != "provider_query" { print $NF }')
        [ -z "$bad" ] || fail "$label exports more than provider_query: ${bad//$'\n'/, }"
    fi
    [ "$failures" -gt "$n0" ] || ok "$label: ${machine:+$machine, }GLIBC <= $GLIBC_MAX, libraries, exports"
}

if [ "${1:-}" = --so ]; then
    [ $# = 2 ] || { echo "usage: $0 [DIR] | --so FILE" >&2; exit 2; }
    check_elf "$2"
    [ "$failures" = 0 ] || exit 1
    exit 0
fi
dist=${1:-target/dist}

# The tools, installed here so that this script works alone.
missing=()
command -v lintian > /dev/null || missing+=(lintian)
command -v rpm > /dev/null || missing+=(rpm)
command -v rpmlint > /dev/null || missing+=(rpmlint)
command -v gdb > /dev/null || missing+=(gdb)
command -v aarch64-linux-gnu-objdump > /dev/null || missing+=(binutils-aarch64-linux-gnu)
if [ ${#missing[@]} -gt 0 ]; then
    echo "check-dist: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
license=$(sed -n '/^\[workspace.package\]/,/^\[/s/^license = "\(.*\)"/\1/p' Cargo.toml)
# LABEL EXPECTED ACTUAL: both lists sorted, differences named.
same_list() {
    local diff
    if diff=$(diff <(sort <<< "$2") <(sort <<< "$3")); then
        ok "$1"
    else
        fail "$1 (< expected, > found): $(grep '^[<>]' <<< "$diff" | tr '\n' ';')"
    fi
}
# PKGFILE PAYLOADDIR SO EXE BINDIR: the binaries inside a package are the
# very files of BINDIR, and pass the ELF checks there too.
check_payload_elves() {
    local pkg=$1 root=$2 so=$3 exe=$4 bindir=$5
    cmp -s "$root/$so" "$bindir/libibacm_urdma.so" || fail "$(basename "$pkg"): $so differs from $bindir/libibacm_urdma.so"
    cmp -s "$root/$exe" "$bindir/urdma-acm" || fail "$(basename "$pkg"): $exe differs from $bindir/urdma-acm"
    check_elf "$root/$so" "$(basename "$pkg"):$so"
    check_elf "$root/$exe" "$(basename "$pkg"):$exe"
}
# LABEL DEP5FILE NAME LICENSEFILE: the copyright file's `License: NAME`
# paragraph holds the license's text word for word.
dep5_holds() {
    if diff -q <(sed -n "/^License: $3\$/,/^\$/p" "$2" | tail -n +2 | sed '/^$/d; s/^ \.$//; s/^ //') \
        <(sed -n '/./,$p' "$4" | sed '/Copyright (c)/,+1d; /^MIT License$/,+1d') > /dev/null; then
        ok "$1: $3's text is $(basename "$4")'s"
    else
        fail "$1: the $3 text differs from $(basename "$4") (regenerate debian/copyright)"
    fi
}
# DEBUGDIR PROVIDER: the line gdb finds for provider_query.
read_crash() {
    gdb -batch -iex "set debug-file-directory $1" -ex "info line provider_query" \
        "$2" 2>&1 | tail -n 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ARCH DEBARCH BINDIR MACHINE: the binaries of BINDIR and the four
# packages of one architecture.
check_arch() {
    local arch=$1 debarch=$2 bin=$3 deb rpm dbgsym debuginfo deb_files rpm_files n0 depends libc_floor
    local copyright info want_debug with without lib=usr/lib/$1-linux-gnu/ibacm/libibacm_urdma.so
    machine=$4
    objdump=objdump
    [ "$arch" = x86_64 ] || objdump=$arch-linux-gnu-objdump
    echo "check-dist: $arch ($debarch)"
    deb=$dist/ibacm-urdma_${version}_$debarch.deb
    rpm=$dist/ibacm-urdma-$version-1.$arch.rpm
    dbgsym=$dist/ibacm-urdma-dbgsym_${version}_$debarch.deb
    debuginfo=$dist/ibacm-urdma-debuginfo-$version-1.$arch.rpm
    for f in "$bin/libibacm_urdma.so" "$bin/urdma-acm" "$deb" "$rpm" "$dbgsym" "$debuginfo"; do
        [ -f "$f" ] || { echo "check-dist: FAIL: $f missing (make dist)" >&2; exit 1; }
    done
    rm -rf "${tmp:?}"/*

    check_elf "$bin/libibacm_urdma.so"
    check_elf "$bin/urdma-acm"

    # The packages' payloads, as `ls -l` modes and paths of regular files:
    # the provider is a regular 0644 file (the daemon skips symlinked
    # providers), and nothing else comes in or goes missing.
    docs="README.md ibacm.conf examples/urdma_hosts examples/urdma-alerts.yml
          examples/urdma-grafana-dashboard.json protocol.md systemd.md"
    deb_files=$(
        echo "-rw-r--r-- $lib"
        echo "-rwxr-xr-x usr/bin/urdma-acm"
        for f in $docs copyright changelog.gz; do echo "-rw-r--r-- usr/share/doc/ibacm-urdma/$f"; done
        echo "-rw-r--r-- usr/share/man/man7/ibacm_urdma.7.gz"
        echo "-rw-r--r-- usr/share/man/man8/urdma-acm.8.gz"
        echo "-rw-r--r-- usr/share/bash-completion/completions/urdma-acm"
        echo "-rw-r--r-- usr/share/zsh/vendor-completions/_urdma-acm"
        echo "-rw-r--r-- usr/share/fish/vendor_completions.d/urdma-acm.fish"
        echo "-rw-r--r-- usr/lib/firewalld/services/ibacm-urdma.xml"
        echo "-rw-r--r-- etc/ufw/applications.d/ibacm-urdma"
    )
    rpm_files=$(
        echo "-rw-r--r-- /usr/lib64/ibacm/libibacm_urdma.so"
        echo "-rwxr-xr-x /usr/bin/urdma-acm"
        for f in $docs; do echo "-rw-r--r-- /usr/share/doc/ibacm-urdma/$f"; done
        for d in doc/ibacm-urdma doc/ibacm-urdma/examples licenses/ibacm-urdma; do
            echo "drwxr-xr-x /usr/share/$d"
        done
        for f in LICENSE-MIT LICENSE-APACHE; do echo "-rw-r--r-- /usr/share/licenses/ibacm-urdma/$f"; done
        echo "-rw-r--r-- /usr/share/man/man7/ibacm_urdma.7.gz"
        echo "-rw-r--r-- /usr/share/man/man8/urdma-acm.8.gz"
        echo "-rw-r--r-- /usr/share/bash-completion/completions/urdma-acm"
        echo "-rw-r--r-- /usr/share/zsh/site-functions/_urdma-acm"
        echo "-rw-r--r-- /usr/share/fish/vendor_completions.d/urdma-acm.fish"
        echo "-rw-r--r-- /usr/lib/firewalld/services/ibacm-urdma.xml"
    )

    # The .deb.
    if lintian --fail-on error,warning "$deb" > "$tmp/lintian" 2>&1; then
        ok "lintian $(basename "$deb"): no errors or warnings"
    else
        fail "lintian $(basename "$deb"): $(grep -E '^[EW]:' "$tmp/lintian" | tr '\n' ';')"
    fi
    same_list "$(basename "$deb"): files and modes" "$deb_files" \
        "$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\.\//, "", $6); print $1, $6 }')"
    [ "$(dpkg-deb -f "$deb" Architecture)" = "$debarch" ] \
        || fail "$(basename "$deb"): Architecture $(dpkg-deb -f "$deb" Architecture), not $debarch"
    [ "$(rpm -qp --qf '%{ARCH}' "$rpm")" = "$arch" ] \
        || fail "$(basename "$rpm"): architecture $(rpm -qp --qf '%{ARCH}' "$rpm"), not $arch"
    depends=$(dpkg-deb -f "$deb" Depends)
    n0=$failures
    # Debian 11 to unstable: no libc6 floor above 2.28, no name that a release
    # renamed (the t64 transition of trixie).
    grep -qE '(^|, )ibacm($|[ ,])' <<< "$depends" || fail "$(basename "$deb"): Depends '$depends' lacks ibacm"
    libc_floor=$(grep -oP 'libc6 \(>= \K[0-9.]+' <<< "$depends" || true)
    [ -z "$libc_floor" ] || [ "$(printf '%s\n' "$libc_floor" "$GLIBC_MAX" | sort -V | tail -n 1)" = "$GLIBC_MAX" ] \
        || fail "$(basename "$deb"): Depends '$depends' asks for libc6 >= $libc_floor (Debian 11 has 2.31, the floor is $GLIBC_MAX)"
    if grep -q 't64' <<< "$depends"; then fail "$(basename "$deb"): Depends '$depends' names a t64 package (trixie only)"; fi
    [ "$failures" -gt "$n0" ] || ok "$(basename "$deb"): Depends: $depends"
    mkdir "$tmp/deb"
    dpkg-deb -x "$deb" "$tmp/deb"
    check_payload_elves "$deb" "$tmp/deb" "$lib" usr/bin/urdma-acm "$bin"
    copyright=$tmp/deb/usr/share/doc/ibacm-urdma/copyright
    dep5_holds "$(basename "$deb")" "$copyright" MIT LICENSE-MIT
    # Debian keeps Apache-2.0's text in base-files, which the paragraph names.
    if grep -q '^ /usr/share/common-licenses/Apache-2.0\.$' "$copyright" \
        && cmp -s /usr/share/common-licenses/Apache-2.0 LICENSE-APACHE; then
        ok "$(basename "$deb"): Apache-2.0 by Debian's common-licenses, the same text as LICENSE-APACHE"
    else
        fail "$(basename "$deb"): the Apache-2.0 paragraph does not name Debian's copy of LICENSE-APACHE's text"
    fi
    # An upgrade restarts a running daemon (scripts/matrix.sh runs it).
    dpkg-deb -I "$deb" postinst 2> /dev/null | grep 'try-restart ibacm.service' > /dev/null \
        && ok "$(basename "$deb"): postinst try-restarts ibacm on upgrade" \
        || fail "$(basename "$deb"): no postinst try-restart of ibacm"

    # The .rpm.
    same_list "$(basename "$rpm"): rpm -qlp" "$(cut -d' ' -f2 <<< "$rpm_files")" "$(rpm -qlp "$rpm")"
    same_list "$(basename "$rpm"): rpm -qlvp modes" "$rpm_files" "$(rpm -qlvp "$rpm" | awk '{ print $1, $NF }')"
    info=$(rpm -qip "$rpm")
    n0=$failures
    for field in "Name *: ibacm-urdma" "Version *: $version" "License *: $license"; do
        grep -qx "$field" <<< "$info" || fail "$(basename "$rpm"): rpm -qip has no line '$field'"
    done
    rpm -qp --requires "$rpm" | grep -qx ibacm || fail "$(basename "$rpm"): rpm -qp --requires lacks ibacm"
    [ "$failures" -gt "$n0" ] || ok "$(basename "$rpm"): name, version $version, license, requires ibacm"
    mkdir "$tmp/rpm"
    rpm2archive -n - < "$rpm" | tar -x -C "$tmp/rpm"
    check_payload_elves "$rpm" "$tmp/rpm" usr/lib64/ibacm/libibacm_urdma.so usr/bin/urdma-acm "$bin"
    for f in LICENSE-MIT LICENSE-APACHE; do
        cmp -s "$tmp/rpm/usr/share/licenses/ibacm-urdma/$f" "$f" || fail "$(basename "$rpm"): $f differs from the repository's"
    done
    rpm -qp --licensefiles "$rpm" | grep -x /usr/share/licenses/ibacm-urdma/LICENSE-APACHE > /dev/null \
        && ok "$(basename "$rpm"): %license LICENSE-MIT and LICENSE-APACHE" \
        || fail "$(basename "$rpm"): the license files are not %license"
    rpm -qp --scripts "$rpm" | grep 'systemctl try-restart ibacm.service' > /dev/null \
        && ok "$(basename "$rpm"): %postun try-restarts ibacm on upgrade" \
        || fail "$(basename "$rpm"): no %postun try-restart of ibacm"
    # rpmlint with no error and no warning; an unsigned build cannot have a
    # signature.
    rpmlint -c rpm/rpmlint.toml "$rpm" > "$tmp/rpmlint" 2>&1 || true
    if grep -E ': [EW]: ' "$tmp/rpmlint" | grep -v ': E: no-signature$' > "$tmp/rpmlint.bad"; then
        fail "rpmlint $(basename "$rpm"): $(tr '\n' ';' < "$tmp/rpmlint.bad")"
    else
        ok "rpmlint $(basename "$rpm"): no errors or warnings (unsigned)"
    fi

    # The debug symbols, apart: one file per shipped binary, named by its build
    # ID, the same in the -dbgsym .deb and the -debuginfo .rpm.
    want_debug=$(for f in libibacm_urdma.so urdma-acm; do
        id=$(readelf -n "$bin/$f" | awk '/Build ID:/ { print $3 }')
        echo "-rw-r--r-- /usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
    done)
    same_list "$(basename "$dbgsym"): one debug file per binary, by build ID" "$want_debug" \
        "$(dpkg-deb -c "$dbgsym" | awk '$1 ~ /^-/ { sub(/^\./, "", $6); print $1, $6 }')"
    same_list "$(basename "$debuginfo"): one debug file per binary, by build ID" "$want_debug" \
        "$(rpm -qlvp "$debuginfo" | awk '$1 ~ /^-/ { print $1, $NF }')"
    [ "$(dpkg-deb -f "$dbgsym" Depends)" = "ibacm-urdma (= $version)" ] \
        || fail "$(basename "$dbgsym"): Depends '$(dpkg-deb -f "$dbgsym" Depends)'"
    if lintian --fail-on error,warning "$dbgsym" > "$tmp/lintian-dbgsym" 2>&1; then
        ok "lintian $(basename "$dbgsym"): no errors or warnings"
    else
        fail "lintian $(basename "$dbgsym"): $(grep -E '^[EW]:' "$tmp/lintian-dbgsym" | tr '\n' ';')"
    fi
    rpmlint -c rpm/rpmlint.toml "$debuginfo" > "$tmp/rpmlint-debuginfo" 2>&1 || true
    if grep -E ': [EW]: ' "$tmp/rpmlint-debuginfo" | grep -v ': E: no-signature$' > "$tmp/rpmlint.bad"; then
        fail "rpmlint $(basename "$debuginfo"): $(tr '\n' ';' < "$tmp/rpmlint.bad")"
    else
        ok "rpmlint $(basename "$debuginfo"): no errors or warnings (unsigned)"
    fi
    # A crash inside ibacm can be read: gdb, given the -dbgsym's files as its
    # debug directory, finds the shipped provider's source lines and internal
    # functions by build ID; without them it finds neither.
    mkdir "$tmp/dbgsym"
    dpkg-deb -x "$dbgsym" "$tmp/dbgsym"
    with=$(read_crash "$tmp/dbgsym/usr/lib/debug" "$tmp/deb/$lib")
    without=$(read_crash /nonexistent "$tmp/deb/$lib")
    if grep -q 'of "src/boundary/mod.rs" starts at address' <<< "$with" \
        && grep -q '^No line number information' <<< "$without"; then
        ok "gdb reads the shipped provider's lines with the -dbgsym, and not without"
    else
        fail "gdb with the -dbgsym: '$with'; without: '$without'"
    fi
}

check_arch x86_64 amd64 "$dist" "Advanced Micro Devices X86-64"
check_arch aarch64 arm64 "$dist/aarch64" AArch64

if [ "$failures" -gt 0 ]; then
    echo "check-dist: $failures failure(s)" >&2
    exit 1
fi
echo "check-dist: all passed ($dist)"
