//! Start queries, welcomes and renewals: what newcomers and old hosts hear.

use super::*;

/// The announcements among the effects sent to one host, with where they
/// went and where from.
fn sent_welcomes(fx: &Effects) -> Vec<(SocketAddr, Option<IpAddr>, Announce)> {
    fx.work
        .datagrams
        .iter()
        .filter_map(|d| match d {
            Datagram::Unicast { to, from, bytes } => match Message::decode(bytes) {
                Ok(Message::Announce(a)) => Some((*to, *from, a)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Host `n` of 10.0.0.0/24, with GID fe80::n and name node-n.
fn newcomer(n: u8) -> (EndpointRecord, SocketAddr) {
    let at = SocketAddr::new(IpAddr::V4([10, 0, 0, n].into()), 6126);
    (
        holding(&format!("fe80::{n:x}"), [10, 0, 0, n], &format!("node-{n}")),
        at,
    )
}

/// The announcements this fixture sends between `from` and `to`, a timer
/// every 100 ms.
fn announced_between(f: &mut Fixture, from: Duration, to: Duration) -> Vec<Duration> {
    let mut at = Vec::new();
    let mut t = from;
    while t <= to {
        f.e.input(Input::Timers, f.t0 + t);
        if !sent_announcements(&polled(&mut f.e)).is_empty() {
            at.push(t);
        }
        t += Duration::from_millis(100);
    }
    at
}

/// Whether the effects hold a start query.
fn has_start_query(fx: &Effects) -> bool {
    fx.work.datagrams.len() != without_start_queries(fx).len()
}

/// A start query for node-b, txid `txid`, from the endpoint of `record`.
fn start_query(txid: u64, record: EndpointRecord) -> Vec<u8> {
    let q = Query::new(
        std::num::NonZeroU64::new(txid).unwrap(),
        WireAddress::new(node_b()).unwrap(),
        record,
    );
    Message::from(q).encode()
}

#[test]
fn a_host_announces_itself_to_a_host_that_joined_after_its_announcements() {
    let mut f = keyed(fixture(Config::default()));
    // While its own announcements are still to come, they are enough.
    f.e.input(Input::Timers, f.t0);
    let t0 = f.t0;
    heard_on_group(&mut f, peer_record(PEER), peer(), t0);
    f.e.input(Input::Timers, f.t0 + Duration::from_millis(50));
    let fx = polled(&mut f.e);
    assert_eq!(sent_announcements(&fx).len(), 1, "the first of three");
    assert!(sent_welcomes(&fx).is_empty());
    for ms in [1_000, 3_000] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    polled(&mut f.e);
    // All out: a host never heard is answered soon, on the groups.
    let (within, every) = announce::welcome_pace(2);
    let t = f.t0 + Duration::from_secs(5);
    let (c, c_at) = newcomer(3);
    heard_on_group(&mut f, c, c_at, t);
    f.e.input(Input::Timers, t + within);
    let fx = polled(&mut f.e);
    assert!(sent_welcomes(&fx).is_empty(), "{fx:?}");
    let ours = sent_announcements(&fx);
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].records()[0].gid(), OWN.parse().unwrap());
    // A host heard before is not.
    let t = t + within;
    heard_on_group(&mut f, peer_record(PEER), peer(), t);
    f.e.input(Input::Timers, t + within);
    assert!(polled(&mut f.e).work.datagrams.is_empty());
    // The peer, heard at its address for a while, back with new hardware:
    // answered by unicast, to that address, from this host's own, within
    // two windows (the first lets a burst show its size).
    let t = t + every;
    heard_on_group(&mut f, peer_record("fe80::b2"), peer(), t);
    f.e.input(Input::Timers, t + within * 2);
    let fx = polled(&mut f.e);
    assert!(sent_announcements(&fx).is_empty(), "{fx:?}");
    let w = sent_welcomes(&fx);
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].0, w[0].1), (peer(), Some(own_ip())));
    assert_eq!(w[0].2.records()[0].gid(), OWN.parse().unwrap());
    // Again, with other hardware, soon after: that address was welcomed
    // (a forger naming it does not make this host flood it).
    heard_on_group(&mut f, peer_record("fe80::b3"), peer(), t + within * 2);
    f.e.input(Input::Timers, t + within * 4);
    assert!(polled(&mut f.e).work.datagrams.is_empty());
    // Long after its own start, a host that joins is answered too.
    let late = f.t0 + Duration::from_secs(4_000);
    let (e, e_at) = newcomer(5);
    heard_on_group(&mut f, e, e_at, late);
    f.e.input(Input::Timers, late + within);
    assert_eq!(sent_announcements(&polled(&mut f.e)).len(), 1);
}

