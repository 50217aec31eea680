//! End-to-end scenarios: the real `ibacm` daemon with the urdma provider on
//! simulated devices, driven by the real `ib_acme` and by librdmacm's
//! `rdma_getaddrinfo` (`urdma-rai`). Every test asserts what a user of those
//! tools would see: their printed output, their exit status and the daemon
//! log. Needs root and `cargo build --workspace` (see `urdma_harness`).
//!
//! These scenarios are about local and static data, so discovery is off
//! (`urdma_discovery no`): a destination that is neither local nor in the
//! hosts file has nobody to ask. `tests/discovery.rs` covers the rest.

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

/// The 1-based number of the first line of `file` that equals `line`.
fn line_number(file: &std::path::Path, line: &str) -> usize {
    let text = std::fs::read_to_string(file).expect("read file");
    text.lines()
        .position(|l| l == line)
        .unwrap_or_else(|| panic!("`{line}` not in {}", file.display()))
        + 1
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

// 11 -----------------------------------------------------------------------

#[test]
fn ethernet_device_is_skipped_and_the_ib_device_still_works() {
    let host =
        Host::start(static_config().hosts_file(HOSTS).sim_config(
            "device urdma0\n  port 1\ndevice ueth0\n  port 1\n    link_layer ethernet\n",
        ));
    host.expect_log("acm_open_dev: ueth0 does not support InfiniBand", WAIT);
    host.expect_log("acm_open_dev: urdma0 opened", WAIT);
    let log = host.log();
    assert!(!log.contains("acm_open_port: ueth0"), "{log}");
    // ueth0 (second device: GUID ...57) never reached the provider.
    assert!(!log.contains("urdma: device 0x505400fffe123457"), "{log}");

    let (path, _) = host.acme_path(&["-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID0, "9");
    let rows = endpoints(&host);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][1], "0x505400fffe123456", "{rows:?}");
}

#[test]
fn ethernet_port_of_an_ib_device_is_refused_by_the_provider() {
    let host = Host::start(
        static_config()
            .hosts_file(HOSTS)
            .sim_config("device urdma0\n  port 1\n  port 2\n    link_layer ethernet\n")
            .addr_lines(&[
                "10.0.0.1 urdma0 1 default",
                "node1 urdma0 1 default",
                "node1b urdma0 2 default",
            ]),
    );
    // The daemon uses the device (port 1 is IB) and offers it port 2 too.
    host.expect_log("acm_open_dev: urdma0 opened", WAIT);
    host.expect_log("acm_open_port: urdma0 2", WAIT);
    let refusal = log_line(&host, "urdma: port 2: ");
    assert!(refusal.contains("not InfiniBand"), "{refusal}");
    assert!(refusal.contains("Ethernet"), "{refusal}");
    assert!(host.daemon_alive(), "{}", host.diagnostics());

    let (path, _) = host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID0, "9");
    // Port 2 has no endpoint, so its name is no usable source.
    resolve_fails(
        &host,
        &["-f", "n", "-s", "node1b", "-d", "node3"],
        "Cannot assign requested address",
    );
    let rows = endpoints(&host);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0][2], "1", "{rows:?}");
}

// 12 -----------------------------------------------------------------------

#[test]
fn port_error_stops_and_port_active_restores_resolution() {
    let host = start();
    let from_port = ["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"];
    host.acme_path(&from_port).0.assert_route(REMOTE, GID0, "9");
    let added = "urdma: endpoint pkey 0xffff: address node1";
    assert_eq!(host.log_count(added), 1);

    host.inject("event urdma0 1 port_err");
    host.expect_log("urdma: port 1 closed", WAIT);
    host.expect_log("acm_port_down: urdma0 1 is down", WAIT);
    resolve_fails(&host, &from_port, "Cannot assign requested address");
    resolve_fails(
        &host,
        &["-f", "n", "-s", "node1", "-d", "node3"],
        "Cannot assign requested address",
    );
    assert!(
        endpoints(&host).is_empty(),
        "no endpoint while the port is down"
    );

    host.inject("event urdma0 1 port_active");
    // The last address of the addr file is added last.
    if !host.wait_log_count(added, 2, WAIT) {
        panic!("port 1 did not come back\n{}", host.diagnostics());
    }
    host.acme_path(&from_port).0.assert_route(REMOTE, GID0, "9");
    host.acme_path(&["-f", "n", "-s", "node1", "-d", "node1"])
        .0
        .assert_route(GID0, GID0, "0");
}

