//! The attacker of the threat model against real daemons: a host on the
//! segment that forges source addresses and reads the discovery groups
//! (`urdma_harness::forger`). Whatever it sends, a client of a daemon never gets
//! a GID the destination does not hold, and no query brings more than one
//! reply. Without keys, unless a test says otherwise. Needs root and
//! `cargo build --workspace` (see `urdma_harness`).
//!
//! Here: forged queries, announcements, replies and welcomes, which never
//! change an answer nor aim traffic at a victim. `floods`: floods of them,
//! which leave memory bounded and real peers resolvable. `replays`:
//! captured datagrams sent again, with keys.

mod floods;
mod replays;

use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::discovery::wire::{Announce, Answer, EndpointRecord, Message, Query, WireAddress};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::forger::{Forger, GROUP_V4};
use urdma_harness::nodes::{
    add_silent_neighbour, poll_until_resolved, resolve_fails, resolve_node, resolves_by_every_kind,
    timed, Node, DISCOVERY_PORT, WAIT,
};
use urdma_harness::{Host, HostConfig, Net, PathInfo};

/// The attacker's own GID, which it wants clients to use for others.
const ATTACKER_GID: &str = "fe80::bad:0:0:66";
const FORGER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 66);

fn v4(node: Node) -> Ipv4Addr {
    node.ip4().parse().unwrap()
}

fn at(ip: Ipv4Addr) -> SocketAddrV4 {
    SocketAddrV4::new(ip, DISCOVERY_PORT)
}

fn wire(a: &str) -> WireAddress {
    WireAddress::new(Address::parse_host(a).unwrap()).unwrap()
}

/// An endpoint record with the attacker's GID for `addresses`.
fn attacker_record(addresses: &[String]) -> EndpointRecord {
    record(ATTACKER_GID, addresses)
}

/// An endpoint record with `gid` for `addresses`.
fn record(gid: &str, addresses: &[String]) -> EndpointRecord {
    let addresses = addresses.iter().map(|a| wire(a)).collect();
    EndpointRecord::new(
        gid.parse::<Gid>().unwrap(),
        0,
        5,
        16,
        vec![0xffff],
        addresses,
    )
    .unwrap()
}

/// `node`'s three addresses.
fn addresses(node: Node) -> Vec<String> {
    vec![node.ip4(), node.ip6(), node.name()]
}

fn query(txid: u64, target: &str, sender: EndpointRecord) -> Query {
    Query::new(NonZeroU64::new(txid).unwrap(), wire(target), sender)
}

fn bytes(m: impl Into<Message>) -> Vec<u8> {
    m.into().encode()
}

/// `host` (node `from`) still resolves `to` by every kind of address to
/// `to`'s own GID, from its cache (NODELAY) and anew.
fn still_resolves(host: &Host, from: Node, to: Node) {
    for (f, d) in [("i", to.ip4()), ("n", to.name())] {
        resolve_node(
            host,
            from,
            to,
            &["-c", "-f", f, "-s", &src(from, f), "-d", &d],
        );
    }
    resolve_node(
        host,
        from,
        to,
        &["-c", "-f", "i", "-s", &from.ip6(), "-d", &to.ip6()],
    );
    let log = host.log();
    assert!(
        !log.contains(&format!("is now {ATTACKER_GID}")),
        "a binding moved to the attacker:\n{log}"
    );
}

fn src(from: Node, format: &str) -> String {
    match format {
        "n" => from.name(),
        _ => from.ip4(),
    }
}

/// Two hosts that know each other by every kind of address, and the
/// forger beside them.
fn pair(opts: &[&str]) -> (Net, Host, Host, Forger) {
    let net = Net::new();
    let a = Node::A.start(&net, opts);
    let b = Node::B.start(&net, opts);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    resolves_by_every_kind(&a, Node::A, Node::B);
    (net, a, b, f)
}

/// Waits for what a forged datagram may have set off (checks with the
/// holder) to be over.
fn settle() {
    sleep(Duration::from_millis(300));
}

/// The number after `field ` in the last summary line that has it.
fn summary(host: &Host, line: &str, field: &str) -> u64 {
    host.log()
        .lines()
        .rev()
        .filter(|l| l.contains(line))
        .find_map(|l| {
            l.split_once(&format!("{field} "))
                .map(|(_, r)| r.to_string())
        })
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .unwrap_or(0)
}