/// A fixture that has heard hosts 11 to 10 + `n` of 10.0.0.0/24 (10 would
/// have its GID) at their addresses and settled them, and the welcome
/// window on a segment of that size; the time is 20 s after they were heard.
fn settled_among(n: u8) -> (Fixture, Instant, Duration) {
    let mut f = keyed(fixture(Config::default()));
    for ms in [0, 50, 1_000, 3_000] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    let t = f.t0 + Duration::from_secs(4);
    for n in 11..11 + n {
        let (r, at) = newcomer(n);
        heard_on_group(&mut f, r, at, t);
    }
    let (within, _) = announce::welcome_pace(n.into());
    let t = t + Duration::from_secs(20);
    f.e.input(Input::Timers, t);
    polled(&mut f.e);
    (f, t, within)
}

/// Host `n`, back with new hardware (GID fe80::`gen`:`n`), heard at `t`.
fn back(f: &mut Fixture, n: u8, gen: u8, t: Instant) {
    let (_, at) = newcomer(n);
    let gid = format!("fe80::{gen:x}:{n:x}");
    let r = holding(&gid, [10, 0, 0, n], &format!("node-{n}"));
    heard_on_group(f, r, at, t);
}

/// A record of endpoint `gid` listing only its IPv4 address `ip`.
fn ip_only(gid: &str, ip: [u8; 4]) -> EndpointRecord {
    let addrs = vec![WireAddress::from(Ipv4Addr::from(ip))];
    EndpointRecord::new(gid.parse().unwrap(), 0, 4, 7, vec![0xffff], addrs).unwrap()
}

/// A start query, txid `txid`, for the first address `record` lists.
fn own_start_query(txid: u64, record: EndpointRecord) -> Vec<u8> {
    let target = record.addresses()[0].clone();
    let txid = std::num::NonZeroU64::new(txid).unwrap();
    Message::from(Query::new(txid, target, record)).encode()
}

#[test]
fn a_host_back_before_its_names_is_welcomed_by_unicast_where_it_is_bound() {
    let mut f = keyed(fixture(Config::default()));
    for ms in [0, 50, 1_000, 3_000] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    learn_peer(&mut f, 1);
    polled(&mut f.e);
    // The peer back on new hardware, its start query sent before its
    // daemon gave it its name: it asks for its address, which is all its
    // record lists. Bound here from the peer's own reply, that address
    // is a host of the segment's: welcomed there alone.
    let (within, _) = announce::welcome_pace(1);
    let t = f.t0 + Duration::from_secs(10);
    let bytes = own_start_query(77, ip_only("fe80::b2", PEER_IP));
    deliver(&mut f, peer(), Some(group()), &bytes, t);
    f.e.input(Input::Timers, t + within * 2);
    let fx = polled(&mut f.e);
    assert!(sent_announcements(&fx).is_empty(), "{fx:?}");
    let w = sent_welcomes(&fx);
    assert_eq!(w.len(), 1, "{fx:?}");
    assert_eq!(w[0].0, peer());
    // From an address this host knows nothing of: the groups, never a
    // datagram aimed where the asker says.
    let (_, c_at) = newcomer(9);
    let t = t + WELCOMED_FOR;
    let bytes = own_start_query(78, ip_only("fe80::9", [10, 0, 0, 9]));
    deliver(&mut f, c_at, Some(group()), &bytes, t);
    f.e.input(Input::Timers, t + within * announce::WELCOME_WAIT);
    let fx = polled(&mut f.e);
    assert!(sent_welcomes(&fx).is_empty(), "{fx:?}");
    assert_eq!(sent_announcements(&fx).len(), 1, "{fx:?}");
}

