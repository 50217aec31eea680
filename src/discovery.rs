//! Resolution between hosts: the lookup state machine and the handlers of
//! the discovery protocol (docs/protocol.md), as methods of the engine.
//!
//! A miss that only another host can answer becomes a [`Lookup`]: a QUERY
//! (unicast to an IP destination, multicast for a name), retried every
//! `urdma_timeout` ms up to `urdma_retries` more times, then the configured
//! derivations in order. Requests for the same destination share one
//! lookup. Everything here runs under the engine's lock and only queues
//! effects; the worker thread and the boundary perform them.

use crate::addr::{Address, Gid};
use crate::auth::Auth;
use crate::config::Derivation;
use crate::engine::{Datagram, DropCounts, Engine, Found, Id, Outgoing};
use crate::fastmap::Set;
use crate::host::Host;
use crate::msg;
use crate::path::Dest;
use crate::resolver::{Learned, Lookup, NeighbourJob, Stage, Waiter};
use crate::wire::{
    Announce, Answer, EndpointRecord, Message, Query, Reply, WireAddress, MAX_ADDRESSES,
    MAX_ANNOUNCE_RECORDS, MAX_PKEYS,
};
use acm_prov_sys::{ACM_STATUS_ENODATA, ACM_STATUS_ETIMEDOUT};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Announcements after a change: soon, then twice more in case one is lost.
const ANNOUNCE_DELAYS_MS: [u64; 3] = [50, 1000, 3000];
/// How often a missing neighbour entry is looked for again.
pub const NEIGHBOUR_POLL: Duration = Duration::from_millis(20);
/// What distinguishes one endpoint record from another: GID, LID, MTU,
/// rate and P_Key.
pub(crate) type RecordKey = (Gid, u16, u8, u8, u16);

/// Drops are summed up in the log at most this often, so a flood costs a
/// line per interval, not a line per datagram.
const DROP_SUMMARY_EVERY: Duration = Duration::from_secs(10);
/// Announcements leave this many at a time, one batch per
/// [`ANNOUNCE_PACE`]: a host with thousands of addresses announces
/// hundreds of datagrams, and sending them in one go would keep the worker
/// from answering queries, and the peers' workers from anything else, for
/// a noticeable time.
const ANNOUNCE_BATCH: usize = 16;
const ANNOUNCE_PACE: Duration = Duration::from_millis(1);
/// How long withdrawals wait to be sent together.
const WITHDRAW_DELAY: Duration = Duration::from_millis(20);
/// Where a datagram goes to make the kernel resolve a neighbour: the
/// discard port, so no provider takes it for a message.
const POKE_PORT: u16 = 9;

