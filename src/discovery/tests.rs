//! Discovery's behaviour as the request path sees it: through the
//! engine, with a fake host and explicit time.

use super::announce::{BATCH as ANNOUNCE_BATCH, PACE as ANNOUNCE_PACE};
use super::state::NssJob;
use super::welcome::WELCOMED_FOR;
use super::wire::{Announce, Answer, EndpointRecord, Message, Query, WireAddress};
use super::*;
use crate::addr::{Address, Gid};
use crate::config::hosts::Hosts;
use crate::config::{Config, Derivation, NameLookup};
use crate::daemon::FakeDaemon;
use crate::engine::{Effects, Engine};
use crate::handle::{AddressId, EndpointId};
use crate::local::PortInfo;
use crate::request::msg::tests::{addr_entry, request};
use crate::request::msg::MsgBuf;
use crate::request::path::PathRecord;
use crate::summary::EVERY as DROP_SUMMARY_EVERY;
use acm_prov_sys::{
    ACM_ADDRESS_IP, ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST, ACM_FLAGS_NODELAY, ACM_STATUS_ENODATA,
    ACM_STATUS_ENOMEM, ACM_STATUS_ENOTCONN, ACM_STATUS_ETIMEDOUT,
};
use std::net::Ipv4Addr;

const OWN: &str = "fe80::a";
const PEER: &str = "fe80::b";
const PEER_IP: [u8; 4] = [10, 0, 0, 2];

struct Fixture {
    e: Engine<FakeDaemon>,
    ep: EndpointId,
    addr: AddressId,
    t0: Instant,
}

fn fixture(cfg: Config) -> Fixture {
    fixture_with_gid(cfg, OWN)
}

/// Device 1, its port 1 with GID `gid`, one endpoint holding 10.0.0.1
/// and `node-a`: the endpoint and its IPv4 address.
fn bring_up(e: &mut Engine<FakeDaemon>, gid: &str) -> (EndpointId, AddressId) {
    let dev = e.open_device(1);
    let info = PortInfo::infiniband(1, gid.parse().unwrap());
    let port = e.open_port(dev, info).unwrap();
    let ep = e.open_endpoint(port, 0xffff).unwrap();
    let addr = e
        .add_address(ep, Address::Ip4([10, 0, 0, 1].into()))
        .unwrap();
    e.add_address(ep, Address::name("node-a").unwrap()).unwrap();
    (ep, addr)
}

fn fixture_with_gid(cfg: Config, gid: &str) -> Fixture {
    let mut e = Engine::new(FakeDaemon::default(), cfg, Hosts::default());
    let (ep, addr) = bring_up(&mut e, gid);
    e.set_discovery_up(Families::V4, Instant::now());
    e.take_effects();
    Fixture {
        e,
        ep,
        addr,
        t0: Instant::now(),
    }
}

fn ip_request(ip: [u8; 4], flags: u32, tid: u64) -> MsgBuf {
    request(
        &[addr_entry(ACM_EP_FLAG_DEST | flags, ACM_ADDRESS_IP, &ip)],
        false,
        tid,
    )
}

fn peer_record(gid: &str) -> EndpointRecord {
    let addrs = vec![
        WireAddress::from(Ipv4Addr::from(PEER_IP)),
        WireAddress::new(Address::name("node-b").unwrap()).unwrap(),
    ];
    EndpointRecord::new(gid.parse().unwrap(), 0, 4, 7, vec![0xffff], addrs).unwrap()
}

fn peer() -> SocketAddr {
    SocketAddr::new(
        IpAddr::V4(PEER_IP.into()),
        crate::config::DEFAULT_DISCOVERY_PORT,
    )
}

/// The one QUERY among the effects, and where it went.
fn sent_query(fx: &Effects) -> (Query, Option<SocketAddr>) {
    let queries = sent_queries(fx);
    assert_eq!(queries.len(), 1, "{fx:?}");
    queries.into_iter().next().unwrap()
}

/// The fixture asks for the peer's IPv4 address (request `tid`) and
/// the peer answers FOUND with its record: the peer is learned.
fn learn_peer(f: &mut Fixture, tid: u64) {
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, tid), tid);
    let (q, _) = sent_query(&f.e.take_effects());
    let found = reply_bytes(&q, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &found, f.t0);
    f.e.take_effects();
}

/// The fixture asks for `node-b` by name; the peer claims it in answer
/// to the group query and confirms it by unicast: the name is learned,
/// confirmed at the peer's address.
fn learn_peer_name(f: &mut Fixture, tid: u64) {
    let by_name = request(
        &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node-b")],
        false,
        tid,
    );
    assert_eq!(f.e.resolve(f.addr, &by_name, tid), None);
    let (group, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, None, "names are asked of the groups");
    let claim = reply_bytes(&group, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &claim, f.t0);
    let (confirm, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, Some(peer()), "the claimant is asked by unicast");
    assert_ne!(confirm.txid(), group.txid(), "with a fresh transaction id");
    let found = reply_bytes(&confirm, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &found, f.t0);
    let fx = after_claims(f);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
}

/// The effects once the group query's try is over: a name claimed and
/// confirmed is decided only then, when every holder had its chance to
/// answer.
fn after_claims(f: &mut Fixture) -> Effects {
    assert!(
        f.e.take_effects().replies.is_empty(),
        "not before other holders could answer"
    );
    f.e.on_timers(f.t0 + Duration::from_millis(600));
    f.e.take_effects()
}

/// Names asked of the segment only, so a lookup that fails there fails.
fn segment_only() -> Config {
    Config {
        name_lookup: vec![NameLookup::Segment],
        ..Config::default()
    }
}

fn reply_bytes(q: &Query, answer: Answer) -> Vec<u8> {
    Message::from(q.reply(answer).unwrap()).encode()
}

const ATTACKER: &str = "fe80::bad:0:0:66";

/// What a forger puts in its datagrams: its own GID for the peer's
/// addresses.
fn forged_record() -> EndpointRecord {
    peer_record(ATTACKER)
}

fn node_b() -> Address {
    Address::name("node-b").unwrap()
}

fn node_a() -> Address {
    Address::name("node-a").unwrap()
}

fn peer_ip() -> Address {
    Address::Ip4(PEER_IP.into())
}

/// The datagrams among the effects but the start queries, which a fixture
/// sends with its first announcements (`welcome.rs`).
fn without_start_queries(fx: &Effects) -> Vec<Datagram> {
    fx.datagrams
        .iter()
        .filter(|d| {
            let Datagram::Multicast { bytes, .. } = d else {
                return true;
            };
            !matches!(Message::decode(bytes), Ok(Message::Query(q)) if welcome::is_start_query(&q))
        })
        .cloned()
        .collect()
}

/// The queries among the effects (start queries aside), with where they
/// went.
fn sent_queries(fx: &Effects) -> Vec<(Query, Option<SocketAddr>)> {
    without_start_queries(fx)
        .iter()
        .filter_map(|d| {
            let (to, bytes) = match d {
                Datagram::Unicast { to, bytes, .. } => (Some(*to), bytes),
                Datagram::Multicast { bytes, .. } => (None, bytes),
            };
            match Message::decode(bytes) {
                Ok(Message::Query(q)) => Some((q, to)),
                _ => None,
            }
        })
        .collect()
}

fn bound_gid(e: &Engine<FakeDaemon>, a: &Address) -> Option<Gid> {
    e.learned_dest(a).map(|d| d.gid)
}

fn dgid(m: &MsgBuf) -> Gid {
    assert_eq!(m.status(), 0, "{m:?}");
    PathRecord::decode(m.entry(0).info.first_chunk().unwrap()).dgid
}

#[test]
fn a_miss_asks_the_address_once_and_answers_every_waiter_once() {
    let mut f = fixture(Config::default());
    assert_eq!(
        f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11),
        None,
        "waits for the peer"
    );
    let fx = f.e.take_effects();
    assert!(
        fx.deadline.is_some(),
        "the worker must learn of the new deadline"
    );
    let (q, to) = sent_query(&fx);
    assert_eq!(to, Some(peer()));
    assert_eq!(q.target().address(), &peer_ip());
    assert_eq!(
        q.sender().gid(),
        OWN.parse().unwrap(),
        "the query carries the asker's record"
    );
    let [Datagram::Unicast { from, .. }] = &fx.datagrams[..] else {
        panic!("{fx:?}")
    };
    assert_eq!(
        *from,
        Some(IpAddr::V4([10, 0, 0, 1].into())),
        "sent from the asking endpoint's own address"
    );
    assert_eq!(f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 2), 12), None);
    assert!(
        f.e.take_effects().datagrams.is_empty(),
        "a second request joins the lookup"
    );

    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&q, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let fx = f.e.take_effects();
    let mut ids: Vec<u64> = fx.replies.iter().map(|r| r.id).collect();
    ids.sort();
    assert_eq!(ids, [11, 12]);
    for r in &fx.replies {
        assert_eq!(dgid(&r.msg), PEER.parse().unwrap());
        let path = PathRecord::decode(r.msg.entry(0).info.first_chunk().unwrap());
        assert_eq!(
            (path.mtu, path.rate),
            (4, 7),
            "the peer's MTU and rate bound the path"
        );
    }
    // Learned: the address asked about and the peer's GID; not the
    // other address its record lists, which nobody confirmed.
    assert_eq!(bound_gid(&f.e, &peer_ip()), Some(PEER.parse().unwrap()));
    assert_eq!(
        bound_gid(&f.e, &Address::Gid(PEER.parse().unwrap())),
        Some(PEER.parse().unwrap())
    );
    assert_eq!(bound_gid(&f.e, &node_b()), None);
    assert_eq!(f.e.discovery().lookups_in_flight(), 0);
    // A second reply to the same query (its retry answered too) is
    // dropped as late, not as unsolicited: normal traffic raises no alarm.
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
    assert!(f.e.take_effects().replies.is_empty());
    let d = f.e.discovery().drops();
    assert_eq!((d.late, d.unsolicited), (1, 0));
    // Once no try of it can still be answered, a reply to it is one
    // nobody asked for.
    let stage = Duration::from_millis(u64::from(Config::default().timeout_ms))
        * (Config::default().retries + 1);
    let after = f.t0 + stage + Duration::from_millis(1);
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), after);
    let d = f.e.discovery().drops();
    assert_eq!((d.late, d.unsolicited), (1, 1));
}