#[test]
fn a_host_back_before_its_names_is_welcomed_by_unicast_where_it_announced_them() {
    // Hosts heard announcing their names at their addresses, none of them
    // asked for anything since (or what was asked expired: bindings last
    // `urdma_reconfirm`, hints a day).
    let (mut f, t, within) = settled_among(3);
    // Host 11 back on new hardware, its start query sent before its
    // daemon gave it its names: the address it announced them from is a
    // host of the segment's, welcomed there alone.
    let (_, at) = newcomer(11);
    let bytes = own_start_query(77, ip_only("fe80::1:b", [10, 0, 0, 11]));
    deliver(&mut f, at, Some(group()), &bytes, t);
    f.e.input(Input::Timers, t + within * announce::WELCOME_WAIT);
    let fx = polled(&mut f.e);
    assert!(sent_announcements(&fx).is_empty(), "{fx:?}");
    let w = sent_welcomes(&fx);
    assert_eq!(w.len(), 1, "{fx:?}");
    assert_eq!(w[0].0, at);
}

#[test]
fn many_hosts_back_at_once_are_welcomed_by_one_announcement_to_the_groups() {
    let (mut f, t, within) = settled_among(81);
    // 80 back with new hardware at once: beyond UNICAST_WELCOMES in a
    // period, one announcement to the groups answers them all, those
    // still waiting for theirs too.
    for n in 11..91 {
        back(&mut f, n, 1, t);
    }
    let t = t + within * announce::WELCOME_WAIT;
    f.e.input(Input::Timers, t);
    let fx = polled(&mut f.e);
    assert_eq!(sent_welcomes(&fx).len(), 0, "{fx:?}");
    assert_eq!(sent_announcements(&fx).len(), 1, "{fx:?}");
    // One that comes back after it is answered by unicast again.
    back(&mut f, 91, 2, t);
    f.e.input(Input::Timers, t + within * 2);
    assert_eq!(sent_welcomes(&polled(&mut f.e)).len(), 1);
}

/// The welcomes, by unicast and to the groups, a host of a settled segment
/// of 81 sends when `count` of them come back with new hardware one after
/// another, 1 % of a welcome window apart, its timers running between.
fn welcomes_for_burst(count: u8) -> (usize, usize) {
    let (mut f, t0, within) = settled_among(81);
    let step = within / 100;
    let mut fx = Vec::new();
    for (i, n) in (11..11 + count).enumerate() {
        let t = t0 + step * i as u32;
        back(&mut f, n, 1, t);
        f.e.input(Input::Timers, t);
        fx.push(polled(&mut f.e));
    }
    let mut t = t0 + step * count.into();
    while t <= t0 + within * (announce::WELCOME_WAIT + 2) {
        f.e.input(Input::Timers, t);
        fx.push(polled(&mut f.e));
        t += step;
    }
    let unicast = fx.iter().map(|x| sent_welcomes(x).len()).sum();
    let groups = fx.iter().map(|x| sent_announcements(x).len()).sum();
    (unicast, groups)
}

#[test]
fn a_burst_that_passes_the_bound_within_a_window_gets_no_unicast_welcome() {
    // 80 within 0.8 windows: the groups answer them, and nothing went to
    // the first 64 on its own before the burst passed the bound.
    assert_eq!(welcomes_for_burst(80), (0, 1), "unicast and group welcomes");
    // As many as the bound: each its own, by unicast.
    let most = welcome::UNICAST_WELCOMES;
    assert_eq!(welcomes_for_burst(most as u8), (most, 0));
}

