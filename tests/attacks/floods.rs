//! Floods of forged traffic: from a million sources, of names announced
//! and withdrawn (for an hour, by hand), of new names, of start queries
//! and of queries that spend a holder's allowance. Memory stays bounded,
//! and the real peers stay resolvable, each from its own answer.

use crate::{
    addresses, at, attacker_record, bytes, metric, pair, query, record, settle, still_resolves,
    summary, v4, FORGER_IP,
};
use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::{Announce, Answer};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::forger::{Forger, GROUP_V4};
use urdma_harness::nodes::{resolve_node, resolves_by_every_kind, Node, DISCOVERY_PORT, WAIT};
use urdma_harness::{Host, Net, PathInfo};

const FLOOD: u32 = 1_000_000;
/// What a flood may add to the daemon's resident memory: the provider's
/// tables at their bounds for this traffic (docs/reliability.md).
const FLOOD_RSS_KB: u64 = 8 * 1024;

#[test]
fn a_flood_from_a_million_forged_sources_leaves_memory_bounded_and_peers_resolvable() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let b = Node::B.start(&net, &[]);
    let _c = Node::C.start(&net, &[]);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    take_any_source(&a);
    resolves_by_every_kind(&a, Node::A, Node::B);
    let rss_before = a.daemon_rss_kb();
    let started = Instant::now();
    let to = at(v4(Node::A));
    for i in 0..FLOOD {
        let (src, data) = forged_from_its_own_source(i);
        f.send(src, to, &data);
        // Paced so that A's socket buffer keeps up: the point is what the
        // provider keeps, not what the kernel drops.
        if i % 1000 == 999 {
            sleep(Duration::from_millis(2));
        }
    }
    eprintln!("sent {FLOOD} forged datagrams in {:?}", started.elapsed());
    wait_until_the_flood_is_read(&a);
    let rss_after = a.daemon_rss_kb();
    eprintln!(
        "daemon RSS {rss_before} KiB before, {rss_after} KiB after; {}",
        a.log()
            .lines()
            .rev()
            .find(|l| l.contains("datagrams dropped so far"))
            .unwrap_or("")
    );
    assert!(
        rss_after <= rss_before + FLOOD_RSS_KB,
        "RSS grew from {rss_before} to {rss_after} KiB\n{}",
        a.diagnostics()
    );
    // The real peers: B as before (a check of it may have run), C asked
    // for the first time now.
    still_resolves(&a, Node::A, Node::B);
    resolves_by_every_kind(&a, Node::A, Node::C);
    assert!(b.daemon_alive());
}

/// `host` takes datagrams from sources it has no route to (the kernel's
/// reverse-path filter would drop them before the provider saw them).
fn take_any_source(host: &Host) {
    for conf in ["all", "default", "eth0"] {
        let (code, out) = host.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv4.conf.{conf}.rp_filter=0"),
        ]);
        assert_eq!(code, 0, "sysctl: {out}");
    }
}

/// The `i`th datagram of the flood, each from its own address in
/// 100.64.0.0/10, the four kinds in turn.
fn forged_from_its_own_source(i: u32) -> (SocketAddrV4, Vec<u8>) {
    let src = SocketAddrV4::new(Ipv4Addr::from(0x6440_0000 + i), DISCOVERY_PORT);
    let own = src.ip().to_string();
    let txid = u64::from(i) + 1;
    let data = match i % 4 {
        // Asks A's own address: answered, until the source's allowance
        // (or the shared one of untracked sources) runs out.
        0 => bytes(query(txid, &Node::A.ip4(), attacker_record(&[own]))),
        // Moves B's addresses to the attacker: a hint to check B, held
        // off after once a second.
        1 => bytes(Announce::new(vec![attacker_record(&addresses(Node::B))], false).unwrap()),
        // Announces an address nobody asked for.
        2 => bytes(Announce::new(vec![attacker_record(&[own])], false).unwrap()),
        // A reply to nothing A asked.
        _ => bytes(
            query(txid, &own, attacker_record(std::slice::from_ref(&own)))
                .reply(Answer::Refused)
                .unwrap(),
        ),
    };
    (src, data)
}