/// The value of `sample` (a metric's name, with its labels as written) in
/// `host`'s metrics file, which the provider writes every second.
fn metric(host: &Host, sample: &str) -> Option<f64> {
    host.metrics_file()
        .lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
}

/// The attacker's record, at its own address, holding `target`.
fn forger_holds(target: &WireAddress) -> EndpointRecord {
    let gid = ATTACKER_GID.parse::<Gid>().unwrap();
    let addresses = vec![wire(&FORGER_IP.to_string()), target.clone()];
    EndpointRecord::new(gid, 0, 5, 16, vec![0xffff], addresses).unwrap()
}

// 1 ------------------------------------------------------------------------

#[test]
fn a_forged_query_never_changes_an_answer() {
    let (_net, a, _b, f) = pair(&[]);
    // A query for one of A's addresses, in B's name (source address), with
    // the attacker's GID as sender record for all of B's addresses.
    let q = query(0x1234, &Node::A.ip4(), attacker_record(&addresses(Node::B)));
    for _ in 0..3 {
        f.send(at(v4(Node::B)), at(v4(Node::A)), &bytes(q.clone()));
    }
    settle();
    still_resolves(&a, Node::A, Node::B);
    // It was taken as a hint: A asked B, which confirmed what A knew.
    a.expect_log("urdma: discovery: checking 10.0.0.2 at 10.0.0.2:6126", WAIT);
    a.expect_log("urdma: discovery: 10.0.0.2 confirmed at ", WAIT);
}

#[test]
fn a_forged_announcement_never_moves_a_hosts_names() {
    let (_net, a, _b, f) = pair(&[]);
    let forged = Announce::new(vec![attacker_record(&addresses(Node::B))], false).unwrap();
    // To the group and to A directly, in B's name.
    f.send(at(v4(Node::B)), at(GROUP_V4), &bytes(forged.clone()));
    f.send(at(v4(Node::B)), at(v4(Node::A)), &bytes(forged));
    settle();
    still_resolves(&a, Node::A, Node::B);
    // A forged withdrawal of B, later (after the checks' hold-off):
    // checked too, and B still holds everything.
    sleep(Duration::from_millis(1100));
    let withdrawal =
        Announce::new(vec![record(&Node::B.gid(), &addresses(Node::B))], true).unwrap();
    f.send(at(FORGER_IP), at(GROUP_V4), &bytes(withdrawal));
    settle();
    still_resolves(&a, Node::A, Node::B);
}

#[test]
fn a_reply_binds_only_the_address_that_was_asked() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    // A asks the attacker's own address; its answer also lists B's
    // addresses (piggy-back).
    let mut listed = vec![FORGER_IP.to_string()];
    listed.extend(addresses(Node::B));
    let record = attacker_record(&listed);
    let forger_ip = FORGER_IP.to_string();
    std::thread::scope(|s| {
        let asked = s.spawn(|| a.acme(&["-f", "i", "-d", &forger_ip]));
        let (from, q) = f
            .recv_query(Some(&Address::Ip4(FORGER_IP)), WAIT)
            .unwrap_or_else(|| panic!("never asked\n{}", a.diagnostics()));
        let reply = q.reply(Answer::Found(record.clone())).unwrap();
        f.listener.send_to(&bytes(reply), from).unwrap();
        let (code, out) = asked.join().unwrap();
        assert_eq!(code, 0, "{out}");
    });
    // The attacker's own address leads to the attacker: that answer is
    // right.
    let (path, out) = a.acme_path(&["-c", "-f", "i", "-d", &forger_ip]);
    assert_eq!(path.get("dgid"), ATTACKER_GID, "{out}");
    // None of B's addresses was bound by it.
    for args in [
        vec!["-c", "-f", "i", "-d", "10.0.0.2"],
        vec!["-c", "-f", "n", "-s", "node-a", "-d", "node-b"],
    ] {
        resolve_fails(&a, &args, "No data available");
    }
    resolves_by_every_kind(&a, Node::A, Node::B);
}

