#!/usr/bin/env bash
# Debian packages this needs: lintian rpm (installed below if missing;
# objdump and readelf come with binutils, which gcc pulls in).
#
# Checks what `make dist` built (target/dist, or DIR): the provider and
# urdma-acm, as files and inside the .deb and the .rpm, need no glibc symbol
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
ALLOWED_LIBS=" libc.so.6 libpthread.so.0 libdl.so.2 libm.so.6 librt.so.1 libgcc_s.so.1 ld-linux-x86-64.so.2 libibverbs.so.1 "

failures=0
fail() { echo "check-dist: FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "check-dist: ok: $*"; }

# FILE [LABEL]: symbol versions, libraries, and (for the provider) exports.
check_elf() {
    local f=$1 label=${2:-$1} bad lib n0=$failures
    [ -f "$f" ] || { fail "$label: missing"; return; }
    # A newer symbol version is what makes an older glibc's loader refuse
    # the file; compared as numbers (2.3 < 2.28 < 2.34). GLIBC_PRIVATE and
    # other non-numeric versions are never acceptable.
    bad=$(objdump -T "$f" | awk -v max="$GLIBC_MAX" '
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
        bad=$(objdump -T "$f" | awk '/^[0-9a-f]+ / && !/\*UND\*/ && $NF != "provider_query" { print $NF }')
        [ -z "$bad" ] || fail "$label exports more than provider_query: ${bad//$'\n'/, }"
    fi
    [ "$failures" -gt "$n0" ] || ok "$label: GLIBC <= $GLIBC_MAX, libraries, exports"
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
if [ ${#missing[@]} -gt 0 ]; then
    echo "check-dist: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
license=$(sed -n '/^\[workspace.package\]/,/^\[/s/^license = "\(.*\)"/\1/p' Cargo.toml)
deb=$dist/ibacm-urdma_${version}_amd64.deb
rpm=$dist/ibacm-urdma-$version-1.x86_64.rpm
for f in "$dist/libibacm_urdma.so" "$dist/urdma-acm" "$deb" "$rpm"; do
    [ -f "$f" ] || { echo "check-dist: FAIL: $f missing (make dist)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check_elf "$dist/libibacm_urdma.so"
check_elf "$dist/urdma-acm"

# The packages' payloads, as `ls -l` modes and paths of regular files:
# the provider is a regular 0644 file (the daemon skips symlinked
# providers), and nothing else comes in or goes missing.
docs="README.md ibacm.conf examples/urdma_hosts examples/urdma-alerts.yml
      examples/urdma-grafana-dashboard.json protocol.md systemd.md"
deb_files=$(
    echo "-rw-r--r-- usr/lib/x86_64-linux-gnu/ibacm/libibacm_urdma.so"
    echo "-rwxr-xr-x usr/bin/urdma-acm"
    for f in $docs copyright changelog.gz; do echo "-rw-r--r-- usr/share/doc/ibacm-urdma/$f"; done
    echo "-rw-r--r-- usr/share/man/man7/ibacm_urdma.7.gz"
    echo "-rw-r--r-- usr/share/man/man8/urdma-acm.8.gz"
    echo "-rw-r--r-- usr/share/bash-completion/completions/urdma-acm"
    echo "-rw-r--r-- usr/share/zsh/vendor-completions/_urdma-acm"
    echo "-rw-r--r-- usr/share/fish/vendor_completions.d/urdma-acm.fish"
)
rpm_files=$(
    echo "-rw-r--r-- /usr/lib64/ibacm/libibacm_urdma.so"
    echo "-rwxr-xr-x /usr/bin/urdma-acm"
    for f in $docs; do echo "-rw-r--r-- /usr/share/doc/ibacm-urdma/$f"; done
    echo "-rw-r--r-- /usr/share/man/man7/ibacm_urdma.7.gz"
    echo "-rw-r--r-- /usr/share/man/man8/urdma-acm.8.gz"
    echo "-rw-r--r-- /usr/share/bash-completion/completions/urdma-acm"
    echo "-rw-r--r-- /usr/share/zsh/site-functions/_urdma-acm"
    echo "-rw-r--r-- /usr/share/fish/vendor_completions.d/urdma-acm.fish"
)
# LABEL EXPECTED ACTUAL: both lists sorted, differences named.
same_list() {
    local diff
    if diff=$(diff <(sort <<< "$2") <(sort <<< "$3")); then
        ok "$1"
    else
        fail "$1 (< expected, > found): $(grep '^[<>]' <<< "$diff" | tr '\n' ';')"
    fi
}
# PKGFILE PAYLOADDIR SO BIN: the binaries inside a package are the very
# files of target/dist, and pass the ELF checks there too.
check_payload_elves() {
    local pkg=$1 root=$2 so=$3 bin=$4
    cmp -s "$root/$so" "$dist/libibacm_urdma.so" || fail "$(basename "$pkg"): $so differs from $dist/libibacm_urdma.so"
    cmp -s "$root/$bin" "$dist/urdma-acm" || fail "$(basename "$pkg"): $bin differs from $dist/urdma-acm"
    check_elf "$root/$so" "$(basename "$pkg"):$so"
    check_elf "$root/$bin" "$(basename "$pkg"):$bin"
}

# The .deb.
if lintian --fail-on error,warning "$deb" > "$tmp/lintian" 2>&1; then
    ok "lintian $(basename "$deb"): no errors or warnings"
else
    fail "lintian $(basename "$deb"): $(grep -E '^[EW]:' "$tmp/lintian" | tr '\n' ';')"
fi
same_list "$(basename "$deb"): files and modes" "$deb_files" \
    "$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub(/^\.\//, "", $6); print $1, $6 }')"
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
check_payload_elves "$deb" "$tmp/deb" usr/lib/x86_64-linux-gnu/ibacm/libibacm_urdma.so usr/bin/urdma-acm

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
check_payload_elves "$rpm" "$tmp/rpm" usr/lib64/ibacm/libibacm_urdma.so usr/bin/urdma-acm

if [ "$failures" -gt 0 ]; then
    echo "check-dist: $failures failure(s)" >&2
    exit 1
fi
echo "check-dist: all passed ($dist)"