fn ip_of(a: &Address) -> Option<IpAddr> {
    match a {
        Address::Ip4(v4) => Some(IpAddr::V4(*v4)),
        Address::Ip6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// `fe80::` + modified EUI-64 of a MAC: how urdma forms a port's GID.
pub fn eui64_gid(mac: [u8; 6]) -> Gid {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8] = mac[0] ^ 0x02;
    g[9] = mac[1];
    g[10] = mac[2];
    g[11] = 0xff;
    g[12] = 0xfe;
    g[13..16].copy_from_slice(&mac[3..6]);
    Gid(g)
}

/// Addresses waiting to be withdrawn together, in order, without repeats.
#[derive(Default)]
pub(crate) struct Pending {
    addrs: Vec<WireAddress>,
    seen: Set<WireAddress>,
}

/// Which of the drop counts a dropped datagram goes to.
type DropReason = fn(&mut DropCounts) -> &mut u64;

/// Where a record came from, which decides how much of it is believed.
enum Learn<'a> {
    /// A query answered FOUND, from this source address.
    Query(IpAddr),
    /// A FOUND reply to our query for this target.
    Reply(&'a Address),
    /// An announcement from this source address, which was bound to this
    /// GID before the datagram (its first record may already have moved it).
    Announce(IpAddr, Option<Gid>),
}

/// How a port's addresses travel: per datagram, the address lists of its
/// records. A receiver believes a datagram's records only if one of them
/// (with the same GID) lists the datagram's source, so every datagram
/// leads with the port's IP addresses (up to half a record of them) and
/// the names fill the rest; an address appears once per datagram.
fn announce_chunks(addrs: Vec<WireAddress>) -> Vec<Vec<Vec<WireAddress>>> {
    let per_datagram = MAX_ADDRESSES * MAX_ANNOUNCE_RECORDS;
    let (ips, names): (Vec<_>, Vec<_>) = addrs
        .into_iter()
        .partition(|w| ip_of(w.address()).is_some());
    let (lead, more_ips) = ips.split_at(ips.len().min(MAX_ADDRESSES / 2));
    let mut lists: Vec<Vec<WireAddress>> = Vec::new();
    if names.is_empty() || lead.is_empty() {
        lists.extend(
            ips.iter()
                .chain(&names)
                .cloned()
                .collect::<Vec<_>>()
                .chunks(per_datagram)
                .map(<[_]>::to_vec),
        );
    } else {
        lists.extend(
            names
                .chunks(per_datagram - lead.len())
                .map(|c| lead.iter().chain(c).cloned().collect()),
        );
        lists.extend(more_ips.chunks(per_datagram).map(<[_]>::to_vec));
    }
    lists
        .into_iter()
        .map(|l| l.chunks(MAX_ADDRESSES).map(<[_]>::to_vec).collect())
        .collect()
}

fn same_binding(a: &Learned, b: &Learned) -> bool {
    (a.gid, a.lid, a.mtu, a.rate, &a.partitions) == (b.gid, b.lid, b.mtu, b.rate, &b.partitions)
}

impl<H: Host> Engine<H> {
    /// Called by the boundary when the discovery sockets are (or are not)
    /// open.
    pub fn set_discovery_up(&mut self, up: bool) {
        self.discovery_up = up;
        if up {
            self.schedule_announce(Instant::now());
        }
    }

    /// Authenticates every discovery datagram from now on.
    pub fn set_auth(&mut self, auth: Option<Auth>) {
        self.auth = auth;
    }

    /// Turns discovery off for good: its configuration cannot be honoured
    /// (an unusable key file must not mean unauthenticated discovery).
    pub fn disable_discovery(&mut self) {
        self.cfg.discovery = false;
        self.discovery_up = false;
    }

    /// A message as it goes on the wire: sealed when authentication is on.
    fn encode(&self, m: Message) -> Vec<u8> {
        match &self.auth {
            Some(auth) => auth.seal(m.encode()),
            None => m.encode(),
        }
    }

    pub(crate) fn can_look_up(&self, key: &Address) -> bool {
        match key {
            Address::Name(_) => self.discovery_up,
            Address::Ip4(_) | Address::Ip6(_) => self.discovery_up || !self.cfg.derive.is_empty(),
            Address::Gid(_) | Address::Lid(_) => false,
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.cfg.timeout_ms))
    }

    /// Starts a lookup for `key`, or joins the one in flight.
    pub(crate) fn start_lookup(
        &mut self,
        ep: Id,
        key: Address,
        waiter: Option<Waiter>,
        now: Instant,
    ) {
        if let Some(l) = self.resolver.lookups.get_mut(&key) {
            l.waiters.extend(waiter);
            return;
        }
        let txid = self.resolver.new_txid();
        log::trace!("lookup {key}: started");
        self.resolver.by_txid.insert(txid, key.clone());
        self.resolver.lookups.insert(
            key.clone(),
            Lookup {
                txid,
                stage: Stage::Discover { tries: 0 },
                deadline: now,
                endpoint: ep,
                waiters: waiter.into_iter().collect(),
                failure: ACM_STATUS_ENODATA as u8,
            },
        );
        let first = match self.discovery_up {
            true => Stage::Discover { tries: 0 },
            false => Stage::Derive(0),
        };
        self.run_stage(key, first, now);
    }

    fn run_stage(&mut self, key: Address, stage: Stage, now: Instant) {
        let timeout = self.timeout();
        let Some(l) = self.resolver.lookups.get(&key) else {
            return;
        };
        let (txid, ep, failure) = (l.txid, l.endpoint, l.failure);
        match stage {
            Stage::Discover { tries } => {
                let query = self.query_datagram(&key, txid, ep);
                let Some(datagram) = query else {
                    log::debug!("lookup {key}: no record of the source endpoint to send");
                    return self.run_stage(key, Stage::Derive(0), now);
                };
                self.effects.datagrams.push(datagram);
                if let Some(l) = self.resolver.lookups.get_mut(&key) {
                    l.stage = Stage::Discover { tries: tries + 1 };
                    l.deadline = now + timeout;
                }
                // A lookup started on the daemon's thread: the worker may be
                // asleep until a later deadline (or for a whole idle second)
                // and must learn of this one, or the retry and the timeout
                // come late.
                self.effects.wake = true;
            }
            Stage::Derive(i) => match self.cfg.derive.get(i).copied() {
                None => self.fail(&key, failure, now),
                Some(Derivation::Ipv4Mapped) => match key {
                    Address::Ip4(v4) => {
                        let gid = Gid(v4.to_ipv6_mapped().octets());
                        self.succeed(&key, Learned::derived(gid, self.addr_expiry(now)), now)
                    }
                    _ => self.run_stage(key, Stage::Derive(i + 1), now),
                },
                Some(Derivation::Eui64) => match ip_of(&key) {
                    Some(ip) => {
                        if let Some(l) = self.resolver.lookups.get_mut(&key) {
                            l.stage = Stage::Derive(i);
                            l.deadline = now + timeout;
                        }
                        // The query (if any) already made the kernel
                        // resolve the neighbour.
                        let poked = self.discovery_up;
                        self.resolver.neighbour_jobs.push(NeighbourJob {
                            dest: key,
                            ip,
                            poked,
                        });
                        self.effects.wake = true;
                    }
                    None => self.run_stage(key, Stage::Derive(i + 1), now),
                },
            },
        }
    }

    /// The QUERY for `key`, carrying the record of the asking endpoint.
    fn query_datagram(
        &self,
        key: &Address,
        txid: std::num::NonZeroU64,
        ep: Id,
    ) -> Option<Datagram> {
        let target = WireAddress::new(key.clone()).ok()?;
        let sender = self.record_for(ep, None)?;
        let bytes = self.encode(Query::new(txid, target, sender).into());
        Some(match ip_of(key) {
            Some(ip) => Datagram::Unicast {
                to: SocketAddr::new(ip, self.cfg.discovery_port),
                from: None,
                bytes,
            },
            None => Datagram::Multicast { bytes },
        })
    }

    fn addr_expiry(&self, now: Instant) -> Option<Instant> {
        self.cfg.addr_timeout.duration().map(|d| now + d)
    }

    /// Moves a lookup past a stage that failed with `status`.
    fn next_stage(&mut self, key: &Address, status: u8, now: Instant) {
        let Some(l) = self.resolver.lookups.get_mut(key) else {
            return;
        };
        l.failure = status;
        let next = match l.stage {
            Stage::Discover { .. } => Stage::Derive(0),
            Stage::Derive(i) => Stage::Derive(i + 1),
        };
        self.run_stage(key.clone(), next, now);
    }

    /// Completes a lookup: learns the binding and answers its waiters.
    fn succeed(&mut self, key: &Address, learned: Learned, now: Instant) {
        log::trace!("lookup {key}: {}", learned.gid);
        self.resolver.failed.remove(key);
        self.resolver.learned.insert(key.clone(), learned);
        self.cache.evict(key);
        let Some(l) = self.resolver.remove_lookup(key) else {
            return;
        };
        for w in l.waiters {
            let reply = match self.find(w.endpoint, key, now) {
                Found::At(dest) => match self.build_and_cache(w.endpoint, key.clone(), dest, now) {
                    Ok((_, wire)) => msg::resolve_success(&w.request, &wire, w.echo_source),
                    Err(e) => msg::resolve_error(&w.request, e.status),
                },
                Found::NotInPartition | Found::Unknown => {
                    msg::resolve_error(&w.request, ACM_STATUS_ENODATA as u8)
                }
            };
            self.answer_waiter(&w, reply);
        }
    }

    fn fail(&mut self, key: &Address, status: u8, now: Instant) {
        log::trace!("lookup {key}: failed with status {status}");
        if self.cfg.negative_timeout_ms > 0 {
            let until = now + Duration::from_millis(u64::from(self.cfg.negative_timeout_ms));
            self.resolver.failed.insert(key.clone(), (status, until));
        }
        if let Some(l) = self.resolver.remove_lookup(key) {
            for w in l.waiters {
                let reply = msg::resolve_error(&w.request, status);
                self.answer_waiter(&w, reply);
            }
        }
    }

    fn answer_waiter(&mut self, w: &Waiter, reply: msg::MsgBuf) {
        self.count_status(w.endpoint, reply.status());
        self.effects.replies.push(Outgoing {
            id: w.id,
            msg: reply,
            query: false,
        });
    }

    /// Answers, with `status`, every request waiting on endpoint `ep`.
    pub(crate) fn abandon_waiters(&mut self, ep: Id, status: u8) {
        let mut orphaned = Vec::new();
        let mut gone = Vec::new();
        for (key, l) in self.resolver.lookups.iter_mut() {
            let (theirs, rest): (Vec<Waiter>, Vec<Waiter>) =
                l.waiters.drain(..).partition(|w| w.endpoint == ep);
            l.waiters = rest;
            orphaned.extend(theirs);
            if l.endpoint == ep {
                match l.waiters.first() {
                    // Retries carry the record of an endpoint still open.
                    Some(w) => l.endpoint = w.endpoint,
                    None => gone.push(key.clone()),
                }
            }
        }
        for key in gone {
            self.resolver.remove_lookup(&key);
        }
        for w in orphaned {
            let reply = msg::resolve_error(&w.request, status);
            self.answer_waiter(&w, reply);
        }
    }

    /// When the worker must run next.
    pub fn next_wake(&self) -> Option<Instant> {
        let jobs =
            (!self.resolver.neighbour_jobs.is_empty()).then(|| Instant::now() + NEIGHBOUR_POLL);
        let paced = (!self.announcements.is_empty()).then_some(self.announcements_at);
        [
            self.resolver.next_deadline(),
            self.announce_at.first().copied(),
            jobs,
            paced,
            self.withdraw_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Retries, stage changes and announcements that are due.
    pub fn on_timers(&mut self, now: Instant) {
        let due: Vec<(Address, Stage)> = self
            .resolver
            .lookups
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(k, l)| (k.clone(), l.stage))
            .collect();
        for (key, stage) in due {
            match stage {
                Stage::Discover { tries } if tries <= self.cfg.retries => {
                    log::trace!("lookup {key}: try {} timed out, asking again", tries);
                    self.run_stage(key, Stage::Discover { tries }, now);
                }
                _ => self.next_stage(&key, ACM_STATUS_ETIMEDOUT as u8, now),
            }
        }
        if self.withdraw_at.is_some_and(|t| t <= now) {
            self.send_withdrawals();
        }
        if self.announce_at.first().is_some_and(|&t| t <= now) {
            self.announce_at.remove(0);
            self.announce();
        }
        if !self.announcements.is_empty() && self.announcements_at <= now {
            let n = self.announcements.len().min(ANNOUNCE_BATCH);
            self.effects.datagrams.extend(
                self.announcements
                    .drain(..n)
                    .map(|bytes| Datagram::Multicast { bytes }),
            );
            self.announcements_at = now + ANNOUNCE_PACE;
        }
        self.log_drops(now);
    }

    /// Says in the log, at the daemon's default level, how many datagrams
    /// were dropped and why: an operator sees an attack or a misconfigured
    /// peer (a wrong key) without turning on tracing.
    fn log_drops(&mut self, now: Instant) {
        let (logged, at) = &self.drops_logged;
        if self.drops == *logged || at.is_some_and(|t| now < t + DROP_SUMMARY_EVERY) {
            return;
        }
        log::info!("discovery: datagrams dropped so far: {}", self.drops);
        self.drops_logged = (self.drops.clone(), Some(now));
    }

    pub(crate) fn schedule_announce(&mut self, now: Instant) {
        self.announce_at = ANNOUNCE_DELAYS_MS
            .iter()
            .map(|ms| now + Duration::from_millis(*ms))
            .collect();
        self.effects.wake = true;
    }

    /// The record of endpoint `ep`: its port's GID, LID, MTU and rate, its
    /// partition and up to eight of its addresses (`first` among them).
    pub(crate) fn record_for(&self, ep: Id, first: Option<&Address>) -> Option<EndpointRecord> {
        let e = self.endpoints.get(&ep)?;
        let port = &self.ports.get(&e.port)?.info;
        let mut addresses: Vec<WireAddress> = first
            .and_then(|a| WireAddress::new(a.clone()).ok())
            .into_iter()
            .collect();
        for id in &e.addresses {
            if addresses.len() == MAX_ADDRESSES {
                break;
            }
            if let Ok(w) = WireAddress::new(self.addresses[id].address.clone()) {
                if !addresses.contains(&w) {
                    addresses.push(w);
                }
            }
        }
        let (mtu, rate) = self.port_mtu_rate(port);
        EndpointRecord::new(port.gids[0], port.lid, mtu, rate, vec![e.pkey], addresses).ok()
    }

    /// Announces every port's endpoints to the segment.
    fn announce(&mut self) {
        if !self.discovery_up {
            return;
        }
        let mut announcements = Vec::new();
        for p in self.ports.values() {
            let mut pkeys: Vec<u16> = Vec::new();
            let mut addrs: Vec<WireAddress> = Vec::new();
            // A set, not a scan of `addrs`: ports can hold thousands of
            // names, and a quadratic dedup of 11,000 took 150 ms of the
            // worker's time (seen as one slow cold resolve in the benchmark).
            let mut seen: Set<&Address> = Set::default();
            for ep in &p.endpoints {
                let e = &self.endpoints[ep];
                if pkeys.len() < MAX_PKEYS && !pkeys.iter().any(|k| k & 0x7fff == e.pkey & 0x7fff) {
                    pkeys.push(e.pkey);
                }
                for id in &e.addresses {
                    let a = &self.addresses[id].address;
                    if seen.insert(a) {
                        addrs.extend(WireAddress::new(a.clone()));
                    }
                }
            }
            let (mtu, rate) = self.port_mtu_rate(&p.info);
            for datagram in announce_chunks(addrs) {
                let records = datagram.into_iter().filter_map(|chunk| {
                    EndpointRecord::new(p.info.gids[0], p.info.lid, mtu, rate, pkeys.clone(), chunk)
                        .ok()
                });
                if let Ok(a) = Announce::new(records.collect(), false) {
                    announcements.push(a);
                }
            }
        }
        for a in announcements {
            let bytes = self.encode(a.into());
            self.announcements.push_back(bytes);
        }
    }

    /// Queues the withdrawal of addresses of endpoint `ep` (`only` one, or
    /// all of them). The daemon removes an endpoint's addresses one call at
    /// a time; they leave together a moment later, in one record per
    /// endpoint, so names travel with the IP addresses that vouch for them.
    pub(crate) fn withdraw(&mut self, ep: Id, only: Option<&Address>) {
        if !self.discovery_up {
            return;
        }
        let Some(e) = self.endpoints.get(&ep) else {
            return;
        };
        let Some(port) = self.ports.get(&e.port) else {
            return;
        };
        let gone: Vec<WireAddress> = match only {
            Some(a) => WireAddress::new(a.clone()).into_iter().collect(),
            None => e
                .addresses
                .iter()
                .filter_map(|id| WireAddress::new(self.addresses[id].address.clone()).ok())
                .collect(),
        };
        let (mtu, rate) = self.port_mtu_rate(&port.info);
        let key = (port.info.gids[0], port.info.lid, mtu, rate, e.pkey);
        let i = match self.withdrawals.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.withdrawals.push((key, Pending::default()));
                self.withdrawals.len() - 1
            }
        };
        let pending = &mut self.withdrawals[i].1;
        for w in gone {
            // A set beside the list: the daemon removes an endpoint's
            // addresses one call at a time, thousands of them on a big port.
            if pending.seen.insert(w.clone()) {
                pending.addrs.push(w);
            }
        }
        if self.withdraw_at.is_none() {
            self.withdraw_at = Some(Instant::now() + WITHDRAW_DELAY);
            self.effects.wake = true;
        }
    }

    fn send_withdrawals(&mut self) {
        self.withdraw_at = None;
        let mut records = Vec::new();
        for ((gid, lid, mtu, rate, pkey), Pending { addrs, .. }) in
            std::mem::take(&mut self.withdrawals)
        {
            for chunk in addrs.chunks(MAX_ADDRESSES) {
                if let Ok(r) = EndpointRecord::new(gid, lid, mtu, rate, vec![pkey], chunk.to_vec())
                {
                    records.push(r);
                }
            }
        }
        for chunk in records.chunks(MAX_ANNOUNCE_RECORDS) {
            if let Ok(a) = Announce::new(chunk.to_vec(), true) {
                let bytes = self.encode(a.into());
                self.announcements.push_back(bytes);
            }
        }
    }

    fn is_own_gid(&self, gid: Gid) -> bool {
        self.ports.values().any(|p| p.info.gids.contains(&gid))
    }

    /// Counts a dropped datagram under `reason` and says why at trace
    /// level; `why` is formatted only when tracing is on, so a flood of
    /// garbage costs a count, not a string, per datagram.
    fn drop_datagram(&mut self, reason: DropReason, from: SocketAddr, why: impl std::fmt::Display) {
        *reason(&mut self.drops) += 1;
        let total = self.drops.total();
        log::trace!("discovery: dropped a datagram from {from}: {why} ({total} dropped so far)");
    }

    /// Learns a peer's record, trusting it only as far as it can be
    /// checked (docs/protocol.md, Caching). A binding that changed leaves
    /// the destination cache.
    fn learn(&mut self, record: &EndpointRecord, how: Learn, now: Instant) {
        let new = Learned::from_record(record, self.addr_expiry(now));
        let mut keys: Vec<(Address, bool)> = Vec::new();
        match how {
            // Only the address the query came from is verified.
            Learn::Query(src) => keys.push((src.into(), true)),
            // The target, verified by the query; the owner's other
            // addresses only where nothing else is bound.
            Learn::Reply(target) => {
                keys.push((target.clone(), true));
                for w in record.addresses() {
                    let a = w.address();
                    if a != target && !self.resolver.learned.contains_key(a) {
                        keys.push((a.clone(), true));
                    }
                }
            }
            // Updates only: the source address, and addresses bound to the
            // same host as the source was, so a host can move its own names
            // to a new GID but never take another host's.
            Learn::Announce(src, host) => {
                let src = Address::from(src);
                for w in record.addresses() {
                    let a = w.address();
                    let same_host =
                        host.is_some() && self.resolver.learned.get(a).map(|l| l.gid) == host;
                    if *a == src || same_host {
                        keys.push((a.clone(), false));
                    }
                }
            }
        }
        keys.push((Address::Gid(record.gid()), true));
        for (key, insert) in keys {
            match self.resolver.learned.get_mut(&key) {
                // The common case (a peer re-announcing what is known):
                // only the lifetime changes, without a copy of the record.
                Some(old) if same_binding(old, &new) => {
                    old.expires = new.expires;
                    continue;
                }
                Some(_) => {
                    log::trace!("discovery: {key} is now {}", new.gid);
                    self.cache.evict(&key);
                }
                None if insert => {}
                None => continue,
            }
            self.resolver.learned.insert(key, new.clone());
        }
    }

    /// One datagram that arrived at the discovery port. `to` is the address
    /// it was sent to, when the socket reports it.
    pub fn on_datagram(
        &mut self,
        from: SocketAddr,
        to: Option<IpAddr>,
        bytes: &[u8],
        now: Instant,
    ) {
        let decoded = match &mut self.auth {
            None => Message::decode(bytes),
            Some(auth) => match auth.open(bytes) {
                Ok(body) => Message::decode_authenticated(body),
                Err(r) => {
                    let reason: DropReason = match r.is_replay() {
                        true => |d| &mut d.replayed,
                        false => |d| &mut d.unauthenticated,
                    };
                    return self.drop_datagram(reason, from, r);
                }
            },
        };
        match decoded {
            Err(e) => {
                self.drop_datagram(|d| &mut d.malformed, from, format_args!("malformed: {e}"))
            }
            Ok(Message::Query(q)) => self.on_query(q, from, to, now),
            Ok(Message::Reply(r)) => self.on_reply(r, from, now),
            Ok(Message::Announce(a)) => self.on_announce(a, from, now),
        }
    }

    fn on_query(&mut self, q: Query, from: SocketAddr, to: Option<IpAddr>, now: Instant) {
        if self.is_own_gid(q.sender().gid()) {
            return self.drop_datagram(|d| &mut d.own, from, "our own query");
        }
        let target = q.target().address().clone();
        let holder = self
            .local
            .get(&target)
            .and_then(|ids| ids.first())
            .map(|id| self.addresses[id].endpoint);
        let answer = match holder.and_then(|ep| self.record_for(ep, Some(&target))) {
            Some(record) => Answer::Found(record),
            // Names are asked by multicast: only their owner answers.
            None if ip_of(&target).is_none() => return,
            None => Answer::Refused,
        };
        let found = matches!(answer, Answer::Found(_));
        if !self.reply_limit.allow(from.ip(), now) {
            return self.drop_datagram(|d| &mut d.rate_limited, from, "over urdma_reply_rate");
        }
        let Ok(reply) = q.reply(answer) else {
            return;
        };
        log::trace!(
            "discovery: {from} asked for {target}: {}",
            if found { "ours" } else { "refused" }
        );
        // A reply to a unicast query comes from the queried address, the
        // only source the asker accepts.
        let from_addr = ip_of(&target).filter(|ip| Some(*ip) == to);
        self.effects.datagrams.push(Datagram::Unicast {
            to: from,
            from: from_addr,
            bytes: self.encode(reply.into()),
        });
        // Both sides cache each other, as acmp does; only a sender that
        // speaks from one of its own addresses is believed.
        if found
            && q.sender()
                .addresses()
                .iter()
                .any(|w| ip_of(w.address()) == Some(from.ip()))
        {
            self.learn(q.sender(), Learn::Query(from.ip()), now);
        }
    }

    fn on_reply(&mut self, r: Reply, from: SocketAddr, now: Instant) {
        let Some(key) = self.resolver.by_txid.get(&r.txid()).cloned() else {
            return self.drop_datagram(
                |d| &mut d.unsolicited,
                from,
                "no query with that transaction id",
            );
        };
        let expected = self.resolver.lookups.get(&key).map(|l| l.stage);
        if !matches!(expected, Some(Stage::Discover { .. })) || r.target().address() != &key {
            return self.drop_datagram(
                |d| &mut d.unsolicited,
                from,
                "reply does not match its query",
            );
        }
        if ip_of(&key).is_some_and(|ip| ip != from.ip() || from.port() != self.cfg.discovery_port) {
            return self.drop_datagram(
                |d| &mut d.wrong_source,
                from,
                "reply not from the queried address",
            );
        }
        match r.answer() {
            Answer::Found(record) => {
                let learned = Learned::from_record(record, self.addr_expiry(now));
                self.learn(record, Learn::Reply(&key), now);
                self.succeed(&key, learned, now);
            }
            Answer::Refused => {
                log::trace!("lookup {key}: refused by {from}");
                self.next_stage(&key, ACM_STATUS_ENODATA as u8, now);
            }
        }
    }

    fn on_announce(&mut self, a: Announce, from: SocketAddr, now: Instant) {
        // The GIDs the source vouches for: those of records listing it. A
        // port with many names needs several records; one of them lists
        // the source for all of the same GID.
        let vouched: Vec<Gid> = a
            .records()
            .iter()
            .filter(|r| {
                r.addresses()
                    .iter()
                    .any(|w| ip_of(w.address()) == Some(from.ip()))
            })
            .map(EndpointRecord::gid)
            .collect();
        let source = Address::from(from.ip());
        let host_before = self.resolver.learned.get(&source).map(|l| l.gid);
        for record in a.records() {
            if self.is_own_gid(record.gid()) {
                self.drop_datagram(|d| &mut d.own, from, "our own announcement");
                continue;
            }
            let listed = vouched.contains(&record.gid());
            // A withdrawal may also come from another address of the same
            // host (the withdrawn one may be gone from its interface).
            let same_host = a.withdrawn()
                && self
                    .resolver
                    .learned
                    .get(&source)
                    .is_some_and(|l| l.gid == record.gid());
            if !listed && !same_host {
                self.drop_datagram(
                    |d| &mut d.wrong_source,
                    from,
                    "announcement not from an address it lists",
                );
                continue;
            }
            if a.withdrawn() {
                for w in record.addresses() {
                    let key = w.address();
                    if self
                        .resolver
                        .learned
                        .get(key)
                        .is_some_and(|l| l.gid == record.gid())
                    {
                        log::trace!("discovery: {key} withdrawn by {from}");
                        self.resolver.learned.remove(key);
                        self.cache.evict(key);
                    }
                }
            } else {
                self.learn(record, Learn::Announce(from.ip(), host_before), now);
            }
        }
        // A host that came back with a new GID (after a crash, so nothing
        // was withdrawn) moved the names this datagram carries. Those in
        // its other datagrams cannot follow (they no longer see the source
        // at the old GID), and the old GID is gone: forget them.
        let host_now = self.resolver.learned.get(&source).map(|l| l.gid);
        if let (Some(old), Some(new), false) = (host_before, host_now, a.withdrawn()) {
            if old != new {
                for gone in self.resolver.forget_gid(old) {
                    log::trace!("discovery: {gone} forgotten: its host moved to {new}");
                    self.cache.evict(&gone);
                }
            }
        }
    }

    /// An ICMP error for a datagram sent to `dest`; `payload` is that
    /// datagram. An unreachable host or port fails its lookup at once.
    pub fn on_unreachable(&mut self, dest: SocketAddr, payload: &[u8], now: Instant) {
        let Some(txid) = Message::query_txid(payload) else {
            return;
        };
        let Some(key) = self.resolver.by_txid.get(&txid).cloned() else {
            return;
        };
        if ip_of(&key) == Some(dest.ip())
            && matches!(
                self.resolver.lookups.get(&key).map(|l| l.stage),
                Some(Stage::Discover { .. })
            )
        {
            log::trace!("lookup {key}: {dest} unreachable");
            self.next_stage(&key, ACM_STATUS_ENODATA as u8, now);
        }
    }

    /// Neighbour lookups the worker should make now.
    pub fn take_neighbour_jobs(&mut self) -> Vec<NeighbourJob> {
        std::mem::take(&mut self.resolver.neighbour_jobs)
    }

    /// The result of a neighbour lookup for an `eui64` derivation.
    pub fn on_neighbour(&mut self, mut job: NeighbourJob, mac: Option<[u8; 6]>, now: Instant) {
        let Some(l) = self.resolver.lookups.get(&job.dest) else {
            return;
        };
        let Stage::Derive(i) = l.stage else { return };
        if self.cfg.derive.get(i) != Some(&Derivation::Eui64) {
            return;
        }
        match mac {
            Some(mac) => {
                let learned = Learned::derived(eui64_gid(mac), self.addr_expiry(now));
                self.succeed(&job.dest.clone(), learned, now);
            }
            None if now < l.deadline => {
                if !job.poked {
                    self.effects.datagrams.push(Datagram::Unicast {
                        to: SocketAddr::new(job.ip, POKE_PORT),
                        from: None,
                        bytes: vec![0],
                    });
                    job.poked = true;
                }
                self.resolver.neighbour_jobs.push(job);
            }
            // The timer moves the lookup on at its deadline.
            None => {}
        }
    }

    /// Where a learned destination leads, for tests and statistics.
    pub fn learned_dest(&self, a: &Address) -> Option<Dest> {
        self.resolver.learned.get(a).map(|l| Dest {
            gid: l.gid,
            lid: l.lid,
            mtu: l.mtu,
            rate: l.rate,
        })
    }

    /// Lookups in flight.
    pub fn lookups_in_flight(&self) -> usize {
        self.resolver.lookups.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::engine::{Effects, PortInfo};
    use crate::host::FakeHost;
    use crate::hosts::Hosts;
    use crate::msg::tests::{addr_entry, request};
    use crate::msg::MsgBuf;
    use crate::path::PathRecord;
    use acm_prov_sys::{
        ACM_ADDRESS_IP, ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST, ACM_FLAGS_NODELAY, ACM_STATUS_ENOTCONN,
    };
    use std::net::Ipv4Addr;

    const OWN: &str = "fe80::a";
    const PEER: &str = "fe80::b";
    const PEER_IP: [u8; 4] = [10, 0, 0, 2];

    struct Fixture {
        e: Engine<FakeHost>,
        ep: Id,
        addr: Id,
        t0: Instant,
    }

    fn fixture(cfg: Config) -> Fixture {
        fixture_with_gid(cfg, OWN)
    }

    /// Device 1, its port 1 with GID `gid`, one endpoint holding 10.0.0.1
    /// and `node-a`: the endpoint and its IPv4 address.
    fn bring_up(e: &mut Engine<FakeHost>, gid: &str) -> (Id, Id) {
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
        let mut e = Engine::new(FakeHost::default(), cfg, Hosts::default());
        let (ep, addr) = bring_up(&mut e, gid);
        e.set_discovery_up(true);
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
        SocketAddr::new(IpAddr::V4(PEER_IP.into()), crate::wire::DEFAULT_PORT)
    }

    /// The one QUERY among the effects, and where it went.
    fn sent_query(fx: &Effects) -> (Query, Option<SocketAddr>) {
        let queries: Vec<_> = fx
            .datagrams
            .iter()
            .filter_map(|d| {
                let (to, bytes) = match d {
                    Datagram::Unicast { to, bytes, .. } => (Some(*to), bytes),
                    Datagram::Multicast { bytes } => (None, bytes),
                };
                match Message::decode(bytes) {
                    Ok(Message::Query(q)) => Some((q, to)),
                    _ => None,
                }
            })
            .collect();
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

    fn reply_bytes(q: &Query, answer: Answer) -> Vec<u8> {
        Message::from(q.reply(answer).unwrap()).encode()
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
        assert!(fx.wake, "the worker must learn of the new deadline");
        let (q, to) = sent_query(&fx);
        assert_eq!(to, Some(peer()));
        assert_eq!(q.target().address(), &Address::Ip4(PEER_IP.into()));
        assert_eq!(
            q.sender().gid(),
            OWN.parse().unwrap(),
            "the query carries the asker's record"
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
        // Learned: the peer's other address and its GID answer at once.
        let by_name = request(
            &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node-b")],
            false,
            3,
        );
        assert_eq!(
            dgid(&f.e.resolve(f.addr, &by_name, 13).unwrap()),
            PEER.parse().unwrap()
        );
        assert_eq!(f.e.lookups_in_flight(), 0);
        // A second reply to the same query is dropped.
        f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
        assert!(f.e.take_effects().replies.is_empty());
        assert_eq!(f.e.drops().unsolicited, 1);
    }

    #[test]
    fn replies_from_elsewhere_or_unknown_transactions_are_dropped() {
        let mut f = fixture(Config::default());
        f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
        let (q, _) = sent_query(&f.e.take_effects());
        let found = reply_bytes(&q, Answer::Found(peer_record("fe80::666")));
        let impostor =
            SocketAddr::new(IpAddr::V4([10, 0, 0, 66].into()), crate::wire::DEFAULT_PORT);
        f.e.on_datagram(impostor, None, &found, f.t0);
        let other_port = SocketAddr::new(IpAddr::V4(PEER_IP.into()), 4444);
        f.e.on_datagram(other_port, None, &found, f.t0);
        assert_eq!(f.e.drops().wrong_source, 2);
        let stranger = Query::new(
            std::num::NonZeroU64::new(q.txid().get() ^ 1).unwrap(),
            q.target().clone(),
            peer_record(PEER),
        );
        f.e.on_datagram(peer(), None, &reply_bytes(&stranger, Answer::Refused), f.t0);
        assert_eq!(f.e.drops().unsolicited, 1);
        f.e.on_datagram(peer(), None, b"garbage", f.t0);
        assert_eq!(f.e.drops().malformed, 1);
        assert!(
            f.e.take_effects().replies.is_empty(),
            "nothing answered the client"
        );
        assert_eq!(
            f.e.lookups_in_flight(),
            1,
            "the lookup still waits for its real answer"
        );
    }

    #[test]
    fn silence_is_retried_then_times_out_and_is_remembered() {
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
        // Remembered: the next request fails at once without a query.
        let r = f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 2), 12).unwrap();
        assert_eq!(r.status(), ACM_STATUS_ETIMEDOUT as u8);
        assert!(f.e.take_effects().datagrams.is_empty());
    }

    #[test]
    fn refusal_and_icmp_unreachable_fail_at_once() {
        let mut f = fixture(Config {
            negative_timeout_ms: 0,
            ..Config::default()
        });
        f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
        let (q, _) = sent_query(&f.e.take_effects());
        f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
        let fx = f.e.take_effects();
        assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);

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
            (12, ACM_STATUS_ENODATA as u8)
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
            fx.wake && fx.datagrams.is_empty(),
            "withdrawals wait to leave together"
        );
        f.e.on_timers(f.t0 + Duration::from_secs(1));
        fx.datagrams = f.e.take_effects().datagrams;
        assert_eq!(fx.replies.len(), 1);
        assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENOTCONN as u8);
        assert_eq!(f.e.lookups_in_flight(), 0);
        let withdrawn: Vec<_> = fx
            .datagrams
            .iter()
            .filter_map(|d| match d {
                Datagram::Multicast { bytes } => match Message::decode(bytes) {
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

    #[test]
    fn queries_are_answered_by_the_owner_only() {
        let mut f = fixture(Config::default());
        let asker = peer_record(PEER);
        let txid = std::num::NonZeroU64::new(7).unwrap();
        let own_ip = IpAddr::V4([10, 0, 0, 1].into());
        let ask = |target: Address| {
            Message::from(Query::new(
                txid,
                WireAddress::new(target).unwrap(),
                asker.clone(),
            ))
            .encode()
        };

        f.e.on_datagram(
            peer(),
            Some(own_ip),
            &ask(Address::Ip4([10, 0, 0, 1].into())),
            f.t0,
        );
        let fx = f.e.take_effects();
        let [Datagram::Unicast { to, from, bytes }] = &fx.datagrams[..] else {
            panic!("{fx:?}")
        };
        assert_eq!(
            (*to, *from),
            (peer(), Some(own_ip)),
            "answered from the queried address"
        );
        let Ok(Message::Reply(r)) = Message::decode(bytes) else {
            panic!()
        };
        assert!(matches!(r.answer(), Answer::Found(rec) if rec.gid() == OWN.parse().unwrap()));
        assert!(
            bytes.len() <= crate::wire::QUERY_LEN,
            "never larger than the query"
        );
        // The asker was learned at the address it asked from, and only
        // there: the name its record claims is not verified.
        let r = f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 1).unwrap();
        assert_eq!(dgid(&r), PEER.parse().unwrap());
        assert_eq!(f.e.learned_dest(&Address::name("node-b").unwrap()), None);

        f.e.on_datagram(
            peer(),
            Some(own_ip),
            &ask(Address::Ip4([10, 0, 0, 50].into())),
            f.t0,
        );
        let fx = f.e.take_effects();
        let [Datagram::Unicast { bytes, .. }] = &fx.datagrams[..] else {
            panic!("{fx:?}")
        };
        assert!(
            matches!(Message::decode(bytes), Ok(Message::Reply(r)) if matches!(r.answer(), Answer::Refused))
        );

        f.e.on_datagram(peer(), None, &ask(Address::name("node-z").unwrap()), f.t0);
        assert!(
            f.e.take_effects().datagrams.is_empty(),
            "other hosts' names: silence"
        );

        let mine = Message::from(Query::new(
            txid,
            WireAddress::new(Address::name("node-a").unwrap()).unwrap(),
            f.e.record_for(f.ep, None).unwrap(),
        ))
        .encode();
        f.e.on_datagram(peer(), None, &mine, f.t0);
        assert!(
            f.e.take_effects().datagrams.is_empty(),
            "our own multicast, looped back"
        );
        assert_eq!(f.e.drops().own, 1);
    }

    #[test]
    fn announcements_update_what_is_cached_and_nothing_else() {
        let mut f = fixture(Config::default());
        learn_peer(&mut f, 1);
        let announce = |gid: &str, withdrawn: bool| {
            Message::from(Announce::new(vec![peer_record(gid)], withdrawn).unwrap()).encode()
        };

        // From an address the record does not list: not believed.
        let elsewhere = SocketAddr::new(IpAddr::V4([10, 0, 0, 66].into()), 6126);
        f.e.on_datagram(elsewhere, None, &announce("fe80::bad", false), f.t0);
        assert_eq!(f.e.drops().wrong_source, 1);
        assert_eq!(
            dgid(&f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 2), 2).unwrap()),
            PEER.parse().unwrap()
        );

        // The peer restarted with a new GID: the cached path follows.
        f.e.on_datagram(peer(), None, &announce("fe80::c", false), f.t0);
        assert_eq!(
            dgid(&f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 3), 3).unwrap()),
            "fe80::c".parse().unwrap()
        );

        // Withdrawing a GID that is no longer bound changes nothing...
        f.e.on_datagram(peer(), None, &announce(PEER, true), f.t0);
        assert_eq!(
            f.e.learned_dest(&Address::Ip4(PEER_IP.into())).unwrap().gid,
            "fe80::c".parse().unwrap()
        );
        // ...withdrawing the bound one forgets it.
        f.e.on_datagram(peer(), None, &announce("fe80::c", true), f.t0);
        assert_eq!(f.e.learned_dest(&Address::Ip4(PEER_IP.into())), None);

        // Another host cannot take a name bound to someone else.
        learn_peer(&mut f, 4);
        let thief_ip = Ipv4Addr::new(10, 0, 0, 66);
        let thief = EndpointRecord::new(
            "fe80::666".parse().unwrap(),
            0,
            5,
            16,
            vec![0xffff],
            vec![
                WireAddress::from(thief_ip),
                WireAddress::new(Address::name("node-b").unwrap()).unwrap(),
            ],
        )
        .unwrap();
        let from_thief = SocketAddr::new(IpAddr::V4(thief_ip), 6126);
        f.e.on_datagram(
            from_thief,
            None,
            &Message::from(Announce::new(vec![thief.clone()], false).unwrap()).encode(),
            f.t0,
        );
        assert_eq!(
            f.e.learned_dest(&Address::name("node-b").unwrap())
                .unwrap()
                .gid,
            PEER.parse().unwrap()
        );
        let asks = Message::from(Query::new(
            std::num::NonZeroU64::new(9).unwrap(),
            WireAddress::from(Ipv4Addr::new(10, 0, 0, 1)),
            thief,
        ))
        .encode();
        f.e.on_datagram(
            from_thief,
            Some(IpAddr::V4([10, 0, 0, 1].into())),
            &asks,
            f.t0,
        );
        assert_eq!(
            f.e.learned_dest(&Address::name("node-b").unwrap())
                .unwrap()
                .gid,
            PEER.parse().unwrap()
        );

        // Addresses never asked about are not learned from announcements.
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
            f.t0,
        );
        assert_eq!(f.e.learned_dest(&Address::Ip4([10, 0, 0, 4].into())), None);
    }

    #[test]
    fn names_are_asked_by_multicast_and_this_host_announces_itself() {
        let mut f = fixture(Config::default());
        let by_name = request(
            &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node-b")],
            false,
            3,
        );
        assert_eq!(f.e.resolve(f.addr, &by_name, 1), None);
        let (q, to) = sent_query(&f.e.take_effects());
        assert_eq!(
            (to, q.target().address()),
            (None, &Address::name("node-b").unwrap())
        );
        // A name's owner may answer from any of its addresses.
        let from = SocketAddr::new(IpAddr::V4([10, 0, 0, 77].into()), 6126);
        f.e.on_datagram(
            from,
            None,
            &reply_bytes(&q, Answer::Found(peer_record(PEER))),
            f.t0,
        );
        assert_eq!(
            dgid(&f.e.take_effects().replies[0].msg),
            PEER.parse().unwrap()
        );

        f.e.schedule_announce(f.t0);
        assert!(f.e.next_wake().unwrap() <= f.t0 + Duration::from_millis(50));
        f.e.on_timers(f.t0 + Duration::from_millis(60));
        let fx = f.e.take_effects();
        let [Datagram::Multicast { bytes }] = &fx.datagrams[..] else {
            panic!("{fx:?}")
        };
        let Ok(Message::Announce(a)) = Message::decode(bytes) else {
            panic!()
        };
        assert!(!a.withdrawn());
        assert_eq!(a.records()[0].gid(), OWN.parse().unwrap());
        assert_eq!(a.records()[0].addresses().len(), 2);
        assert_eq!(f.e.announce_at.len(), 2, "repeated twice more");
    }

    #[test]
    fn without_discovery_only_derivations_run() {
        let cfg = Config {
            discovery: false,
            derive: vec![Derivation::Eui64, Derivation::Ipv4Mapped],
            ..Config::default()
        };
        let mut f = fixture(cfg);
        f.e.set_discovery_up(false);
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
            crate::auth::Keyring::parse(keys, "key").unwrap(),
            crate::auth::wall_micros,
        )
    }

    #[test]
    fn with_a_key_only_authenticated_fresh_messages_count() {
        let mut f = fixture(Config::default());
        f.e.set_auth(Some(auth(KEY)));
        let mut peer_auth = auth(KEY);
        f.e.resolve(f.addr, &ip_request(PEER_IP, 0, 1), 11);
        let fx = f.e.take_effects();
        let [Datagram::Unicast { bytes: sent, .. }] = &fx.datagrams[..] else {
            panic!("{fx:?}")
        };
        assert_eq!(
            sent.len(),
            crate::wire::QUERY_LEN + crate::wire::AUTH_TRAILER_LEN
        );
        assert!(
            Message::decode(sent).is_err(),
            "a receiver without the key drops it"
        );
        let body = peer_auth.open(sent).expect("sealed with the shared key");
        let Ok(Message::Query(q)) = Message::decode_authenticated(body) else {
            panic!()
        };
        let found = Message::from(q.reply(Answer::Found(peer_record(PEER))).unwrap()).encode();

        // A reply that is right in every way but unsealed, or sealed with
        // another key, is dropped and does not end the lookup.
        f.e.on_datagram(peer(), None, &found, f.t0);
        let forger = auth("1 0f0e0d0c0b0a09080706050403020100");
        f.e.on_datagram(peer(), None, &forger.seal(found.clone()), f.t0);
        let other_id = auth("2 000102030405060708090a0b0c0d0e0f");
        f.e.on_datagram(peer(), None, &other_id.seal(found.clone()), f.t0);
        assert!(f.e.take_effects().replies.is_empty());
        assert_eq!(f.e.drops().unauthenticated, 3);
        assert_eq!(f.e.lookups_in_flight(), 1);

        let sealed = peer_auth.seal(found);
        assert!(sealed.len() <= sent.len(), "no larger than the query");
        f.e.on_datagram(peer(), None, &sealed, f.t0);
        let fx = f.e.take_effects();
        assert_eq!(fx.replies.len(), 1);
        assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());

        // Replayed later, even to a new lookup with the same target, it is
        // caught before its transaction id is looked at.
        f.e.on_datagram(peer(), None, &sealed, f.t0);
        assert_eq!(f.e.drops().replayed, 1);
        assert_eq!(f.e.drops().unsolicited, 0);
    }

    #[test]
    fn with_a_key_queries_are_answered_sealed_and_plain_ones_ignored() {
        let mut f = fixture(Config::default());
        f.e.set_auth(Some(auth(KEY)));
        let mut peer_auth = auth(KEY);
        let q = Message::from(Query::new(
            std::num::NonZeroU64::new(9).unwrap(),
            WireAddress::new(Address::Ip4([10, 0, 0, 1].into())).unwrap(),
            peer_record(PEER),
        ))
        .encode();
        f.e.on_datagram(peer(), None, &q, f.t0);
        assert!(f.e.take_effects().datagrams.is_empty());
        let sealed = peer_auth.seal(q);
        f.e.on_datagram(peer(), None, &sealed, f.t0);
        let fx = f.e.take_effects();
        let [Datagram::Unicast { bytes, .. }] = &fx.datagrams[..] else {
            panic!("{fx:?}")
        };
        assert!(bytes.len() <= sealed.len(), "never larger than the query");
        let body = peer_auth.open(bytes).unwrap();
        assert!(matches!(
            Message::decode_authenticated(body),
            Ok(Message::Reply(r)) if matches!(r.answer(), Answer::Found(_))
        ));
        f.e.on_datagram(peer(), None, &sealed, f.t0);
        assert!(
            f.e.take_effects().datagrams.is_empty(),
            "a replay is not answered"
        );
        assert_eq!((f.e.drops().unauthenticated, f.e.drops().replayed), (1, 1));
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
        let answered = |e: &mut Engine<FakeHost>, from: SocketAddr, n: u64, t: Instant| {
            (1..=n)
                .filter(|&txid| {
                    e.on_datagram(from, None, &ask(txid), t);
                    !e.take_effects().datagrams.is_empty()
                })
                .count()
        };
        assert_eq!(answered(&mut f.e, peer(), 100, f.t0), 40, "a 4 s burst");
        assert_eq!(f.e.drops().rate_limited, 60);
        let other = SocketAddr::new(IpAddr::V4([10, 0, 0, 3].into()), 6126);
        assert_eq!(answered(&mut f.e, other, 5, f.t0), 5);
        let later = f.t0 + Duration::from_secs(1);
        assert_eq!(answered(&mut f.e, peer(), 100, later), 10, "then 10/s");
    }

    #[test]
    fn drops_are_summed_up_in_the_log_now_and_then() {
        let mut f = fixture(Config::default());
        for _ in 0..3 {
            f.e.on_datagram(peer(), None, b"garbage", f.t0);
        }
        f.e.on_timers(f.t0);
        assert_eq!(f.e.drops_logged.0.malformed, 3, "the first drops at once");
        f.e.on_datagram(peer(), None, b"garbage", f.t0);
        f.e.on_timers(f.t0 + Duration::from_secs(1));
        assert_eq!(f.e.drops_logged.0.malformed, 3, "then once per interval");
        f.e.on_timers(f.t0 + DROP_SUMMARY_EVERY);
        assert_eq!(f.e.drops_logged.0.malformed, 4);
        assert_eq!(
            f.e.drops().to_string(),
            "4 (malformed 4, unsolicited 0, wrong source 0, own 0, unauthenticated 0, \
             replayed 0, rate-limited 0)"
        );
    }

    #[test]
    fn many_announcements_leave_in_paced_batches() {
        let mut f = fixture(Config::default());
        // 401 names: 27 datagrams of 10.0.0.1 and 15 names (two records).
        for i in 0..400 {
            f.e.add_address(f.ep, Address::name(&format!("n{i}")).unwrap())
                .unwrap();
        }
        f.e.take_effects();
        f.e.schedule_announce(f.t0);
        let announced = |e: &mut Engine<FakeHost>, t: Instant| {
            e.on_timers(t);
            e.take_effects().datagrams.len()
        };
        let first = f.t0 + Duration::from_millis(50);
        assert_eq!(announced(&mut f.e, first), ANNOUNCE_BATCH);
        assert_eq!(f.e.next_wake(), Some(first + ANNOUNCE_PACE));
        assert_eq!(announced(&mut f.e, first), 0, "not before the pace allows");
        f.e.on_timers(first + ANNOUNCE_PACE);
        let last = f.e.take_effects().datagrams;
        assert_eq!(last.len(), 27 - ANNOUNCE_BATCH);
        assert_eq!(announced(&mut f.e, first + 2 * ANNOUNCE_PACE), 0);
        // Every datagram can be believed: it lists the address it comes from.
        let own = WireAddress::from(Ipv4Addr::new(10, 0, 0, 1));
        let Datagram::Multicast { bytes } = &last[0] else {
            panic!()
        };
        let Ok(Message::Announce(a)) = Message::decode(bytes) else {
            panic!()
        };
        assert!(a.records()[0].holds(&own), "{a:?}");
        assert_eq!(a.records().len(), 2);
        // And a peer that knows this host takes every record of it.
        let mut peer = fixture_with_gid(Config::default(), PEER);
        let mut names = Vec::new();
        for d in &last {
            let Datagram::Multicast { bytes } = d else {
                panic!()
            };
            let Ok(Message::Announce(a)) = Message::decode(bytes) else {
                panic!()
            };
            for r in a.records() {
                names.extend(r.addresses().iter().filter(|w| **w != own).cloned());
            }
        }
        let from = SocketAddr::new(IpAddr::V4([10, 0, 0, 1].into()), 6126);
        let old: Gid = "fe80::9".parse().unwrap();
        for w in &names {
            peer.e
                .resolver
                .learned
                .insert(w.address().clone(), Learned::derived(old, None));
        }
        peer.e
            .resolver
            .learned
            .insert(own.address().clone(), Learned::derived(old, None));
        for d in &last {
            let Datagram::Multicast { bytes } = d else {
                panic!()
            };
            peer.e.on_datagram(from, None, bytes, f.t0);
        }
        assert_eq!(peer.e.drops(), &Default::default());
        // Moved with their host if in the datagram that moved it, forgotten
        // otherwise: never left at a GID that is gone.
        let moved = names
            .iter()
            .filter(|w| {
                let now = peer.e.learned_dest(w.address()).map(|d| d.gid);
                assert_ne!(now, Some(old), "{w:?}");
                now.is_some()
            })
            .count();
        assert_eq!(moved, 15, "the first datagram's names");
    }

    /// What the engine holds, table by table.
    fn footprint(e: &Engine<FakeHost>) -> [usize; 12] {
        [
            e.ports.len(),
            e.endpoints.len(),
            e.addresses.len(),
            e.local.len(),
            e.cache.len(),
            e.resolver.lookups.len(),
            e.resolver.by_txid.len(),
            e.resolver.learned.len(),
            e.resolver.failed.len(),
            e.resolver.neighbour_jobs.len(),
            e.withdrawals.len(),
            e.announcements.len(),
        ]
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
            let port = f.e.endpoints[&ep].port;
            let dev = f.e.ports[&port].device;
            let ids: Vec<Id> = f.e.endpoints[&ep].addresses.to_vec();
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
            assert_eq!(*after_first.get_or_insert(now), now, "after cycle {i}");
        }
    }
}
