//! End-to-end discovery between hosts: several simulated urdma hosts, each
//! the real `ibacm` with this provider in its own network and mount
//! namespace, joined by a bridge (`Net`), with no hosts-file entries for
//! each other: everything a host knows about another it learned over the
//! discovery protocol (docs/protocol.md). Driven by the real `ib_acme`,
//! librdmacm (`urdma-rai`) and `urdma-load`. Needs root and
//! `cargo build --workspace` (see `urdma_harness`).
//!
//! Host N (1, 2, 3 = A, B, C) has 10.0.0.N, fd00::N and the name `node-x`
//! (x = a, b, c) on its urdma0 port 1, whose GID is `fe80::` + EUI-64 of
//! the sim MAC 52:54:00:00:GG:0x (GG: the generation, bumped when the host
//! restarts with new hardware).

use std::net::UdpSocket;
use std::time::{Duration, Instant};
use urdma_harness::load::load_summary;
use urdma_harness::nodes::{
    add_silent_neighbour, poll_until_resolved, resolve, resolve_fails, resolve_node, timed, Node,
    DISCOVERY_PORT, WAIT,
};
use urdma_harness::{Host, KeyFile, Net};

/// The three hosts A, B, C on one bridge, all with `opts`.
fn trio(opts: &[&str]) -> (Net, Host, Host, Host) {
    let net = Net::new();
    let a = Node::A.start(&net, opts);
    let b = Node::B.start(&net, opts);
    let c = Node::C.start(&net, opts);
    (net, a, b, c)
}

// 1 ------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// `-f i -d IPv4`: the daemon picks the source.
    Ip4,
    /// `-f i -s own IPv6 -d peer IPv6`.
    Ip6,
    /// `-f n -s own name -d peer name` (asked by multicast).
    Name,
}

impl Kind {
    /// `node`'s address of this kind.
    fn addr(self, node: Node) -> String {
        match self {
            Kind::Ip4 => node.ip4(),
            Kind::Ip6 => node.ip6(),
            Kind::Name => node.name(),
        }
    }

    fn args(self, from: Node, to: Node) -> Vec<String> {
        let mut v: Vec<String> = match self {
            Kind::Ip4 => vec!["-f".into(), "i".into()],
            Kind::Ip6 => vec!["-f".into(), "i".into(), "-s".into(), from.ip6()],
            Kind::Name => vec!["-f".into(), "n".into(), "-s".into(), from.name()],
        };
        v.extend(["-d".into(), self.addr(to)]);
        v
    }
}

#[test]
fn hosts_resolve_each_other_by_ipv4_ipv6_and_name_in_every_direction() {
    let (_net, a, b, c) = trio(&[]);
    let host = |n: Node| match n.n {
        1 => &a,
        2 => &b,
        _ => &c,
    };
    // A host learns only what it asked, and only from the holder's own
    // answer: every kind of address goes over the network, in every
    // direction, starting with a different kind each time.
    let plan = [
        (Node::A, Node::B, Kind::Ip4),
        (Node::B, Node::A, Kind::Name),
        (Node::A, Node::C, Kind::Ip6),
        (Node::C, Node::A, Kind::Ip4),
        (Node::B, Node::C, Kind::Ip6),
        (Node::C, Node::B, Kind::Name),
    ];
    for (from, to, first) in plan {
        let asker = host(from);
        let mut kinds = [Kind::Ip4, Kind::Ip6, Kind::Name];
        let start = kinds.iter().position(|&k| k == first).unwrap();
        kinds.rotate_left(start);
        for kind in kinds {
            let args = kind.args(from, to);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = resolve_node(asker, from, to, &args);
            // For IPv4 the source printed is the one the daemon chose.
            let want = format!(
                "Destination: {}\nSource: {}\n",
                kind.addr(to),
                kind.addr(from)
            );
            assert!(out.contains(&want), "{args:?}:\n{out}");
        }
        for kind in kinds {
            let asked = format!("urdma: lookup {}: started", kind.addr(to));
            assert!(
                asker.log().contains(&asked),
                "{} should have asked the network for {}\n{}",
                from.name(),
                kind.addr(to),
                asker.diagnostics()
            );
        }

        // librdmacm's rdma_getaddrinfo gets the same route from the daemon.
        let route = format!(
            "route flags=0x2b sgid={} dgid={} pkey=0xffff mtu=5 rate=16",
            from.gid(),
            to.gid()
        );
        for kind in [Kind::Ip4, Kind::Ip6] {
            let (code, out) = asker.rai(&["-s", &kind.addr(from), &kind.addr(to)]);
            assert_eq!(code, 0, "{out}");
            assert!(
                out.contains(&route),
                "urdma-rai {} -> {}:\n{out}",
                kind.addr(from),
                kind.addr(to)
            );
        }
    }
    for h in [&a, &b, &c] {
        assert!(h.daemon_alive(), "{}", h.diagnostics());
    }
}