#[test]
fn replies_from_elsewhere_or_unknown_transactions_are_dropped() {
    let mut f = fixture(Config::default());
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
    let (q, _) = sent_query(&f.e.take_effects());
    let found = reply_bytes(&q, Answer::Found(peer_record("fe80::666")));
    let impostor = SocketAddr::new(
        IpAddr::V4([10, 0, 0, 66].into()),
        crate::config::DEFAULT_DISCOVERY_PORT,
    );
    f.e.on_datagram(impostor, None, &found, f.t0);
    let other_port = SocketAddr::new(IpAddr::V4(PEER_IP.into()), 4444);
    f.e.on_datagram(other_port, None, &found, f.t0);
    assert_eq!(f.e.discovery().drops().wrong_source, 2);
    let stranger = Query::new(
        std::num::NonZeroU64::new(q.txid().get() ^ 1).unwrap(),
        q.target().clone(),
        peer_record(PEER),
    );
    f.e.on_datagram(peer(), None, &reply_bytes(&stranger, Answer::Refused), f.t0);
    assert_eq!(f.e.discovery().drops().unsolicited, 1);
    f.e.on_datagram(peer(), None, b"garbage", f.t0);
    assert_eq!(f.e.discovery().drops().malformed, 1);
    assert!(
        f.e.take_effects().replies.is_empty(),
        "nothing answered the client"
    );
    assert_eq!(
        f.e.discovery().lookups_in_flight(),
        1,
        "the lookup still waits for its real answer"
    );
}

#[test]
fn silence_is_retried_then_times_out_and_is_not_remembered() {
    let cfg = Config {
        timeout_ms: 100,
        retries: 2,
        ..Config::default()
    };
    let mut f = fixture(cfg);
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
    let (first, _) = sent_query(&f.e.take_effects());
    for try_ in 1..=2u64 {
        f.e.on_timers(f.t0 + Duration::from_millis(101 * try_));
        let (again, _) = sent_query(&f.e.take_effects());
        assert_eq!(again.txid(), first.txid(), "retries keep the txid");
    }
    f.e.on_timers(f.t0 + Duration::from_millis(400));
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
    // Not finding out says nothing about the destination: the next
    // request asks again.
    let t = f.t0 + Duration::from_millis(401);
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 12, t),
        None
    );
    let (again, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, Some(peer()));
    assert_ne!(again.txid(), first.txid(), "a new lookup");
    assert_eq!(f.e.discovery().failures(), 0, "nothing remembered");
}

#[test]
fn a_refusal_fails_at_once_with_enodata_and_an_icmp_error_with_etimedout() {
    let mut f = fixture(Config {
        negative_timeout_ms: 0,
        ..Config::default()
    });
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
    let (q, _) = sent_query(&f.e.take_effects());
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
    let fx = f.e.take_effects();
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);

    // Nothing listening at the address (a daemon not started yet, a
    // neighbour not resolved): nobody said no, so not ENODATA.
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 2), 12);
    let fx = f.e.take_effects();
    let Datagram::Unicast { bytes, .. } = &fx.datagrams[0] else {
        panic!("{fx:?}")
    };
    // An ICMP error about a datagram to some other host is not ours.
    f.e.on_unreachable(
        SocketAddr::new(IpAddr::V4([10, 0, 0, 9].into()), 6126),
        bytes,
        f.t0,
    );
    assert!(f.e.take_effects().replies.is_empty());
    // ICMPv4 quotes only the start of the query.
    f.e.on_unreachable(peer(), &bytes[..520], f.t0);
    let fx = f.e.take_effects();
    assert_eq!(
        (fx.replies[0].id, fx.replies[0].msg.status()),
        (12, ACM_STATUS_ETIMEDOUT as u8)
    );
}

#[test]
fn derivations_follow_a_failed_discovery_in_order() {
    let cfg = Config {
        derive: vec![Derivation::Eui64, Derivation::Ipv4Mapped],
        ..Config::default()
    };
    let mut f = fixture(cfg);
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
    let (q, _) = sent_query(&f.e.take_effects());
    f.e.on_unreachable(peer(), &Message::from(q).encode(), f.t0);
    let jobs = f.e.take_neighbour_jobs();
    assert_eq!(jobs.len(), 1, "eui64 comes first");
    f.e.on_neighbour(
        jobs[0].clone(),
        Some([0x52, 0x54, 0, 0xaa, 0xbb, 0xcc]),
        f.t0,
    );
    let fx = f.e.take_effects();
    assert_eq!(
        dgid(&fx.replies[0].msg),
        "fe80::5054:ff:feaa:bbcc".parse().unwrap()
    );

    // Without a neighbour entry, eui64 gives way to ipv4-mapped at its deadline.
    let other = [10, 0, 0, 3];
    f.e.resolve(f.addr, &ip_request(other, 0, 2), 12);
    let (q, _) = sent_query(&f.e.take_effects());
    let to = SocketAddr::new(IpAddr::V4(other.into()), 6126);
    f.e.on_unreachable(to, &Message::from(q).encode(), f.t0);
    let job = f.e.take_neighbour_jobs().remove(0);
    f.e.on_neighbour(job, None, f.t0);
    let fx = f.e.take_effects();
    assert!(
        fx.datagrams.is_empty(),
        "the query already made the kernel resolve the neighbour"
    );
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    let fx = f.e.take_effects();
    assert_eq!(dgid(&fx.replies[0].msg), "::ffff:10.0.0.3".parse().unwrap());
}

#[test]
fn nodelay_answers_now_and_still_starts_the_lookup() {
    let mut f = fixture(Config::default());
    let r =
        f.e.resolve(f.addr, &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 1), 11)
            .unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENODATA as u8);
    let (q, _) = sent_query(&f.e.take_effects());
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&q, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    assert!(f.e.take_effects().replies.is_empty(), "nobody was waiting");
    let r =
        f.e.resolve(f.addr, &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 2), 12)
            .unwrap();
    assert_eq!(dgid(&r), PEER.parse().unwrap());
}

#[test]
fn closing_an_endpoint_answers_its_waiters() {
    let mut f = fixture(Config::default());
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
    f.e.take_effects();
    f.e.close_endpoint(f.ep);
    let mut fx = f.e.take_effects();
    assert!(
        fx.deadline.is_some() && fx.datagrams.is_empty(),
        "withdrawals wait to leave together"
    );
    // The wake's timer counts their time; a later one sends them.
    f.e.on_timers(f.t0);
    assert!(f.e.take_effects().datagrams.is_empty());
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    fx.datagrams = f.e.take_effects().datagrams;
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENOTCONN as u8);
    assert_eq!(f.e.discovery().lookups_in_flight(), 0);
    let withdrawn: Vec<_> = fx
        .datagrams
        .iter()
        .filter_map(|d| match d {
            Datagram::Multicast { bytes, .. } => match Message::decode(bytes) {
                Ok(Message::Announce(a)) if a.withdrawn() => Some(a),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(withdrawn.len(), 1, "one withdrawal for the whole endpoint");
    let addrs = withdrawn[0].records()[0].addresses();
    assert_eq!(
        addrs.len(),
        2,
        "its name travels with its IP address: {addrs:?}"
    );
}

/// A query for `target` from the peer's address carrying `sender`,
/// sent to `to` (a unicast address of this host, or a group).
fn query_from_peer(
    e: &mut Engine<FakeDaemon>,
    target: Address,
    sender: EndpointRecord,
    to: IpAddr,
    t: Instant,
) {
    let q = Message::from(Query::new(
        std::num::NonZeroU64::new(7).unwrap(),
        WireAddress::new(target).unwrap(),
        sender,
    ))
    .encode();
    e.on_datagram(peer(), Some(to), &q, t);
}

fn own_ip() -> IpAddr {
    IpAddr::V4([10, 0, 0, 1].into())
}

fn group() -> IpAddr {
    IpAddr::V4(crate::discovery::wire::V4_GROUP)
}

/// The one reply among the effects: where it went, from, and its answer.
fn sent_reply(fx: &Effects) -> (SocketAddr, Option<IpAddr>, Answer) {
    let [Datagram::Unicast { to, from, bytes }] = &fx.datagrams[..] else {
        panic!("one reply expected: {fx:?}")
    };
    assert!(
        bytes.len() <= crate::discovery::wire::QUERY_LEN,
        "never larger than the query"
    );
    let Ok(Message::Reply(r)) = Message::decode(bytes) else {
        panic!("{fx:?}")
    };
    (*to, *from, r.answer().clone())
}

#[test]
fn queries_are_answered_by_the_owner_only_and_group_queries_never_refused() {
    let mut f = fixture(Config::default());
    query_from_peer(
        &mut f.e,
        Address::Ip4([10, 0, 0, 1].into()),
        peer_record(PEER),
        own_ip(),
        f.t0,
    );
    let (to, from, answer) = sent_reply(&f.e.take_effects());
    assert_eq!(
        (to, from),
        (peer(), Some(own_ip())),
        "answered from the queried address"
    );
    assert!(matches!(answer, Answer::Found(rec) if rec.gid() == OWN.parse().unwrap()));
    // The asker's record binds nothing: nobody confirmed it.
    assert_eq!(bound_gid(&f.e, &peer_ip()), None);
    assert_eq!(
        f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 1),
        None,
        "asked like any"
    );
    f.e.take_effects();

    // By unicast, what this host does not hold is refused, names too.
    for target in [
        Address::Ip4([10, 0, 0, 50].into()),
        Address::name("node-z").unwrap(),
    ] {
        query_from_peer(&mut f.e, target, peer_record(PEER), own_ip(), f.t0);
        let (_, from, answer) = sent_reply(&f.e.take_effects());
        assert_eq!(from, Some(own_ip()));
        assert!(matches!(answer, Answer::Refused));
    }
    // A group query reaches every host: only the holder answers, or
    // one forged query would bring a reply from each.
    for to in [group(), IpAddr::V6(crate::discovery::wire::V6_GROUP)] {
        for target in [
            Address::Ip4([10, 0, 0, 50].into()),
            Address::name("node-z").unwrap(),
        ] {
            query_from_peer(&mut f.e, target, peer_record(PEER), to, f.t0);
            assert!(f.e.take_effects().datagrams.is_empty(), "silence");
        }
    }
    query_from_peer(
        &mut f.e,
        Address::name("node-a").unwrap(),
        peer_record(PEER),
        group(),
        f.t0,
    );
    let (_, from, answer) = sent_reply(&f.e.take_effects());
    assert_eq!(
        from, None,
        "a group's reply leaves from the kernel's choice"
    );
    assert!(matches!(answer, Answer::Found(_)));

    let mine = Message::from(Query::new(
        std::num::NonZeroU64::new(7).unwrap(),
        WireAddress::new(Address::name("node-a").unwrap()).unwrap(),
        record_for(f.e.local(), f.ep, None).unwrap(),
    ))
    .encode();
    f.e.on_datagram(peer(), Some(group()), &mine, f.t0);
    assert!(
        f.e.take_effects().datagrams.is_empty(),
        "our own multicast, looped back"
    );
    assert_eq!(f.e.discovery().drops().own, 1);
}

#[test]
fn a_group_query_that_arrives_through_both_families_is_answered_once() {
    let mut f = fixture(Config::default());
    let v6_group = IpAddr::V6(crate::discovery::wire::V6_GROUP);
    let node_a = || Address::name("node-a").unwrap();
    query_from_peer(&mut f.e, node_a(), peer_record(PEER), group(), f.t0);
    sent_reply(&f.e.take_effects());
    let copy = f.t0 + Duration::from_millis(1);
    query_from_peer(&mut f.e, node_a(), peer_record(PEER), v6_group, copy);
    assert!(
        f.e.take_effects().datagrams.is_empty(),
        "the IPv6 copy of the same query: one claim is enough"
    );
    // A try sent again, a timeout later, is answered again.
    let retry = f.t0 + Duration::from_millis(500);
    query_from_peer(&mut f.e, node_a(), peer_record(PEER), group(), retry);
    sent_reply(&f.e.take_effects());
}

#[test]
fn a_forged_query_never_changes_a_binding() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    // From B's address, the attacker's GID as sender record.
    query_from_peer(
        &mut f.e,
        Address::Ip4([10, 0, 0, 1].into()),
        forged_record(),
        own_ip(),
        f.t0,
    );
    let fx = f.e.take_effects();
    assert_eq!(bound_gid(&f.e, &peer_ip()), Some(PEER.parse().unwrap()));
    // It is a hint: B is asked at its own address, with a fresh txid.
    let checks: Vec<_> = sent_queries(&fx);
    assert_eq!(checks.len(), 1, "{fx:?}");
    let (check, to) = &checks[0];
    assert_eq!((*to, check.target().address()), (Some(peer()), &peer_ip()));
    // The attacker, who cannot see that query, answers a guess.
    let guess = Query::new(
        std::num::NonZeroU64::new(check.txid().get() ^ 0x5a5a).unwrap(),
        check.target().clone(),
        forged_record(),
    );
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&guess, Answer::Found(forged_record())),
        f.t0,
    );
    assert_eq!(f.e.discovery().drops().unsolicited, 1);
    assert_eq!(bound_gid(&f.e, &peer_ip()), Some(PEER.parse().unwrap()));
    // B's own answer keeps its binding.
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(check, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let r =
        f.e.resolve(f.addr, &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 2), 2)
            .unwrap();
    assert_eq!(dgid(&r), PEER.parse().unwrap());
    // More forgeries soon after ask B nothing more.
    for _ in 0..100 {
        query_from_peer(
            &mut f.e,
            Address::Ip4([10, 0, 0, 1].into()),
            forged_record(),
            own_ip(),
            f.t0,
        );
    }
    assert_eq!(
        sent_queries(&f.e.take_effects()).len(),
        0,
        "checked at most once per holdoff"
    );
}

