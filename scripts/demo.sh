#!/usr/bin/env bash
# The main job, as a demo: two simulated urdma hosts, each the real
# /usr/sbin/ibacm with this provider on a simulated urdma device, in network
# namespaces joined by a veth pair, answering the real ib_acme and a real
# librdmacm client: host a by discovery (authenticated with a shared key),
# host b from its hosts file, which it reloads live when it changes; then
# the operator's tool urdma-acm. Needs root (namespaces, bind mounts).
# Leaves nothing behind: namespaces, daemons and temp files go when it exits.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
    echo "demo.sh: run as root (it creates network and mount namespaces)" >&2
    exit 1
fi
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
# Only what the demo runs: the provider, the simulator with its librdmacm
# client, and urdma-acm.
echo "== building (cargo build --release -p ibacm-urdma -p urdma-sim -p urdma-acm)"
cargo build --release -p ibacm-urdma -p urdma-sim -p urdma-acm --manifest-path "$root/Cargo.toml" --quiet
bin=$root/target/release

work=$(mktemp -d /tmp/urdma-demo.XXXXXX)
tag=$$
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    pkill -f "$work/" 2>/dev/null || true
    wait 2>/dev/null || true
    ip netns del "urdma-demo-a-$tag" 2>/dev/null || true
    ip netns del "urdma-demo-b-$tag" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# Runs a command inside host $1's namespaces: its network namespace and a
# private mount namespace whose /run is the host's own run directory, so the
# daemon's fixed socket paths (/run/ibacm*.sock) belong to that host.
in_host() {
    local h=$1; shift
    # exec all the way down, so that `in_host ... &` leaves $! = the program.
    exec ip netns exec "urdma-demo-$h-$tag" unshare -m --propagation private \
        sh -c 'mount --bind "$0" /run && exec "$@"' "$work/$h/run" "$@"
}

# host  ip         ipv6     mac of its urdma0
hosts="a 10.0.0.1 fd00::1 52:54:00:12:34:56
b 10.0.0.2 fd00::2 52:54:00:12:34:57"

# One pre-shared key for both hosts: every discovery message carries an
# HMAC of it (urdma_auth_key_file; the file must be private to its owner).
mkdir -p "$work"
printf '# KEY-ID HEX-KEY\n1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" > "$work/urdma.key"
chmod 600 "$work/urdma.key"

ip netns add "urdma-demo-a-$tag"
ip netns add "urdma-demo-b-$tag"
ip link add a0 netns "urdma-demo-a-$tag" type veth peer name b0 netns "urdma-demo-b-$tag"

while read -r h ip ip6 mac; do
    ns=urdma-demo-$h-$tag
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$ip/24" dev "${h}0"
    ip -n "$ns" addr add "$ip6/64" dev "${h}0" nodad
    ip -n "$ns" link set "${h}0" up
    d=$work/$h
    mkdir -p "$d/run" "$d/prov"
    # A regular file: the daemon skips symlinked providers.
    cp "$bin/libibacm_urdma.so" "$d/prov/"
    cat > "$d/sim.cfg" <<CFG
device urdma0
  mac $mac
  node_desc URDMA Virtual HCA
  port 1
    link_layer infiniband
    state active
    pkey 0xffff
CFG
    cat > "$d/ibacm_opts.cfg" <<OPTS
log_file $d/ibacm.log
log_level 1
lock_file $d/ibacm.pid
provider_lib_path $d/prov
provider urdma default
support_ips_in_addr_cfg 1
urdma_hosts_file $d/hosts
urdma_auth_key_file $work/urdma.key
urdma_metrics_file /run/ibacm-urdma.prom
OPTS
    printf '%s urdma0 1 default\n' "node-$h" "$ip" "$ip6" > "$d/ibacm_addr.cfg"
done <<< "$hosts"