#[test]
fn gid_change_is_reflected_and_the_old_gid_is_not_served_from_cache() {
    let host = start();
    const NEW: &str = "fe80::1234";
    // Fill the cache: a remote, the host itself by name and by GID.
    host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"])
        .0
        .assert_route(REMOTE, GID0, "9");
    host.acme_path(&["-f", "n", "-s", "node1", "-d", "node1"])
        .0
        .assert_route(GID0, GID0, "0");
    host.acme_path(&["-f", "g", "-d", GID0])
        .0
        .assert_route(GID0, GID0, "0");

    host.inject(&format!("set urdma0 1 gid {NEW}"));
    host.inject("event urdma0 1 gid_change");
    host.expect_log(
        &format!("urdma: device 0x505400fffe123456 port 1: gid {NEW}"),
        WAIT,
    );
    if !host.wait_log_count("urdma: endpoint pkey 0xffff: address node1", 2, WAIT) {
        panic!("port 1 did not come back\n{}", host.diagnostics());
    }

    host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"])
        .0
        .assert_route(REMOTE, NEW, "9");
    host.acme_path(&["-f", "n", "-s", "node1", "-d", "node1"])
        .0
        .assert_route(NEW, NEW, "0");
    host.acme_path(&["-d", "10.0.0.1"])
        .0
        .assert_route(NEW, NEW, "0");
    host.acme_path(&["-f", "g", "-d", NEW])
        .0
        .assert_route(NEW, NEW, "0");
    // Nothing owns the old GID any more.
    resolve_fails(&host, &["-f", "g", "-d", GID0], "No data available");
}

// 13 -----------------------------------------------------------------------

#[test]
fn malformed_hosts_line_is_reported_and_skipped() {
    let host = Host::start(static_config().hosts_file(
        "node3 fe80::5054:ff:fe12:9999 lid=9\n\
         10.0.0.4 fe80::5054:ff:fe12:zzzz\n\
         10.0.0.3 fe80::5054:ff:fe12:9999\n",
    ));
    let located = format!("urdma: {}:2: ", host.hosts_path().display());
    let line = log_line(&host, &located);
    assert!(line.ends_with("line skipped"), "{line}");
    assert!(line.contains("fe80::5054:ff:fe12:zzzz"), "{line}");
    let log = host.log();
    for good in [1, 3] {
        let other = format!("{}:{good}:", host.hosts_path().display());
        assert!(!log.contains(&other), "line {good} is fine:\n{log}");
    }

    host.acme_path(&["-f", "n", "-s", "node1", "-d", "node3"])
        .0
        .assert_route(REMOTE, GID0, "9");
    host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"])
        .0
        .assert_route(REMOTE, GID0, "9");
    resolve_fails(
        &host,
        &["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.4"],
        "No data available",
    );
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

// 15 -----------------------------------------------------------------------

#[test]
fn with_log_file_stderr_every_line_reaches_stderr_with_its_severity() {
    // What docs/systemd.md recommends under systemd, where stderr is the
    // journal: the daemon then truncates no file at its next start.
    let host = Host::start(
        static_config()
            .hosts_file(HOSTS)
            .opt("urdma_mtu 999")
            .opt("log_file stderr"),
    );
    let deadline = std::time::Instant::now() + WAIT;
    while !host.daemon_output().contains("urdma: info: hosts file ")
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = host.daemon_output();
    for line in ["urdma: info: options from ", "urdma: info: hosts file "] {
        assert!(out.contains(line), "no `{line}` on stderr:\n{out}");
    }
    assert!(
        out.lines()
            .any(|l| l.contains("urdma: error: ") && l.contains("'999'")),
        "the bad value is not an error on stderr:\n{out}"
    );
    assert!(host.raw_log().is_empty(), "{}", host.raw_log());
}

#[test]
fn bad_option_lines_are_located_and_defaults_kept() {
    let host = Host::start(
        static_config()
            .hosts_file(HOSTS)
            .opt("urdma_mtu 999")
            .opt("urdma_sl 3")
            .opt("urdma_colour blue"),
    );
    let opts = host.path("ibacm_opts.cfg");
    let mtu_line = line_number(&opts, "urdma_mtu 999");
    let colour_line = line_number(&opts, "urdma_colour blue");

    let bad_mtu = log_line(&host, &format!("urdma: {}:{mtu_line}: ", opts.display()));
    assert!(bad_mtu.contains("'999'"), "{bad_mtu}");
    assert!(bad_mtu.contains("keeping urdma_mtu 4096"), "{bad_mtu}");
    let unknown = log_line(&host, &format!("urdma: {}:{colour_line}: ", opts.display()));
    assert!(unknown.contains("urdma_colour"), "{unknown}");
    host.expect_log("urdma: urdma_mtu 4096", WAIT);
    host.expect_log("urdma: urdma_sl 3", WAIT);
    // Each line says how much it matters, whatever level the daemon
    // writes it at: a mistake is an error, the summary is detail.
    let at = |message: &str| host.log_severity(message).unwrap_or_default();
    assert_eq!(at(&format!("{}:{mtu_line}: ", opts.display())), "error");
    assert_eq!(at("options from "), "info");
    assert_eq!(at("urdma_sl 3"), "debug");
    assert!(host.daemon_alive(), "{}", host.diagnostics());

    // Served with the default MTU (4096 = 5) and the good line's SL.
    let (path, _) = host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID0, "9");
    assert_eq!(path.get("sl"), "3");
}

