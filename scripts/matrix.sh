#!/usr/bin/env bash
# The compatibility matrix: the package from `make dist`, installed with
# `dpkg -i` into a root filesystem of each Debian release (scripts/rootfs.sh
# makes and caches them), served by that release's own /usr/sbin/ibacm and
# queried with its own ib_acme, librdmacm and the installed urdma-acm. Two
# hosts per release, each the release's daemon on a simulated urdma device
# in network namespaces joined by a veth pair:
#   - host b resolves host a from its hosts file (name, IPv4, IPv6);
#   - host a resolves host b by discovery (name, IPv4, IPv6; keys on), and
#     through librdmacm's rdma_getaddrinfo;
#   - host a's port goes down (resolution fails) and up (it works again);
#   - urdma-acm doctor passes on the installed package and names the
#     daemon's version; on a provider built for a newer glibc it fails with
#     the loader's words, exactly where that glibc is missing;
#   - urdma-acm stats shows the endpoint's counters and the metrics;
#   - Debian 12 (amd64): the release's node exporter, as its unit runs it,
#     serves the provider's metrics (urdma_up 1) from its textfile
#     directory with no path edited; promtool checks them;
#   - reinstalled and removed, the package leaves nothing behind that the
#     daemon would load; removed while ibacm's options still name urdma, it
#     says so and how to mend it (the printed sed works), restarts nothing
#     and leaves the options file as it was; removed without that, it says
#     nothing and try-restarts ibacm; either way it takes its firewalld
#     service out of the zones and policies that name it (a stand-in
#     firewalld); purged, it leaves no metrics file, control socket or file
#     under /etc. On Debian 12 (amd64) the .rpm's scriptlets, run by this
#     machine's rpm into the same root filesystem, do the same.
# SUITE-arm64 (bookworm-arm64) does the same with the arm64 .deb, simulator
# and librdmacm client in the release's arm64 root filesystem, its programs
# run by qemu-user (scripts/binfmt.sh), but for the newer-glibc provider,
# which is this machine's x86-64 build.
# Usage: scripts/matrix.sh [SUITE...]
#        (default: bullseye bookworm trixie sid bookworm-arm64)
# Needs root. Every failure names its release; the last line counts checks.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "matrix.sh: run as root (debootstrap, chroot, namespaces)" >&2
    exit 1
fi
# Everything mounted here (overlays, binds) lives in a mount namespace of
# the run's own, so it goes away with the run however the run ends.
if [ -z "${URDMA_MATRIX_NS:-}" ]; then
    exec unshare -m --propagation private env URDMA_MATRIX_NS=1 "$0" "$@"
fi

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(bullseye bookworm trixie sid bookworm-arm64)
# A provider linked against this machine's glibc (the test command's debug
# build): the load that doctor must refuse where that glibc is missing.
native=$root/target/debug/libibacm_urdma.so
# SUITE: sets the release, the Debian and GNU architecture names, the
# package and the simulator's build (the glibc 2.28 build of urdma-sim) of
# a suite.
architecture() {
    release=${1%-arm64}
    if [ "$release" = "$1" ]; then arch=amd64 gnu=x86_64; else arch=arm64 gnu=aarch64; fi
    zig=$root/target/zig/$gnu-unknown-linux-gnu/deb
    local debs=("$root"/target/dist/ibacm-urdma_*_"$arch".deb)
    deb=${debs[0]}
    [ "$arch" = arm64 ] || deb=${URDMA_MATRIX_DEB:-$deb}
}
for s in "${suites[@]}"; do
    architecture "$s"
    for f in "$deb" "$zig/liburdma_sim.so" "$zig/urdma-rai" "$native"; do
        [ -e "$f" ] || { echo "matrix.sh: $f missing (make dist; scripts/zigbuild.sh --arch $gnu --profile deb -p urdma-sim; cargo build)" >&2; exit 1; }
    done
done

work=$(mktemp -d /tmp/urdma-matrix.XXXXXX)
tag=$$
namespaces=()
# Started here with no path of the run in their command line (the node
# exporter): ended by their ids.
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
    pkill -f "$work/" 2> /dev/null || true
    sleep 0.2
    pkill -9 -f "$work/" 2> /dev/null || true
    for ns in "${namespaces[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
    # Lazy: a daemon that is still dying keeps its mounts busy.
    grep -o " $work/[^ ]*" /proc/self/mounts | sort -r | while read -r m; do umount -l "$m" 2> /dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

passed=0
failed=0
suite=
pass() { passed=$((passed + 1)); echo "matrix: $suite: ok: $*"; }
fail() { failed=$((failed + 1)); echo "matrix: $suite: FAILED: $*" >&2; }

# The root filesystems are made in parallel the first time (about two
# minutes each), then come from the cache.
makers=()
for s in "${suites[@]}"; do
    architecture "$s"
    "$root/scripts/rootfs.sh" "$release" "$arch" > /dev/null &
    makers+=($!)