# Host a has no hosts file: it learns host b by discovery (docs/protocol.md).
# Host b has a static table naming host a (GIDs are fe80:: + EUI-64 of the
# MAC), with one bad line that the provider reports and skips.
: > "$work/a/hosts"
cat > "$work/b/hosts" <<'H'
node-a      fe80::5054:ff:fe12:3456
10.0.0.1    fe80::5054:ff:fe12:3456
fd00::1     fe80::5054:ff:fe12:3456
bad line without a gid
H

for h in a b; do
    d=$work/$h
    URDMA_SIM_CONFIG=$d/sim.cfg in_host "$h" env LD_PRELOAD="$bin/liburdma_sim.so" \
        /usr/sbin/ibacm -P -O "$d/ibacm_opts.cfg" -A "$d/ibacm_addr.cfg" > "$d/daemon.out" 2>&1 &
    pids+=($!)
done
for h in a b; do
    for _ in $(seq 100); do [ -S "$work/$h/run/ibacm-unix.sock" ] && break; sleep 0.05; done
    [ -S "$work/$h/run/ibacm-unix.sock" ] || { cat "$work/$h/ibacm.log" "$work/$h/daemon.out"; exit 1; }
done

acme() {
    local h=$1; shift
    echo
    echo "== host $h: ib_acme $*"
    ib_acme -S "$work/$h/run/ibacm-unix.sock" "$@" || true
}

acme a -e
echo; echo "== host a knows nothing of host b: it asks the network (discovery, authenticated)"
acme a -f n -s node-a -d node-b -v
acme a -f i -d 10.0.0.2
acme a -f i -s fd00::1 -d fd00::2
echo; echo "== host b answers from its hosts file"
acme b -f g -d fe80::5054:ff:fe12:3456
acme b -f i -d 10.0.0.1 -c
echo; echo "== nobody holds 10.0.0.99: the lookup times out (3 tries of 0.5, 1 and 2 s: 3.5 s)"
acme a -f i -d 10.0.0.99
acme a -P s -s 10.0.0.1

echo
echo "== host a: librdmacm rdma_getaddrinfo(10.0.0.2), the call rdma_resolve_route makes"
(in_host a env LD_PRELOAD="$bin/liburdma_sim.so" "$bin/urdma-rai" -s 10.0.0.1 --route-only 10.0.0.2) || true

echo
echo "== host b's hosts file gains node-z: in force without a restart"
echo "node-z      fe80::5054:ff:fe12:9999" >> "$work/b/hosts"
sleep 1
acme b -f n -s node-b -d node-z

echo
echo "== urdma-acm doctor on host b: will ibacm serve its ports with urdma?"
(URDMA_SIM_CONFIG=$work/b/sim.cfg in_host b env LD_PRELOAD="$bin/liburdma_sim.so" \
    "$bin/urdma-acm" doctor -O "$work/b/ibacm_opts.cfg" -A "$work/b/ibacm_addr.cfg") || true
echo
echo "== urdma-acm check-config on host b's options (and the hosts and key files they name)"
"$bin/urdma-acm" check-config "$work/b/ibacm_opts.cfg" || true
echo
echo "== urdma-acm stats on host a: the provider's counters per endpoint, then its metrics"
# In host a's namespaces: its /run holds the daemon's socket and the
# provider's metrics file (urdma_metrics_file, /run/ibacm-urdma.prom) and
# its control socket (/run/ibacm-urdma.sock).
(in_host a "$bin/urdma-acm" stats -O "$work/a/ibacm_opts.cfg") || true

echo
echo "== urdma-acm health and show on host a: over the provider's own control socket"
(in_host a "$bin/urdma-acm" health) || true
(in_host a "$bin/urdma-acm" show) || true
echo "== urdma-acm forget node-b on host a: the next request asks the network again"
(in_host a "$bin/urdma-acm" forget node-b) || true
acme a -f n -s node-a -d node-b

echo
echo "== host b: the provider's lines in the daemon log (log_level 1)"
grep 'urdma: ' "$work/b/ibacm.log"
