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
//!
//! Here: what hosts learn of each other, by every kind of address, and
//! when. `outages`: hosts and ports that stop. `refusals`: what a host
//! drops (garbage, traffic without the shared key).

mod outages;
mod refusals;

use std::time::Duration;
use urdma_harness::load::load_summary;
use urdma_harness::nodes::{
    poll_until_resolved, resolve, resolve_fails, resolve_node, timed, Node, WAIT,
};
use urdma_harness::{Host, Net};

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

/// Names and further IPv4 addresses of B that A asks for all at once.
const NAMES: usize = 500;
const IPS: usize = 50;

#[test]
fn five_hundred_concurrent_misses_are_each_answered_once() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let extra_ips: Vec<String> = (0..IPS).map(|i| format!("10.0.0.{}", 101 + i)).collect();
    let b = holder_of_many(&net, &extra_ips);

    // 500 distinct names, all misses, on 500 connections at once (a thread
    // each); at the same time 50 distinct IP addresses (unicast queries) on
    // 50 more, multiplexed by one thread.
    let dests = a.path("dests.txt");
    std::fs::write(&dests, extra_ips.join("\n")).unwrap();
    let ((names, addrs), took) = timed(|| {
        std::thread::scope(|s| {
            let names = s.spawn(|| ask_names_a_thread_each(&a));
            let addrs = ask_addresses_from_one_thread(&a, &dests);
            (names.join().unwrap(), addrs)
        })
    });
    for (run, count) in [(&names, NAMES), (&addrs, IPS)] {
        let out = &run.1;
        eprintln!("{count} in {took:?}: {}", out.lines().last().unwrap_or(""));
        assert_each_answered_once(&a, run, count);
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

/// Node B on `net`, holding `extra_ips` and the names `node-b-1` to
/// `node-b-{NAMES}` on its endpoint beside its own addresses.
fn holder_of_many(net: &Net, extra_ips: &[String]) -> Host {
    let mut b_cfg = Node::B.config(&[]);
    for ip in extra_ips {
        b_cfg.ip_addrs.push(format!("{ip}/24"));
        b_cfg.addr_lines.push(format!("{ip} urdma0 1 default"));
    }
    // After the addresses: a reply's record lists its endpoint's first
    // addresses, so no answer about an address teaches A any of the names.
    for i in 1..=NAMES {
        let line = format!("node-b-{i} urdma0 1 default");
        b_cfg.addr_lines.push(line);
    }
    let b = Host::start_on(net, "eth0", b_cfg);
    b.expect_log(
        &format!("urdma: endpoint pkey 0xffff: address node-b-{NAMES}"),
        WAIT,
    );
    b
}

/// `urdma-load` on `a`: B's `NAMES` names, each once, on a connection
/// (and a thread) each.
fn ask_names_a_thread_each(a: &Host) -> (i32, String) {
    let n = NAMES.to_string();
    a.load(
        &[
            "-s", "node-a", "-f", "n", "--range", "node-b-", &n, "-c", &n, "-n", &n, "--window",
            "1",
        ],
        Duration::from_secs(60),
    )
}

/// `urdma-load` on `a`: the addresses listed in `dests`, each once, on a
/// connection each, printing each answer.
fn ask_addresses_from_one_thread(a: &Host, dests: &std::path::Path) -> (i32, String) {
    let ips = IPS.to_string();
    a.load(
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
    )
}

/// The exit status and output of a `urdma-load` run on `a` of `count`
/// requests: each answered once, and well.
fn assert_each_answered_once(a: &Host, (code, out): &(i32, String), count: usize) {
    let count = count.to_string();
    let sum = load_summary(out);
    assert_eq!(*code, 0, "urdma-load:\n{out}\n{}", a.diagnostics());
    for (k, v) in [
        ("requests", count.as_str()),
        ("replies", &count),
        ("ok", &count),
        ("missing", "0"),
        ("duplicates", "0"),
        ("unknown_tid", "0"),
        ("bad_replies", "0"),
        ("disconnects", "0"),
    ] {
        assert_eq!(sum[k], v, "`{k}` in {sum:?}\n{}", a.diagnostics());
    }
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