#[test]
fn a_forged_announcement_never_moves_a_hosts_names() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    learn_peer_name(&mut f, 2);
    let forged = Message::from(Announce::new(vec![forged_record()], false).unwrap()).encode();
    f.e.on_datagram(peer(), None, &forged, f.t0);
    let fx = f.e.take_effects();
    for a in [peer_ip(), node_b()] {
        assert_eq!(bound_gid(&f.e, &a), Some(PEER.parse().unwrap()), "{a}");
    }
    // Each binding it contradicts is checked where it was confirmed:
    // B's address, for the address and for the name.
    let checks = sent_queries(&fx);
    let mut asked: Vec<(String, Option<SocketAddr>)> = checks
        .iter()
        .map(|(q, to)| (q.target().address().to_string(), *to))
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        [
            ("10.0.0.2".to_string(), Some(peer())),
            ("node-b".to_string(), Some(peer()))
        ]
    );
    for (q, _) in &checks {
        f.e.on_datagram(
            peer(),
            None,
            &reply_bytes(q, Answer::Found(peer_record(PEER))),
            f.t0,
        );
    }
    for a in [peer_ip(), node_b()] {
        assert_eq!(bound_gid(&f.e, &a), Some(PEER.parse().unwrap()), "{a}");
    }
    // A forged withdrawal, later: checked too, and B still holds both.
    let later = f.t0 + CHECK_HOLDOFF * 2;
    let withdrawal = Message::from(Announce::new(vec![peer_record(PEER)], true).unwrap()).encode();
    let elsewhere = SocketAddr::new(IpAddr::V4([10, 0, 0, 66].into()), 6126);
    f.e.on_datagram(elsewhere, None, &withdrawal, later);
    for (q, to) in sent_queries(&f.e.take_effects()) {
        assert_eq!(to, Some(peer()));
        f.e.on_datagram(
            peer(),
            None,
            &reply_bytes(&q, Answer::Found(peer_record(PEER))),
            later,
        );
    }
    for a in [peer_ip(), node_b()] {
        assert_eq!(bound_gid(&f.e, &a), Some(PEER.parse().unwrap()), "{a}");
    }
    // Addresses this host never asked about are not learned either.
    let stranger = EndpointRecord::new(
        "fe80::d".parse().unwrap(),
        0,
        5,
        16,
        vec![0xffff],
        vec![WireAddress::from(Ipv4Addr::new(10, 0, 0, 4))],
    )
    .unwrap();
    let from4 = SocketAddr::new(IpAddr::V4([10, 0, 0, 4].into()), 6126);
    f.e.on_datagram(
        from4,
        None,
        &Message::from(Announce::new(vec![stranger], false).unwrap()).encode(),
        later,
    );
    assert!(f.e.take_effects().datagrams.is_empty());
    assert_eq!(f.e.learned_dest(&Address::Ip4([10, 0, 0, 4].into())), None);
}

#[test]
fn a_host_with_a_new_gid_is_followed_once_it_confirms_it() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    learn_peer_name(&mut f, 2);
    let cached = f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 3), 3).unwrap();
    assert_eq!(dgid(&cached), PEER.parse().unwrap());
    // B came back with new hardware and announces it.
    let moved = Message::from(Announce::new(vec![peer_record("fe80::c")], false).unwrap()).encode();
    f.e.on_datagram(peer(), None, &moved, f.t0);
    let checks = sent_queries(&f.e.take_effects());
    assert_eq!(checks.len(), 2);
    for (q, _) in &checks {
        f.e.on_datagram(
            peer(),
            None,
            &reply_bytes(q, Answer::Found(peer_record("fe80::c"))),
            f.t0,
        );
    }
    for a in [peer_ip(), node_b()] {
        assert_eq!(bound_gid(&f.e, &a), Some("fe80::c".parse().unwrap()), "{a}");
    }
    assert_eq!(
        bound_gid(&f.e, &Address::Gid(PEER.parse().unwrap())),
        None,
        "nothing is left at the old GID"
    );
    let r =
        f.e.resolve(f.addr, &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 4), 4)
            .unwrap();
    assert_eq!(
        dgid(&r),
        "fe80::c".parse().unwrap(),
        "the cached path followed"
    );
}

#[test]
fn a_withdrawal_forgets_what_its_holder_no_longer_confirms() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    learn_peer_name(&mut f, 2);
    let withdrawal = Message::from(Announce::new(vec![peer_record(PEER)], true).unwrap()).encode();
    f.e.on_datagram(peer(), None, &withdrawal, f.t0);
    let checks = sent_queries(&f.e.take_effects());
    assert_eq!(checks.len(), 2);
    let (first, second) = (&checks[0].0, &checks[1].0);
    f.e.on_datagram(peer(), None, &reply_bytes(first, Answer::Refused), f.t0);
    assert_eq!(bound_gid(&f.e, first.target().address()), None);
    // No answer at all forgets too (after the check's tries).
    let cfg_timeout = Duration::from_millis(u64::from(f.e.config().timeout_ms));
    for i in 1..=3 {
        f.e.on_timers(f.t0 + cfg_timeout * i + Duration::from_millis(1));
    }
    assert_eq!(bound_gid(&f.e, second.target().address()), None);
    let r =
        f.e.resolve(f.addr, &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 3), 3)
            .unwrap();
    assert_eq!(
        r.status(),
        ACM_STATUS_ENODATA as u8,
        "not served from the cache"
    );
}

#[test]
fn a_claim_counts_only_once_its_host_confirms_it() {
    let mut f = fixture(segment_only());
    let by_name = |name: &[u8], tid| {
        request(
            &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, name)],
            false,
            tid,
        )
    };
    // The attacker reads the group query and answers first, in B's
    // name, with its own GID: B is asked, and B's answer counts.
    f.e.resolve(f.addr, &by_name(b"node-b", 1), 1);
    let (g, _) = sent_query(&f.e.take_effects());
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&g, Answer::Found(forged_record())),
        f.t0,
    );
    let (confirm, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, Some(peer()));
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&confirm, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let fx = after_claims(&mut f);
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());

    // A name B does not hold, claimed in B's name: B refuses, and the
    // lookup fails once its group query's time is up. B said no only for
    // itself: a holder whose answer was lost may exist, so not ENODATA.
    f.e.resolve(f.addr, &by_name(b"node-c", 2), 2);
    let (g, _) = sent_query(&f.e.take_effects());
    let c_record = EndpointRecord::new(
        ATTACKER.parse().unwrap(),
        0,
        5,
        16,
        vec![0xffff],
        vec![WireAddress::new(Address::name("node-c").unwrap()).unwrap()],
    )
    .unwrap();
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&g, Answer::Found(c_record)),
        f.t0,
    );
    let (confirm, _) = sent_query(&f.e.take_effects());
    f.e.on_datagram(peer(), None, &reply_bytes(&confirm, Answer::Refused), f.t0);
    f.e.on_timers(f.t0 + Duration::from_secs(2));
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(bound_gid(&f.e, &Address::name("node-c").unwrap()), None);
}

#[test]
fn a_name_two_hosts_confirm_with_different_gids_gets_no_answer() {
    let mut f = fixture(segment_only());
    let by_name = request(
        &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node-b")],
        false,
        1,
    );
    f.e.resolve(f.addr, &by_name, 1);
    let (g, _) = sent_query(&f.e.take_effects());
    // The attacker claims the name from its own address too.
    let attacker = SocketAddr::new(IpAddr::V4([10, 0, 0, 66].into()), 6126);
    f.e.on_datagram(
        attacker,
        None,
        &reply_bytes(&g, Answer::Found(forged_record())),
        f.t0,
    );
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&g, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let confirms = sent_queries(&f.e.take_effects());
    assert_eq!(confirms.len(), 2);
    for (q, to) in &confirms {
        let (from, record) = match *to == Some(attacker) {
            true => (attacker, forged_record()),
            false => (peer(), peer_record(PEER)),
        };
        f.e.on_datagram(from, None, &reply_bytes(q, Answer::Found(record)), f.t0);
    }
    let fx = after_claims(&mut f);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    assert_eq!(bound_gid(&f.e, &node_b()), None);
    assert_eq!(f.e.discovery().conflicts(), 1);
}