#[test]
fn a_host_that_starts_takes_the_welcomes_sent_to_it_alone_as_hints_for_a_while() {
    let mut f = keyed(fixture(segment_only()));
    for ms in [0, 50] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    polled(&mut f.e);
    // The peer's welcome, sent to this host alone after its start query.
    let welcome = Message::from(Announce::new(vec![peer_record(PEER)], false).unwrap()).encode();
    let t = f.t0 + Duration::from_millis(100);
    deliver(&mut f, peer(), Some(own_ip()), &welcome, t);
    let t = t + hints::SETTLE;
    f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()), "asked of its holder");
    // A forged one naming another holder of the same name: disputed, so
    // the groups decide.
    let forged = holding(ATTACKER, [10, 0, 0, 66], "node-x");
    let honest = holding("fe80::c", [10, 0, 0, 3], "node-x");
    let c = SocketAddr::new(IpAddr::V4([10, 0, 0, 3].into()), 6126);
    for (record, from) in [(forged, attacker()), (honest, c)] {
        let a = Message::from(Announce::new(vec![record], false).unwrap()).encode();
        deliver(&mut f, from, Some(own_ip()), &a, t);
    }
    let t = t + hints::SETTLE;
    f.e.resolve_at(f.addr, &by_name("node-x", 2), 2, t);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, None, "two holders: the groups");
    // Past the welcomes' time, one sent to this host alone is no hint.
    let late = f.t0 + welcome::WELCOME_LISTEN + Duration::from_secs(1);
    let d = holding("fe80::d", [10, 0, 0, 4], "node-d");
    let from = SocketAddr::new(IpAddr::V4([10, 0, 0, 4].into()), 6126);
    let a = Message::from(Announce::new(vec![d], false).unwrap()).encode();
    deliver(&mut f, from, Some(own_ip()), &a, late);
    f.e.resolve_at(f.addr, &by_name("node-d", 3), 3, late + hints::SETTLE);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, None);
}

#[test]
fn a_host_renews_its_announcements_so_that_what_peers_heard_never_expires() {
    // Peers keep what it announced a minute: it renews every 24 s, give
    // or take a tenth.
    let cfg = Config {
        addr_timeout: crate::config::Lifetime::Minutes(1),
        ..Config::default()
    };
    let mut f = fixture(cfg.clone());
    let secs = Duration::from_secs;
    let sent = announced_between(&mut f, Duration::ZERO, secs(200));
    assert_eq!(&sent[..3], &[Duration::from_millis(100), secs(1), secs(3)]);
    let gaps: Vec<Duration> = sent[2..].windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() >= 7, "{sent:?}");
    for gap in &gaps {
        assert!((secs(21)..=secs(27)).contains(gap), "{sent:?}");
    }
    assert!(gaps.windows(2).any(|w| w[0] != w[1]), "jittered: {gaps:?}");
    // Announced for ever: never renewed.
    let cfg = Config {
        addr_timeout: crate::config::Lifetime::Never,
        ..Config::default()
    };
    let mut f = fixture(cfg);
    assert_eq!(
        announced_between(&mut f, Duration::ZERO, secs(100)).len(),
        3
    );

    // A peer that hears the renewals keeps whom to ask for the name.
    let mut g = fixture(Config {
        addr_timeout: crate::config::Lifetime::Minutes(1),
        name_lookup: vec![NameLookup::Segment],
        ..Config::default()
    });
    let t0 = g.t0;
    for s in (0..=600).step_by(24) {
        heard_on_group(&mut g, peer_record(PEER), peer(), t0 + secs(s));
    }
    let t = g.t0 + secs(600) + hints::SETTLE;
    g.e.resolve_at(g.addr, &by_name("node-b", 1), 1, t);
    let (_, to) = sent_query(&polled(&mut g.e));
    assert_eq!(to, Some(peer()), "asked of its holder, ten lifetimes later");
}