// 2 ------------------------------------------------------------------------

#[test]
fn a_query_teaches_its_receiver_nothing_it_did_not_ask() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let b = Node::B.start(&net, &[]);

    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", &Node::B.ip4()]);

    // A's query carried A's record, but anyone can send a query with any
    // record from any source address: B binds nothing from it. NODELAY
    // (from the cache or not at all) finds nothing (and starts a lookup
    // for an address)...
    for args in [
        vec!["-c", "-f", "g", "-d", &Node::A.gid()],
        vec!["-c", "-f", "i", "-d", "10.0.0.1"],
    ] {
        resolve_fails(&b, &args, "No data available");
    }
    // ...and B asks A itself, which answers.
    let (out, took) =
        timed(|| resolve_node(&b, Node::B, Node::A, &["-f", "i", "-d", &Node::A.ip4()]));
    assert!(out.contains("Source: 10.0.0.2"), "{out}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    b.expect_log("urdma: lookup 10.0.0.1: started", WAIT);
    resolve_node(
        &b,
        Node::B,
        Node::A,
        &["-c", "-f", "g", "-d", &Node::A.gid()],
    );
    // Only what was asked: A's name was not.
    resolve_fails(
        &b,
        &[
            "-c",
            "-f",
            "n",
            "-s",
            &Node::B.name(),
            "-d",
            &Node::A.name(),
        ],
        "No data available",
    );
}

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

// 4 ------------------------------------------------------------------------

#[test]
fn a_host_restarting_with_a_new_gid_is_followed_by_its_peers() {
    let (_net, a, b, c) = trio(&[]);
    let old = Node::C;
    let new = Node::C.next_generation();
    assert_ne!(old.gid(), new.gid());

    for args in [
        vec!["-f", "i", "-d", "10.0.0.3"],
        vec!["-f", "i", "-s", "fd00::1", "-d", "fd00::3"],
        vec!["-f", "n", "-s", "node-a", "-d", "node-c"],
    ] {
        resolve_node(&a, Node::A, old, &args);
    }
    resolve_node(&b, Node::B, old, &["-f", "i", "-d", "10.0.0.3"]);

    // C comes back with another device: a new MAC, so a new GID. A and B
    // are not restarted; C's announcement updates them.
    c.restart(&new.config(&[]));
    c.expect_log(
        &format!("urdma: device 0x505400fffe00010c port 1: gid {}", new.gid()),
        WAIT,
    );
    let took = poll_until_resolved(&a, &["-f", "i", "-d", "10.0.0.3"], &new.gid());
    eprintln!("A followed C to its new GID after {took:?}");
    // C announces itself 50 ms after its port is up, and A checks at once.
    // (Its worker slept through its first second: 530 ms here.)
    assert!(
        took < Duration::from_millis(400),
        "A followed C only after {took:?}: C's first announcement was late"
    );
    resolve_node(&a, Node::A, new, &["-f", "i", "-d", "10.0.0.3"]);
    // The announcement moved C's other names with it.
    resolve_node(
        &a,
        Node::A,
        new,
        &["-f", "i", "-s", "fd00::1", "-d", "fd00::3"],
    );
    resolve_node(
        &a,
        Node::A,
        new,
        &["-f", "n", "-s", "node-a", "-d", "node-c"],
    );
    poll_until_resolved(&b, &["-f", "i", "-d", "10.0.0.3"], &new.gid());
    let (code, out) = a.rai(&["-s", "10.0.0.1", "10.0.0.3"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("dgid={}", new.gid())), "{out}");
}

// 5 ------------------------------------------------------------------------

