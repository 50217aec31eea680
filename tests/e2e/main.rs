//! End-to-end scenarios: the real `ibacm` daemon with the urdma provider on
//! simulated devices, driven by the real `ib_acme` and by librdmacm's
//! `rdma_getaddrinfo` (`urdma-rai`). Every test asserts what a user of those
//! tools would see: their printed output, their exit status and the daemon
//! log. Needs root and `cargo build --workspace` (see `urdma_harness`).
//!
//! These scenarios are about local and static data, so discovery is off
//! (`urdma_discovery no`): a destination that is neither local nor in the
//! hosts file has nobody to ask. `tests/discovery/` covers the rest.
//!
//! Here: what a client resolves and what the daemon counts and lists.
//! `devices`: devices and ports the daemon skips or the provider refuses,
//! and port events. `config_files`: the options and hosts files, their
//! mistakes and their changes.

mod config_files;
mod devices;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use urdma_harness::{Host, HostConfig, PathInfo};

/// Generous: the daemon answers in milliseconds, CI machines can be slow.
const WAIT: Duration = Duration::from_secs(10);

/// GID 0 of the simulator's default devices urdma0 and urdma1.
const GID0: &str = "fe80::5054:ff:fe12:3456";
const GID1: &str = "fe80::5054:ff:fe12:3457";
/// The remote host `node3` of the hosts file.
const REMOTE: &str = "fe80::5054:ff:fe12:9999";

/// A remote host known by name, IPv4, IPv6, its GID and its LID.
const HOSTS: &str = "\
# remote node3
node3     fe80::5054:ff:fe12:9999 lid=9
10.0.0.3  fe80::5054:ff:fe12:9999
fd00::3   fe80::5054:ff:fe12:9999
";

/// The default host configuration, answering from local and static data
/// only.
fn static_config() -> HostConfig {
    HostConfig::default().opt("urdma_discovery no")
}

/// The default host (urdma0 + urdma1; 10.0.0.1, fd00::1 and node1 on
/// urdma0 port 1) with `HOSTS` as its hosts file.
fn start() -> Host {
    Host::start(static_config().hosts_file(HOSTS))
}

/// The checks of this setup's paths, as methods of the harness's
/// `PathInfo` (a trait, since that type is another crate's).
trait AssertRoute {
    fn assert_route(&self, dgid: &str, sgid: &str, dlid: &str);
}

impl AssertRoute for PathInfo {
    /// The fields every path of this setup has: the provider's defaults
    /// (MTU 4096, 100 Gb/s from the 4x EDR port), the default partition,
    /// a reversible path.
    fn assert_route(&self, dgid: &str, sgid: &str, dlid: &str) {
        let want = [
            ("dgid", dgid),
            ("sgid", sgid),
            ("dlid", dlid),
            ("pkey", "0xffff"),
            ("mtu", "5"),
            ("rate", "16"),
            ("reversible", "1"),
            ("packet lifetime", "18"),
        ];
        for (field, value) in want {
            assert_eq!(self.get(field), value, "`{field}` of {:?}", self.0);
        }
    }
}

/// Runs `ib_acme ARGS`, which must fail with `error` (a strerror text).
fn resolve_fails(host: &Host, args: &[&str], error: &str) -> String {
    let (code, out) = host.acme(args);
    assert_ne!(code, 0, "ib_acme {args:?} should fail:\n{out}");
    assert!(
        out.contains(&format!("failed: {error}")),
        "ib_acme {args:?} should fail with `{error}`:\n{out}"
    );
    assert!(out.contains("return status 0xffffffff"), "{out}");
    assert!(!out.contains("Path information"), "{out}");
    out
}

/// The counters of `ib_acme -P [N|s ...]`: a CSV header line starting with
/// `svc,` and one row of values, `svc` first.
fn counters(host: &Host, args: &[&str]) -> BTreeMap<String, u64> {
    let (code, out) = host.acme(args);
    assert_eq!(code, 0, "ib_acme {args:?}:\n{out}");
    let mut lines = out.lines().skip_while(|l| !l.starts_with("svc,"));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no counter header in:\n{out}"));
    let row = lines
        .next()
        .unwrap_or_else(|| panic!("no counter row in:\n{out}"));
    let names: Vec<&str> = header.split(',').skip(1).collect();
    let values: Vec<u64> = row
        .split(',')
        .skip(1)
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("bad counter `{v}`:\n{out}"))
        })
        .collect();
    assert_eq!(names.len(), 7, "seven counters expected:\n{out}");
    assert_eq!(names.len(), values.len(), "{out}");
    names.into_iter().map(String::from).zip(values).collect()
}