done
for p in "${makers[@]}"; do wait "$p" || { echo "matrix.sh: a root filesystem could not be made" >&2; exit 1; }; done

gid_of() { printf 'fe80::5054:ff:fe12:%s' "$1"; }
GID_A=$(gid_of 3456)
GID_B=$(gid_of 3457)

# Runs a command chrooted into the release, inside host $1's network
# namespace and a private mount namespace whose /run is the host's own.
in_host() {
    local h=$1; shift
    ip netns exec "urdma-mx-$suite-$h-$tag" unshare -m --propagation private \
        sh -c 'mount --bind "$0" "$1/run" && r=$1 && shift && exec chroot "$r" "$@"' \
        "$files/$h/run" "$rootdir" "$@"
}
# The simulated device of host $1 under command $2...
sim() {
    local h=$1; shift
    in_host "$h" env LD_PRELOAD="$zig/liburdma_sim.so" URDMA_SIM_CONFIG="$files/$h/sim.cfg" \
        URDMA_SIM_CONTROL="$files/$h/sim.ctl" "$@"
}

# ib_acme on host $1 must resolve args $3... to the path whose dgid is $2.
expect_dgid() {
    local h=$1 dgid=$2; shift 2
    local out
    if out=$(in_host "$h" ib_acme "$@" 2>&1) && grep -qx "  dgid: $dgid" <<< "$out"; then
        pass "host $h: ib_acme $* -> $dgid"
    else
        fail "host $h: ib_acme $* did not resolve to $dgid:"$'\n'"$out"
    fi
}

# Polls (up to 10 s) until ib_acme on host $1 with args $3... succeeds
# (want=ok) or fails (want=fail).
wait_acme() {
    local h=$1 want=$2; shift 2
    for _ in $(seq 100); do
        if in_host "$h" ib_acme "$@" > /dev/null 2>&1; then
            [ "$want" = ok ] && return 0
        else
            [ "$want" = fail ] && return 0
        fi
        sleep 0.1
    done
    return 1
}

# Files of the release's provider directory that ibacm 28 and older would
# load (a name containing ".so") besides acmp's and ours.
strays() {
    local f
    for f in "$rootdir"/usr/lib/$gnu-linux-gnu/ibacm/*.so*; do
        [ -e "$f" ] || continue
        case ${f##*/} in libibacmp.so | libibacm_urdma.so) ;; *) echo "${f##*/}" ;; esac
    done
}

# A chroot has no systemd: the package's postinst finds a stand-in
# deb-systemd-invoke first in its PATH, which records each call and does
# what systemd's try-restart would do to host a's daemon (stop it if it
# runs; upgrade_restarts_a_running_daemon then starts it again, as systemd
# would).
service_manager_stand_in() {
    local shim=$rootdir/usr/local/sbin/deb-systemd-invoke
    mkdir -p "$rootdir/run/systemd/system" "$(dirname "$shim")"
    cat > "$shim" << SHIM
#!/bin/sh
echo "\$*" >> $files/invoked
if [ "\$*" = "try-restart ibacm.service" ] && [ -s $files/a/ibacm.pid ]; then
    kill "\$(cat $files/a/ibacm.pid)" 2> /dev/null || true
fi
exit 0
SHIM
    chmod 755 "$shim"
}

# The package upgraded (dpkg -i over itself) under host a's running daemon:
# postinst try-restarts ibacm.service, the old daemon (with the old provider
# mapped) goes, and the one started in its place serves.
upgrade_restarts_a_running_daemon() {
    local d=$files/a pid out
    pid=$(cat "$d/ibacm.pid")
    if ! out=$(chroot "$rootdir" dpkg -i "$files/$(basename "$deb")" 2>&1); then
        fail "dpkg -i over a running daemon:"$'\n'"$out"
        return
    fi
    for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    if [ "$(cat "$files/invoked" 2> /dev/null)" = "try-restart ibacm.service" ] && ! kill -0 "$pid" 2> /dev/null; then
        pass "upgrade: postinst try-restarts ibacm.service, the running daemon stops"
    else
        fail "upgrade: calls '$(cat "$files/invoked" 2> /dev/null)', daemon $pid $(kill -0 "$pid" 2> /dev/null && echo still runs)"
        return
    fi
    rm -f "$d/ibacm.log" "$files/invoked"
    sim a /usr/sbin/ibacm -P -O "$d/ibacm_opts.cfg" -A "$d/ibacm_addr.cfg" > "$d/daemon.out" 2>&1 &
    for _ in $(seq 100); do grep -q 'urdma: ' "$d/ibacm.log" 2> /dev/null && break; sleep 0.1; done
    if wait_acme a ok -f i -s 10.0.0.1 -d 10.0.0.2; then
        expect_dgid a "$GID_B" -f i -s 10.0.0.1 -d 10.0.0.2
    else
        fail "upgrade: the restarted daemon does not resolve:"$'\n'"$(tail -n 20 "$d/ibacm.log" "$d/daemon.out" 2> /dev/null)"
    fi
    # The rest of the suite as before: no service manager.
    rm -rf "$rootdir/usr/local/sbin/deb-systemd-invoke" "$rootdir/run/systemd"
}