#[test]
fn a_host_that_starts_sends_a_start_query_and_hosts_that_hear_it_announce_themselves() {
    let mut f = keyed(fixture(Config::default()));
    let mut starts = Vec::new();
    for ms in (0..=3_000).step_by(50) {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
        let fx = polled(&mut f.e);
        if has_start_query(&fx) {
            starts.push(ms);
            let q = fx
                .work
                .datagrams
                .iter()
                .find_map(|d| match d {
                    Datagram::Multicast { bytes, .. } => match Message::decode(bytes) {
                        Ok(Message::Query(q)) => Some(q),
                        _ => None,
                    },
                    _ => None,
                })
                .unwrap();
            assert_eq!(q.target().address(), &node_a(), "its own name");
            assert_eq!(q.sender().gid(), OWN.parse().unwrap());
        }
    }
    assert_eq!(starts, [50, 1_000], "with its first two announcements");
    assert_eq!(f.e.discovery().counts().traffic.start_queries, 2);
    // A change is announced, with no start query: the host knows the
    // segment.
    f.e.add_address(f.ep, Address::name("node-a2").unwrap());
    for ms in (3_100..=7_000).step_by(50) {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
        assert!(!has_start_query(&polled(&mut f.e)));
    }

    // The peer, known here, restarted (same GID) and sends a start query:
    // this host announces itself to it, within the window; the peer's
    // second start query is not answered again.
    let (within, _) = announce::welcome_pace(1);
    let heard = f.t0 + Duration::from_secs(8);
    heard_on_group(&mut f, peer_record(PEER), peer(), heard);
    f.e.input(Input::Timers, heard + within);
    assert_eq!(
        sent_announcements(&polled(&mut f.e)).len(),
        1,
        "a new endpoint, on the groups"
    );
    let t = heard + WELCOMED_FOR * 2;
    let bytes = start_query(77, peer_record(PEER));
    deliver(&mut f, peer(), Some(group()), &bytes, t);
    let fx = polled(&mut f.e);
    assert!(fx.work.datagrams.is_empty(), "not answered: {fx:?}");
    f.e.input(Input::Timers, t + within * 2);
    let w = sent_welcomes(&polled(&mut f.e));
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0, peer());
    deliver(&mut f, peer(), Some(group()), &bytes, t + within * 2);
    f.e.input(Input::Timers, t + within * 4);
    assert!(polled(&mut f.e).work.datagrams.is_empty());
    let every = announce::welcome_pace(1).1;
    // A query by unicast for the asker's own address is no start query.
    let t = t + WELCOMED_FOR * 2;
    deliver(&mut f, peer(), Some(own_ip()), &bytes, t);
    f.e.input(Input::Timers, t + every + within);
    assert!(sent_announcements(&polled(&mut f.e)).is_empty());
}

#[test]
fn a_host_whose_discovery_starts_before_its_addresses_still_sends_both_start_queries() {
    // The daemon opens the port (discovery starts), then the endpoint and
    // its addresses, one call at a time; this host's thread can announce
    // in between, with nothing to ask for yet.
    let mut e = Engine::new(FakeDaemon::default(), Config::default(), Hosts::default());
    let dev = e.open_device(1);
    let port = e.open_port(dev, PortInfo::infiniband(1, OWN.parse().unwrap()));
    let port = port.unwrap();
    let t0 = Instant::now();
    e.input(Input::DiscoveryUp(Families::V4), t0);
    let mut starts = 0;
    let mut run = |e: &mut Engine<FakeDaemon>, ms: u64| {
        e.input(Input::Timers, t0 + Duration::from_millis(ms));
        starts += usize::from(has_start_query(&polled(e)));
    };
    run(&mut e, 0);
    run(&mut e, 50);
    let ep = e.open_endpoint(port, 0xffff).unwrap();
    e.add_address(ep, Address::Ip4([10, 0, 0, 1].into()));
    e.add_address(ep, Address::name("node-a").unwrap());
    for ms in [100, 150, 1_000, 1_100, 1_150, 3_000, 3_200] {
        run(&mut e, ms);
    }
    assert_eq!(starts, 2, "both start queries, once it has its addresses");
}