/// The global counters as `ib_acme -P col` prints them: `Name : value`.
fn global_counters(host: &Host) -> BTreeMap<String, u64> {
    let (code, out) = host.acme(&["-P", "col"]);
    assert_eq!(code, 0, "{out}");
    let found: BTreeMap<String, u64> = out
        .lines()
        .filter_map(|l| l.split_once(" : "))
        .map(|(k, v)| (k.to_string(), v.trim().parse().expect("counter value")))
        .collect();
    assert_eq!(found.len(), 7, "seven counters expected:\n{out}");
    found
}

/// Checks the named counters, leaving the others free.
fn assert_counters(got: &BTreeMap<String, u64>, want: &[(&str, u64)], what: &str) {
    for (name, value) in want {
        assert_eq!(got.get(*name), Some(value), "{what}: `{name}` in {got:?}");
    }
}

/// Rows of `ib_acme -e` after the `svc,guid,...` header, split on commas.
fn endpoints(host: &Host) -> Vec<Vec<String>> {
    let (code, out) = host.acme(&["-e"]);
    assert_eq!(code, 0, "{out}");
    let svc = host.socket().display().to_string();
    let rows: Vec<Vec<String>> = out
        .lines()
        .filter(|l| l.starts_with(&format!("{svc},")))
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    // The header comes with the first endpoint.
    assert_eq!(
        out.contains("svc,guid,port,pkey,ep_index,prov,addr_0,addresses\n"),
        !rows.is_empty(),
        "{out}"
    );
    rows
}

/// The first daemon-log line containing `needle`, or a panic with the log.
fn log_line(host: &Host, needle: &str) -> String {
    host.log()
        .lines()
        .find(|l| l.contains(needle))
        .map(String::from)
        .unwrap_or_else(|| panic!("no log line contains `{needle}`\n{}", host.diagnostics()))
}

// 1 ------------------------------------------------------------------------

#[test]
fn provider_loads_with_version_handshake_and_serves() {
    let host = start();
    let so = host.path("prov/libibacm_urdma.so");
    // Logged only after provider_query passed the version/size check.
    host.expect_log(&format!("Provider urdma ({}) loaded", so.display()), WAIT);
    host.expect_log("acm_load_prov_config: default provider: urdma", WAIT);
    host.expect_log("assign default prov urdma to urdma0/1", WAIT);
    // The provider's own lines, through acm_write with its `urdma:` prefix.
    let opts = host.path("ibacm_opts.cfg");
    host.expect_log(&format!("urdma: options from {}", opts.display()), WAIT);
    host.expect_log(
        &format!("urdma: urdma_hosts_file {}", host.hosts_path().display()),
        WAIT,
    );
    host.expect_log(
        &format!("urdma: hosts file {}: ", host.hosts_path().display()),
        WAIT,
    );
    host.expect_log(
        &format!("urdma: device 0x505400fffe123456 port 1: gid {GID0}"),
        WAIT,
    );
    host.expect_log("urdma: endpoint pkey 0xffff: address 10.0.0.1", WAIT);
    host.expect_log("acm_listen: listen active", WAIT);
    let log = host.log();
    assert!(!log.contains("unmatched provider version"), "{log}");
    assert!(!log.contains("failed to open the prov port"), "{log}");

    assert!(host.daemon_alive(), "{}", host.diagnostics());
    let (path, _) = host.acme_path(&["-f", "n", "-s", "node1", "-d", "node3"]);
    path.assert_route(REMOTE, GID0, "9");
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}

// 2 ------------------------------------------------------------------------