#[test]
fn five_hundred_concurrent_misses_are_each_answered_once() {
    const NAMES: usize = 500;
    const IPS: usize = 50;
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let mut b_cfg = Node::B.config(&[]);
    let extra_ips: Vec<String> = (0..IPS).map(|i| format!("10.0.0.{}", 101 + i)).collect();
    for ip in &extra_ips {
        b_cfg.ip_addrs.push(format!("{ip}/24"));
        b_cfg.addr_lines.push(format!("{ip} urdma0 1 default"));
    }
    // After the addresses: a reply's record lists its endpoint's first
    // addresses, so no answer about an address teaches A any of the names.
    for i in 1..=NAMES {
        let line = format!("node-b-{i} urdma0 1 default");
        b_cfg.addr_lines.push(line);
    }
    let b = Host::start_on(&net, "eth0", b_cfg);
    b.expect_log(
        &format!("urdma: endpoint pkey 0xffff: address node-b-{NAMES}"),
        WAIT,
    );

    // 500 distinct names, all misses, on 500 connections at once (a thread
    // each); at the same time 50 distinct IP addresses (unicast queries) on
    // 50 more, multiplexed by one thread.
    let n = NAMES.to_string();
    let ips = IPS.to_string();
    let dests = a.path("dests.txt");
    std::fs::write(&dests, extra_ips.join("\n")).unwrap();
    let ((names, addrs), took) = timed(|| {
        std::thread::scope(|s| {
            let names = s.spawn(|| {
                a.load(
                    &[
                        "-s", "node-a", "-f", "n", "--range", "node-b-", &n, "-c", &n, "-n", &n,
                        "--window", "1",
                    ],
                    Duration::from_secs(60),
                )
            });
            let addrs = a.load(
                &[
                    "-s",
                    "10.0.0.1",
                    "-f",
                    "i",
                    "--dest-file",
                    dests.to_str().unwrap(),
                    "-c",
                    &ips,
                    "-n",
                    &ips,
                    "--window",
                    "1",
                    "--verbose",
                    // One thread multiplexing its 50 connections: the
                    // benchmark's mode, held to the same exactly-once count.
                    "--poll",
                ],
                Duration::from_secs(60),
            );
            (names.join().unwrap(), addrs)
        })
    });
    for ((code, out), count) in [(&names, &n), (&addrs, &ips)] {
        eprintln!("{count} in {took:?}: {}", out.lines().last().unwrap_or(""));
        let sum = load_summary(out);
        assert_eq!(*code, 0, "urdma-load:\n{out}\n{}", a.diagnostics());
        for (k, v) in [
            ("requests", count.as_str()),
            ("replies", count),
            ("ok", count),
            ("missing", "0"),
            ("duplicates", "0"),
            ("unknown_tid", "0"),
            ("bad_replies", "0"),
            ("disconnects", "0"),
        ] {
            assert_eq!(sum[k], v, "`{k}` in {sum:?}\n{}", a.diagnostics());
        }
    }
    // Every address was answered with B's GID (one `--verbose` line each).
    let b_gid = format!("dgid={}", Node::B.gid());
    assert_eq!(
        addrs.1.lines().filter(|l| l.contains(&b_gid)).count(),
        IPS,
        "{}",
        addrs.1
    );
    assert!(a.daemon_alive() && b.daemon_alive(), "{}", a.diagnostics());
}

// 6 ------------------------------------------------------------------------

#[test]
fn nodelay_answers_no_data_at_once_and_starts_the_lookup() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    let _c = Node::C.start(&net, &[]);

    // One peer by address, the other by name (asking for B by address
    // teaches A B's name too).
    for (args, peer) in [
        (vec!["-c", "-f", "i", "-d", "10.0.0.2"], Node::B),
        (
            vec!["-c", "-f", "n", "-s", "node-a", "-d", "node-c"],
            Node::C,
        ),
    ] {
        let (_, took) = timed(|| resolve_fails(&a, &args, "No data available"));
        assert!(took < Duration::from_millis(500), "{args:?} took {took:?}");
        // The lookup it started answers a later NODELAY request.
        poll_until_resolved(&a, &args, &peer.gid());
        resolve_node(&a, Node::A, peer, &args);
    }
}

// 7 ------------------------------------------------------------------------