#[test]
fn a_lookup_in_flight_asks_again_at_once_when_its_host_says_it_has_just_started() {
    let mut f = fixture(Config::default());
    let t = f.t0 + Duration::from_secs(10);
    // Asked while the peer is down: the query finds nobody.
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, t);
    let (lost, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()));
    // The peer back, on new hardware: its start query.
    let start = |txid: u64| start_query(txid, peer_record("fe80::b2"));
    let back = t + Duration::from_millis(200);
    deliver(&mut f, peer(), Some(group()), &start(77), back);
    let fx = polled(&mut f.e);
    let (again, to) = sent_query(&fx);
    assert_eq!(to, Some(peer()), "asked again at once, not after the try");
    assert_eq!(again.target().address(), &peer_ip());
    assert_ne!(again.txid(), lost.txid(), "a try of its own");
    // Its second start query does not make it ask a third time.
    deliver(&mut f, peer(), Some(group()), &start(78), back);
    assert!(sent_queries(&polled(&mut f.e)).is_empty());
    // Its tries keep their times: the second still at the end of the
    // first, 500 ms after it.
    f.e.input(Input::Timers, t + Duration::from_millis(499));
    assert!(sent_queries(&polled(&mut f.e)).is_empty());
    f.e.input(Input::Timers, t + Duration::from_millis(500));
    assert_eq!(sent_query(&polled(&mut f.e)).1, Some(peer()));
    // The reply binds as any reply does: the request is answered with the
    // GID the holder gives.
    let found = reply_bytes(&again, Answer::Found(peer_record("fe80::b2")));
    deliver(&mut f, peer(), None, &found, t + Duration::from_millis(501));
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), "fe80::b2".parse().unwrap());
}

#[test]
fn a_check_its_host_prompted_is_not_asked_again_when_that_host_says_it_started() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    let t = f.t0 + Duration::from_secs(10);
    // The peer back on new hardware: its announcement comes first and is
    // checked with it, at the address it came from, which is open now.
    let moved =
        Message::from(Announce::new(vec![peer_record("fe80::b2")], false).unwrap()).encode();
    deliver(&mut f, peer(), Some(group()), &moved, t);
    let (check, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()));
    // Its start query then asks nothing more: the check left after the
    // peer was back, and a second copy would only double its replies.
    let bytes = start_query(77, peer_record("fe80::b2"));
    deliver(
        &mut f,
        peer(),
        Some(group()),
        &bytes,
        t + Duration::from_millis(20),
    );
    assert!(sent_queries(&polled(&mut f.e)).is_empty());
    // The check's reply follows the peer.
    let found = reply_bytes(&check, Answer::Found(peer_record("fe80::b2")));
    deliver(&mut f, peer(), None, &found, t + Duration::from_millis(30));
    polled(&mut f.e);
    assert_eq!(
        bound_gid(&f.e, &peer_ip()),
        Some("fe80::b2".parse().unwrap())
    );
}