#[test]
fn names_are_asked_of_the_groups_and_this_host_announces_itself() {
    let mut f = fixture(Config::default());
    learn_peer_name(&mut f, 3);
    // Learned: the name, confirmed where the peer answered.
    assert_eq!(
        f.e.discovery().state().learned.get(&node_b()).unwrap().via,
        Some(peer())
    );
    assert_eq!(bound_gid(&f.e, &peer_ip()), None, "only the name was asked");

    // Counted from the next timer, which is due at once.
    f.e.schedule_announce();
    assert!(f.e.take_effects().deadline.is_some());
    f.e.on_timers(f.t0);
    assert!(f.e.next_wake().unwrap() <= f.t0 + Duration::from_millis(50));
    f.e.on_timers(f.t0 + Duration::from_millis(60));
    let fx = f.e.take_effects();
    let [Datagram::Multicast { bytes, .. }] = &without_start_queries(&fx)[..] else {
        panic!("{fx:?}")
    };
    let Ok(Message::Announce(a)) = Message::decode(bytes) else {
        panic!()
    };
    assert!(!a.withdrawn());
    assert_eq!(a.records()[0].gid(), OWN.parse().unwrap());
    assert_eq!(a.records()[0].addresses().len(), 2);
    assert_eq!(
        f.e.discovery().announcer_sizes()[0],
        2,
        "repeated twice more"
    );
}

#[test]
fn without_discovery_only_derivations_run() {
    let cfg = Config {
        discovery: false,
        derive: vec![Derivation::Eui64, Derivation::Ipv4Mapped],
        ..Config::default()
    };
    let mut f = fixture(cfg);
    f.e.set_discovery_up(Families::NONE, f.t0);
    f.e.take_effects();
    assert_eq!(f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11), None);
    let job = f.e.take_neighbour_jobs().remove(0);
    f.e.on_neighbour(job, None, f.t0);
    let fx = f.e.take_effects();
    assert!(
        matches!(&fx.datagrams[..], [Datagram::Unicast { to, .. }] if *to == SocketAddr::new(IpAddr::V4(PEER_IP.into()), 9)),
        "no query went out, so the kernel is made to resolve the neighbour: {fx:?}"
    );
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(dgid(&fx.replies[0].msg), "::ffff:10.0.0.2".parse().unwrap());
    let by_name = request(
        &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node-b")],
        false,
        3,
    );
    let r = f.e.resolve(f.addr, &by_name, 2).unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENODATA as u8, "names need discovery");
}

const KEY: &str = "1 000102030405060708090a0b0c0d0e0f";

fn auth(keys: &str) -> Auth {
    Auth::new(
        crate::discovery::auth::Keyring::parse(keys, "key").unwrap(),
        crate::discovery::auth::WallClock::system(),
    )
}

#[test]
fn with_a_key_only_authenticated_fresh_messages_count() {
    let mut f = fixture(Config::default());
    f.e.set_auth(Some(auth(KEY)));
    let peer_auth = auth(KEY);
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
    // The engine makes the message; the sender seals each copy as it
    // leaves (net.rs).
    let (q, _) = sent_query(&f.e.take_effects());
    let found = Message::from(q.reply(Answer::Found(peer_record(PEER))).unwrap()).encode();

    // A reply that is right in every way but unsealed, or sealed with
    // another key, is dropped and does not end the lookup.
    f.e.on_datagram(peer(), None, &found, f.t0);
    let forger = auth("1 0f0e0d0c0b0a09080706050403020100");
    f.e.on_datagram(peer(), None, &forger.seal(found.clone()), f.t0);
    let other_id = auth("2 000102030405060708090a0b0c0d0e0f");
    f.e.on_datagram(peer(), None, &other_id.seal(found.clone()), f.t0);
    assert!(f.e.take_effects().replies.is_empty());
    assert_eq!(f.e.discovery().drops().unauthenticated, 3);
    assert_eq!(f.e.discovery().lookups_in_flight(), 1);

    let sealed = peer_auth.seal(found);
    assert!(
        sealed.len()
            <= crate::discovery::wire::QUERY_LEN + crate::discovery::wire::AUTH_TRAILER_LEN,
        "no larger than the sealed query"
    );
    f.e.on_datagram(peer(), None, &sealed, f.t0);
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());

    // Replayed later, even to a new lookup with the same target, it is
    // caught before its transaction id is looked at.
    f.e.on_datagram(peer(), None, &sealed, f.t0);
    assert_eq!(f.e.discovery().drops().replayed, 1);
    assert_eq!(f.e.discovery().drops().unsolicited, 0);
}

/// The peer's QUERY (transaction id 9) for this host's address.
fn peer_asks_for_us() -> Vec<u8> {
    Message::from(Query::new(
        std::num::NonZeroU64::new(9).unwrap(),
        WireAddress::new(Address::Ip4([10, 0, 0, 1].into())).unwrap(),
        peer_record(PEER),
    ))
    .encode()
}

#[test]
fn with_a_key_queries_are_answered_and_plain_or_replayed_ones_ignored() {
    let mut f = fixture(Config::default());
    f.e.set_auth(Some(auth(KEY)));
    let peer_auth = auth(KEY);
    let q = peer_asks_for_us();
    f.e.on_datagram(peer(), Some(own_ip()), &q, f.t0);
    assert!(f.e.take_effects().datagrams.is_empty());
    let sealed = peer_auth.seal(q);
    f.e.on_datagram(peer(), Some(own_ip()), &sealed, f.t0);
    let (_, _, answer) = sent_reply(&f.e.take_effects());
    assert!(matches!(answer, Answer::Found(_)));
    f.e.on_datagram(peer(), Some(own_ip()), &sealed, f.t0);
    assert!(
        f.e.take_effects().datagrams.is_empty(),
        "a replay is not answered"
    );
    assert_eq!(
        (
            f.e.discovery().drops().unauthenticated,
            f.e.discovery().drops().replayed
        ),
        (1, 1)
    );
}

#[test]
fn with_a_key_messages_that_overtake_each_other_all_count_and_replays_none() {
    let mut f = fixture(Config::default());
    f.e.set_auth(Some(auth(KEY)));
    let peer_auth = auth(KEY);
    // Three tries of a query, sealed in turn, arriving last first (held
    // while the peer's kernel resolved this host's link address).
    let q = peer_asks_for_us();
    let tries: Vec<Vec<u8>> = (0..3).map(|_| peer_auth.seal(q.clone())).collect();
    for t in tries.iter().rev() {
        f.e.on_datagram(peer(), Some(own_ip()), t, f.t0);
        let (_, _, answer) = sent_reply(&f.e.take_effects());
        assert!(matches!(answer, Answer::Found(_)));
    }
    assert_eq!(f.e.discovery().drops().total(), 0, "nothing dropped");
    for t in &tries {
        f.e.on_datagram(peer(), Some(own_ip()), t, f.t0);
    }
    assert!(f.e.take_effects().datagrams.is_empty());
    assert_eq!(f.e.discovery().drops().replayed, 3);
}

#[test]
fn replies_to_one_source_are_rate_limited() {
    let mut f = fixture(Config {
        reply_rate: 10,
        ..Config::default()
    });
    let ask = |txid: u64| {
        Message::from(Query::new(
            std::num::NonZeroU64::new(txid).unwrap(),
            WireAddress::new(Address::Ip4([10, 0, 0, 9].into())).unwrap(),
            peer_record(PEER),
        ))
        .encode()
    };
    let answered = |e: &mut Engine<FakeDaemon>, from: SocketAddr, n: u64, t: Instant| {
        (1..=n)
            .filter(|&txid| {
                e.on_datagram(from, Some(own_ip()), &ask(txid), t);
                !e.take_effects().datagrams.is_empty()
            })
            .count()
    };
    assert_eq!(answered(&mut f.e, peer(), 100, f.t0), 40, "a 4 s burst");
    assert_eq!(f.e.discovery().drops().rate_limited, 60);
    let other = SocketAddr::new(IpAddr::V4([10, 0, 0, 3].into()), 6126);
    assert_eq!(answered(&mut f.e, other, 5, f.t0), 5);
    let later = f.t0 + Duration::from_secs(1);
    assert_eq!(answered(&mut f.e, peer(), 100, later), 10, "then 10/s");
}

#[test]
fn every_table_the_network_or_clients_fill_is_bounded() {
    let mut f = fixture(Config {
        max_learned: 2,
        max_lookups: 1,
        max_cached: 2,
        ..Config::default()
    });
    // Lookups in flight: one; the next miss is answered at once.
    f.e.resolve(f.addr, &ip_request([10, 0, 0, 7], 0, 1), 1);
    let (q, _) = sent_query(&f.e.take_effects());
    let r =
        f.e.resolve(f.addr, &ip_request([10, 0, 0, 8], 0, 2), 2)
            .unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENOMEM as u8);
    assert_eq!(f.e.limits()[3], 1, "counted");
    // Learned bindings: at most two (an address and a GID per answer).
    let from7 = SocketAddr::new(IpAddr::V4([10, 0, 0, 7].into()), 6126);
    let rec = |last: u8| {
        EndpointRecord::new(
            format!("fe80::{last}").parse().unwrap(),
            0,
            5,
            16,
            vec![0xffff],
            vec![WireAddress::from(Ipv4Addr::new(10, 0, 0, last))],
        )
        .unwrap()
    };
    f.e.on_datagram(from7, None, &reply_bytes(&q, Answer::Found(rec(7))), f.t0);
    f.e.take_effects();
    for last in [8, 9] {
        f.e.resolve(f.addr, &ip_request([10, 0, 0, last], 0, 3), 3);
        let (q, _) = sent_query(&f.e.take_effects());
        let from = SocketAddr::new(IpAddr::V4([10, 0, 0, last].into()), 6126);
        f.e.on_datagram(from, None, &reply_bytes(&q, Answer::Found(rec(last))), f.t0);
        assert_eq!(f.e.take_effects().replies.len(), 1, "answered");
    }
    assert_eq!(f.e.discovery().state().learned.len(), 2);
    assert_eq!(f.e.limits()[1], 4, "the oldest made room, two per answer");
    assert_eq!(
        f.e.cached(),
        1,
        "what left the bindings left the cache (a hint could not be checked)"
    );
    // What expires is swept without being asked for.
    f.e.on_timers(f.t0 + Duration::from_secs(24 * 3600 + 1));
    assert_eq!(
        (f.e.discovery().state().learned.len(), f.e.cached()),
        (0, 0)
    );
}

#[test]
fn drops_are_summed_up_in_the_log_now_and_then() {
    let mut f = fixture(Config::default());
    for _ in 0..3 {
        f.e.on_datagram(peer(), None, b"garbage", f.t0);
    }
    f.e.on_timers(f.t0);
    assert_eq!(
        f.e.discovery().drops_said().malformed,
        3,
        "the first drops at once"
    );
    f.e.on_datagram(peer(), None, b"garbage", f.t0);
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    assert_eq!(
        f.e.discovery().drops_said().malformed,
        3,
        "then once per interval"
    );
    f.e.on_timers(f.t0 + DROP_SUMMARY_EVERY);
    assert_eq!(f.e.discovery().drops_said().malformed, 4);
    assert_eq!(
        f.e.discovery().drops().to_string(),
        "4 (malformed 4, unsolicited 0, late 0, wrong source 0, own 0, unauthenticated 0, \
         replayed 0, rate-limited 0)"
    );
}

