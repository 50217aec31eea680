#!/usr/bin/env bash
# The Debian package, end to end: take the one `make dist` built (the glibc
# 2.28 build that ships, in target/dist), check what it holds, install it
# with dpkg, run the provider and urdma-acm from the installed paths against
# the real daemon (the e2e harness with URDMA_PROVIDER_SO / URDMA_ACM), then
# remove it and check that nothing is left and /etc/rdma is as it was.
# Needs root. Refuses to run over an ibacm-urdma that is already installed,
# since it removes the package, unless this script installed it in a run
# that was killed before its cleanup (the marker below says so).
set -euo pipefail
cd "$(dirname "$0")/.."

pkg=ibacm-urdma
so=/usr/lib/x86_64-linux-gnu/ibacm/libibacm_urdma.so
tool=/usr/bin/urdma-acm
say() { echo "package-test: $*"; }
fail() { echo "package-test: FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (dpkg -i, and the e2e scenario uses namespaces)"
marker=/var/tmp/$pkg-package-test.installed
if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    [ -e "$marker" ] \
        || fail "$pkg is already installed; remove it first (this test installs and removes it)"
    say "removing the $pkg a killed run of this test left installed"
    dpkg -P "$pkg-dbgsym" "$pkg" > /dev/null 2>&1 || true
fi
rm -f "$marker"
scripts/deps.sh

# What /etc/rdma holds before: the package must never touch it.
etc_state() { find /etc/rdma -exec stat -c '%n %a %s %Y' {} + 2>/dev/null | sort; }
etc_before=$(etc_state)

say "the .deb of make dist"
debs=(target/dist/"$pkg"_*_amd64.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] \
    || fail "want one target/dist/${pkg}_<version>_amd64.deb (make dist), found: ${debs[*]}"
deb=$PWD/${debs[0]}
version=$(dpkg-deb -f "$deb" Version)
[ "$(basename "$deb")" = "${pkg}_${version}_amd64.deb" ] \
    || fail "unexpected package file $deb (want ${pkg}_${version}_amd64.deb)"

say "contents of $(basename "$deb")"
contents=$(dpkg-deb -c "$deb")
entry() { # PATH -> the `ls -l`-style line of that path in the package
    awk -v p="./$1" '$6 == p' <<< "$contents"
}
expect_file() { # PATH MODE
    local line; line=$(entry "$1")
    [ -n "$line" ] || fail "$1 is not in the package"
    [ "${line%% *}" = "$2" ] || fail "$1 is '${line%% *}', want $2 (a regular file)"
}
expect_file "${so#/}" -rw-r--r--
expect_file "${tool#/}" -rwxr-xr-x
for f in usr/share/man/man7/ibacm_urdma.7.gz usr/share/man/man8/urdma-acm.8.gz \
         usr/share/doc/$pkg/ibacm.conf usr/share/doc/$pkg/examples/urdma_hosts \
         usr/share/doc/$pkg/examples/urdma-alerts.yml \
         usr/share/doc/$pkg/examples/urdma-grafana-dashboard.json \
         usr/share/doc/$pkg/README.md usr/share/doc/$pkg/protocol.md \
         usr/share/doc/$pkg/systemd.md usr/share/doc/$pkg/copyright \
         usr/share/doc/$pkg/changelog.gz usr/share/bash-completion/completions/urdma-acm \
         usr/share/zsh/vendor-completions/_urdma-acm \
         usr/share/fish/vendor_completions.d/urdma-acm.fish \
         usr/lib/firewalld/services/ibacm-urdma.xml etc/ufw/applications.d/ibacm-urdma; do
    expect_file "$f" -rw-r--r--
done
# Under /etc, only ufw's application profile (ufw reads them nowhere
# else), a conffile: nothing of the daemon's.
ufw_profile=/etc/ufw/applications.d/$pkg
under_etc=$(awk '$6 ~ /^\.\/etc\// && $6 !~ /\/$/ { print substr($6, 2) }' <<< "$contents")
[ "$under_etc" = "$ufw_profile" ] || fail "the package installs under /etc: $under_etc"
conffiles=$(dpkg-deb -I "$deb" conffiles 2> /dev/null || true)
[ "$conffiles" = "$ufw_profile" ] || fail "conffiles '$conffiles', want $ufw_profile alone"
depends=$(dpkg-deb -f "$deb" Depends)
grep -qE '(^|, )ibacm($|[ ,])' <<< "$depends" || fail "Depends '$depends' lacks ibacm"

installed=
cleanup() {
    if [ -n "$installed" ]; then dpkg -P "$pkg-dbgsym" "$pkg" > /dev/null 2>&1 || true; fi
    rm -f "$marker"
}
trap cleanup EXIT

say "dpkg -i, with the -dbgsym"
dbgsym=$(dirname "$deb")/$pkg-dbgsym_${version}_amd64.deb
touch "$marker"
dpkg -i "$deb" "$dbgsym" > /dev/null
installed=1
[ -f "$so" ] && [ ! -L "$so" ] || fail "$so is not a regular file after install"
# gdb, as an operator would run it on a crash, finds the installed
# provider's source lines through the -dbgsym's files.
gdb -batch -ex "info line provider_query" "$so" 2>&1 | tail -n 1 \
    | grep -q 'of "src/boundary/mod.rs" starts at address' \
    || fail "gdb finds no source line in the installed $so: $(gdb -batch -ex "info line provider_query" "$so" 2>&1 | tail -n 2)"
dpkg -P "$pkg-dbgsym" > /dev/null

say "installed urdma-acm and man pages"
"$tool" --help > /dev/null
for sub in doctor check-config stats; do
    "$tool" "$sub" --help | grep -q "Usage: urdma-acm $sub" || fail "$tool $sub --help"
done
for page in "7 ibacm_urdma" "8 urdma-acm"; do
    set -- $page
    path=$(man -w "$1" "$2") || fail "man -w $1 $2 finds nothing"
    zcat "$path" | grep -q "^\.TH .* $1 " || fail "$path is not a section $1 page"
    zcat "$path" | groff -man -Tutf8 -ww -z 2>&1 | { ! grep .; } || fail "$path has roff warnings"
done
"$tool" check-config "/usr/share/doc/$pkg/ibacm.conf" > /dev/null \
    || fail "the installed sample options file does not pass check-config"
# ufw itself reads the installed profile (deps.sh --test installs ufw).
ufw app info "$pkg" | grep -qx '  6126/udp' || fail "ufw app info $pkg: $(ufw app info "$pkg" 2>&1)"
# bash-completion's loader finds the installed script by the command's name.
bash -c "source /usr/share/bash-completion/completions/urdma-acm; complete -p urdma-acm" \
    | grep -q -- '-F _urdma__acm urdma-acm' || fail "no bash completion for urdma-acm"

say "end-to-end from the installed paths"
# The harness also needs the simulator and the librdmacm client, which are
# test fixtures and not packaged.
cargo build --workspace --quiet
URDMA_PROVIDER_SO=$so cargo test --quiet --test e2e -- --exact \
    provider_loads_with_version_handshake_and_serves
URDMA_PROVIDER_SO=$so URDMA_ACM=$tool cargo test --quiet --test tool -- --exact \
    stats_counts_what_was_resolved_per_endpoint \
    doctor_serves_the_good_port_and_says_why_not_for_each_bad_one

say "dpkg -r, dpkg -P"
dpkg -r "$pkg" > /dev/null
while read -r mode _ _ _ _ path _; do
    case $mode in d*) continue ;; esac
    [ "${path#.}" = "$ufw_profile" ] || [ ! -e "${path#.}" ] || fail "${path#.} is still there after dpkg -r"
done <<< "$contents"
dpkg -P "$pkg" > /dev/null
installed=
[ ! -e "$ufw_profile" ] || fail "$ufw_profile is still there after dpkg -P"
[ "$(etc_state)" = "$etc_before" ] || fail "/etc/rdma changed"
say "ok"
