//! The simulated devices and their ports: what the daemon skips, what the
//! provider refuses, and the port events (error, active, GID change,
//! client reregister) that change what a client is answered.

use crate::{
    assert_counters, counters, endpoints, log_line, resolve_fails, start, static_config,
    AssertRoute, GID0, HOSTS, REMOTE, WAIT,
};
use urdma_harness::Host;

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