#[test]
fn many_announcements_leave_in_paced_batches_and_peers_check_each_binding_once() {
    let mut f = fixture(Config::default());
    // 401 names: 27 datagrams of 10.0.0.1 and 15 names (two records).
    for i in 0..400 {
        f.e.add_address(f.ep, Address::name(&format!("n{i}")).unwrap())
            .unwrap();
    }
    f.e.take_effects();
    f.e.schedule_announce();
    f.e.on_timers(f.t0);
    let announced = |e: &mut Engine<FakeDaemon>, t: Instant| {
        e.on_timers(t);
        without_start_queries(&e.take_effects()).len()
    };
    let first = f.t0 + Duration::from_millis(50);
    assert_eq!(announced(&mut f.e, first), ANNOUNCE_BATCH);
    assert_eq!(f.e.next_wake(), Some(first + ANNOUNCE_PACE));
    assert_eq!(announced(&mut f.e, first), 0, "not before the pace allows");
    f.e.on_timers(first + ANNOUNCE_PACE);
    let last = f.e.take_effects().datagrams;
    assert_eq!(last.len(), 27 - ANNOUNCE_BATCH);
    assert_eq!(announced(&mut f.e, first + 2 * ANNOUNCE_PACE), 0);
    // Every datagram names an address a peer can ask.
    let own = WireAddress::from(Ipv4Addr::new(10, 0, 0, 1));
    let decode = |d: &Datagram| {
        let Datagram::Multicast { bytes, .. } = d else {
            panic!()
        };
        let Ok(Message::Announce(a)) = Message::decode(bytes) else {
            panic!()
        };
        a
    };
    assert!(decode(&last[0]).records()[0].holds(&own));
    // A peer holding old bindings for this host's address and for ten
    // of its names, each confirmed at that address, checks each once,
    // however many datagrams name it.
    let mut peer = fixture_with_gid(Config::default(), PEER);
    let old: Gid = "fe80::9".parse().unwrap();
    let at = SocketAddr::new(IpAddr::V4([10, 0, 0, 1].into()), 6126);
    let mut known: Vec<Address> = vec![own.address().clone()];
    for d in &last {
        for r in decode(d).records() {
            known.extend(
                r.addresses()
                    .iter()
                    .map(|w| w.address().clone())
                    .filter(|a| matches!(a, Address::Name(_)))
                    .take(1),
            );
        }
    }
    for a in &known {
        let mut l = Learned::derived(old);
        l.via = Some(at);
        peer.e
            .discovery_mut()
            .state_mut()
            .learned
            .insert(a.clone(), l, None);
    }
    for d in &last {
        let Datagram::Multicast { bytes, .. } = d else {
            panic!()
        };
        peer.e.on_datagram(at, None, bytes, f.t0);
        peer.e.on_datagram(at, None, bytes, f.t0);
    }
    let checks = sent_queries(&peer.e.take_effects());
    assert_eq!(checks.len(), known.len(), "one check per binding");
    assert!(checks.iter().all(|(_, to)| *to == Some(at)));
    for a in &known {
        assert_eq!(
            bound_gid(&peer.e, a),
            Some(old),
            "unchanged until confirmed"
        );
    }
}

/// What the engine holds, table by table.
fn footprint(e: &Engine<FakeDaemon>) -> Vec<usize> {
    let d = e.discovery();
    let state = d.state();
    let mut sizes = e.local().sizes().to_vec();
    sizes.extend(d.inflight().sizes());
    sizes.extend([
        e.cached(),
        e.waiting(),
        state.learned.len(),
        state.failed.len(),
        state.neighbour_jobs.len(),
    ]);
    sizes.extend(d.announcer_sizes());
    sizes
}

#[test]
fn port_cycles_with_lookups_pending_leave_nothing_behind() {
    // The soak saw the daemon's RSS step up with port cycles; this is
    // the provider's side of it: after any number of cycles (each with
    // a lookup pending, its withdrawal and announcement sent) every
    // table is as it was after the first.
    let mut f = fixture(Config::default());
    let mut t = f.t0;
    let (mut ep, mut addr) = (f.ep, f.addr);
    let mut after_first = None;
    for i in 0..1000u64 {
        f.e.resolve(addr, &ip_request(PEER_IP, 0, i), i);
        let port = f.e.local().endpoint(ep).unwrap().port;
        let dev = f.e.local().port(port).unwrap().device;
        let ids: Vec<AddressId> = f.e.local().endpoint(ep).unwrap().addresses.to_vec();
        for a in ids {
            f.e.remove_address(a);
        }
        f.e.close_endpoint(ep);
        f.e.close_port(port);
        f.e.close_device(dev);
        t += Duration::from_millis(30);
        f.e.on_timers(t);
        (ep, addr) = bring_up(&mut f.e, OWN);
        t += Duration::from_millis(30);
        f.e.on_timers(t);
        let fx = f.e.take_effects();
        assert_eq!(fx.replies.len(), 1, "the pending request is answered");
        let now = footprint(&f.e);
        assert_eq!(
            *after_first.get_or_insert(now.clone()),
            now,
            "after cycle {i}"
        );
    }
}

/// The record of a host with GID `gid` that holds `ip`.
fn record_of(gid: &str, ip: IpAddr) -> EndpointRecord {
    let addrs = vec![WireAddress::new(Address::from(ip)).unwrap()];
    EndpointRecord::new(gid.parse().unwrap(), 0, 4, 7, vec![0xffff], addrs).unwrap()
}

/// A name the segment does not know, asked of the system's resolver next.
fn by_name(name: &str, tid: u64) -> MsgBuf {
    request(
        &[addr_entry(
            ACM_EP_FLAG_DEST,
            ACM_ADDRESS_NAME,
            name.as_bytes(),
        )],
        false,
        tid,
    )
}

/// Asks for `name`, lets the segment stage time out silently, and returns
/// the job the system's resolver gets and when it was made.
fn to_the_resolver(f: &mut Fixture, name: &str, tid: u64) -> (NssJob, Instant) {
    assert_eq!(f.e.resolve(f.addr, &by_name(name, tid), tid), None);
    let (_, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, None, "the segment is asked first");
    assert!(f.e.take_nss_jobs().is_empty(), "not yet");
    // The group query's tries, each timing out silently, then its stage.
    let start = Instant::now();
    let mut t = start;
    let mut jobs = Vec::new();
    while jobs.is_empty() {
        t += Duration::from_millis(100);
        assert!(
            t < start + Duration::from_secs(2),
            "the segment stage ends in time"
        );
        f.e.on_timers(t);
        let fx = f.e.take_effects();
        assert!(fx.replies.is_empty(), "{fx:?}");
        jobs = f.e.take_nss_jobs();
    }
    let segment_over = t;
    assert_eq!(jobs.len(), 1, "then the system's resolver");
    assert_eq!(jobs[0].name, name);
    assert_eq!(jobs[0].deadline, segment_over + Duration::from_millis(1500));
    (jobs.into_iter().next().unwrap(), segment_over)
}

#[test]
fn a_name_off_the_segment_is_found_through_the_system_resolver_and_asked_by_unicast() {
    let mut f = fixture(Config::default());
    let (job, t) = to_the_resolver(&mut f, "node-far", 1);
    let far: IpAddr = IpAddr::V4([10, 0, 1, 2].into());
    let far_v6: IpAddr = "fd01::2".parse().unwrap();
    f.e.on_nss(&job.key, Ok(vec![far_v6, far]), t);
    let asked = sent_queries(&f.e.take_effects());
    assert_eq!(asked.len(), 2, "each address it gave, by unicast");
    let far_gid = "fe80::f";
    for (q, to) in &asked {
        let to = to.expect("unicast");
        assert!([far, far_v6].contains(&to.ip()));
        assert_eq!(
            *q.target().address(),
            Address::from(to.ip()),
            "asked for itself"
        );
        // A reply from anywhere else is no answer.
        let elsewhere = SocketAddr::new(IpAddr::V4([10, 0, 1, 66].into()), to.port());
        let forged = record_of(ATTACKER, to.ip());
        f.e.on_datagram(elsewhere, None, &reply_bytes(q, Answer::Found(forged)), t);
    }
    assert!(f.e.take_effects().replies.is_empty());
    assert_eq!(f.e.discovery().drops().wrong_source, 2);
    for (q, to) in &asked {
        let record = record_of(far_gid, to.unwrap().ip());
        f.e.on_datagram(to.unwrap(), None, &reply_bytes(q, Answer::Found(record)), t);
    }
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1, "answered once: {fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), far_gid.parse().unwrap());
    let name = Address::name("node-far").unwrap();
    assert_eq!(bound_gid(&f.e, &name), Some(far_gid.parse().unwrap()));
    assert_eq!(
        bound_gid(&f.e, &Address::from(far)),
        Some(far_gid.parse().unwrap()),
        "the address is bound too: it answered by unicast"
    );
}

#[test]
fn a_name_the_resolver_does_not_know_fails_at_once_and_is_remembered() {
    let mut f = fixture(Config {
        name_lookup: vec![NameLookup::Nss],
        ..Config::default()
    });
    assert_eq!(f.e.resolve(f.addr, &by_name("nobody", 1), 1), None);
    let job = f.e.take_nss_jobs().remove(0);
    let no = NssError::NoSuchName("Name or service not known".into());
    f.e.on_nss(&job.key, Err(no), f.t0);
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    let again = f.e.resolve(f.addr, &by_name("nobody", 2), 2).unwrap();
    assert_eq!(
        again.status(),
        ACM_STATUS_ENODATA as u8,
        "from the failure memory"
    );
    assert!(f.e.take_nss_jobs().is_empty());
}

#[test]
fn a_resolver_that_never_answers_fails_the_name_at_the_stage_deadline_and_nothing_else() {
    let mut f = fixture(Config::default());
    let (job, t) = to_the_resolver(&mut f, "node-slow", 1);
    // Meanwhile an IP lookup runs its course as usual.
    learn_peer(&mut f, 2);
    f.e.on_timers(job.deadline - Duration::from_millis(1));
    assert!(f.e.take_effects().replies.is_empty());
    f.e.on_timers(job.deadline);
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().lookups_in_flight(), 0);
    // The answer that comes late changes nothing and sends nothing.
    f.e.on_nss(&job.key, Ok(vec![IpAddr::V4([10, 0, 1, 2].into())]), t);
    assert!(f.e.take_effects().is_empty());
}