#[test]
fn derivations_give_gids_of_peers_without_the_provider() {
    const D_MAC: &str = "52:54:00:aa:bb:cc";
    const D_EUI64: &str = "fe80::5054:ff:feaa:bbcc";
    let net = Net::new();
    // D: an IP host on the segment that runs no daemon.
    let d = Host::bare();
    net.attach_with_mac(&d, "eth0", Some(D_MAC), &["10.0.0.4/24", "fd00::4/64"]);
    // One try each: D's port unreachable should end it at once anyway.
    let eui = Node::A.start(&net, &["urdma_derive eui64", "urdma_retries 0"]);
    let mapped = Node::B.start(&net, &["urdma_derive ipv4-mapped", "urdma_retries 0"]);
    let offline = Node::C.start(&net, &["urdma_discovery no", "urdma_derive eui64"]);

    // Nobody answers discovery at 10.0.0.4 (port unreachable), so each host
    // falls back to its derivation.
    resolve(
        &eui,
        &["-f", "i", "-d", "10.0.0.4"],
        D_EUI64,
        &Node::A.gid(),
    );
    resolve(
        &eui,
        &["-f", "i", "-s", "fd00::1", "-d", "fd00::4"],
        D_EUI64,
        &Node::A.gid(),
    );
    resolve(
        &mapped,
        &["-f", "i", "-d", "10.0.0.4"],
        "::ffff:10.0.0.4",
        &Node::B.gid(),
    );
    // ipv4-mapped has nothing to offer for an IPv6 address: the lookup
    // fails with discovery's status (that ICMP ends it at once is the
    // business of `a_host_whose_daemon_stopped_fails_lookups_at_once_by_icmp`).
    let (code, out) = mapped.acme(&["-f", "i", "-s", "fd00::2", "-d", "fd00::4"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("ib_acm_resolve_ip failed: "), "{out}");
    assert!(!out.contains("Path information"), "{out}");
    // Without discovery the derivation is all there is.
    resolve(
        &offline,
        &["-f", "i", "-d", "10.0.0.4"],
        D_EUI64,
        &Node::C.gid(),
    );

    // A peer that runs the provider still gets its real GID, not one
    // derived from its interface's MAC.
    resolve_node(&eui, Node::A, Node::B, &["-f", "i", "-d", "10.0.0.2"]);
    resolve_node(&mapped, Node::B, Node::A, &["-f", "i", "-d", "10.0.0.1"]);
    // librdmacm gets the derived route too.
    let (code, out) = eui.rai(&["-s", "10.0.0.1", "10.0.0.4"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("dgid={D_EUI64}")), "{out}");
}

// 8 ------------------------------------------------------------------------

/// A REPLY (type 2) REFUSED for IPv4 `target`, transaction id `txid`: a
/// well-formed message (docs/protocol.md) that answers no query.
fn refused_reply(txid: u64, target: [u8; 4]) -> Vec<u8> {
    let mut m = b"URDD".to_vec();
    m.extend_from_slice(&[1, 2, 0, 0]);
    m.extend_from_slice(&txid.to_be_bytes());
    m.push(2);
    m.extend_from_slice(&[2, 4]);
    m.extend_from_slice(&target);
    assert_eq!(m.len(), 23);
    m
}

#[test]
fn garbage_on_the_discovery_port_is_dropped_counted_and_never_answered() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    let d = Host::bare();
    net.attach(&d, "eth0", &["10.0.0.4/24"]);

    // Deterministic noise that is not a message (xorshift).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..200)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let datagrams: Vec<(&str, Vec<u8>)> = vec![
        ("malformed", noise),
        ("malformed", b"URDD\x01\x02\x00\x00\x00\x00".to_vec()),
        (
            "no query with that transaction id",
            refused_reply(0x0123_4567_89ab_cdef, [10, 0, 0, 2]),
        ),
    ];
    let a_addr = format!("{}:{DISCOVERY_PORT}", Node::A.ip4());
    let (port, answered) = d.in_netns(|| {
        let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
        for (_, bytes) in &datagrams {
            s.send_to(bytes, &a_addr).expect("send");
        }
        // The protocol never answers anything that is not a query.
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 2048];
        let answered = s.recv_from(&mut buf).ok();
        (s.local_addr().unwrap().port(), answered)
    });
    assert_eq!(answered, None, "A answered garbage");

    let from = format!("discovery: dropped a datagram from 10.0.0.4:{port}: ");
    if !a.wait_log_count(&from, datagrams.len(), WAIT) {
        panic!(
            "A did not log {} drops\n{}",
            datagrams.len(),
            a.diagnostics()
        );
    }
    let drops: Vec<String> = a
        .log()
        .lines()
        .filter(|l| l.contains(&from))
        .map(String::from)
        .collect();
    let mut last = 0;
    for ((why, _), line) in datagrams.iter().zip(&drops) {
        assert!(line.contains(why), "expected `{why}`: {line}");
        let total: usize = line
            .rsplit_once('(')
            .and_then(|(_, t)| t.strip_suffix(" dropped so far)"))
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no count in {line}"));
        assert!(total > last, "the count should grow: {drops:?}");
        last = total;
    }

    // A is unharmed: it still resolves a peer and its own name.
    assert!(a.daemon_alive(), "{}", a.diagnostics());
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", "10.0.0.2"]);
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", "node-a", "-d", "node-b"],
    );
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
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", "10.0.0.2"]);
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", "node-a", "-d", "node-b"],
    );
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