/// The forged replies are counted as unsolicited once `host` has read
/// them; on a loaded machine the kernel drops some before it reads them,
/// so half of them will do.
fn wait_until_the_flood_is_read(host: &Host) {
    let want = u64::from(FLOOD / 4) / 2;
    let deadline = Instant::now() + Duration::from_secs(30);
    while summary(host, "datagrams dropped so far", "unsolicited") < want {
        assert!(
            Instant::now() < deadline,
            "A did not read the flood ({} unsolicited)\n{}",
            summary(host, "datagrams dropped so far", "unsolicited"),
            host.diagnostics()
        );
        sleep(Duration::from_millis(200));
    }
}

/// An ANNOUNCE from `ip` (or its WITHDRAWN), on behalf of the attacker's
/// GID, of `ip` and 15 names `{tag}-N`: two records, of eight addresses
/// at most each, the first listing the source.
fn fifteen_names(ip: Ipv4Addr, tag: &str, withdrawn: bool) -> Vec<u8> {
    let mut first = vec![ip.to_string()];
    first.extend((0..7).map(|n| format!("{tag}-{n}")));
    let rest: Vec<String> = (7..15).map(|n| format!("{tag}-{n}")).collect();
    let records = vec![attacker_record(&first), attacker_record(&rest)];
    bytes(Announce::new(records, withdrawn).unwrap())
}