#[test]
fn a_forged_claim_of_a_name_is_confirmed_with_its_claimant() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    // The attacker reads A's group query for node-b and answers it at
    // once, in B's name, with its own GID.
    let node_b = Address::name("node-b").unwrap();
    std::thread::scope(|s| {
        let asked = s.spawn(|| {
            resolve_node(
                &a,
                Node::A,
                Node::B,
                &["-f", "n", "-s", "node-a", "-d", "node-b"],
            )
        });
        let deadline = Instant::now() + WAIT;
        while !asked.is_finished() {
            assert!(
                Instant::now() < deadline,
                "never answered\n{}",
                a.diagnostics()
            );
            let Some((SocketAddr::V4(from), q)) =
                f.recv_query(Some(&node_b), Duration::from_millis(50))
            else {
                continue;
            };
            let claim = q
                .reply(Answer::Found(attacker_record(&addresses(Node::B))))
                .unwrap();
            f.send(at(v4(Node::B)), from, &bytes(claim));
        }
        asked.join().expect("resolved to B's own GID");
    });
    // Only the name was asked: it comes from A's cache now, still B's.
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-c", "-f", "n", "-s", "node-a", "-d", "node-b"],
    );
    assert!(
        !a.log().contains(&format!("is now {ATTACKER_GID}")),
        "{}",
        a.diagnostics()
    );
}

// 2 ------------------------------------------------------------------------

#[test]
fn a_forged_group_query_gets_at_most_one_reply_from_the_owner() {
    let net = Net::new();
    let _a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    let _c = Node::C.start(&net, &[]);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    let sender = attacker_record(&[FORGER_IP.to_string()]);
    // The victim is the forger's own address, so it can count.
    let count_replies = |target: &str| {
        for i in 0..100u64 {
            let q = query(1000 + i, target, sender.clone());
            f.send(at(FORGER_IP), at(GROUP_V4), &bytes(q));
        }
        let mut from = Vec::new();
        while let Some((src, data)) = f.recv(Duration::from_millis(500)) {
            if let Ok(Message::Reply(r)) = Message::decode(&data) {
                assert!(matches!(r.answer(), Answer::Found(_)), "{r:?}");
                from.push(src.ip());
            }
        }
        from
    };
    // Nobody holds it: nobody answers.
    assert_eq!(count_replies("10.0.0.99"), Vec::<IpAddr>::new());
    assert_eq!(count_replies("node-z"), Vec::<IpAddr>::new());
    // B holds it: one reply per query, all from B.
    let replies = count_replies("10.0.0.2");
    assert_eq!(replies.len(), 100, "{replies:?}");
    assert!(replies.iter().all(|ip| *ip == IpAddr::V4(v4(Node::B))));
}

// 3 ------------------------------------------------------------------------

/// Node `n` with IPv6 addresses only, on the bridge and on its endpoint.
fn ipv6_only(n: Node) -> HostConfig {
    let mut cfg = n.config(&[]);
    cfg.ip_addrs = vec![format!("{}/64", n.ip6())];
    cfg.addr_lines = vec![
        format!("{} urdma0 1 default", n.ip6()),
        format!("{} urdma0 1 default", n.name()),
    ];
    cfg
}

