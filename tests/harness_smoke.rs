//! Proves the end-to-end harness itself: the real daemon starts on the
//! simulated devices, sees injected events, and the clients reach it. It
//! asserts nothing about the provider beyond "the daemon comes up", so it
//! holds whether or not the provider loads.

use std::time::Duration;
use urdma_harness::{Host, HostConfig, Net};

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn daemon_opens_both_simulated_devices() {
    let host = Host::start(HostConfig::default());
    host.expect_log("acm_open_dev: urdma0 opened", WAIT);
    host.expect_log("acm_open_dev: urdma1 opened", WAIT);
    host.expect_log("guid 0: 0xfe80000000000000 505400fffe123456", WAIT);
    assert!(host.daemon_alive(), "{}", host.diagnostics());

    let (code, out) = host.acme(&["-P", "col"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Resolve Count"), "{out}");
}

#[test]
fn injected_events_reach_the_daemon() {
    let host = Host::start(HostConfig::default());
    host.expect_log("acm_open_dev: urdma1 opened", WAIT);

    host.inject("event urdma0 1 port_err");
    host.expect_log("processing async event port error for urdma0", WAIT);
    host.expect_log("acm_port_down: urdma0 1 is down", WAIT);

    host.inject("set urdma0 1 gid fe80::1234");
    host.inject("event urdma0 1 port_active");
    host.expect_log("processing async event port active for urdma0", WAIT);
    host.expect_log("guid 0: 0xfe80000000000000 1234", WAIT);

    let err = host.try_inject("event urdma0 9 port_err").unwrap_err();
    assert!(err.contains("no port 9"), "{err}");
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}

#[test]
fn ethernet_device_is_skipped_and_config_errors_reported() {
    let cfg = HostConfig::default().sim_config(
        "device urdma0\n  port 1\ndevice ueth0\n  port 1\n    link_layer ethernet\n    speed 3\n",
    );
    let host = Host::start(cfg);
    host.expect_log("ueth0 does not support InfiniBand", WAIT);
    host.expect_log("acm_open_dev: urdma0 opened", WAIT);
    assert!(
        host.daemon_output().contains("sim.cfg:6: bad speed `3`"),
        "{}",
        host.diagnostics()
    );
}

#[test]
fn librdmacm_client_reaches_the_daemon() {
    let host = Host::start(HostConfig::default());
    host.expect_log("acm_open_dev: urdma0 opened", WAIT);
    let (code, out) = host.rai(&["--numeric", "10.0.0.2"]);
    // Route or not depends on the provider; the call itself must work and
    // must have asked the daemon.
    assert_eq!(code, 0, "{out}\n{}", host.diagnostics());
    assert!(out.contains("addrinfo family=inet"), "{out}");
    host.expect_log("acm_svr_resolve_dest", WAIT);
}

#[test]
fn two_hosts_on_one_net() {
    let net = Net::new();
    let a = Host::start(HostConfig::default().ip_addrs(&[]));
    let b = Host::start(
        HostConfig::default()
            .ip_addrs(&[])
            .addr_lines(&["10.1.0.2 urdma0 1 default"]),
    );
    net.attach(&a, "eth0", &["10.1.0.1/24"]);
    net.attach(&b, "eth0", &["10.1.0.2/24"]);
    // No ping on the CI image: a TCP connect that is refused (RST) rather
    // than timing out proves b answers on the bridge.
    let (_, out) = a.exec(&["timeout", "5", "bash", "-c", "echo > /dev/tcp/10.1.0.2/9"]);
    assert!(out.contains("Connection refused"), "{out}");
}

/// Packets `host`'s `eth0` received so far.
fn received(host: &Host) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &host.netns])
        .args(["cat", "/sys/class/net/eth0/statistics/rx_packets"])
        .output()
        .expect("ip netns exec");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("rx_packets")
}

/// The fleet bench's segment (`Net::answering_arp`) answers a host's ARP
/// requests itself, so a third host receives none of them; on a plain
/// segment it receives every one. Without that the fleet bench measures
/// 256 namespaces receiving every pair's first ARP request on two cores.
#[test]
fn a_segment_that_answers_arp_keeps_other_hosts_out_of_it() {
    for (net, answers) in [(Net::new(), false), (Net::answering_arp(), true)] {
        let (a, b, c) = (Host::bare(), Host::bare(), Host::bare());
        // b holds 50 addresses; a resolves the 49 it cannot have learned
        // from b's first datagram, which comes from the first.
        let b_addrs: Vec<String> = (100..150).map(|i| format!("10.1.0.{i}/24")).collect();
        let b_addrs: Vec<&str> = b_addrs.iter().map(String::as_str).collect();
        net.attach(&a, "eth0", &["10.1.0.1/24"]);
        net.attach(&b, "eth0", &b_addrs);
        net.attach(&c, "eth0", &["10.1.0.3/24"]);
        // b speaks first, so that the bridge knows its port.
        b.exec(&["bash", "-c", "echo > /dev/udp/10.1.0.1/9"]);
        std::thread::sleep(Duration::from_millis(300));
        let before = received(&c);
        let (code, out) = a.exec(&[
            "bash",
            "-c",
            "for i in $(seq 101 149); do echo > /dev/udp/10.1.0.$i/9; done",
        ]);
        assert_eq!(code, 0, "{out}");
        std::thread::sleep(Duration::from_millis(300));
        let (_, neighbours) = a.exec(&["ip", "neigh", "show", "dev", "eth0"]);
        let resolved = neighbours.matches("lladdr").count();
        assert!(
            resolved >= 49,
            "a resolved {resolved} of b's addresses:\n{neighbours}"
        );
        let heard = received(&c) - before;
        if answers {
            // A few of IPv6's own start-up packets may still reach c.
            assert!(
                heard < 20,
                "c received {heard} packets while a resolved 49 addresses"
            );
        } else {
            assert!(
                heard >= 49,
                "c received {heard} packets: ARP requests not flooded?"
            );
        }
    }
}