/// A lookup of the peer's address left while it was down; the peer comes
/// back on new hardware, holding a second address, and its announcement is
/// heard first; a lookup of that second address leaves then; its start
/// query follows. Returns the queries that start query made this host send,
/// after checking that the first lookup is the one asked again.
fn asked_again_at_start(f: &mut Fixture, t: Instant) -> usize {
    let other = [10, 0, 0, 3];
    // Asked while the peer is down: the query finds nobody.
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, t);
    let (lost, _) = sent_query(&polled(&mut f.e));
    // The peer back on new hardware, holding a second address: its
    // announcement is heard first; then a lookup of that second address
    // leaves, to a host that is listening.
    let addrs = vec![
        WireAddress::from(Ipv4Addr::from(PEER_IP)),
        WireAddress::from(Ipv4Addr::from(other)),
        WireAddress::new(node_b()).unwrap(),
    ];
    let record = EndpointRecord::new("fe80::b2".parse().unwrap(), 0, 4, 7, vec![0xffff], addrs);
    let record = record.unwrap();
    let back = t + Duration::from_millis(200);
    let a = Message::from(Announce::new(vec![record.clone()], false).unwrap()).encode();
    deliver(f, peer(), Some(group()), &a, back);
    polled(&mut f.e);
    let later = back + Duration::from_millis(10);
    f.e.resolve_at(f.addr, &ip_request(other, 0, 2), 12, later);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to.map(|a| a.ip()), Some(IpAddr::from(other)));
    // Its start query asks again only what left before it was heard.
    let bytes = start_query(77, record);
    deliver(
        f,
        peer(),
        Some(group()),
        &bytes,
        later + Duration::from_millis(10),
    );
    let fx = polled(&mut f.e);
    let again = sent_queries(&fx);
    assert!(
        again
            .iter()
            .any(|(q, to)| q.target() == lost.target() && *to == Some(peer())),
        "{fx:?}"
    );
    again.len()
}

#[test]
fn only_what_left_before_a_host_was_heard_back_is_asked_again_at_its_start() {
    let mut f = fixture(Config::default());
    let t = f.t0 + Duration::from_secs(10);
    assert_eq!(asked_again_at_start(&mut f, t), 1);
}

#[test]
fn a_host_announcing_a_change_of_its_own_still_asks_again_only_what_left_before() {
    let mut f = fixture(Config::default());
    for ms in [0, 50, 1_000, 3_000] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    // This host takes a new address: its own announcements are due over
    // the next 3 s, while the peer comes back. They answer the peer, but
    // when it was first heard counts all the same.
    let t = f.t0 + Duration::from_secs(10);
    f.e.add_address(f.ep, Address::Ip4([10, 0, 0, 7].into()));
    f.e.input(Input::Timers, t);
    polled(&mut f.e);
    assert_eq!(asked_again_at_start(&mut f, t), 1);
}

#[test]
fn a_start_query_that_does_not_list_its_source_makes_nobody_ask_again() {
    let mut f = fixture(Config::default());
    let t = f.t0 + Duration::from_secs(10);
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, t);
    polled(&mut f.e);
    // A forger elsewhere naming the peer's address in its record.
    let bytes = start_query(79, peer_record(ATTACKER));
    deliver(
        &mut f,
        attacker(),
        Some(group()),
        &bytes,
        t + Duration::from_millis(100),
    );
    assert!(sent_queries(&polled(&mut f.e)).is_empty());
}

#[test]
fn forged_start_queries_from_many_sources_leave_a_real_one_its_asking_again() {
    let mut f = fixture(Config::default());
    let t = f.t0 + Duration::from_secs(10);
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, t);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()));
    // A forger sends 200 start queries in a tenth of a second, each from
    // another address its record lists, the last ten just before the
    // peer's own.
    let back = t + Duration::from_millis(200);
    for n in 0..210u32 {
        let ip = [10, 1, (n / 250) as u8, (n % 250) as u8 + 1];
        let gid = format!("fe80::bad:{n:x}");
        let from = SocketAddr::new(IpAddr::V4(ip.into()), 6126);
        let bytes = own_start_query(1_000 + u64::from(n), ip_only(&gid, ip));
        let at =
            back - Duration::from_millis(100) + Duration::from_micros(u64::from(n.min(200)) * 500);
        f.e.on_datagram(from, Some(group()), &bytes, at);
    }
    polled(&mut f.e);
    // The peer, back, is still asked again at once.
    let start = start_query(77, peer_record("fe80::b2"));
    f.e.on_datagram(peer(), Some(group()), &start, back);
    let (again, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()), "asked again at once");
    assert_eq!(again.target().address(), &peer_ip());
}