#[test]
fn options_are_read_as_bytes_and_a_line_about_discovery_that_cannot_be_read_keeps_it_off() {
    use std::os::unix::fs::PermissionsExt;
    let host = Host::start(HostConfig::default().opt("urdma_discovery no"));
    let key = host.path("urdma.key");
    std::fs::write(&key, "1 000102030405060708090a0b0c0d0e0f\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let key = key.display().to_string();
    let bytes = |parts: &[&[u8]]| parts.concat();

    // A Latin-1 comment (0xe9 alone is not UTF-8) used to make the
    // provider ignore every urdma_ key of the file, silently: discovery
    // then ran unauthenticated on the default port.
    host.restart(&HostConfig::default().raw_opts(&bytes(&[
        b"# r\xe9seau de test, cl\xe9 partag\xe9e\n",
        b"urdma_discovery_port 7000\nurdma_auth_key_file ",
        key.as_bytes(),
        b"\n",
    ])));
    host.expect_log(
        "urdma: discovery: authenticated, signing with key 1 of 1",
        WAIT,
    );
    host.expect_log("urdma: discovery on UDP port 7000", WAIT);
    assert!(
        !host.log().contains("ibacm_opts.cfg:"),
        "nothing to report:\n{}",
        host.log()
    );

    // A key that is not text: nothing can tell what it was meant to be
    // (here, the key file), so discovery stays off rather than run
    // unauthenticated.
    host.restart(&HostConfig::default().raw_opts(&bytes(&[
        b"urdma_auth_key_fil\xe9 ",
        key.as_bytes(),
        b"\n",
    ])));
    let opts = host.path("ibacm_opts.cfg");
    let line = std::fs::read(&opts)
        .unwrap()
        .split(|&b| b == b'\n')
        .position(|l| l.starts_with(b"urdma_auth_key_fil\xe9"))
        .unwrap()
        + 1;
    let reported = log_line(&host, &format!("urdma: {}:{line}: ", opts.display()));
    assert!(
        reported.ends_with("discovery stays off until this line is fixed"),
        "{reported}"
    );
    host.expect_log("urdma: discovery disabled", WAIT);
    assert!(
        !host.log().contains("discovery on UDP port"),
        "{}",
        host.log()
    );
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}

// 16 -----------------------------------------------------------------------

#[test]
fn client_reregister_flushes_the_cache() {
    let host = start();
    let args = ["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"];
    host.acme_path(&args).0.assert_route(REMOTE, GID0, "9");
    host.acme_path(&args).0.assert_route(REMOTE, GID0, "9");
    let ep = ["-P", "s", "-s", "10.0.0.1"];
    assert_counters(
        &counters(&host, &ep),
        &[
            ("Resolve Count", 2),
            ("Addr Query Count", 1),
            ("Route Query Count", 1),
            ("Route Cache Count", 1),
        ],
        "before",
    );

    host.inject("event urdma0 1 client_reregister");
    host.expect_log(
        "urdma: port 1: client reregister, 1 cached destinations flushed",
        WAIT,
    );

    host.acme_path(&args).0.assert_route(REMOTE, GID0, "9");
    assert_counters(
        &counters(&host, &ep),
        &[
            ("Resolve Count", 3),
            ("Addr Query Count", 2),
            ("Route Query Count", 2),
            ("Route Cache Count", 1),
        ],
        "after",
    );
}

// 17 -----------------------------------------------------------------------

/// Polls `ib_acme ARGS` until it prints a path to `dgid` (or, with `None`,
/// fails with "No data available"); returns how long that took.
fn until_answer(host: &Host, args: &[&str], dgid: Option<&str>, since: Instant) -> Duration {
    loop {
        let (code, out) = host.acme(args);
        let path = PathInfo::parse(&out);
        let done = match dgid {
            Some(g) => code == 0 && path.0.get("dgid").map(String::as_str) == Some(g),
            None => code != 0 && out.contains("failed: No data available"),
        };
        if done {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < WAIT,
            "ib_acme {args:?} still answers the old file:\n{out}\n{}",
            host.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hosts_file_changes_are_in_force_within_two_seconds_without_a_restart() {
    const MOVED: &str = "fe80::5054:ff:fe12:aaaa";
    const NEW: &str = "fe80::5054:ff:fe12:4444";
    let host = start();
    let by_name = ["-f", "n", "-s", "node1", "-d", "node3"];
    let by_ip = ["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"];
    let new_name = ["-f", "n", "-s", "node1", "-d", "node4"];
    host.acme_path(&by_name).0.assert_route(REMOTE, GID0, "9");
    host.acme_path(&by_ip).0.assert_route(REMOTE, GID0, "9");
    resolve_fails(&host, &new_name, "No data available");

    // Edited in place: node3 moves, 10.0.0.3 goes, node4 comes, and a
    // typo is reported at its line while the rest takes effect.
    let edited =
        "node3 fe80::5054:ff:fe12:aaaa lid=9\nnode4 fe80::5054:ff:fe12:4444\nnode5 fe80::zz\n";
    let written = Instant::now();
    std::fs::write(host.hosts_path(), edited).unwrap();
    let mut took = vec![until_answer(&host, &new_name, Some(NEW), written)];
    took.push(until_answer(&host, &by_name, Some(MOVED), written));
    took.push(until_answer(&host, &by_ip, None, written));
    host.expect_log(
        &format!(
            "urdma: {}:3: 'fe80::zz' is not a GID",
            host.hosts_path().display()
        ),
        WAIT,
    );
    // node3, 10.0.0.3, fd00::3, node4, three GIDs and LID 9.
    host.expect_log("reloaded, 2 addresses, 8 destinations changed", WAIT);

    // Replaced by rename, the way configuration tools write files.
    let tmp = host.path("hosts.new");
    std::fs::write(&tmp, HOSTS).unwrap();
    let written = Instant::now();
    std::fs::rename(&tmp, host.hosts_path()).unwrap();
    took.push(until_answer(&host, &by_ip, Some(REMOTE), written));
    took.push(until_answer(&host, &new_name, None, written));
    host.acme_path(&by_name).0.assert_route(REMOTE, GID0, "9");

    // Removed: nothing from it resolves any more.
    let written = Instant::now();
    std::fs::remove_file(host.hosts_path()).unwrap();
    took.push(until_answer(&host, &by_name, None, written));
    for (i, t) in took.iter().enumerate() {
        assert!(
            *t < Duration::from_secs(2),
            "change {i} took {t:?} to be in force: {took:?}"
        );
    }
    // The daemon's own addresses never depended on the file.
    host.acme_path(&["-f", "n", "-s", "node1", "-d", "node1"]);
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}
