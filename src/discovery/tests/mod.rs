//! Discovery's behaviour as the request path sees it: through the
//! engine, with a fake host and explicit time.

mod answering;
mod bounds;
mod claim_window;
mod lookups;
mod name_hints;
mod resolver;
mod trust;
mod welcomes;
mod with_key;

use super::announce::{BATCH as ANNOUNCE_BATCH, PACE as ANNOUNCE_PACE};
use super::seal::{Keyring, WallClock};
use super::welcome::WELCOMED_FOR;
use super::wire::{Announce, Answer, EndpointRecord, Message, Query, WireAddress};
use super::*;
use crate::addr::{Address, Gid};
use crate::config::hosts::Hosts;
use crate::config::keyfile::KeyFile;
use crate::config::{Config, Derivation, NameLookup};
use crate::daemon::FakeDaemon;
use crate::engine::reconfigure::Change;
use crate::engine::{Effects, Engine, Input, Topology};
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
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

const OWN: &str = "fe80::a";
const PEER: &str = "fe80::b";
const PEER_IP: [u8; 4] = [10, 0, 0, 2];

struct Fixture {
    e: Engine<FakeDaemon>,
    ep: EndpointId,
    addr: AddressId,
    t0: Instant,
    /// The key the segment's other hosts seal with, once the fixture has
    /// one ([`keyed`]): what [`deliver`] sends is sealed with it.
    peers: Option<Auth>,
}

/// The fixture with a key, which every other host of the segment holds.
fn keyed(mut f: Fixture) -> Fixture {
    f.e.reconfigure(Change::Auth(auth(KEY)));
    f.peers = Some(auth(KEY));
    f
}

/// A datagram from another host of the segment: sealed if the fixture has
/// a key.
fn deliver(f: &mut Fixture, from: SocketAddr, to: Option<IpAddr>, bytes: &[u8], t: Instant) {
    match &f.peers {
        Some(a) => {
            let sealed = a.seal(bytes.to_vec());
            f.e.on_datagram(from, to, &sealed, t)
        }
        None => f.e.on_datagram(from, to, bytes, t),
    }
}

/// What the engine wants done since its last poll (nothing, with no
/// deadline, if nothing happened).
fn polled(e: &mut Engine<FakeDaemon>) -> Effects {
    e.poll().unwrap_or_default()
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
    e.input(Input::DiscoveryUp(Families::V4), Instant::now());
    polled(&mut e);
    Fixture {
        e,
        ep,
        addr,
        t0: Instant::now(),
        peers: None,
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
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, tid), tid, Instant::now());
    let (q, _) = sent_query(&polled(&mut f.e));
    let found = reply_bytes(&q, Answer::Found(peer_record(PEER)));
    let t0 = f.t0;
    deliver(f, peer(), None, &found, t0);
    polled(&mut f.e);
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
    assert_eq!(f.e.resolve_at(f.addr, &by_name, tid, Instant::now()), None);
    let (group, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, None, "names are asked of the groups");
    let claim = reply_bytes(&group, Answer::Found(peer_record(PEER)));
    let t0 = f.t0;
    deliver(f, peer(), None, &claim, t0);
    let (confirm, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()), "the claimant is asked by unicast");
    assert_ne!(confirm.txid(), group.txid(), "with a fresh transaction id");
    let found = reply_bytes(&confirm, Answer::Found(peer_record(PEER)));
    deliver(f, peer(), None, &found, t0);
    let fx = after_claims(f);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
}

/// The effects once the group query's try is over: a name claimed and
/// confirmed is decided only then, when every holder had its chance to
/// answer.
fn after_claims(f: &mut Fixture) -> Effects {
    assert!(
        polled(&mut f.e).replies.is_empty(),
        "not before other holders could answer"
    );
    f.e.input(Input::Timers, f.t0 + Duration::from_millis(600));
    polled(&mut f.e)
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
    fx.work
        .datagrams
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
    e.discovery().state().binding(a).map(|l| l.gid)
}

fn dgid(m: &MsgBuf) -> Gid {
    assert_eq!(m.status(), 0, "{m:?}");
    PathRecord::decode(m.entry(0).info.first_chunk().unwrap()).dgid
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
    let [Datagram::Unicast { to, from, bytes }] = &fx.work.datagrams[..] else {
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

const KEY: &str = "1 000102030405060708090a0b0c0d0e0f";

fn auth(keys: &str) -> Auth {
    Auth::new(
        Keyring::new(&KeyFile::parse(keys, "key").unwrap()),
        WallClock::system(),
    )
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

// Failure semantics: ENODATA only when every stage that could have known
// said no; ETIMEDOUT, never remembered, when one could not find out.

/// The one reply among the effects: its status.
fn one_status(f: &mut Fixture) -> u8 {
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    fx.replies[0].msg.status()
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
    deliver(f, from, Some(group()), &a, t);
    polled(&mut f.e)
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
    fx.work
        .datagrams
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

/// A request for `name` from the fixture at `t`, and the group query it
/// sent.
fn group_asked(f: &mut Fixture, name: &str, tid: u64, t: Instant) -> Query {
    assert_eq!(f.e.resolve_at(f.addr, &by_name(name, tid), tid, t), None);
    let (q, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, None, "asked of the groups");
    q
}

/// Host `from` claims the name of `group` with `record`, and confirms it
/// when asked, at `t`.
fn claimed(f: &mut Fixture, group: &Query, from: SocketAddr, record: EndpointRecord, t: Instant) {
    let claim = reply_bytes(group, Answer::Found(record.clone()));
    f.e.on_datagram(from, None, &claim, t);
    let (confirm, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(from));
    let found = reply_bytes(&confirm, Answer::Found(record));
    f.e.on_datagram(from, None, &found, t);
}