fn link_local_ready(host: &Host) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, out) = host.exec(&[
            "ip",
            "-6",
            "addr",
            "show",
            "dev",
            "eth0",
            "scope",
            "link",
            "-tentative",
        ]);
        if out.contains("fe80::") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no usable link-local address: {out}"
        );
        sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_host_on_an_ipv6_only_segment_that_changes_gid_is_followed() {
    let net = Net::new();
    let a = Host::start_on(&net, "eth0", ipv6_only(Node::A));
    let c = Host::start_on(&net, "eth0", ipv6_only(Node::C));
    let (old, new) = (Node::C, Node::C.next_generation());
    let by_ip = ["-f", "i", "-s", "fd00::1", "-d", "fd00::3"];
    let by_name = ["-f", "n", "-s", "node-a", "-d", "node-c"];
    resolve_node(&a, Node::A, old, &by_ip);
    resolve_node(&a, Node::A, old, &by_name);
    // Until its link-local address has passed DAD, the kernel sends from
    // the global one; afterwards it prefers fe80::, which no record lists.
    link_local_ready(&c);
    let mut cfg = ipv6_only(new);
    cfg.ip_addrs.clear();
    c.restart(&cfg);
    let took = poll_until_resolved(
        &a,
        &[
            "-c", by_ip[0], by_ip[1], by_ip[2], by_ip[3], by_ip[4], by_ip[5],
        ],
        &new.gid(),
    );
    eprintln!("A followed C to its new GID over IPv6 after {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    poll_until_resolved(&a, &by_name, &new.gid());
    assert!(
        !a.log().contains("not from an address it lists"),
        "{}",
        a.diagnostics()
    );
}

#[test]
fn queries_leave_from_the_asking_endpoints_own_address() {
    let net = Net::new();
    // The kernel would pick 10.0.0.11, the interface's first address; the
    // endpoint holds 10.0.0.1.
    let mut cfg = Node::A.config(&[]);
    cfg.ip_addrs = vec![
        "10.0.0.11/24".into(),
        "10.0.0.1/24".into(),
        "fd00::1/64".into(),
    ];
    let a = Host::start_on(&net, "eth0", cfg);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    std::thread::scope(|s| {
        s.spawn(|| {
            a.acme(&[
                "-f",
                "i",
                "-s",
                &Node::A.ip4(),
                "-d",
                &FORGER_IP.to_string(),
            ])
        });
        let (from, q) = f
            .recv_query(None, WAIT)
            .unwrap_or_else(|| panic!("never asked\n{}", a.diagnostics()));
        assert_eq!(from.ip(), IpAddr::V4(v4(Node::A)), "{q:?}");
        let refused = q.reply(Answer::Refused).unwrap();
        f.listener.send_to(&bytes(refused), from).unwrap();
    });
}

// 6 ------------------------------------------------------------------------

/// The GID `host` resolves `args` to, if it resolves them.
fn dgid(host: &Host, args: &[&str]) -> Option<String> {
    let (code, out) = host.acme(args);
    let path = PathInfo::parse(&out);
    (code == 0).then(|| path.0.get("dgid").cloned()).flatten()
}

/// Until `stop`, the forger answers every query for `name` it reads, on a
/// group or sent to it, at once: FOUND, with its own record.
fn claim(f: &Forger, name: &str, stop: &AtomicBool) {
    let name = Address::name(name).unwrap();
    while !stop.load(Ordering::Relaxed) {
        if let Some((from, q)) = f.recv_query(Some(&name), Duration::from_millis(50)) {
            let found = q.reply(Answer::Found(forger_holds(q.target())));
            f.listener.send_to(&bytes(found.unwrap()), from).unwrap();
        }
    }
}

#[test]
fn a_forged_welcome_never_gets_a_name_answered_with_the_forgers_gid() {
    let (_net, a, _b, f) = pair(&[]);
    let by_name = ["-f", "n", "-s", "node-a", "-d", "node-b"];
    // B's own announcements are out (the last 3 s after it started), and
    // what A's first run sent is not the start query of its second.
    sleep(Duration::from_secs(3));
    while f.recv(Duration::from_millis(100)).is_some() {}
    a.restart(&Node::A.config(&[]));
    let heard = loop {
        let (from, _) = f
            .recv_start_query(WAIT)
            .unwrap_or_else(|| panic!("no start query from A\n{}", a.diagnostics()));
        if from.ip() == IpAddr::V4(v4(Node::A)) {
            break Instant::now();
        }
    };
    // At once, to A alone: B's name is at the forger's address.
    let welcome = Announce::new(vec![forger_holds(&wire("node-b"))], false).unwrap();
    f.send(at(FORGER_IP), at(v4(Node::A)), &bytes(welcome));
    let stop = AtomicBool::new(false);
    let got: Vec<Option<String>> = std::thread::scope(|s| {
        s.spawn(|| claim(&f, "node-b", &stop));
        // Asked once a hint would be used (heard a second ago), and
        // before B's welcome to A (one to two seconds after B heard it)
        // could contradict it.
        sleep((heard + Duration::from_millis(1050)).saturating_duration_since(Instant::now()));
        let got = (0..3)
            .map(|_| {
                let gid = dgid(&a, &by_name);
                sleep(Duration::from_millis(300));
                gid
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        got
    });
    assert!(
        !got.contains(&Some(ATTACKER_GID.to_string())),
        "node-b resolved to the forger: {got:?}\n{}",
        a.diagnostics()
    );
    // With the forger quiet, B's name leads to B.
    poll_until_resolved(&a, &by_name, &Node::B.gid());
}

#[test]
fn forged_start_queries_never_aim_welcomes_at_an_address_of_the_forgers_choosing() {
    let (_net, a, _b, f) = pair(&[]);
    // An address no host holds, on the segment: the forger takes it too,
    // to read what is sent there.
    let victim = Ipv4Addr::new(10, 0, 0, 77);
    let (code, out) = f
        .host
        .exec(&["ip", "addr", "add", "10.0.0.77/24", "dev", "eth0"]);
    assert_eq!(code, 0, "ip addr add: {out}");
    let holds_v = |gid: &str| record(gid, &[victim.to_string(), "node-v".into()]);
    // The hosts' own announcements are out (the last 3 s after start),
    // then the victim "announces" a name, long enough ago to be used.
    sleep(Duration::from_secs(3));
    let planted = Announce::new(vec![holds_v(ATTACKER_GID)], false).unwrap();
    f.send(at(victim), at(GROUP_V4), &bytes(planted));
    sleep(Duration::from_millis(1500));
    // Newcomers at the victim's address, one every 2.5 s.
    let hosts = [v4(Node::A), v4(Node::B)].map(IpAddr::V4);
    let (mut sent, mut aimed) = (1, Vec::new());
    let started = Instant::now();
    for i in 1..=5u32 {
        let q = query(
            u64::from(i),
            "node-v",
            holds_v(&format!("fe80::bad:1:0:{i}")),
        );
        f.send(at(victim), at(GROUP_V4), &bytes(q));
        sent += 1;
        let until = started + Duration::from_millis(2500) * i;
        while let Some((from, to, _)) = f.recv_to(until.saturating_duration_since(Instant::now())) {
            if to == victim && hosts.contains(&from.ip()) {
                aimed.push(from);
            }
        }
    }
    assert!(
        aimed.len() * 10 <= sent,
        "{} datagrams sent to {victim} for the forger's {sent}: {aimed:?}\n{}",
        aimed.len(),
        a.diagnostics()
    );
}

/// Until `stop`, the forger claims every name it is asked for on a group,
/// at once, and confirms each claim 3.4 s after it is asked to: slow
/// replies, none lost.
fn confirm_late(f: &Forger, stop: &AtomicBool) {
    let mut due: Vec<(Instant, SocketAddr, Vec<u8>)> = Vec::new();
    let mut confirming: Vec<WireAddress> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        for (_, to, reply) in due.iter().filter(|(at, ..)| *at <= now) {
            f.listener.send_to(reply, to).unwrap();
        }
        due.retain(|(at, ..)| *at > now);
        let Some((from, to, data)) = f.recv_to(Duration::from_millis(20)) else {
            continue;
        };
        let Ok(Message::Query(q)) = Message::decode(&data) else {
            continue;
        };
        let name = q.target();
        if !matches!(name.address(), Address::Name(_)) || q.sender().holds(name) {
            continue;
        }
        let found = bytes(q.reply(Answer::Found(forger_holds(name))).unwrap());
        if to.is_multicast() {
            f.listener.send_to(&found, from).unwrap();
        } else if !confirming.contains(name) {
            // The first try's txid: its reply is timed from it.
            confirming.push(name.clone());
            due.push((now + Duration::from_millis(3400), from, found));
        }
    }
}

#[test]
fn a_claimant_that_confirms_late_never_slows_the_tries_of_other_lookups() {
    let (_net, a, _b, f) = pair(&[]);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| confirm_late(&f, &stop));
        // Names only the forger claims: what A is told does not matter
        // here, how long the forger took does.
        for name in ["ghost-1", "ghost-2"] {
            a.acme(&["-f", "n", "-s", "node-a", "-d", name]);
        }
        stop.store(true, Ordering::Relaxed);
    });
    // The metrics file is written every second.
    sleep(Duration::from_millis(1500));
    let try_time = metric(&a, "urdma_discovery_try_seconds");
    assert_eq!(try_time, Some(0.5), "{}", a.metrics_file());
    // A destination that does not answer fails after 0.5 + 1 + 2 s, not
    // after three of the longest tries.
    add_silent_neighbour(&a, "10.0.0.99");
    let ((code, out), took) = timed(|| a.acme(&["-f", "i", "-d", "10.0.0.99"]));
    assert_ne!(code, 0, "{out}");
    assert!(took < Duration::from_millis(4500), "failed after {took:?}");
}