#[test]
fn every_ib_acme_address_format_resolves_from_the_hosts_file() {
    let host = start();

    let (path, out) = host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID0, "9");
    assert!(
        out.contains("Destination: 10.0.0.3\nSource: 10.0.0.1\n"),
        "{out}"
    );

    let (path, _) = host.acme_path(&["-f", "n", "-s", "node1", "-d", "node3"]);
    path.assert_route(REMOTE, GID0, "9");

    let (path, _) = host.acme_path(&["-f", "l", "-d", "9"]);
    path.assert_route(REMOTE, GID0, "9");

    let (path, _) = host.acme_path(&["-f", "g", "-d", REMOTE]);
    path.assert_route(REMOTE, GID0, "9");

    // No -f and no -s: an IP destination, the daemon picks the source and
    // the provider hands that choice back, so ib_acme prints it.
    let (path, out) = host.acme_path(&["-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID0, "9");
    assert!(out.contains("Source: 10.0.0.1"), "{out}");
}

// 3 ------------------------------------------------------------------------

#[test]
fn ipv6_destination_resolves() {
    let host = start();
    let (path, out) = host.acme_path(&["-f", "i", "-s", "fd00::1", "-d", "fd00::3"]);
    path.assert_route(REMOTE, GID0, "9");
    assert!(out.contains("Destination: fd00::3"), "{out}");

    // The daemon selects fd00::1 as the source itself.
    let (path, out) = host.acme_path(&["-d", "fd00::3"]);
    path.assert_route(REMOTE, GID0, "9");
    assert!(out.contains("Source: fd00::1"), "{out}");

    resolve_fails(
        &host,
        &["-f", "i", "-s", "fd00::1", "-d", "fd00::99"],
        "No data available",
    );
}

// 4 ------------------------------------------------------------------------

#[test]
fn verify_is_answered_locally() {
    let host = start();
    for args in [
        &["-v", "-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"][..],
        &["-v", "-f", "g", "-d", REMOTE],
        &["-v", "-f", "n", "-s", "node1", "-d", "node1"],
    ] {
        let (_, out) = host.acme_path(args);
        assert!(out.contains("SA verification: success"), "{args:?}:\n{out}");
    }
}

// 5 ------------------------------------------------------------------------

#[test]
fn nodelay_answers_known_destinations_at_once_and_unknown_with_no_data() {
    let host = start();
    // A cold cache: NODELAY still gets the path, from the static data.
    let (path, _) = host.acme_path(&["-c", "-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID0, "9");
    let (path, _) = host.acme_path(&["-c", "-f", "n", "-s", "node1", "-d", "node3"]);
    path.assert_route(REMOTE, GID0, "9");

    resolve_fails(
        &host,
        &["-c", "-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.99"],
        "No data available",
    );
    resolve_fails(&host, &["-c", "-d", "10.0.0.99"], "No data available");
}

// 6 ------------------------------------------------------------------------

#[test]
fn endpoints_are_listed_with_the_urdma_provider() {
    let host = start();
    let rows = endpoints(&host);
    assert_eq!(rows.len(), 1, "only urdma0 port 1 has addresses: {rows:?}");
    let row = &rows[0];
    assert_eq!(row[1], "0x505400fffe123456", "guid: {row:?}");
    assert_eq!(row[2], "1", "port: {row:?}");
    assert_eq!(row[3], "0xffff", "pkey: {row:?}");
    assert_eq!(row[5], "urdma", "provider column: {row:?}");
    assert_eq!(
        row[6..],
        ["10.0.0.1", "fd00::1", "node1"],
        "addresses: {row:?}"
    );
}

// 7 ------------------------------------------------------------------------

#[test]
fn counters_follow_queries_and_cache_hits() {
    let host = start();
    const N: u64 = 4;
    for _ in 0..N {
        let (path, _) = host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
        path.assert_route(REMOTE, GID0, "9");
    }
    let after_hits = [
        ("Error Count", 0),
        ("Resolve Count", N),
        ("No Data", 0),
        ("Addr Query Count", 1),
        ("Addr Cache Count", 0),
        ("Route Query Count", 1),
        ("Route Cache Count", N - 1),
    ];
    // `-P 1`: endpoint 1 (the only one). (-P N>1 hits a core bug.)
    assert_counters(&counters(&host, &["-P", "1"]), &after_hits, "-P 1");
    assert_counters(
        &counters(&host, &["-P", "s", "-s", "10.0.0.1"]),
        &after_hits,
        "-P s -s 10.0.0.1",
    );
    // The daemon's totals: it counts resolves, the provider reports its
    // queries and cache hits through acm_increment_counter.
    assert_counters(&global_counters(&host), &after_hits, "-P col");

    resolve_fails(
        &host,
        &["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.99"],
        "No data available",
    );
    let after_miss = [
        ("Error Count", 0),
        ("Resolve Count", N + 1),
        ("No Data", 1),
        ("Addr Query Count", 2),
        ("Route Query Count", 1),
        ("Route Cache Count", N - 1),
    ];
    assert_counters(&counters(&host, &["-P", "1"]), &after_miss, "-P 1");
    assert_counters(&global_counters(&host), &after_miss, "-P col");
}

// 8 ------------------------------------------------------------------------

#[test]
fn own_addresses_resolve_to_the_ports_gid() {
    let host = start();
    for args in [
        &["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.1"][..],
        &["-f", "n", "-s", "node1", "-d", "node1"],
        &["-f", "i", "-s", "fd00::1", "-d", "fd00::1"],
        &["-d", "10.0.0.1"],
        &["-f", "g", "-d", GID0],
    ] {
        let (path, out) = host.acme_path(args);
        assert_eq!(path.get("sgid"), path.get("dgid"), "{args:?}:\n{out}");
        path.assert_route(GID0, GID0, "0");
    }
}

// 9 ------------------------------------------------------------------------

#[test]
fn unknown_destination_fails_fast() {
    let host = start();
    for args in [
        &["-d", "10.0.0.99"][..],
        &["-f", "n", "-s", "node1", "-d", "nobody"],
        &["-f", "g", "-d", "fe80::77"],
    ] {
        let started = Instant::now();
        resolve_fails(&host, args, "No data available");
        let took = started.elapsed();
        // Includes starting nsenter/unshare/ib_acme; the provider answers
        // at once instead of waiting on a lookup that cannot succeed.
        assert!(
            took < Duration::from_secs(1),
            "ib_acme {args:?} took {took:?}"
        );
    }
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}

// 10 -----------------------------------------------------------------------

#[test]
fn two_devices_answer_with_their_own_gids() {
    let host = Host::start(
        static_config()
            .hosts_file(HOSTS)
            .ip_addrs(&["10.0.0.1/24", "10.0.0.2/24"])
            .addr_lines(&[
                "10.0.0.1 urdma0 1 default",
                "node1 urdma0 1 default",
                "10.0.0.2 urdma1 1 default",
                "node2 urdma1 1 default",
            ]),
    );
    let (path, _) = host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID0, "9");
    let (path, _) = host.acme_path(&["-f", "i", "-s", "10.0.0.2", "-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID1, "9");
    let (path, _) = host.acme_path(&["-f", "n", "-s", "node2", "-d", "node3"]);
    path.assert_route(REMOTE, GID1, "9");

    // One device's address from the other: dgid is the other device's GID.
    let (path, _) = host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.2"]);
    path.assert_route(GID1, GID0, "0");
    let (path, _) = host.acme_path(&["-f", "n", "-s", "node2", "-d", "node1"]);
    path.assert_route(GID0, GID1, "0");
    let (path, _) = host.acme_path(&["-f", "i", "-s", "10.0.0.2", "-d", "10.0.0.2"]);
    path.assert_route(GID1, GID1, "0");

    let mut rows = endpoints(&host);
    rows.sort_by(|a, b| a[1].cmp(&b[1]));
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0][1], "0x505400fffe123456");
    assert_eq!(rows[0][5..], ["urdma", "10.0.0.1", "node1"], "{rows:?}");
    assert_eq!(rows[1][1], "0x505400fffe123457");
    assert_eq!(rows[1][5..], ["urdma", "10.0.0.2", "node2"], "{rows:?}");
}

// 14 -----------------------------------------------------------------------

#[test]
fn librdmacm_gets_the_route_from_the_provider() {
    let host = start();
    let route = format!(
        "route flags=0x2b sgid={GID0} dgid={REMOTE} pkey=0xffff mtu=5 rate=16 slid=0 dlid=9 reversible=1"
    );

    // NODELAY (numeric host) on a cold cache; the source the daemon chose
    // comes back to librdmacm.
    let (code, out) = host.rai(&["--numeric", "10.0.0.3"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&route), "--numeric:\n{out}");
    assert!(
        out.contains("src=10.0.0.1 dst=10.0.0.3 route_len=72"),
        "{out}"
    );

    let (code, out) = host.rai(&["-s", "10.0.0.1", "10.0.0.3"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&route), "-s 10.0.0.1:\n{out}");

    let (code, out) = host.rai(&["--route-only", "-s", "10.0.0.1", "10.0.0.3"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&route), "--route-only:\n{out}");

    let (code, out) = host.rai(&["-s", "fd00::1", "fd00::3"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&route), "IPv6:\n{out}");

    // Unknown: librdmacm falls back silently to no route.
    let (code, out) = host.rai(&["10.0.0.99"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no route"), "{out}");
    assert!(!out.contains("route flags="), "{out}");
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}