/// Waits until `host` has read what was sent to it: its count of
/// datagrams received stays the same from one write of its metrics to the
/// next. Returns that count.
fn read_all(host: &Host) -> f64 {
    let received = || metric(host, "urdma_datagrams_received_total").unwrap_or(0.0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = received();
    loop {
        sleep(Duration::from_millis(1100));
        let now = received();
        if now == last {
            return now;
        }
        assert!(Instant::now() < deadline, "{}", host.diagnostics());
        last = now;
    }
}

/// Rounds of new names announced and withdrawn, in all.
const CHURN: u32 = 100_000;
/// Rounds before the daemon's memory is first measured: its tables and
/// buffers reach the size this traffic gives them.
const CHURN_WARM_UP: u32 = 20_000;

#[test]
fn names_announced_and_withdrawn_over_and_over_leave_memory_bounded() {
    let (_net, a, _b, f) = pair(&[]);
    let src = Ipv4Addr::new(10, 0, 0, 88);
    let churn = |rounds: std::ops::Range<u32>| {
        for i in rounds {
            for withdrawn in [false, true] {
                let names = fifteen_names(src, &format!("churn-{i}"), withdrawn);
                f.send(at(src), at(GROUP_V4), &names);
            }
            // Paced so that A's socket buffer keeps up: the point is what
            // the provider keeps, not what the kernel drops.
            if i % 200 == 199 {
                sleep(Duration::from_millis(10));
            }
        }
    };
    churn(0..CHURN_WARM_UP);
    let read_before = read_all(&a);
    let rss_before = a.daemon_rss_kb();
    let started = Instant::now();
    churn(CHURN_WARM_UP..CHURN);
    let read = read_all(&a) - read_before;
    let rss_after = a.daemon_rss_kb();
    let sent = 2 * (CHURN - CHURN_WARM_UP);
    eprintln!(
        "A read {read} of {sent} datagrams in {:?}; RSS {rss_before} KiB, then {rss_after} KiB",
        started.elapsed()
    );
    assert!(read >= f64::from(sent) / 2.0, "{}", a.diagnostics());
    assert!(
        rss_after < rss_before + 1024,
        "RSS grew from {rss_before} to {rss_after} KiB\n{}",
        a.diagnostics()
    );
    still_resolves(&a, Node::A, Node::B);
}

#[test]
fn a_flood_of_new_names_never_sends_a_known_name_to_the_groups() {
    let opts = ["urdma_max_learned 64"];
    let net = Net::new();
    let a = Node::A.start(&net, &opts);
    let _b = Node::B.start(&net, &opts);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    // B's announcements are out (the last 3 s after it started): A knows
    // to ask B for node-b.
    sleep(Duration::from_millis(3500));
    // 300 new names, five times what A keeps.
    for i in 0..20 {
        let names = fifteen_names(FORGER_IP, &format!("new-{i}"), false);
        f.send(at(FORGER_IP), at(GROUP_V4), &names);
    }
    settle();
    while f.recv(Duration::from_millis(100)).is_some() {}
    let by_name = ["-f", "n", "-s", "node-a", "-d", "node-b"];
    resolve_node(&a, Node::A, Node::B, &by_name);
    let node_b = Address::name("node-b").unwrap();
    if let Some((from, q)) = f.recv_query(Some(&node_b), Duration::from_millis(200)) {
        panic!("{from} asked the groups: {q:?}\n{}", a.diagnostics());
    }
}

#[test]
fn forged_start_queries_never_keep_a_host_from_asking_a_restarted_peer_again() {
    let net = Net::new();
    // Tries of 1, 2 and 4 s: B is back well after A's last try left, and
    // well before it ends, on a loaded machine too.
    let a = Node::A.start(&net, &["urdma_timeout 1000"]);
    let b = Node::B.start(&net, &[]);
    let b_started = Instant::now();
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    // B goes down without a word, and says nothing to A while down (no
    // port unreachable, which would end A's query at once).
    let (code, out) = b.exec(&["ip", "route", "add", "blackhole", "10.0.0.1/32"]);
    assert_eq!(code, 0, "ip route: {out}");
    b.kill_daemon();
    // A's memory of B's arrival (5 s) is over: its next start query says
    // it has just started.
    sleep((b_started + Duration::from_millis(5500)).saturating_duration_since(Instant::now()));
    let stop = AtomicBool::new(false);
    let (asked, restarted) = std::thread::scope(|s| {
        let asked = s.spawn(|| (a.acme(&["-f", "i", "-d", &Node::B.ip4()]), Instant::now()));
        a.expect_log("urdma: lookup 10.0.0.2: started", WAIT);
        let began = Instant::now();
        let (f, stop) = (&f, &stop);
        s.spawn(move || {
            // Start queries of newcomers at 100 addresses while A's query
            // is in flight, 2000 a second: far more than the 20 a second
            // that one allowance for all would refill, so that B's finds
            // it spent.
            for i in 0u32.. {
                if stop.load(Ordering::Relaxed) || began.elapsed() > WAIT {
                    break;
                }
                let ip = Ipv4Addr::new(10, 0, 0, 100 + (i % 100) as u8);
                let gid = format!("fe80::bad:2:{:x}:{:x}", i >> 16, i & 0xffff);
                let sender = record(&gid, &[ip.to_string()]);
                let q = query(u64::from(i) + 1, &ip.to_string(), sender);
                f.send(at(ip), at(GROUP_V4), &bytes(q));
                if i % 20 == 19 {
                    sleep(Duration::from_millis(10));
                }
            }
        });
        // A's last try (3 s after the first) left while B was down.
        sleep((began + Duration::from_millis(4000)).saturating_duration_since(Instant::now()));
        let (code, out) = b.exec(&["ip", "route", "del", "blackhole", "10.0.0.1/32"]);
        b.restart(&Node::B.config(&[]));
        let restarted = Instant::now();
        let asked = asked.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        assert_eq!(code, 0, "ip route: {out}");
        (asked, restarted)
    });
    let ((code, out), answered) = asked;
    assert_eq!(
        code,
        0,
        "A never heard back from B:\n{out}\n{}",
        a.diagnostics()
    );
    assert_eq!(PathInfo::parse(&out).get("dgid"), Node::B.gid(), "{out}");
    let took = answered.saturating_duration_since(restarted);
    assert!(took < Duration::from_secs(1), "{took:?} after B was back");
}

#[test]
fn a_check_its_holder_cannot_answer_keeps_what_was_bound() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let b = Node::B.start(&net, &["urdma_reply_rate 10"]);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    resolves_by_every_kind(&a, Node::A, Node::B);
    // Queries forged from A's address spend B's allowance for A, faster
    // than it refills, until A's check of B (3.5 s) is over.
    let mut txid = 0;
    let mut flood = |d: Duration| {
        let until = Instant::now() + d;
        while Instant::now() < until {
            for _ in 0..20 {
                txid += 1;
                let q = query(
                    txid,
                    &Node::B.ip4(),
                    attacker_record(&[FORGER_IP.to_string()]),
                );
                f.send(at(v4(Node::A)), at(v4(Node::B)), &bytes(q));
            }
            sleep(Duration::from_millis(10));
        }
    };
    flood(Duration::from_millis(500));
    // In B's name: B moved to the attacker's GID. A checks it with B.
    let hint = Announce::new(vec![attacker_record(&[Node::B.ip4()])], false).unwrap();
    f.send(at(v4(Node::B)), at(v4(Node::A)), &bytes(hint));
    flood(Duration::from_secs(4));
    a.expect_log("urdma: discovery: checking 10.0.0.2 at 10.0.0.2:6126", WAIT);
    assert!(
        metric(
            &b,
            r#"urdma_datagrams_dropped_total{reason="rate_limited"}"#
        ) > Some(1000.0),
        "{}",
        b.metrics_file()
    );
    // Unanswered, the check changed nothing: B as before, from A's cache
    // too.
    resolve_node(&a, Node::A, Node::B, &["-c", "-f", "i", "-d", "10.0.0.2"]);
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", "10.0.0.2"]);
}

