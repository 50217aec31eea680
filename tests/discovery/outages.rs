//! Hosts and ports that stop: a stopped host times out (or fails at once
//! by ICMP) while other destinations are served, and a port going down
//! answers its pending requests and is withdrawn from its peers.

use std::time::{Duration, Instant};
use urdma_harness::nodes::{
    add_silent_neighbour, resolve_fails, resolve_node, resolves_by_address_and_name, timed, Node,
    WAIT,
};
use urdma_harness::{Host, Net};

// 3 ------------------------------------------------------------------------

#[test]
fn a_stopped_host_times_out_while_other_destinations_are_served() {
    const TIMEOUT_MS: u64 = 500;
    const RETRIES: u64 = 1;
    let opts = [
        format!("urdma_timeout {TIMEOUT_MS}"),
        format!("urdma_retries {RETRIES}"),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let net = Net::new();
    let a = Node::A.start(&net, &opts);
    let b = Node::B.start(&net, &opts);
    // C also holds an address outside its urdma endpoint, which A cannot
    // have learned from it.
    let mut c_cfg = Node::C.config(&opts);
    c_cfg.ip_addrs.push("10.0.0.13/24".into());
    let c = Host::start_on(&net, "eth0", c_cfg);

    // Cached before C stops.
    resolve_node(&a, Node::A, Node::C, &["-f", "i", "-d", "10.0.0.3"]);

    // C's daemon dies and its link goes down: nothing answers, not even
    // ICMP, and the lookup fails once every try has timed out.
    c.kill_daemon();
    c.set_link("eth0", false);
    let total = Duration::from_millis(TIMEOUT_MS * (RETRIES + 1));
    std::thread::scope(|s| {
        let slow = s.spawn(|| {
            timed(|| resolve_fails(&a, &["-f", "i", "-d", "10.0.0.13"], "Connection timed out"))
        });
        a.expect_log("urdma: lookup 10.0.0.13: started", WAIT);
        // Meanwhile A serves a destination it has to ask for and one it has
        // cached (C's: the cache outlives the host).
        let (_, other) = timed(|| {
            resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", "10.0.0.2"]);
            resolve_node(&a, Node::A, Node::C, &["-f", "i", "-d", "10.0.0.3"]);
        });
        assert!(
            !slow.is_finished(),
            "the other requests ({other:?}) should have been answered while 10.0.0.13 was \
             still being asked for\n{}",
            a.diagnostics()
        );
        let (out, took) = slow.join().unwrap();
        assert!(
            took >= total - Duration::from_millis(50),
            "failed after {took:?}, before {RETRIES} retries of {TIMEOUT_MS} ms:\n{out}"
        );
        assert!(
            took < Duration::from_secs(2),
            "failed only after {took:?}, expected about {total:?}:\n{out}"
        );
    });
    a.expect_log(
        "urdma: lookup 10.0.0.13: try 1 timed out, asking again",
        WAIT,
    );

    // Not finding out is not remembered (C may be back any moment): asked
    // again, A asks C again, and times out again.
    let (_, took) =
        timed(|| resolve_fails(&a, &["-f", "i", "-d", "10.0.0.13"], "Connection timed out"));
    assert!(took >= total - Duration::from_millis(50), "took {took:?}");
    assert_eq!(a.log_count("urdma: lookup 10.0.0.13: started"), 2);
    resolve_node(&a, Node::A, Node::C, &["-f", "i", "-d", "10.0.0.3"]);
    assert!(a.daemon_alive() && b.daemon_alive(), "{}", a.diagnostics());
}

#[test]
fn a_host_whose_daemon_stopped_fails_lookups_at_once_by_icmp() {
    // Defaults: without an answer a lookup would take 3 x 500 ms.
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let mut c_cfg = Node::C.config(&[]);
    c_cfg
        .ip_addrs
        .extend(["10.0.0.13/24".into(), "fd00::13/64".into()]);
    let c = Host::start_on(&net, "eth0", c_cfg);
    resolve_node(&a, Node::A, Node::C, &["-f", "i", "-d", "10.0.0.3"]);

    // C's daemon dies, its link stays up: C's kernel answers A's queries
    // with ICMP port unreachable, and A fails at once, within one try, as
    // not finding out (nothing there to say no; maybe a daemon starting).
    c.kill_daemon();
    for (args, dest) in [
        (vec!["-f", "i", "-d", "10.0.0.13"], "10.0.0.13:6126"),
        (
            vec!["-f", "i", "-s", "fd00::1", "-d", "fd00::13"],
            "[fd00::13]:6126",
        ),
    ] {
        let (out, took) = timed(|| resolve_fails(&a, &args, "Connection timed out"));
        assert!(
            took < Duration::from_millis(500),
            "the ICMP error should fail {args:?} at once, it took {took:?}:\n{out}\n{}",
            a.diagnostics()
        );
        a.expect_log(&format!("{dest} unreachable"), WAIT);
    }
    // What A learned before C stopped still answers.
    resolve_node(&a, Node::A, Node::C, &["-f", "i", "-d", "10.0.0.3"]);
}

// 9 ------------------------------------------------------------------------

#[test]
fn a_port_going_down_answers_its_pending_requests() {
    let net = Net::new();
    let a = Node::A.start(&net, &["urdma_timeout 5000", "urdma_retries 0"]);
    let _b = Node::B.start(&net, &[]);
    // 10.0.0.99 "exists" (a static neighbour entry, so no ARP failure and no
    // ICMP) but nobody answers: the lookup would wait the full 5 s.
    add_silent_neighbour(&a, "10.0.0.99");

    std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            timed(|| {
                resolve_fails(
                    &a,
                    &["-f", "i", "-d", "10.0.0.99"],
                    "Transport endpoint is not connected",
                )
            })
        });
        a.expect_log("urdma: lookup 10.0.0.99: started", WAIT);
        let (_, injected) = timed(|| a.inject("event urdma0 1 port_err"));
        let (out, took) = waiting.join().unwrap();
        assert!(
            took < Duration::from_millis(2500) + injected,
            "the request was answered only after {took:?}:\n{out}"
        );
    });
    a.expect_log("acm_port_down: urdma0 1 is down", WAIT);

    a.inject("event urdma0 1 port_active");
    if !a.wait_log_count("urdma: endpoint pkey 0xffff: address node-a", 2, WAIT) {
        panic!("port 1 did not come back\n{}", a.diagnostics());
    }
    resolves_by_address_and_name(&a, Node::A, Node::B);
}