run_suite() {
    suite=$1
    local rootfs w h ip ip6 mac d version
    architecture "$suite"
    rootfs=$("$root/scripts/rootfs.sh" "$release" "$arch")
    w=$work/$suite
    files=$w/files
    rootdir=$w/root
    mkdir -p "$w/upper" "$w/ovl" "$rootdir" "$files"
    # The cached release stays untouched: each run installs into an overlay.
    mount -t overlay overlay -o "lowerdir=$rootfs,upperdir=$w/upper,workdir=$w/ovl" "$rootdir"
    for d in proc sys dev; do mount --rbind "/$d" "$rootdir/$d"; done
    # The build's outputs and this run's files at the same paths inside.
    for d in "$root" "$files"; do
        mkdir -p "$rootdir$d"
        mount --bind "$d" "$rootdir$d"
    done
    version=$(chroot "$rootdir" dpkg-query -W -f '${Version}' ibacm)
    echo "== matrix: $suite: ibacm $version ($arch)"
    if [ "$arch" = arm64 ]; then
        local machine
        machine=$(chroot "$rootdir" uname -m)
        if [ "$machine" = aarch64 ] && readelf -h "$rootdir/usr/sbin/ibacm" | grep -q 'Machine: *AArch64'; then
            pass "the release's ibacm is an AArch64 program, run by qemu-user"
        else
            fail "an arm64 suite on machine '$machine'"
            return
        fi
    fi

    local out
    cp "$deb" "$files/"
    service_manager_stand_in
    if out=$(chroot "$rootdir" dpkg -i "$files/$(basename "$deb")" 2>&1) && [ ! -e "$files/invoked" ]; then
        pass "dpkg -i $(basename "$deb"): a first install restarts nothing"
    else
        fail "dpkg -i $(basename "$deb"):"$'\n'"$out"
        return
    fi
    local provider=$rootdir/usr/lib/$gnu-linux-gnu/ibacm/libibacm_urdma.so
    if [ -f "$provider" ] && [ ! -L "$provider" ]; then
        pass "the provider is a regular file in the daemon's directory"
    else
        fail "no regular file $provider after dpkg -i"
    fi
    local extra
    extra=$(strays)
    if [ -z "$extra" ]; then
        pass "nothing else named *.so* in the provider directory"
    else
        fail "the provider directory holds $extra"
    fi

    printf '# KEY-ID HEX-KEY\n1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$files/urdma.key"
    chmod 600 "$files/urdma.key"
    ip netns add "urdma-mx-$suite-a-$tag"; namespaces+=("urdma-mx-$suite-a-$tag")
    ip netns add "urdma-mx-$suite-b-$tag"; namespaces+=("urdma-mx-$suite-b-$tag")
    ip link add a0 netns "urdma-mx-$suite-a-$tag" type veth peer name b0 netns "urdma-mx-$suite-b-$tag"
    while read -r h ip ip6 mac; do
        local ns=urdma-mx-$suite-$h-$tag
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$ip/24" dev "${h}0"
        ip -n "$ns" addr add "$ip6/64" dev "${h}0" nodad
        ip -n "$ns" link set "${h}0" up
        d=$files/$h
        mkdir -p "$d/run"
        printf 'device urdma0\n  mac %s\n  port 1\n    link_layer infiniband\n    state active\n    pkey 0xffff\n' \
            "$mac" > "$d/sim.cfg"
        # The daemon's own provider directory: the package's.
        cat > "$d/ibacm_opts.cfg" << OPTS
log_file $d/ibacm.log
log_level 1
lock_file $d/ibacm.pid
provider urdma default
support_ips_in_addr_cfg 1
urdma_hosts_file $d/hosts
urdma_auth_key_file $files/urdma.key
OPTS
        printf '%s urdma0 1 default\n' "node-$h" "$ip" "$ip6" > "$d/ibacm_addr.cfg"
        # The hosts share the release's /var, where host a's metrics go by
        # default when the node exporter's directory is there: host b's
        # stay under its own /run.
        [ "$h" = a ] || echo "urdma_metrics_file /run/ibacm-urdma.prom" >> "$d/ibacm_opts.cfg"
    done << HOSTS
a 10.0.0.1 fd00::1 52:54:00:12:34:56
b 10.0.0.2 fd00::2 52:54:00:12:34:57
HOSTS
    : > "$files/a/hosts"
    printf '%s %s\n' node-a "$GID_A" 10.0.0.1 "$GID_A" fd00::1 "$GID_A" > "$files/b/hosts"

    for h in a b; do
        d=$files/$h
        sim "$h" /usr/sbin/ibacm -P -O "$d/ibacm_opts.cfg" -A "$d/ibacm_addr.cfg" > "$d/daemon.out" 2>&1 &
    done
    for h in a b; do
        for _ in $(seq 100); do [ -S "$files/$h/run/ibacm-unix.sock" ] && break; sleep 0.1; done
        if [ -S "$files/$h/run/ibacm-unix.sock" ] && grep -q 'urdma: ' "$files/$h/ibacm.log"; then
            pass "host $h: the release's ibacm loaded the provider"
        else
            fail "host $h: the daemon did not come up with the provider:"$'\n'"$(grep -ih 'provider\|error\|urdma' "$files/$h/ibacm.log" "$files/$h/daemon.out" 2> /dev/null | tail -20)"
            return
        fi
    done

    # Static: host b from its hosts file.
    expect_dgid b "$GID_A" -f n -s node-b -d node-a
    expect_dgid b "$GID_A" -f i -s 10.0.0.2 -d 10.0.0.1
    expect_dgid b "$GID_A" -f i -s fd00::2 -d fd00::1
    # Discovery: host a knows nothing of host b.
    expect_dgid a "$GID_B" -f n -s node-a -d node-b
    expect_dgid a "$GID_B" -f i -s 10.0.0.1 -d 10.0.0.2
    expect_dgid a "$GID_B" -f i -s fd00::1 -d fd00::2
    # The release's librdmacm, as an application calls it.
    if out=$(sim a "$zig/urdma-rai" -s 10.0.0.1 --route-only 10.0.0.2 2>&1) && grep -q "dgid=$GID_B " <<< "$out"; then
        pass "host a: rdma_getaddrinfo(10.0.0.2) route to $GID_B"
    else
        fail "host a: rdma_getaddrinfo(10.0.0.2) gave no route to $GID_B:"$'\n'"$out"
    fi

    # A port going down and up.
    local down=(-f i -s 10.0.0.1 -d 10.0.0.2)
    echo "event urdma0 1 port_err" > "$files/a/sim.ctl"
    if wait_acme a fail "${down[@]}"; then
        pass "host a: port down, resolution fails"
    else
        fail "host a: resolution still answers 10 s after the port went down"
    fi
    echo "event urdma0 1 port_active" > "$files/a/sim.ctl"
    if wait_acme a ok "${down[@]}"; then
        expect_dgid a "$GID_B" "${down[@]}"
    else
        fail "host a: resolution did not come back within 10 s of the port coming up"
    fi

    upgrade_restarts_a_running_daemon

    # The operator's tool, as installed by the package.
    local major=${version%%.*}
    if out=$(sim b urdma-acm doctor -O "$files/b/ibacm_opts.cfg" -A "$files/b/ibacm_addr.cfg" 2>&1) \
        && grep -qF "daemon: ibacm $version (dpkg-query), rdma-core $major:" <<< "$out" \
        && grep -qx "  libibacm_urdma.so: loaded (urdma)" <<< "$out"; then
        pass "urdma-acm doctor: ok, names ibacm $version, the provider loads"
    else
        fail "urdma-acm doctor on the installed package:"$'\n'"$out"
    fi
    # (x86-64 only: the only build linked against a newer glibc is this
    # machine's.)
    [ "$arch" != amd64 ] || doctor_on_a_newer_glibc
    stats_show_counters
    [ "$suite" != bookworm ] || node_exporter_serves_metrics
    # Removed under host a's running daemon.
    reinstall_and_remove
}