/// An hour of the flood above at the rate that once grew a daemon by
/// 27 MiB in 48 s (5,000 datagrams a second, fresh names each time): the
/// daemon's RSS, read every minute, stays within 1 MiB of the first
/// minute's. Run by hand, as it takes an hour (`URDMA_FLOOD_SECONDS` to
/// shorten it): `cargo test --test attacks -- --ignored an_hour_of`.
#[test]
#[ignore]
fn an_hour_of_names_announced_and_withdrawn_leaves_the_daemons_memory_flat() {
    let seconds: u64 = std::env::var("URDMA_FLOOD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3_600);
    let (_net, a, _b, f) = pair(&[]);
    let src = Ipv4Addr::new(10, 0, 0, 88);
    let started = Instant::now();
    let (mut round, mut batch) = (0u32, 0u32);
    let mut rss = Vec::new();
    while started.elapsed() < Duration::from_secs(seconds) {
        // 25 announcements and their withdrawals every 10 ms.
        for _ in 0..25 {
            for withdrawn in [false, true] {
                let names = fifteen_names(src, &format!("hour-{round}"), withdrawn);
                f.send(at(src), at(GROUP_V4), &names);
            }
            round += 1;
        }
        batch += 1;
        let due = started + Duration::from_millis(10) * batch;
        sleep(due.saturating_duration_since(Instant::now()));
        if batch % 6_000 == 0 {
            let kb = a.daemon_rss_kb();
            eprintln!("minute {}: {round} pairs sent, RSS {kb} KiB", batch / 6_000);
            rss.push(kb);
        }
    }
    let (first, most) = (rss[0], rss.iter().copied().max().unwrap());
    assert!(most < first + 1024, "RSS each minute: {rss:?}");
    // Asked anew: what was cached an hour ago expired long since.
    resolves_by_every_kind(&a, Node::A, Node::B);
}