// 11 -----------------------------------------------------------------------

/// The cumulative counts of A's latest drop summary in the log.
fn drop_summary(host: &Host) -> Option<String> {
    host.log()
        .lines()
        .rev()
        .find_map(|l| l.split_once("datagrams dropped so far: "))
        .map(|(_, counts)| counts.to_string())
}

#[test]
fn with_a_shared_key_only_key_holders_take_part() {
    let shared = KeyFile::new("shared", "5 00112233445566778899aabbccddeeff\n", 0o600);
    let other = KeyFile::new("other", "5 ffeeddccbbaa99887766554433221100\n", 0o600);
    // Names asked of the segment only: its silence is what is checked.
    let quick = [
        "urdma_timeout 200",
        "urdma_retries 1",
        "urdma_name_lookup segment",
    ];
    let net = Net::new();
    let (shared_opt, other_opt) = (shared.opt(), other.opt());
    fn with<'a>(quick: [&'a str; 3], key: &'a str) -> [&'a str; 4] {
        [quick[0], quick[1], quick[2], key]
    }
    let a = Node::A.start(&net, &with(quick, &shared_opt));
    let b = Node::B.start(&net, &with(quick, &shared_opt));
    // C signs with another key under the same id; D has no key at all.
    let c = Node::C.start(&net, &with(quick, &other_opt));
    let d = Node::new(4).start(&net, &quick);
    a.expect_log("discovery: authenticated, signing with key 5 of 1", WAIT);

    // Key holders find each other by address and by name, both ways.
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", &Node::B.ip4()]);
    resolve_node(
        &b,
        Node::B,
        Node::A,
        &["-f", "n", "-s", "node-b", "-d", "node-a"],
    );
    // A host with the wrong key, or none, neither answers nor is answered.
    for (asker, target) in [(&a, "10.0.0.3"), (&a, "10.0.0.4"), (&c, "10.0.0.1")] {
        resolve_fails(asker, &["-f", "i", "-d", target], "Connection timed out");
    }
    resolve_fails(&d, &["-f", "i", "-d", "10.0.0.2"], "Connection timed out");
    resolve_fails(
        &a,
        &["-f", "n", "-s", "node-a", "-d", "node-c"],
        "Connection timed out",
    );

    // Every refusal is counted, and an operator sees why in the log at the
    // daemon's default level.
    for h in [&a, &c] {
        let summary = || drop_summary(h).unwrap_or_default();
        let deadline = Instant::now() + WAIT + Duration::from_secs(10);
        while !summary().contains("unauthenticated") || summary().contains("unauthenticated 0,") {
            assert!(
                Instant::now() < deadline,
                "no unauthenticated drops logged\n{}",
                h.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // D, without a key, drops what the others send (the AUTH flag is not
    // something it can check) and says so.
    assert!(
        d.wait_log("authenticated message, but no urdma_auth_key_file", WAIT),
        "{}",
        d.diagnostics()
    );
    for h in [&a, &b, &c, &d] {
        assert!(h.daemon_alive(), "{}", h.diagnostics());
    }
}

#[test]
fn a_key_file_others_can_read_turns_discovery_off_with_a_clear_error() {
    let key = KeyFile::new("open", "5 00112233445566778899aabbccddeeff\n", 0o644);
    let net = Net::new();
    let a = Node::A.start(&net, &[&key.opt()]);
    let _b = Node::B.start(&net, &[]);
    a.expect_log(
        &format!(
            "{}:0: urdma_auth_key_file: mode 0644 lets other users read or change the key; refused",
            key.0.display()
        ),
        WAIT,
    );
    a.expect_log("discovery off until the key file is mended", WAIT);
    // Never unauthenticated discovery instead: B is not asked ...
    resolve_fails(&a, &["-f", "i", "-d", "10.0.0.2"], "No data available");
    // ... while what A knows by itself still resolves.
    resolve_node(
        &a,
        Node::A,
        Node::A,
        &["-f", "n", "-s", "node-a", "-d", "node-a"],
    );
    assert!(a.daemon_alive(), "{}", a.diagnostics());
}