# A provider that needs a newer glibc than the release has: doctor must say
# so in the loader's words, exactly when it is so.
doctor_on_a_newer_glibc() {
    local need have out
    need=$(objdump -T "$native" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
    have=$(chroot "$rootdir" dpkg-query -W -f '${Version}' libc6)
    mkdir -p "$files/native/prov"
    cp "$native" "$files/native/prov/libibacm_urdma.so"
    sed "/^log_file/d; \$a provider_lib_path $files/native/prov" "$files/b/ibacm_opts.cfg" > "$files/native/opts.cfg"
    local code=0
    out=$(sim b urdma-acm doctor -O "$files/native/opts.cfg" -A "$files/b/ibacm_addr.cfg" 2>&1) || code=$?
    if dpkg --compare-versions "${have%%-*}" lt "${need#GLIBC_}"; then
        if [ "$code" != 0 ] && grep -q "dlopen fails: .*version .GLIBC_[0-9.]*' not found" <<< "$out"; then
            pass "urdma-acm doctor refuses a provider that needs $need (libc6 $have): the loader's words"
        else
            fail "urdma-acm doctor on a provider needing $need (libc6 $have): exit $code:"$'\n'"$out"
        fi
    elif [ "$code" = 0 ]; then
        pass "urdma-acm doctor accepts a provider that needs $need (libc6 $have)"
    else
        fail "urdma-acm doctor on a provider needing $need (libc6 $have): exit $code:"$'\n'"$out"
    fi
}

stats_show_counters() {
    local out
    if out=$(in_host a urdma-acm stats -O "$files/a/ibacm_opts.cfg" 2>&1) \
        && grep -q '^0x505400fffe123456 .* urdma  *node-a ' <<< "$out" && grep -q '^urdma_resolve_requests_total' <<< "$out" && ! grep -q 'no metrics' <<< "$out"; then
        pass "urdma-acm stats: counters and metrics"
    else
        fail "urdma-acm stats on host a:"$'\n'"$out"
    fi
}

# Debian 12's node exporter, as its unit runs it (user prometheus, no
# argument: the textfile directory it was built with), in host a's network
# namespace: it serves what host a's daemon wrote into that directory by
# itself, the options naming no path. promtool (Debian's prometheus
# package), where this machine has it, checks the file and the scrape.
node_exporter_serves_metrics() {
    local dir=/var/lib/prometheus/node-exporter pid out='' code=1 lint
    if [ ! -d "$rootdir$dir" ] || [ ! -x "$rootdir/usr/bin/prometheus-node-exporter" ]; then
        fail "no prometheus-node-exporter or $dir in the release's root filesystem (scripts/rootfs.sh)"
        return
    fi
    # Only the textfile collector: the others read the machine, not the provider.
    in_host a setpriv --reuid=prometheus --regid=prometheus --init-groups \
        prometheus-node-exporter --web.listen-address=127.0.0.1:9100 \
        --collector.disable-defaults --collector.textfile > "$files/node-exporter.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    # The provider writes its file every second or so: up to 10 s.
    for _ in $(seq 50); do
        if out=$(scrape a 9100) && grep -Eq '^urdma_up(\{[^}]*\})? 1$' <<< "$out"; then
            code=0
            break
        fi
        sleep 0.2
    done
    if [ "$code" = 0 ] && grep -qx 'node_textfile_scrape_error 0' <<< "$out"; then
        pass "node exporter (its default textfile directory $dir): urdma_up 1, no scrape error"
    else
        fail "the node exporter serves no urdma_up 1 from $dir ($(ls "$rootdir$dir" 2> /dev/null | tr '\n' ' ')):"$'\n'"$(grep -E '^(urdma_|node_textfile)' <<< "$out" | head -20)"$'\n'"$(tail -5 "$files/node-exporter.log")"
    fi
    kill "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    if ! command -v promtool > /dev/null; then
        echo "matrix: $suite: promtool not found (Debian's prometheus package): metrics not linted"
    elif [ -f "$rootdir$dir/ibacm-urdma.prom" ]; then
        if lint=$(promtool check metrics < "$rootdir$dir/ibacm-urdma.prom" 2>&1) \
            && lint=$(grep -E '^(# (HELP|TYPE) )?urdma_' <<< "$out" | promtool check metrics 2>&1); then
            pass "promtool check metrics: the provider's file and its metrics as scraped"
        else
            fail "promtool check metrics:"$'\n'"$lint"
        fi
    fi
}

# The HTTP body of GET /metrics on 127.0.0.1:PORT $2 in host $1's network
# namespace (bash's /dev/tcp: nothing to install); fails unless 200.
scrape() {
    local reply
    reply=$(ip netns exec "urdma-mx-$suite-$1-$tag" timeout 5 bash -c \
        'exec 3<> "/dev/tcp/127.0.0.1/$0" && printf "GET /metrics HTTP/1.0\r\n\r\n" >&3 && cat <&3' "$2" 2> /dev/null | tr -d '\r') \
        || return 1
    [[ $reply == "HTTP/1."?" 200 "* ]] || return 1
    sed '1,/^$/d' <<< "$reply"
}

# What the provider leaves behind by default, as the release's root sees
# it: its metrics file and the file's temporary, in the node exporter's
# textfile directory and under /run, and its control socket.
LEFTOVERS=(/var/lib/prometheus/node-exporter/ibacm-urdma.prom /var/lib/prometheus/node-exporter/ibacm-urdma.prom.tmp
    /run/ibacm-urdma.prom /run/ibacm-urdma.prom.tmp /run/ibacm-urdma.sock)
# Puts them (and the files named $@) there, as a daemon that stopped leaves them.
plant() {
    local f
    mkdir -p "$rootdir/var/lib/prometheus/node-exporter"
    for f in "${LEFTOVERS[@]}" "$@"; do echo "urdma_up 1" > "$rootdir$f"; done
}
# Those of them (and of the files named $@) that are there.
remaining() {
    local f
    for f in "${LEFTOVERS[@]}" "$@"; do [ ! -e "$rootdir$f" ] || echo "$f"; done
}

# What a removal prints on its standard error while ibacm's options still
# name urdma (line $1 of /etc/rdma/ibacm_opts.cfg, $2).
removal_warning() {
    cat << WARNING
ibacm-urdma: warning: /etc/rdma/ibacm_opts.cfg still names the removed provider:
ibacm-urdma:   line $1: $2
ibacm-urdma: ibacm's next start fails while this line is there (rdma-core 33's ibacm crashes).
ibacm-urdma: A running ibacm keeps the removed provider loaded until that start; it was not restarted.
ibacm-urdma: To mend, comment the line out (or delete it), then restart ibacm:
ibacm-urdma:   sed -i -E 's/^[[:space:]]*provider[[:space:]]+urdma([[:space:]]|\$)/# &/' /etc/rdma/ibacm_opts.cfg
ibacm-urdma:   systemctl restart ibacm
ibacm-urdma: Where only urdma served this host's ports, no other provider can: stop ibacm instead (systemctl disable --now ibacm).
WARNING
}