#[test]
fn without_a_key_a_welcome_sent_to_this_host_alone_gives_no_hint() {
    let mut f = fixture(segment_only());
    for ms in [0, 50] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    polled(&mut f.e);
    // A forger saw the start query and unicasts a "welcome" naming
    // another host's name with its own address, at once: nobody else
    // hears it, so nothing could contradict it.
    let forged = holding(ATTACKER, [10, 0, 0, 66], "node-b");
    let welcome = Message::from(Announce::new(vec![forged], false).unwrap()).encode();
    let t = f.t0 + Duration::from_millis(60);
    f.e.on_datagram(attacker(), Some(own_ip()), &welcome, t);
    let t = t + hints::SETTLE * 2;
    f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, None, "asked of the groups, where every holder claims");
}

#[test]
fn without_a_key_a_host_back_is_welcomed_on_the_groups_only() {
    // An address heard announcing names and settled is no proof that a
    // host is there: one forged announcement from an address nobody
    // holds, and start queries listing it, would aim every host's
    // announcements at it.
    let mut f = fixture(Config::default());
    for ms in [0, 50, 1_000, 3_000] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    let t = f.t0 + Duration::from_secs(4);
    let victim = SocketAddr::new(IpAddr::V4([10, 0, 0, 77].into()), 6126);
    heard_on_group(
        &mut f,
        holding("fe80::77", [10, 0, 0, 77], "node-v"),
        victim,
        t,
    );
    let (within, _) = announce::welcome_pace(1);
    let mut t = t + Duration::from_secs(20);
    let mut welcomes = 0;
    for n in 0..4u8 {
        let gid = format!("fe80::77:{n:x}");
        let bytes = own_start_query(90 + u64::from(n), holding(&gid, [10, 0, 0, 77], "node-v"));
        f.e.on_datagram(victim, Some(group()), &bytes, t);
        f.e.input(Input::Timers, t + within * announce::WELCOME_WAIT);
        let fx = polled(&mut f.e);
        assert!(sent_welcomes(&fx).is_empty(), "aimed at 10.0.0.77: {fx:?}");
        welcomes += sent_announcements(&fx).len();
        t += WELCOMED_FOR;
    }
    assert!(welcomes >= 1, "welcomed on the groups");
}

#[test]
fn a_flood_of_announcements_from_new_gids_makes_no_host_of_the_segment_a_newcomer_again() {
    // A forger on the group announces a name under each of 100 new GIDs,
    // more than the table keeps: the peer heard before stays known, so
    // its next announcement is not answered as a newcomer's.
    let mut f = fixture(Config {
        max_learned: 8,
        ..Config::default()
    });
    for ms in [0, 50, 1_000, 3_000] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    let t0 = f.t0;
    heard_on_group(
        &mut f,
        peer_record(PEER),
        peer(),
        t0 + Duration::from_secs(5),
    );
    announced_between(&mut f, Duration::from_secs(5), Duration::from_secs(20));
    for i in 0..100u32 {
        let forged = holding(
            &format!("fe80::66:{i:x}"),
            [10, 0, 0, 66],
            &format!("forged-{i}"),
        );
        let at = t0 + Duration::from_secs(20) + Duration::from_millis(u64::from(i));
        heard_on_group(&mut f, forged, attacker(), at);
    }
    announced_between(&mut f, Duration::from_secs(20), Duration::from_secs(40));
    heard_on_group(
        &mut f,
        peer_record(PEER),
        peer(),
        t0 + Duration::from_secs(40),
    );
    assert_eq!(
        announced_between(&mut f, Duration::from_secs(40), Duration::from_secs(60)),
        Vec::<Duration>::new(),
        "the peer is no newcomer"
    );
    // The welcomes' pace allows one now: a forged GID whose name the
    // full table refused, pushed out by those after it, is a newcomer
    // again.
    let pushed_out = holding("fe80::66:32", [10, 0, 0, 66], "forged-50");
    heard_on_group(&mut f, pushed_out, attacker(), t0 + Duration::from_secs(60));
    assert_eq!(
        announced_between(&mut f, Duration::from_secs(60), Duration::from_secs(80)).len(),
        1,
        "a newcomer is answered"
    );
}