#[test]
fn addresses_of_different_hosts_for_one_name_get_no_answer() {
    let mut f = fixture(Config {
        name_lookup: vec![NameLookup::Nss],
        ..Config::default()
    });
    assert_eq!(f.e.resolve(f.addr, &by_name("node-rr", 1), 1), None);
    assert!(
        sent_queries(&f.e.take_effects()).is_empty(),
        "no segment stage"
    );
    let job = f.e.take_nss_jobs().remove(0);
    let ips = [
        IpAddr::V4([10, 0, 1, 2].into()),
        IpAddr::V4([10, 0, 1, 3].into()),
    ];
    f.e.on_nss(&job.key, Ok(ips.to_vec()), f.t0);
    for (q, to) in &sent_queries(&f.e.take_effects()) {
        let gid = ["fe80::2", "fe80::3"][usize::from(to.unwrap().ip() == ips[1])];
        let record = record_of(gid, to.unwrap().ip());
        f.e.on_datagram(
            to.unwrap(),
            None,
            &reply_bytes(q, Answer::Found(record)),
            f.t0,
        );
    }
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    assert_eq!(f.e.discovery().conflicts(), 1);
}

// Failure semantics: ENODATA only when every stage that could have known
// said no; ETIMEDOUT, never remembered, when one could not find out.

fn nss_only() -> Config {
    Config {
        name_lookup: vec![NameLookup::Nss],
        ..Config::default()
    }
}

/// The one reply among the effects: its status.
fn one_status(f: &mut Fixture) -> u8 {
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    fx.replies[0].msg.status()
}

#[test]
fn a_name_the_segment_could_not_find_and_the_resolver_does_not_know_times_out() {
    // A cluster whose names are only in ibacm_addr.cfg: DNS never knows
    // them, and an overloaded segment did not answer in time. The segment
    // could have known, so this is not a no.
    let mut f = fixture(Config::default());
    let (job, t) = to_the_resolver(&mut f, "node-b", 1);
    let no = NssError::NoSuchName("Name or service not known".into());
    f.e.on_nss(&job.key, Err(no), t);
    assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().failures(), 0, "not remembered");
    // The next request asks the segment again, where the name is found.
    learn_peer_name(&mut f, 2);
}

#[test]
fn a_resolver_that_could_not_find_out_is_no_answer() {
    let mut f = fixture(nss_only());
    for tid in 1..=2 {
        assert_eq!(f.e.resolve(f.addr, &by_name("node-far", tid), tid), None);
        let job = f.e.take_nss_jobs().remove(0);
        let again = NssError::Failed("Temporary failure in name resolution".into());
        f.e.on_nss(&job.key, Err(again), f.t0);
        assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
        assert_eq!(f.e.discovery().failures(), 0, "asked again: {tid}");
    }
}

#[test]
fn addresses_the_resolver_gave_say_no_only_if_every_one_refuses() {
    let mut f = fixture(nss_only());
    let ips = [
        IpAddr::V4([10, 0, 1, 2].into()),
        IpAddr::V4([10, 0, 1, 3].into()),
    ];
    // One with nothing listening (an ICMP error), then one that refuses:
    // the refusal coming last does not make it a no.
    assert_eq!(f.e.resolve(f.addr, &by_name("node-rr", 1), 1), None);
    let job = f.e.take_nss_jobs().remove(0);
    f.e.on_nss(&job.key, Ok(ips.to_vec()), f.t0);
    let asked = sent_queries(&f.e.take_effects());
    assert_eq!(asked.len(), 2);
    let (q, to) = &asked[0];
    f.e.on_unreachable(to.unwrap(), &Message::from(q.clone()).encode(), f.t0);
    assert!(f.e.take_effects().replies.is_empty(), "the other may bind");
    let (q, to) = &asked[1];
    f.e.on_datagram(to.unwrap(), None, &reply_bytes(q, Answer::Refused), f.t0);
    assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().failures(), 0);

    // Both refuse: the name leads to no destination.
    assert_eq!(f.e.resolve(f.addr, &by_name("node-rr", 2), 2), None);
    let job = f.e.take_nss_jobs().remove(0);
    f.e.on_nss(&job.key, Ok(ips.to_vec()), f.t0);
    for (q, to) in &sent_queries(&f.e.take_effects()) {
        f.e.on_datagram(to.unwrap(), None, &reply_bytes(q, Answer::Refused), f.t0);
    }
    assert_eq!(one_status(&mut f), ACM_STATUS_ENODATA as u8);
    assert_eq!(f.e.discovery().failures(), 1, "a no is remembered");
}

#[test]
fn a_claim_its_host_never_confirms_times_out() {
    let mut f = fixture(segment_only());
    assert_eq!(f.e.resolve(f.addr, &by_name("node-b", 1), 1), None);
    let (g, _) = sent_query(&f.e.take_effects());
    let claim = reply_bytes(&g, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &claim, f.t0);
    let (_, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, Some(peer()));
    // The confirmation and its tries are lost.
    for ms in (100..=2_000).step_by(100) {
        f.e.on_timers(f.t0 + Duration::from_millis(ms));
    }
    assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().failures(), 0);
}

#[test]
fn a_refusal_is_remembered_and_an_icmp_error_is_not() {
    let mut f = fixture(Config::default());
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 1);
    let (q, _) = sent_query(&f.e.take_effects());
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
    assert_eq!(one_status(&mut f), ACM_STATUS_ENODATA as u8);
    let r = f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 2), 2).unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENODATA as u8, "remembered");
    assert!(f.e.take_effects().datagrams.is_empty(), "nothing asked");

    let other = [10, 0, 0, 3];
    let to = SocketAddr::new(IpAddr::V4(other.into()), 6126);
    for tid in 3..=4 {
        assert_eq!(f.e.resolve(f.addr, &ip_request(other, 0, tid), tid), None);
        let (q, _) = sent_query(&f.e.take_effects());
        f.e.on_unreachable(to, &Message::from(q).encode(), f.t0);
        assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    }
}

#[test]
fn a_derivation_that_times_out_after_a_refusal_times_out_the_lookup() {
    let mut f = fixture(Config {
        derive: vec![Derivation::Eui64],
        ..Config::default()
    });
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 1);
    let (q, _) = sent_query(&f.e.take_effects());
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
    let job = f.e.take_neighbour_jobs().remove(0);
    f.e.on_neighbour(job, None, f.t0);
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().failures(), 0);
}

#[test]
fn a_full_lookup_table_is_no_answer_and_not_remembered() {
    let mut f = fixture(Config {
        max_lookups: 1,
        ..Config::default()
    });
    f.e.resolve(f.addr, &ip_request([10, 0, 0, 7], 0, 1), 1);
    f.e.take_effects();
    let r = f.e.resolve(f.addr, &by_name("node-b", 2), 2).unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENOMEM as u8);
    assert_eq!(f.e.discovery().failures(), 0);
}

#[test]
fn a_binding_the_tables_bound_evicts_at_once_still_answers_its_lookup() {
    // Bound to the address and to the GID: with room for one, the GID's
    // binding evicts the address's before the waiting request is answered.
    let mut f = fixture(Config {
        max_learned: 1,
        ..Config::default()
    });
    f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 1);
    let (q, _) = sent_query(&f.e.take_effects());
    let found = reply_bytes(&q, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &found, f.t0);
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
}

/// An announcement of `record`, from `from`, heard on the IPv4 group at
/// `t`; what the host did about it.
fn heard_on_group(
    f: &mut Fixture,
    record: EndpointRecord,
    from: SocketAddr,
    t: Instant,
) -> Effects {
    let a = Message::from(Announce::new(vec![record], false).unwrap()).encode();
    f.e.on_datagram(from, Some(group()), &a, t);
    f.e.take_effects()
}

/// A record of endpoint `gid` at `ip` holding `name`.
fn holding(gid: &str, ip: [u8; 4], name: &str) -> EndpointRecord {
    let addrs = vec![
        WireAddress::from(Ipv4Addr::from(ip)),
        WireAddress::new(Address::name(name).unwrap()).unwrap(),
    ];
    EndpointRecord::new(gid.parse().unwrap(), 0, 4, 7, vec![0xffff], addrs).unwrap()
}

fn attacker() -> SocketAddr {
    SocketAddr::new(IpAddr::V4([10, 0, 0, 66].into()), 6126)
}

/// The announcements among the effects.
fn sent_announcements(fx: &Effects) -> Vec<Announce> {
    fx.datagrams
        .iter()
        .filter_map(|d| match d {
            Datagram::Multicast { bytes, .. } => match Message::decode(bytes) {
                Ok(Message::Announce(a)) => Some(a),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn a_name_its_host_announced_is_asked_of_that_host_alone() {
    let mut f = fixture(segment_only());
    let t0 = f.t0;
    heard_on_group(&mut f, peer_record(PEER), peer(), t0);
    let later = f.t0 + hints::SETTLE;
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, later),
        None
    );
    let fx = f.e.take_effects();
    let (q, to) = sent_query(&fx);
    assert_eq!(to, Some(peer()), "by unicast, to the announcer: {fx:?}");
    assert_eq!(q.target().address(), &node_b());
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&q, Answer::Found(peer_record(PEER))),
        later,
    );
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
    assert_eq!(f.e.discovery().traffic().group_queries, 0);
}

#[test]
fn a_hint_is_not_used_before_its_holder_could_contradict_it() {
    let mut f = fixture(segment_only());
    // Only the forger was heard (this host started after the holder).
    let t0 = f.t0;
    heard_on_group(
        &mut f,
        holding(ATTACKER, [10, 0, 0, 66], "node-b"),
        attacker(),
        t0,
    );
    let t = f.t0 + hints::SETTLE / 2;
    assert_eq!(f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t), None);
    let (_, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, None, "too fresh: the groups are asked");
}

#[test]
fn a_name_announced_by_two_endpoints_is_asked_of_the_groups() {
    let mut f = fixture(segment_only());
    let t0 = f.t0;
    heard_on_group(&mut f, peer_record(PEER), peer(), t0);
    let forged = holding(ATTACKER, [10, 0, 0, 66], "node-b");
    let t0 = f.t0;
    heard_on_group(&mut f, forged.clone(), attacker(), t0);
    // Nor does the holder's next announcement settle it.
    let later = f.t0 + hints::SETTLE * 3;
    heard_on_group(&mut f, peer_record(PEER), peer(), later);
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, later),
        None
    );
    let (g, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, None);
    assert_eq!(f.e.discovery().disputed_names(), 1, "counted once");
    // Two claimants are known to exist: the whole try is heard, not only
    // the claim window of a name nobody disputes.
    claimed(&mut f, &g, peer(), peer_record(PEER), later);
    let timeout = Duration::from_millis(u64::from(Config::default().timeout_ms));
    f.e.on_timers(later + timeout / 2);
    assert!(f.e.take_effects().replies.is_empty());
    f.e.on_timers(later + timeout);
    assert_eq!(
        dgid(&f.e.take_effects().replies[0].msg),
        PEER.parse().unwrap()
    );
    // Announced to this host alone, or naming another address than its
    // source: no hint at all.
    let mut g = fixture(segment_only());
    let a = Message::from(Announce::new(vec![peer_record(PEER)], false).unwrap()).encode();
    g.e.on_datagram(peer(), Some(own_ip()), &a, g.t0);
    let t0 = g.t0;
    heard_on_group(&mut g, peer_record(PEER), attacker(), t0);
    let t = g.t0 + hints::SETTLE;
    assert_eq!(g.e.resolve_at(g.addr, &by_name("node-b", 1), 1, t), None);
    let (_, to) = sent_query(&g.e.take_effects());
    assert_eq!(to, None);
    assert_eq!(g.e.discovery().disputed_names(), 0, "nothing disputed");
}