# firewalld as the package's scripts meet it: a stand-in (the real one
# needs polkitd, which needs logind, which a root filesystem without systemd
# has not), as firewall-cmd of a running daemon (its runtime and
# --permanent configurations) and firewall-offline-cmd ($1 = running), or
# firewall-offline-cmd alone ($1 = offline). It keeps what the zones and
# policies name in $files/firewalld, as lines "CONFIGURATION KIND NAME
# SERVICE"; $2... are its first lines.
firewalld_stand_in() {
    local stub=$rootdir/usr/sbin/firewall-offline-cmd
    rm -f "$rootdir/usr/sbin/firewall-cmd"
    cat > "$stub" << STUB
#!/bin/sh
db=$files/firewalld
case \${0##*/} in
    firewall-offline-cmd) config=offline ;;
    *)
        config=runtime
        [ "\$1" != --state ] || { echo running; exit 0; }
        [ "\$1" != --permanent ] || { config=permanent; shift; }
        ;;
esac
case \$1 in
    --get-zones) echo block drop public trusted work; exit 0 ;;
    --get-policies) echo allow-host-ipv6; exit 0 ;;
    --zone=* | --policy=*) kind=\${1%%=*}; kind=\${kind#--}; name=\${1#*=} ;;
    *) exit 2 ;;