#[test]
fn a_port_going_down_is_withdrawn_from_its_peers() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let b = Node::B.start(&net, &[]);
    // B asks A for each of its addresses.
    for args in [
        vec!["-f", "i", "-d", "10.0.0.1"],
        vec!["-f", "i", "-s", "fd00::2", "-d", "fd00::1"],
        vec!["-f", "n", "-s", "node-b", "-d", "node-a"],
    ] {
        resolve_node(&b, Node::B, Node::A, &args);
    }
    for args in [
        vec!["-c", "-f", "i", "-d", "10.0.0.1"],
        vec!["-c", "-f", "i", "-s", "fd00::2", "-d", "fd00::1"],
        vec!["-c", "-f", "n", "-s", "node-b", "-d", "node-a"],
    ] {
        resolve_node(&b, Node::B, Node::A, &args);
    }

    // A's port goes down: A withdraws its endpoint's addresses; B checks
    // with A, which no longer holds them, and stops handing out paths to a
    // port that is gone.
    a.inject("event urdma0 1 port_err");
    a.expect_log("acm_port_down: urdma0 1 is down", WAIT);
    for args in [
        vec!["-c", "-f", "i", "-d", "10.0.0.1"],
        vec!["-c", "-f", "i", "-s", "fd00::2", "-d", "fd00::1"],
        vec!["-c", "-f", "n", "-s", "node-b", "-d", "node-a"],
    ] {
        let started = Instant::now();
        loop {
            let (code, out) = b.acme(&args);
            if code != 0 {
                assert!(
                    out.contains("failed: No data available"),
                    "{args:?}:\n{out}"
                );
                break;
            }
            assert!(
                started.elapsed() < WAIT,
                "B still resolves {args:?} {WAIT:?} after A's port went down:\n{out}\n{}",
                b.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