#[test]
fn a_host_that_hears_its_name_announced_by_another_announces_itself() {
    let mut f = fixture(Config::default());
    // Its own announcements at start-up are out.
    for ms in [0, 50, 1_000, 3_000] {
        f.e.on_timers(f.t0 + Duration::from_millis(ms));
    }
    f.e.take_effects();
    let t0 = f.t0 + Duration::from_secs(4);
    let fx = heard_on_group(
        &mut f,
        holding(ATTACKER, [10, 0, 0, 66], "node-a"),
        attacker(),
        t0,
    );
    assert!(
        sent_announcements(&fx).is_empty(),
        "not from the datagram's handler"
    );
    f.e.on_timers(t0);
    let ours = sent_announcements(&f.e.take_effects());
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].records()[0].gid(), OWN.parse().unwrap());
    assert!(!ours[0].withdrawn());
    let names: Vec<String> = ours[0].records()[0]
        .addresses()
        .iter()
        .map(|w| w.address().to_string())
        .collect();
    assert!(names.contains(&"node-a".to_string()), "{names:?}");
    // Another one: answered too, but paced.
    let t = t0 + Duration::from_millis(50);
    let other = SocketAddr::new(IpAddr::V4([10, 0, 0, 67].into()), 6126);
    heard_on_group(
        &mut f,
        holding("fe80::bad:0:0:67", [10, 0, 0, 67], "node-a"),
        other,
        t,
    );
    f.e.on_timers(t);
    assert!(sent_announcements(&f.e.take_effects()).is_empty(), "paced");
    f.e.on_timers(t0 + hints::DEFEND_DELAY);
    let fx = f.e.take_effects();
    assert_eq!(sent_announcements(&fx).len(), 1, "{fx:?}");
    // The first one again: once a minute at most.
    let t = t0 + hints::DEFEND_DELAY * 2;
    heard_on_group(
        &mut f,
        holding(ATTACKER, [10, 0, 0, 66], "node-a"),
        attacker(),
        t,
    );
    f.e.on_timers(t + hints::DEFEND_DELAY * 2);
    assert!(sent_announcements(&f.e.take_effects()).is_empty());
}

#[test]
fn a_host_that_refuses_its_hint_or_stays_silent_sends_the_name_to_the_groups() {
    let mut f = fixture(segment_only());
    let t0 = f.t0;
    heard_on_group(&mut f, peer_record(PEER), peer(), t0);
    let t = f.t0 + hints::SETTLE;
    f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t);
    let (q, _) = sent_query(&f.e.take_effects());
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), t);
    let fx = f.e.take_effects();
    assert!(fx.replies.is_empty(), "a moved name is not a no: {fx:?}");
    let (group_query, to) = sent_query(&fx);
    assert_eq!(to, None);
    // Its new holder claims and confirms it.
    let c = SocketAddr::new(IpAddr::V4([10, 0, 0, 3].into()), 6126);
    let moved = holding("fe80::c", [10, 0, 0, 3], "node-b");
    let claim = reply_bytes(&group_query, Answer::Found(moved.clone()));
    f.e.on_datagram(c, None, &claim, t);
    let (confirm, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, Some(c));
    f.e.on_datagram(c, None, &reply_bytes(&confirm, Answer::Found(moved)), t);
    f.e.on_timers(t + Duration::from_millis(500));
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), "fe80::c".parse().unwrap());

    // A hinted host that never answers: the groups are asked when one try
    // is left, within the one stage's time.
    let mut g = fixture(segment_only());
    let t0 = g.t0;
    heard_on_group(&mut g, peer_record(PEER), peer(), t0);
    let t = g.t0 + hints::SETTLE;
    g.e.resolve_at(g.addr, &by_name("node-b", 1), 1, t);
    let (_, to) = sent_query(&g.e.take_effects());
    assert_eq!(to, Some(peer()));
    let (mut group_at, mut answered_at) = (None, None);
    for ms in (100..=3_000).step_by(100) {
        let now = t + Duration::from_millis(ms);
        g.e.on_timers(now);
        let fx = g.e.take_effects();
        if sent_queries(&fx).iter().any(|(_, to)| to.is_none()) {
            group_at.get_or_insert(ms);
        }
        if !fx.replies.is_empty() {
            assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
            assert_eq!(answered_at.replace(ms), None, "answered once");
        }
    }
    assert_eq!(group_at, Some(1_000));
    assert_eq!(answered_at, Some(1_500), "at the stage's end");
}

/// The announcements among the effects sent to one host, with where they
/// went and where from.
fn sent_welcomes(fx: &Effects) -> Vec<(SocketAddr, Option<IpAddr>, Announce)> {
    fx.datagrams
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

#[test]
fn a_host_announces_itself_to_a_host_that_joined_after_its_announcements() {
    let mut f = fixture(Config::default());
    // While its own announcements are still to come, they are enough.
    f.e.on_timers(f.t0);
    let t0 = f.t0;
    heard_on_group(&mut f, peer_record(PEER), peer(), t0);
    f.e.on_timers(f.t0 + Duration::from_millis(50));
    let fx = f.e.take_effects();
    assert_eq!(sent_announcements(&fx).len(), 1, "the first of three");
    assert!(sent_welcomes(&fx).is_empty());
    for ms in [1_000, 3_000] {
        f.e.on_timers(f.t0 + Duration::from_millis(ms));
    }
    f.e.take_effects();
    // All out: a host never heard is answered soon, on the groups.
    let (within, every) = announce::welcome_pace(2);
    let t = f.t0 + Duration::from_secs(5);
    let (c, c_at) = newcomer(3);
    heard_on_group(&mut f, c, c_at, t);
    f.e.on_timers(t + within);
    let fx = f.e.take_effects();
    assert!(sent_welcomes(&fx).is_empty(), "{fx:?}");
    let ours = sent_announcements(&fx);
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].records()[0].gid(), OWN.parse().unwrap());
    // A host heard before is not.
    let t = t + within;
    heard_on_group(&mut f, peer_record(PEER), peer(), t);
    f.e.on_timers(t + within);
    assert!(f.e.take_effects().datagrams.is_empty());
    // The peer, heard at its address for a while, back with new hardware:
    // answered by unicast, to that address, from this host's own.
    let t = t + every;
    heard_on_group(&mut f, peer_record("fe80::b2"), peer(), t);
    f.e.on_timers(t + within);
    let fx = f.e.take_effects();
    assert!(sent_announcements(&fx).is_empty(), "{fx:?}");
    let w = sent_welcomes(&fx);
    assert_eq!(w.len(), 1);
    assert_eq!((w[0].0, w[0].1), (peer(), Some(own_ip())));
    assert_eq!(w[0].2.records()[0].gid(), OWN.parse().unwrap());
    // Again, with other hardware, soon after: that address was welcomed
    // (a forger naming it does not make this host flood it).
    heard_on_group(&mut f, peer_record("fe80::b3"), peer(), t + within);
    f.e.on_timers(t + within * 3);
    assert!(f.e.take_effects().datagrams.is_empty());
    // Long after its own start, a host that joins is answered too.
    let late = f.t0 + Duration::from_secs(4_000);
    let (e, e_at) = newcomer(5);
    heard_on_group(&mut f, e, e_at, late);
    f.e.on_timers(late + within);
    assert_eq!(sent_announcements(&f.e.take_effects()).len(), 1);
}

#[test]
fn many_hosts_back_at_once_are_welcomed_by_one_announcement_to_the_groups() {
    let mut f = fixture(Config::default());
    for ms in [0, 50, 1_000, 3_000] {
        f.e.on_timers(f.t0 + Duration::from_millis(ms));
    }
    // 31 hosts heard at their addresses, settled.
    let t = f.t0 + Duration::from_secs(4);
    for n in 10..41 {
        let (r, at) = newcomer(n);
        heard_on_group(&mut f, r, at, t);
    }
    let (within, _) = announce::welcome_pace(31);
    let t = t + Duration::from_secs(20);
    f.e.on_timers(t);
    f.e.take_effects();
    // All back with new hardware at once: beyond UNICAST_WELCOMES in a
    // period, one announcement to the groups answers them all, those
    // still waiting for theirs too.
    for n in 10..40 {
        let (_, at) = newcomer(n);
        let gid = format!("fe80::1:{n:x}");
        let r = holding(&gid, [10, 0, 0, n], &format!("node-{n}"));
        heard_on_group(&mut f, r, at, t);
    }
    let t = t + within * announce::WELCOME_WAIT;
    f.e.on_timers(t);
    let fx = f.e.take_effects();
    assert_eq!(sent_welcomes(&fx).len(), 0, "{fx:?}");
    assert_eq!(sent_announcements(&fx).len(), 1, "{fx:?}");
    // One that comes back after it is answered by unicast again.
    let (_, at) = newcomer(40);
    heard_on_group(
        &mut f,
        holding("fe80::2:a", [10, 0, 0, 40], "node-40"),
        at,
        t,
    );
    f.e.on_timers(t + within);
    assert_eq!(sent_welcomes(&f.e.take_effects()).len(), 1);
}

#[test]
fn a_host_that_starts_takes_the_welcomes_sent_to_it_alone_as_hints_for_a_while() {
    let mut f = fixture(segment_only());
    for ms in [0, 50] {
        f.e.on_timers(f.t0 + Duration::from_millis(ms));
    }
    f.e.take_effects();
    // The peer's welcome, sent to this host alone after its start query.
    let welcome = Message::from(Announce::new(vec![peer_record(PEER)], false).unwrap()).encode();
    let t = f.t0 + Duration::from_millis(100);
    f.e.on_datagram(peer(), Some(own_ip()), &welcome, t);
    let t = t + hints::SETTLE;
    f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t);
    let (_, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, Some(peer()), "asked of its holder");
    // A forged one naming another holder of the same name: disputed, so
    // the groups decide.
    let forged = holding(ATTACKER, [10, 0, 0, 66], "node-x");
    let honest = holding("fe80::c", [10, 0, 0, 3], "node-x");
    let c = SocketAddr::new(IpAddr::V4([10, 0, 0, 3].into()), 6126);
    for (record, from) in [(forged, attacker()), (honest, c)] {
        let a = Message::from(Announce::new(vec![record], false).unwrap()).encode();
        f.e.on_datagram(from, Some(own_ip()), &a, t);
    }
    let t = t + hints::SETTLE;
    f.e.resolve_at(f.addr, &by_name("node-x", 2), 2, t);
    let (_, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, None, "two holders: the groups");
    // Past the welcomes' time, one sent to this host alone is no hint.
    let late = f.t0 + welcome::WELCOME_LISTEN + Duration::from_secs(1);
    let d = holding("fe80::d", [10, 0, 0, 4], "node-d");
    let from = SocketAddr::new(IpAddr::V4([10, 0, 0, 4].into()), 6126);
    let a = Message::from(Announce::new(vec![d], false).unwrap()).encode();
    f.e.on_datagram(from, Some(own_ip()), &a, late);
    f.e.resolve_at(f.addr, &by_name("node-d", 3), 3, late + hints::SETTLE);
    let (_, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, None);
}