esac
entry="\$config \$kind \$name \${2#*=}"
case \$2 in
    --query-service=*) grep -qxF "\$entry" "\$db" ;;
    --remove-service=*) grep -vxF "\$entry" "\$db" > "\$db.new"; mv "\$db.new" "\$db" ;;
    *) exit 2 ;;
esac
STUB
    chmod 755 "$stub"
    [ "$1" = offline ] || ln -s firewall-offline-cmd "$rootdir/usr/sbin/firewall-cmd"
    shift
    printf '%s\n' "$@" > "$files/firewalld"
}
# After a removal ($1): what it printed about firewalld on its standard
# output ($2) is $3 (lines), and the zones and policies name $4 (lines).
firewalld_after() {
    local said
    said=$(grep '^ibacm-urdma: firewalld:' <<< "$2") || true
    if [ "$said" = "$3" ] && [ "$(cat "$files/firewalld")" = "$4" ]; then
        pass "$1: firewalld's zones and policies as they should be${3:+, said so}"
    else
        fail "$1: firewalld: said"$'\n'"$said"$'\n'"zones and policies name"$'\n'"$(cat "$files/firewalld")"
    fi
}

# Reinstalled over itself (dpkg's own temporary names, .dpkg-new and
# .dpkg-tmp, contain ".so" too, and ibacm 28 and older would load any of
# them that stayed behind), then removed and purged twice: with ibacm's
# options naming urdma under host a's running daemon (when it still runs:
# a suite cut short comes here with none), and with options that do not.
reinstall_and_remove() {
    local dir=$rootdir/usr/lib/$gnu-linux-gnu/ibacm opts=$rootdir/etc/rdma/ibacm_opts.cfg
    local out left='' running='' pid sum code
    if out=$(chroot "$rootdir" dpkg -i "$files/$(basename "$deb")" 2>&1) \
        && left=$(strays) && [ -z "$left" ]; then
        pass "dpkg -i again: nothing left beside the provider"
    else
        fail "dpkg -i again:"$'\n'"$out$left"
    fi
    service_manager_stand_in
    rm -f "$files/invoked"
    pid=$(cat "$files/a/ibacm.pid" 2> /dev/null) || true
    [ -z "$pid" ] || ! kill -0 "$pid" 2> /dev/null || running=1
    # The daemon's lock file, so that the package's scripts know it runs.
    mkdir -p "$rootdir/etc/rdma"
    printf 'log_level 1\nlock_file %s\nprovider urdma default\n' "$files/a/ibacm.pid" > "$opts"
    sum=$(md5sum < "$opts")
    plant
    firewalld_stand_in running "permanent zone work ssh" "permanent zone public ibacm-urdma" \
        "runtime zone public ibacm-urdma" "permanent policy allow-host-ipv6 ibacm-urdma"
    code=0
    chroot "$rootdir" dpkg -r ibacm-urdma > "$files/remove.out" 2> "$files/remove.err" || code=$?
    if [ "$code" = 0 ] && [ "$(cat "$files/remove.err")" = "$(removal_warning 3 'provider urdma default')" ]; then
        pass "dpkg -r with 'provider urdma default' in ibacm's options: the warning and the mend"
    else
        fail "dpkg -r with 'provider urdma default' in ibacm's options: exit $code, standard error:"$'\n'"$(cat "$files/remove.err")"$'\n'"want:"$'\n'"$(removal_warning 3 'provider urdma default')"
    fi
    if [ "$(ls "$dir")" = libibacmp.so ] && [ ! -e "$rootdir/usr/bin/urdma-acm" ]; then
        pass "dpkg -r: the provider directory is as the release shipped it"
    else
        fail "dpkg -r: $(ls -a "$dir" | tr '\n' ' ')"
    fi
    left=$(remaining)
    if [ -e "$files/invoked" ] || [ "$(md5sum < "$opts")" != "$sum" ]; then
        fail "dpkg -r with urdma named: calls '$(cat "$files/invoked" 2> /dev/null)', options file $(cat "$opts")"
    elif [ -n "$running" ] && kill -0 "$pid" 2> /dev/null && [ "$left" = "$(printf '%s\n' "${LEFTOVERS[@]}")" ]; then
        pass "dpkg -r with urdma named: no restart, the running daemon and its files stay, the options file untouched"
    elif [ -z "$running" ] && [ "$left" = /run/ibacm-urdma.sock ]; then
        pass "dpkg -r with urdma named: no restart, no daemon: the metrics files go, the options file untouched"
    else
        fail "dpkg -r with urdma named (daemon ${running:+running}${running:-stopped}): left $left"
    fi
    firewalld_after "dpkg -r" "$(cat "$files/remove.out")" "$(printf '%s\n' \
        "ibacm-urdma: firewalld: took service ibacm-urdma out of zone public (permanent configuration)" \
        "ibacm-urdma: firewalld: took service ibacm-urdma out of policy allow-host-ipv6 (permanent configuration)" \
        "ibacm-urdma: firewalld: took service ibacm-urdma out of zone public (runtime configuration)")" \
        "permanent zone work ssh"
    # The printed mend, as the operator pastes it.
    if chroot "$rootdir" sh -c "$(sed -n 's/^ibacm-urdma:   \(sed -i .*\)$/\1/p' "$files/remove.err")" \
        && [ "$(cat "$opts")" = "$(printf 'log_level 1\nlock_file %s\n# provider urdma default\n' "$files/a/ibacm.pid")" ]; then
        pass "the printed sed comments the line out"
    else
        fail "the printed sed: $(cat "$opts")"
    fi
    pkill -f "$work/$suite/" 2> /dev/null || true
    for _ in $(seq 50); do [ -z "$pid" ] || ! kill -0 "$pid" 2> /dev/null && break; sleep 0.1; done
    purged "dpkg -P after that"

    # The options file of an operator who uses urdma elsewhere (a comment,
    # another provider) and a metrics file of their choosing.
    printf '# provider urdma default\nprovider acmp default\nurdma_metrics_file /var/tmp/urdma.prom\n' > "$opts"
    if ! out=$(chroot "$rootdir" dpkg -i "$files/$(basename "$deb")" 2>&1); then
        fail "dpkg -i once more:"$'\n'"$out"
        return
    fi
    rm -f "$files/invoked"
    plant /var/tmp/urdma.prom /var/tmp/urdma.prom.tmp
    firewalld_stand_in running "permanent zone work ssh"
    code=0
    chroot "$rootdir" dpkg -r ibacm-urdma > "$files/remove.out" 2> "$files/remove.err" || code=$?
    left=$(remaining /var/tmp/urdma.prom /var/tmp/urdma.prom.tmp)
    if [ "$code" = 0 ] && [ ! -s "$files/remove.err" ] && [ "$(cat "$files/invoked" 2> /dev/null)" = "try-restart ibacm.service" ] \
        && [ "$left" = /run/ibacm-urdma.sock ]; then
        pass "dpkg -r with urdma not named: quiet, try-restarts ibacm.service, the metrics files go"
    else
        fail "dpkg -r with urdma not named: exit $code, calls '$(cat "$files/invoked" 2> /dev/null)', left $left, standard error:"$'\n'"$(cat "$files/remove.err")"
    fi
    firewalld_after "dpkg -r" "$(cat "$files/remove.out")" "" "permanent zone work ssh"
    purged "dpkg -P after that"
    rm -rf "$opts" "$rootdir/usr/local/sbin/deb-systemd-invoke" "$rootdir/run/systemd" \
        "$rootdir/usr/sbin/firewall-cmd" "$rootdir/usr/sbin/firewall-offline-cmd"
    if [ "$suite" = bookworm ]; then
        if command -v rpm > /dev/null; then
            rpm_scriptlets
        else
            echo "matrix: $suite: rpm not found (Debian's rpm package): the .rpm's scriptlets not run"
        fi
    fi
}