/// A request for `name` from the fixture at `t`, and the group query it
/// sent.
fn group_asked(f: &mut Fixture, name: &str, tid: u64, t: Instant) -> Query {
    assert_eq!(f.e.resolve_at(f.addr, &by_name(name, tid), tid, t), None);
    let (q, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, None, "asked of the groups");
    q
}

/// Host `from` claims the name of `group` with `record`, and confirms it
/// when asked, at `t`.
fn claimed(f: &mut Fixture, group: &Query, from: SocketAddr, record: EndpointRecord, t: Instant) {
    let claim = reply_bytes(group, Answer::Found(record.clone()));
    f.e.on_datagram(from, None, &claim, t);
    let (confirm, to) = sent_query(&f.e.take_effects());
    assert_eq!(to, Some(from));
    let found = reply_bytes(&confirm, Answer::Found(record));
    f.e.on_datagram(from, None, &found, t);
}

#[test]
fn a_name_asked_of_the_groups_is_decided_once_its_claim_window_is_over() {
    let mut f = fixture(segment_only());
    let timeout = Duration::from_millis(u64::from(Config::default().timeout_ms));
    let window = timeout / decide::CLAIM_WINDOW_SHARE;
    let t = f.t0;
    let g = group_asked(&mut f, "node-b", 1, t);
    claimed(
        &mut f,
        &g,
        peer(),
        peer_record(PEER),
        t + Duration::from_millis(1),
    );
    f.e.on_timers(t + window - Duration::from_millis(1));
    let fx = f.e.take_effects();
    assert!(
        fx.replies.is_empty(),
        "not before other holders could claim"
    );
    assert_eq!(fx.deadline, Some(t + window), "{fx:?}");
    f.e.on_timers(t + window);
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());

    // A second holder heard within the window: two GIDs, no answer.
    let g = group_asked(&mut f, "node-x", 2, t);
    let x = |gid: &str, ip| holding(gid, ip, "node-x");
    claimed(&mut f, &g, peer(), x(PEER, PEER_IP), t);
    let late = t + window - Duration::from_millis(1);
    claimed(&mut f, &g, attacker(), x(ATTACKER, [10, 0, 0, 66]), late);
    f.e.on_timers(t + window);
    let fx = f.e.take_effects();
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    assert_eq!(f.e.discovery().conflicts(), 1);

    // A claim that comes after the window is not followed: the name was
    // decided.
    let g = group_asked(&mut f, "node-y", 3, t);
    let y = |gid: &str, ip| holding(gid, ip, "node-y");
    claimed(&mut f, &g, peer(), y(PEER, PEER_IP), t);
    f.e.on_timers(t + window);
    assert_eq!(
        dgid(&f.e.take_effects().replies[0].msg),
        PEER.parse().unwrap()
    );
    let claim = reply_bytes(&g, Answer::Found(y(ATTACKER, [10, 0, 0, 66])));
    f.e.on_datagram(attacker(), None, &claim, t + window);
    assert!(sent_queries(&f.e.take_effects()).is_empty());
    assert_eq!(f.e.discovery().drops().late, 1);
}

#[test]
fn with_a_key_a_name_asked_of_the_groups_is_decided_at_its_first_confirmation() {
    let mut f = fixture(segment_only());
    f.e.set_auth(Some(auth(KEY)));
    let peer_auth = auth(KEY);
    let t = Instant::now();
    let g = group_asked(&mut f, "node-b", 1, t);
    let claim = reply_bytes(&g, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &peer_auth.seal(claim), t);
    let (confirm, _) = sent_query(&f.e.take_effects());
    let found = reply_bytes(&confirm, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &peer_auth.seal(found), t);
    let fx = f.e.take_effects();
    assert_eq!(fx.replies.len(), 1, "at once: only key holders claim");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
}

/// The announcements this fixture sends between `from` and `to`, a timer
/// every 100 ms.
fn announced_between(f: &mut Fixture, from: Duration, to: Duration) -> Vec<Duration> {
    let mut at = Vec::new();
    let mut t = from;
    while t <= to {
        f.e.on_timers(f.t0 + t);
        if !sent_announcements(&f.e.take_effects()).is_empty() {
            at.push(t);
        }
        t += Duration::from_millis(100);
    }
    at
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
    let (_, to) = sent_query(&g.e.take_effects());
    assert_eq!(to, Some(peer()), "asked of its holder, ten lifetimes later");
}

/// Whether the effects hold a start query.
fn has_start_query(fx: &Effects) -> bool {
    fx.datagrams.len() != without_start_queries(fx).len()
}

#[test]
fn a_host_that_starts_sends_a_start_query_and_hosts_that_hear_it_announce_themselves() {
    let mut f = fixture(Config::default());
    let mut starts = Vec::new();
    for ms in (0..=3_000).step_by(50) {
        f.e.on_timers(f.t0 + Duration::from_millis(ms));
        let fx = f.e.take_effects();
        if has_start_query(&fx) {
            starts.push(ms);
            let q = fx
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
    assert_eq!(f.e.discovery().traffic().start_queries, 2);
    // A change is announced, with no start query: the host knows the
    // segment.
    f.e.add_address(f.ep, Address::name("node-a2").unwrap());
    for ms in (3_100..=7_000).step_by(50) {
        f.e.on_timers(f.t0 + Duration::from_millis(ms));
        assert!(!has_start_query(&f.e.take_effects()));
    }

    // The peer, known here, restarted (same GID) and sends a start query:
    // this host announces itself to it, within the window; the peer's
    // second start query is not answered again.
    let (within, _) = announce::welcome_pace(1);
    let heard = f.t0 + Duration::from_secs(8);
    heard_on_group(&mut f, peer_record(PEER), peer(), heard);
    f.e.on_timers(heard + within);
    assert_eq!(
        sent_announcements(&f.e.take_effects()).len(),
        1,
        "a new endpoint, on the groups"
    );
    let t = heard + WELCOMED_FOR * 2;
    let start = Query::new(
        std::num::NonZeroU64::new(77).unwrap(),
        WireAddress::new(node_b()).unwrap(),
        peer_record(PEER),
    );
    let bytes = Message::from(start).encode();
    f.e.on_datagram(peer(), Some(group()), &bytes, t);
    let fx = f.e.take_effects();
    assert!(fx.datagrams.is_empty(), "not answered: {fx:?}");
    f.e.on_timers(t + within);
    let w = sent_welcomes(&f.e.take_effects());
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0, peer());
    f.e.on_datagram(peer(), Some(group()), &bytes, t + within);
    f.e.on_timers(t + within * 3);
    assert!(f.e.take_effects().datagrams.is_empty());
    let every = announce::welcome_pace(1).1;
    // A query by unicast for the asker's own address is no start query.
    let t = t + WELCOMED_FOR * 2;
    f.e.on_datagram(peer(), Some(own_ip()), &bytes, t);
    f.e.on_timers(t + every + within);
    assert!(sent_announcements(&f.e.take_effects()).is_empty());
}

#[test]
fn a_replayed_renewal_changes_no_answer() {
    // Without keys: the peer renewed its announcement at one GID, came
    // back with another; an old renewal, replayed from its address, moves
    // the hint back, but the hint only says whom to ask: the peer, asked,
    // answers with its GID of now.
    let mut f = fixture(segment_only());
    let old = Message::from(Announce::new(vec![peer_record(PEER)], false).unwrap()).encode();
    let new_gid = "fe80::b2";
    let now = Message::from(Announce::new(vec![peer_record(new_gid)], false).unwrap()).encode();
    let t = f.t0;
    f.e.on_datagram(peer(), Some(group()), &old, t);
    let t = t + Duration::from_secs(30);
    f.e.on_datagram(peer(), Some(group()), &now, t);
    f.e.on_datagram(peer(), Some(group()), &old, t + Duration::from_secs(1));
    let t = t + Duration::from_secs(2);
    f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t);
    let (q, to) = sent_query(&f.e.take_effects());
    assert_eq!(
        to,
        Some(peer()),
        "asked of the address, not answered from the hint"
    );
    let found = reply_bytes(&q, Answer::Found(peer_record(new_gid)));
    f.e.on_datagram(peer(), None, &found, t);
    let fx = f.e.take_effects();
    assert_eq!(dgid(&fx.replies[0].msg), new_gid.parse().unwrap());

    // With a key: the captured renewal is refused as a replay, and the
    // hint stays where the peer's last announcement put it.
    let mut g = fixture(segment_only());
    g.e.set_auth(Some(auth(KEY)));
    let peer_auth = auth(KEY);
    let t = Instant::now();
    let captured = peer_auth.seal(old.clone());
    g.e.on_datagram(peer(), Some(group()), &captured, t);
    let sealed_now = peer_auth.seal(now.clone());
    g.e.on_datagram(peer(), Some(group()), &sealed_now, t);
    g.e.on_datagram(peer(), Some(group()), &captured, t);
    assert_eq!(g.e.discovery().drops().replayed, 1);
    assert_eq!(g.e.discovery().disputed_names(), 0);
}

#[test]
fn every_name_of_a_host_with_many_is_asked_of_it() {
    // Its announcements list its address in their first record only (an
    // address appears once per announcement); the names of the second
    // record are its too.
    let mut a = fixture(Config::default());
    for i in 0..20 {
        a.e.add_address(a.ep, Address::name(&format!("n{i}")).unwrap())
            .unwrap();
    }
    a.e.take_effects();
    a.e.schedule_announce();
    a.e.on_timers(a.t0);
    a.e.on_timers(a.t0 + Duration::from_millis(50));
    let announced: Vec<Vec<u8>> = without_start_queries(&a.e.take_effects())
        .into_iter()
        .filter_map(|d| match d {
            Datagram::Multicast { bytes, .. } => Some(bytes),
            _ => None,
        })
        .collect();
    assert!(announced.len() >= 2, "{}", announced.len());
    let mut b = fixture_with_gid(segment_only(), PEER);
    let from = SocketAddr::new(own_ip(), 6126);
    for bytes in &announced {
        b.e.on_datagram(from, Some(group()), bytes, b.t0);
    }
    let t = b.t0 + hints::SETTLE;
    for i in 0..20 {
        let tid = 100 + i;
        b.e.resolve_at(b.addr, &by_name(&format!("n{i}"), tid), tid, t);
        let (_, to) = sent_query(&b.e.take_effects());
        assert_eq!(to, Some(from), "n{i}");
    }
}