# dpkg -P ($1 names it): quiet, and nothing of the package left.
purged() {
    local code=0 left
    chroot "$rootdir" dpkg -P ibacm-urdma > "$files/purge.out" 2> "$files/purge.err" || code=$?
    left=$(remaining /etc/ufw/applications.d/ibacm-urdma)
    if [ "$code" = 0 ] && [ ! -s "$files/purge.err" ] && [ -z "$left" ] \
        && ! chroot "$rootdir" dpkg-query -W ibacm-urdma > /dev/null 2>&1; then
        pass "$1: quiet, no metrics file, control socket or /etc file left"
    else
        fail "$1: exit $code, left $left, standard error:"$'\n'"$(cat "$files/purge.err")"
    fi
}

# The .rpm's scriptlets (the .deb's scripts, included by the .spec), run by
# this machine's rpm into the release's root filesystem (chrooted, by
# /bin/sh), with no daemon: erased with urdma named, the warning and
# nothing left; without, quiet and nothing left.
rpm_scriptlets() {
    local rpms=("$root"/target/dist/ibacm-urdma-[0-9]*.x86_64.rpm) opts=$rootdir/etc/rdma/ibacm_opts.cfg
    local r=(rpm --root "$rootdir") code left out
    if [ ! -f "${rpms[0]}" ] || ! "${r[@]}" --initdb; then
        fail "rpm: no ${rpms[0]} (make dist), or rpm --initdb failed"
        return
    fi
    for named in yes no; do
        mkdir -p "$rootdir/etc/rdma"
        if [ "$named" = yes ]; then
            printf '# urdma\n  provider\turdma  fe80::\n' > "$opts"
        else
            printf 'provider acmp default\n' > "$opts"
        fi
        if ! out=$("${r[@]}" -i --nodeps "${rpms[0]}" 2>&1) || [ ! -f "$rootdir/usr/lib64/ibacm/libibacm_urdma.so" ]; then
            fail "rpm -i $(basename "${rpms[0]}"):"$'\n'"$out"
            return
        fi
        plant
        firewalld_stand_in offline "offline zone public ibacm-urdma"
        code=0
        "${r[@]}" -e ibacm-urdma > "$files/erase.out" 2> "$files/erase.err" || code=$?
        # What Debian's rpm says when it installs or erases a package
        # (--force-debian would silence it, but other rpms lack it).
        sed -i '/^rpm: RPM should not be used directly/d; /^rpm: However assuming you know what you are doing/d' "$files/erase.err"
        left=$(remaining /usr/lib64/ibacm/libibacm_urdma.so)
        if [ "$named" = yes ]; then
            if [ "$code" = 0 ] && [ "$(cat "$files/erase.err")" = "$(removal_warning 2 "$(printf '  provider\turdma  fe80::')")" ] \
                && [ -z "$left" ]; then
                pass "rpm -e with urdma named (indented, tabbed, a subnet): the warning and the mend, nothing left"
            else
                fail "rpm -e with urdma named: exit $code, left $left, standard error:"$'\n'"$(cat "$files/erase.err")"
            fi
        elif [ "$code" = 0 ] && [ ! -s "$files/erase.err" ] && [ -z "$left" ]; then
            pass "rpm -e with urdma not named: quiet, nothing left"
        else
            fail "rpm -e with urdma not named: exit $code, left $left, standard error:"$'\n'"$(cat "$files/erase.err")"
        fi
        firewalld_after "rpm -e" "$(cat "$files/erase.out")" \
            "ibacm-urdma: firewalld: took service ibacm-urdma out of zone public (offline configuration)" ""
    done
    rm -rf "$opts" "$rootdir/var/lib/rpm" "$rootdir/usr/sbin/firewall-cmd" "$rootdir/usr/sbin/firewall-offline-cmd"
}

for s in "${suites[@]}"; do
    run_suite "$s"
    pkill -f "$work/$s/" 2> /dev/null || true
    [ -e "$rootdir/usr/bin/urdma-acm" ] && reinstall_and_remove
done
echo "matrix: $passed passed, $failed failed"
[ "$failed" = 0 ]
