//! Resolution between hosts: the lookup state machine and the handlers of
//! the discovery protocol (docs/protocol.md), as methods of the engine.
//!
//! A miss that only another host can answer becomes a [`Lookup`]: a QUERY
//! (unicast to an IP destination, to the discovery groups for a name),
//! retried every `urdma_timeout` ms up to `urdma_retries` more times, then
//! the configured derivations in order. Requests for the same destination
//! share one lookup.
//!
//! Trust: the source address of a datagram proves nothing (anyone on the
//! segment can forge it), but a reply to a unicast query with a fresh,
//! unpredictable transaction id can only come from whoever receives what
//! is sent to that address. So only such a reply binds an address, and
//! only the address it was asked about:
//! - an IP address is asked by unicast to itself;
//! - a name is asked of the groups, and each host that answers is asked
//!   again by unicast ([`Purpose::Claim`]) before its answer counts;
//! - a query or an announcement that says something else about a learned
//!   binding is a hint: the binding's holder is asked again
//!   ([`Purpose::Check`]), and only its reply moves the binding; a refusal
//!   or no answer removes it.
//!
//! Everything here runs under the engine's lock and only queues effects;
//! the worker thread sends them.

use crate::addr::{Address, Gid};
use crate::auth::Auth;
use crate::config::Derivation;
use crate::engine::{Datagram, DropCounts, Engine, Found, Id, Outgoing};
use crate::fastmap::Set;
use crate::host::Host;
use crate::msg;
use crate::path::Dest;
use crate::resolver::{
    Learned, Lookup, NeighbourJob, Probe, Purpose, Stage, Waiter, MAX_CHECKS, MAX_CLAIMS,
};
use crate::wire::{
    Announce, Answer, EndpointRecord, Message, Query, Reply, WireAddress, MAX_ADDRESSES,
    MAX_ANNOUNCE_RECORDS, MAX_PKEYS,
};
use acm_prov_sys::{ACM_STATUS_ENODATA, ACM_STATUS_ETIMEDOUT};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// Announcements after a change: soon, then twice more in case one is lost.
const ANNOUNCE_DELAYS_MS: [u64; 3] = [50, 1000, 3000];
/// How often a missing neighbour entry is looked for again.
pub const NEIGHBOUR_POLL: Duration = Duration::from_millis(20);
/// What distinguishes one endpoint record from another: GID, LID, MTU,
/// rate and P_Key.
pub(crate) type RecordKey = (Gid, u16, u8, u8, u16);
/// After a check of an address, hints about it are ignored this long: a
/// host sends each announcement three times, and a flood of forged hints
/// must not become a flood of queries to the host they name.
pub const CHECK_HOLDOFF: Duration = Duration::from_secs(1);
/// How often what expired is swept from the tables.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

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

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
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

/// How a port's addresses travel: per datagram, the address lists of its
/// records. Every datagram leads with the port's IP addresses (up to half
/// a record of them) and the names fill the rest, so a receiver sees in
/// each one an address it can ask to confirm the rest; an address appears
/// once per datagram.
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

/// Whether a reply came from where its query went (the port too: a reply
/// from another port of the host is not the provider's).
fn same_place(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip() == b.ip() && a.port() == b.port()
}

/// What a summary in the log said last, and when: it is logged again when
/// its numbers changed, at most every [`DROP_SUMMARY_EVERY`].
#[derive(Default)]
pub(crate) struct Summary<T> {
    pub(crate) said: T,
    at: Option<Instant>,
}

impl<T: PartialEq + Clone> Summary<T> {
    /// Whether `value` is to be logged at `now`; if so, it counts as said.
    fn due(&mut self, value: &T, now: Instant) -> bool {
        if *value == self.said || self.at.is_some_and(|t| now < t + DROP_SUMMARY_EVERY) {
            return false;
        }
        self.said = value.clone();
        self.at = Some(now);
        true
    }
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

    /// Authenticates every discovery datagram received from now on (the
    /// sender seals what leaves, each copy on its own).
    pub fn set_auth(&mut self, auth: Option<Auth>) {
        self.auth = auth;
    }

    /// Turns discovery off for good: its configuration cannot be honoured
    /// (an unusable key file must not mean unauthenticated discovery).
    pub fn disable_discovery(&mut self) {
        self.cfg.discovery = false;
        self.discovery_up = false;
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

    /// How long the discovery stage of a lookup may take in all: its
    /// tries, whoever answered meanwhile.
    fn discovery_time(&self) -> Duration {
        self.timeout() * (self.cfg.retries + 1)
    }

    /// Whether a lookup for `key` can be started or joined; counts one
    /// refused when the table of lookups in flight is full.
    pub(crate) fn lookup_room(&mut self, key: &Address) -> bool {
        let room = self.resolver.lookups.contains_key(key)
            || self.resolver.lookups.len() < self.resolver.max_lookups;
        if !room {
            self.resolver.lookups_refused += 1;
        }
        room
    }

    /// Starts a lookup for `key`, or joins the one in flight. The caller
    /// has made sure of [`Engine::lookup_room`].
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
        log::trace!("lookup {key}: started");
        self.resolver.lookups.insert(
            key.clone(),
            Lookup {
                stage: Stage::Discover,
                deadline: now,
                endpoint: ep,
                waiters: waiter.into_iter().collect(),
                failure: ACM_STATUS_ENODATA as u8,
                probes: Vec::new(),
                confirmed: Vec::new(),
            },
        );
        let first = match self.discovery_up {
            true => Stage::Discover,
            false => Stage::Derive(0),
        };
        self.run_stage(key, first, now);
    }

    fn run_stage(&mut self, key: Address, stage: Stage, now: Instant) {
        let timeout = self.timeout();
        let discovery_time = self.discovery_time();
        let Some(l) = self.resolver.lookups.get(&key) else {
            return;
        };
        let (ep, failure) = (l.endpoint, l.failure);
        match stage {
            Stage::Discover => {
                let to = ip_of(&key).map(|ip| SocketAddr::new(ip, self.cfg.discovery_port));
                let Some(txid) = self.send_probe(key.clone(), to, Purpose::Lookup, ep, now) else {
                    log::debug!("lookup {key}: no record of the source endpoint to send");
                    return self.run_stage(key, Stage::Derive(0), now);
                };
                if let Some(l) = self.resolver.lookups.get_mut(&key) {
                    l.stage = Stage::Discover;
                    l.deadline = now + discovery_time;
                    l.probes.push(txid);
                }
            }
            Stage::Derive(i) => match self.cfg.derive.get(i).copied() {
                None => self.fail(&key, failure, now),
                Some(Derivation::Ipv4Mapped) => match key {
                    Address::Ip4(v4) => {
                        let gid = Gid(v4.to_ipv6_mapped().octets());
                        self.succeed(&key, Learned::derived(gid), now)
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

    /// Sends a new query for `target`, to `to` (the groups if `None`),
    /// carrying endpoint `ep`'s record, with a transaction id of its own.
    fn send_probe(
        &mut self,
        target: Address,
        to: Option<SocketAddr>,
        purpose: Purpose,
        ep: Id,
        now: Instant,
    ) -> Option<NonZeroU64> {
        let txid = self.resolver.new_txid();
        let probe = Probe {
            target,
            to,
            purpose,
            tries: 0,
            deadline: now,
            endpoint: ep,
            answered: false,
        };
        self.resolver.probes.insert(txid, probe);
        if self.transmit(txid, now) {
            Some(txid)
        } else {
            self.resolver.probes.remove(&txid);
            None
        }
    }

    /// Sends probe `txid`'s query (again: same txid, so a late reply to an
    /// earlier try still counts). False if it cannot be built any more
    /// (its endpoint is gone).
    fn transmit(&mut self, txid: NonZeroU64, now: Instant) -> bool {
        let timeout = self.timeout();
        let Some(p) = self.resolver.probes.get(&txid) else {
            return false;
        };
        let (Ok(target), Some(sender)) = (
            WireAddress::new(p.target.clone()),
            self.record_for(p.endpoint, None),
        ) else {
            return false;
        };
        let bytes = Message::from(Query::new(txid, target, sender)).encode();
        let datagram = match p.to {
            Some(to) => Datagram::Unicast {
                to,
                from: self.source_for(p.endpoint, to.ip()),
                bytes,
            },
            None => Datagram::Multicast { bytes },
        };
        self.effects.datagrams.push(datagram);
        if let Some(p) = self.resolver.probes.get_mut(&txid) {
            p.tries += 1;
            p.deadline = now + timeout;
        }
        // A probe started on the daemon's thread: the worker may be asleep
        // until a later deadline and must learn of this one, or the retry
        // and the timeout come late.
        self.effects.wake = true;
        true
    }

    /// An address of endpoint `ep` to send to `to` from, so the peer sees
    /// the query come from an address the query's record lists. Link-local
    /// destinations are left to the kernel, which picks the link's own.
    fn source_for(&self, ep: Id, to: IpAddr) -> Option<IpAddr> {
        if is_link_local(to) {
            return None;
        }
        let e = self.endpoints.get(&ep)?;
        e.addresses
            .iter()
            .filter_map(|id| ip_of(&self.addresses.get(id)?.address))
            .find(|ip| ip.is_ipv4() == to.is_ipv4() && !is_link_local(*ip))
    }

    /// An endpoint to send a check from: one with an address of `to`'s
    /// family if there is one.
    fn endpoint_for(&self, to: IpAddr) -> Option<Id> {
        let mut any = None;
        for (&id, e) in &self.endpoints {
            any.get_or_insert(id);
            let same_family = e.addresses.iter().any(|a| {
                self.addresses
                    .get(a)
                    .and_then(|a| ip_of(&a.address))
                    .is_some_and(|ip| ip.is_ipv4() == to.is_ipv4())
            });
            if same_family {
                return Some(id);
            }
        }
        any
    }

    fn addr_expiry(&self, now: Instant) -> Option<Instant> {
        self.cfg.addr_timeout.duration().map(|d| now + d)
    }

    /// Moves a lookup past a stage that failed with `status`; the stage's
    /// probes end with it.
    fn next_stage(&mut self, key: &Address, status: u8, now: Instant) {
        let Some(l) = self.resolver.lookups.get_mut(key) else {
            return;
        };
        l.failure = status;
        let next = match l.stage {
            Stage::Discover => Stage::Derive(0),
            Stage::Derive(i) => Stage::Derive(i + 1),
        };
        for t in std::mem::take(&mut l.probes) {
            self.resolver.probes.remove(&t);
        }
        self.run_stage(key.clone(), next, now);
    }

    /// Binds `key` (and, for a binding from a peer's record, its GID) to
    /// `learned`. A binding that changed leaves the destination cache.
    fn bind(&mut self, key: &Address, learned: Learned, now: Instant) {
        let expires = self.addr_expiry(now);
        let mut keys = vec![key.clone()];
        if learned.via.is_some() && *key != Address::Gid(learned.gid) {
            keys.push(Address::Gid(learned.gid));
        }
        self.resolver.failed.remove(key);
        for k in keys {
            match self.resolver.learned.get(&k) {
                // The common case (asked again): only the lifetime changes.
                Some(old) if old.same_endpoint(&learned) && old.via == learned.via => {
                    self.resolver.learned.refresh(&k, expires);
                    continue;
                }
                Some(old) if !old.same_endpoint(&learned) => {
                    log::trace!("discovery: {k} is now {}", learned.gid);
                    self.cache.evict(&k);
                }
                _ => {}
            }
            if let Some(dropped) = self.resolver.learned.insert(k, learned.clone(), expires) {
                self.cache.evict(&dropped);
            }
        }
    }

    /// Completes a lookup: learns the binding and answers its waiters.
    fn succeed(&mut self, key: &Address, learned: Learned, now: Instant) {
        log::trace!("lookup {key}: {}", learned.gid);
        self.bind(key, learned, now);
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
            self.resolver
                .failed
                .insert(key.clone(), status, Some(until));
        }
        self.end_lookup(key, status);
    }

    /// Ends the lookup of `key`, answering its waiters with `status`;
    /// returns how many there were.
    fn end_lookup(&mut self, key: &Address, status: u8) -> usize {
        let Some(l) = self.resolver.remove_lookup(key) else {
            return 0;
        };
        for w in &l.waiters {
            let reply = msg::resolve_error(&w.request, status);
            self.answer_waiter(w, reply);
        }
        l.waiters.len()
    }

    fn answer_waiter(&mut self, w: &Waiter, reply: msg::MsgBuf) {
        self.count_status(w.endpoint, reply.status());
        self.effects.replies.push(Outgoing {
            id: w.id,
            msg: reply,
            query: false,
        });
    }

    /// Ends every lookup and check at once and answers each waiting
    /// request with `status`; returns how many were answered. For after the
    /// discovery thread failed: the state of what was in flight cannot be
    /// trusted, and a request never answered would hang its client (no
    /// failure is remembered: the next request asks again).
    pub fn abandon_all(&mut self, status: u8) -> usize {
        let keys: Vec<Address> = self.resolver.lookups.keys().cloned().collect();
        let answered = keys.iter().map(|k| self.end_lookup(k, status)).sum();
        self.resolver.probes.clear();
        self.resolver.checking.clear();
        self.resolver.neighbour_jobs.clear();
        answered
    }

    /// Whether a lookup of `key` is in flight.
    pub fn looking_up(&self, key: &Address) -> bool {
        self.resolver.lookups.contains_key(key)
    }

    /// Answers, with `status`, every request waiting on endpoint `ep`.
    pub(crate) fn abandon_waiters(&mut self, ep: Id, status: u8) {
        let mut orphaned = Vec::new();
        let mut gone = Vec::new();
        let mut moved: Vec<(NonZeroU64, Id)> = Vec::new();
        for (key, l) in self.resolver.lookups.iter_mut() {
            let (theirs, rest): (Vec<Waiter>, Vec<Waiter>) =
                l.waiters.drain(..).partition(|w| w.endpoint == ep);
            l.waiters = rest;
            orphaned.extend(theirs);
            if l.endpoint == ep {
                match l.waiters.first() {
                    // Retries carry the record of an endpoint still open.
                    Some(w) => {
                        l.endpoint = w.endpoint;
                        moved.extend(l.probes.iter().map(|t| (*t, w.endpoint)));
                    }
                    None => gone.push(key.clone()),
                }
            }
        }
        for (t, to) in moved {
            if let Some(p) = self.resolver.probes.get_mut(&t) {
                p.endpoint = to;
            }
        }
        for key in gone {
            self.resolver.remove_lookup(&key);
        }
        // Checks sent from it go on from another endpoint, or end.
        let checks: Vec<NonZeroU64> = self
            .resolver
            .probes
            .iter()
            .filter(|(_, p)| p.endpoint == ep)
            .map(|(t, _)| *t)
            .collect();
        for t in checks {
            let other = self.endpoints.keys().copied().find(|&e| e != ep);
            match (other, self.resolver.probes.get_mut(&t)) {
                (Some(e), Some(p)) => p.endpoint = e,
                _ => {
                    self.resolver.remove_probe(t);
                }
            }
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

    /// Retries, stage changes, announcements and sweeps that are due.
    pub fn on_timers(&mut self, now: Instant) {
        let due: Vec<NonZeroU64> = self
            .resolver
            .probes
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for txid in due {
            self.probe_due(txid, now);
        }
        let due: Vec<Address> = self
            .resolver
            .lookups
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            // Claims not confirmed in time do not count; those confirmed
            // decide.
            let confirmed = self
                .resolver
                .lookups
                .get(&key)
                .is_some_and(|l| l.stage == Stage::Discover && !l.confirmed.is_empty());
            if confirmed {
                if let Some(l) = self.resolver.lookups.get_mut(&key) {
                    for t in std::mem::take(&mut l.probes) {
                        self.resolver.probes.remove(&t);
                    }
                }
                self.settle(&key, now);
            } else {
                self.next_stage(&key, ACM_STATUS_ETIMEDOUT as u8, now);
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
        if now >= self.next_sweep {
            self.sweep(now);
            self.next_sweep = now + SWEEP_EVERY;
        }
        self.log_drops(now);
        self.log_limits(now);
    }

    /// A probe whose try timed out: sent again while it has tries left
    /// (and its lookup time), else given up.
    fn probe_due(&mut self, txid: NonZeroU64, now: Instant) {
        let Some(p) = self.resolver.probes.get(&txid) else {
            return;
        };
        let in_time = match p.purpose {
            Purpose::Check => true,
            _ => self
                .resolver
                .lookups
                .get(&p.target)
                .is_some_and(|l| l.deadline > now),
        };
        if p.answered {
            // A group query some host answered: the claims decide now.
            let target = p.target.clone();
            self.resolver.probes.remove(&txid);
            return self.lookup_probe_ended(&target, txid, None, now);
        }
        if p.tries <= self.cfg.retries && in_time {
            log::trace!(
                "lookup {}: try {} timed out, asking again",
                p.target,
                p.tries
            );
            if self.transmit(txid, now) {
                return;
            }
        }
        self.probe_failed(txid, ACM_STATUS_ETIMEDOUT as u8, now);
    }

    /// A probe that got no answer it can use: a refusal (ENODATA), an ICMP
    /// error (ENODATA) or silence (ETIMEDOUT).
    fn probe_failed(&mut self, txid: NonZeroU64, status: u8, now: Instant) {
        let Some(p) = self.resolver.remove_probe(txid) else {
            return;
        };
        match p.purpose {
            Purpose::Check => {
                log::trace!(
                    "discovery: check of {} failed ({status}); forgotten",
                    p.target
                );
                if self.resolver.learned.remove(&p.target).is_some() {
                    self.cache.evict(&p.target);
                }
            }
            Purpose::Lookup | Purpose::Claim => {
                self.lookup_probe_ended(&p.target, txid, Some(status), now)
            }
        }
    }

    /// One of a lookup's probes ended without a binding.
    fn lookup_probe_ended(
        &mut self,
        key: &Address,
        txid: NonZeroU64,
        status: Option<u8>,
        now: Instant,
    ) {
        let Some(l) = self.resolver.lookups.get_mut(key) else {
            return;
        };
        l.probes.retain(|t| *t != txid);
        if let Some(s) = status {
            l.failure = s;
        }
        self.settle(key, now);
    }

    /// Decides a lookup's discovery stage once no claim is left to
    /// confirm: the name goes to the hosts that confirmed it if they agree;
    /// two hosts claiming one name with different GIDs get no answer (which
    /// one is right cannot be told, and a wrong answer is worse than none);
    /// with nothing confirmed and nothing more to wait for, the stage fails.
    fn settle(&mut self, key: &Address, now: Instant) {
        let Some(l) = self.resolver.lookups.get(key) else {
            return;
        };
        if l.stage != Stage::Discover {
            return;
        }
        let claims_pending = l
            .probes
            .iter()
            .filter_map(|t| self.resolver.probes.get(t))
            .any(|p| p.purpose == Purpose::Claim);
        if claims_pending {
            return;
        }
        if let Some((_, first)) = l.confirmed.first() {
            let first = first.clone();
            if l.confirmed.iter().all(|(_, c)| c.gid == first.gid) {
                return self.succeed(key, first, now);
            }
            let who: Vec<String> = l
                .confirmed
                .iter()
                .map(|(at, c)| format!("{} at {at}", c.gid))
                .collect();
            log::warn!(
                "lookup {key}: claimed by hosts with different GIDs ({}); not answered",
                who.join(", ")
            );
            self.conflicts += 1;
            return self.next_stage(key, ACM_STATUS_ENODATA as u8, now);
        }
        if l.probes.is_empty() {
            let status = l.failure;
            self.next_stage(key, status, now);
        }
    }

    /// Removes what expired from every table, so memory is given back
    /// without a request for the same destination.
    fn sweep(&mut self, now: Instant) {
        self.cache.sweep(now);
        self.resolver.learned.sweep(now, |_, _| {});
        self.resolver.failed.sweep(now, |_, _| {});
        self.resolver.checked.sweep(now, |_, _| {});
    }

    /// Says in the log, at the daemon's default level, how many datagrams
    /// were dropped and why: an operator sees an attack or a misconfigured
    /// peer (a wrong key) without turning on tracing.
    fn log_drops(&mut self, now: Instant) {
        if self.drops_logged.due(&self.drops, now) {
            log::info!("discovery: datagrams dropped so far: {}", self.drops);
        }
    }

    /// What reached a table's bound so far: entries evicted to make room,
    /// lookups refused, hints left unchecked.
    pub fn limits(&self) -> [u64; 5] {
        [
            self.cache.evicted,
            self.resolver.learned.evicted,
            self.resolver.failed.evicted,
            self.resolver.lookups_refused,
            self.checks_skipped,
        ]
    }

    /// Says in the log, like the drops, when tables reached their bounds.
    fn log_limits(&mut self, now: Instant) {
        let limits = self.limits();
        if !self.limits_logged.due(&limits, now) {
            return;
        }
        let [cache, learned, failed, refused, skipped] = limits;
        log::info!(
            "tables at their bounds so far: destination cache {cache} evicted (of {}), \
             bindings {learned} evicted (of {}), failures {failed} evicted, \
             lookups refused {refused} (of {} in flight), hints left unchecked {skipped}",
            self.cache.capacity(),
            self.resolver.learned.capacity(),
            self.resolver.max_lookups
        );
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
            self.announcements.push_back(Message::from(a).encode());
        }
    }

    /// Queues the withdrawal of addresses of endpoint `ep` (`only` one, or
    /// all of them). The daemon removes an endpoint's addresses one call at
    /// a time; they leave together a moment later, in one record per
    /// endpoint.
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
                self.announcements.push_back(Message::from(a).encode());
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

    /// A hint that the binding of `key` changed: asks its holder again by
    /// unicast, unless it was asked very recently or is being asked now.
    /// Only the holder's reply changes the binding (see [`Purpose::Check`]).
    fn check(&mut self, key: &Address, now: Instant) {
        if !self.discovery_up || self.resolver.checking.contains_key(key) {
            return;
        }
        if self.resolver.checked.get_live(key, now).is_some() {
            return;
        }
        let Some(via) = self.resolver.learned.get(key).and_then(|l| l.via) else {
            // Derived bindings are not discovery's to check.
            return;
        };
        if self.resolver.checking.len() >= MAX_CHECKS {
            self.checks_skipped += 1;
            return;
        }
        let to = match ip_of(key) {
            Some(ip) => SocketAddr::new(ip, self.cfg.discovery_port),
            None => via,
        };
        let Some(ep) = self.endpoint_for(to.ip()) else {
            return;
        };
        log::trace!("discovery: checking {key} at {to}");
        if let Some(txid) = self.send_probe(key.clone(), Some(to), Purpose::Check, ep, now) {
            self.resolver.checking.insert(key.clone(), txid);
            self.resolver
                .checked
                .insert(key.clone(), (), Some(now + CHECK_HOLDOFF));
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
            Some(auth) => match auth.open(bytes, from.ip()) {
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
        // The asker's record is a hint about the address it asked from,
        // never a binding: a changed record is checked with its holder.
        let source = Address::from(from.ip());
        let lists_source = q
            .sender()
            .addresses()
            .iter()
            .any(|w| *w.address() == source);
        if lists_source
            && self
                .resolver
                .learned
                .get(&source)
                .is_some_and(|l| l.differs_from(q.sender()))
        {
            self.check(&source, now);
        }
        // Where the socket cannot say, the query may have been a group's:
        // never refuse it then.
        let group = to.is_none_or(|ip| ip.is_multicast());
        let target = q.target().address().clone();
        let holder = self
            .local
            .get(&target)
            .and_then(|ids| ids.first())
            .map(|id| self.addresses[id].endpoint);
        let answer = match holder.and_then(|ep| self.record_for(ep, Some(&target))) {
            Some(record) => Answer::Found(record),
            // Every host of the segment gets a group query: only the
            // holder answers, or one query would bring a reply from each.
            None if group => return,
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
        let from_addr = to.filter(|ip| !ip.is_multicast());
        self.effects.datagrams.push(Datagram::Unicast {
            to: from,
            from: from_addr,
            bytes: Message::from(reply).encode(),
        });
    }

    fn on_reply(&mut self, r: Reply, from: SocketAddr, now: Instant) {
        let txid = r.txid();
        let Some(p) = self.resolver.probes.get(&txid) else {
            return self.drop_datagram(
                |d| &mut d.unsolicited,
                from,
                "no query with that transaction id",
            );
        };
        if r.target().address() != &p.target {
            return self.drop_datagram(
                |d| &mut d.unsolicited,
                from,
                "reply does not match its query",
            );
        }
        match p.to {
            Some(to) if !same_place(to, from) => {
                return self.drop_datagram(
                    |d| &mut d.wrong_source,
                    from,
                    "reply not from the queried address",
                )
            }
            Some(_) => {}
            None => return self.on_claim(txid, r, from, now),
        }
        match r.answer() {
            Answer::Found(record) => {
                let learned = Learned::from_record(record, from);
                let p = self.resolver.remove_probe(txid).expect("probe exists");
                match p.purpose {
                    Purpose::Lookup => self.succeed(&p.target, learned, now),
                    Purpose::Claim => {
                        log::trace!("lookup {}: {from} confirms {}", p.target, learned.gid);
                        if let Some(l) = self.resolver.lookups.get_mut(&p.target) {
                            l.probes.retain(|t| *t != txid);
                            l.confirmed.push((from, learned));
                        }
                        self.settle(&p.target, now);
                    }
                    Purpose::Check => self.check_confirmed(&p.target, learned, now),
                }
            }
            Answer::Refused => {
                log::trace!("discovery: {from} refused {}", r.target().address());
                self.probe_failed(txid, ACM_STATUS_ENODATA as u8, now);
            }
        }
    }

    /// A host answered a lookup's group query: it claims the name. Anyone
    /// who can read the group's traffic could answer in its place, so the
    /// claim counts only once the host confirms it by unicast.
    fn on_claim(&mut self, group: NonZeroU64, r: Reply, from: SocketAddr, now: Instant) {
        if matches!(r.answer(), Answer::Refused) || from.port() != self.cfg.discovery_port {
            return self.drop_datagram(
                |d| &mut d.unsolicited,
                from,
                "not an answer to a group query",
            );
        }
        let key = r.target().address().clone();
        let Some(l) = self.resolver.lookups.get(&key) else {
            return;
        };
        let claims: Vec<&Probe> = l
            .probes
            .iter()
            .filter_map(|t| self.resolver.probes.get(t))
            .filter(|p| p.purpose == Purpose::Claim)
            .collect();
        if claims
            .iter()
            .any(|p| p.to.is_some_and(|to| to.ip() == from.ip()))
        {
            // Already asked (the host answered a try sent again).
            return;
        }
        if claims.len() >= MAX_CLAIMS {
            return self.drop_datagram(
                |d| &mut d.unsolicited,
                from,
                "too many hosts claim the name",
            );
        }
        let ep = l.endpoint;
        if let Some(p) = self.resolver.probes.get_mut(&group) {
            p.answered = true;
        }
        log::trace!("lookup {key}: claimed by {from}; asking it to confirm");
        if let Some(txid) = self.send_probe(key.clone(), Some(from), Purpose::Claim, ep, now) {
            if let Some(l) = self.resolver.lookups.get_mut(&key) {
                l.probes.push(txid);
            }
        }
    }

    /// A binding's holder answered a check.
    fn check_confirmed(&mut self, key: &Address, learned: Learned, now: Instant) {
        let before = self.resolver.learned.get(key).map(|l| l.gid);
        let gid = learned.gid;
        log::trace!("discovery: {key} confirmed at {gid}");
        self.bind(key, learned, now);
        // The host at this address has a new GID (back after a crash with
        // new hardware, so nothing was withdrawn): what is still bound to
        // the old one went with it, and is asked again when needed.
        if let (Some(old), true) = (before, ip_of(key).is_some()) {
            if old != gid {
                for gone in self.resolver.forget_gid(old) {
                    log::trace!("discovery: {gone} forgotten: its host moved to {gid}");
                    self.cache.evict(&gone);
                }
            }
        }
    }

    fn on_announce(&mut self, a: Announce, from: SocketAddr, now: Instant) {
        // Never believed, whatever its source says: each address it says
        // something new about that this host has a binding for is checked
        // with its holder. Addresses never asked about are ignored.
        let mut hints: Vec<Address> = Vec::new();
        for record in a.records() {
            if self.is_own_gid(record.gid()) {
                self.drop_datagram(|d| &mut d.own, from, "our own announcement");
                continue;
            }
            for w in record.addresses() {
                let key = w.address();
                let hint = match self.resolver.learned.get(key) {
                    Some(l) if a.withdrawn() => l.gid == record.gid(),
                    Some(l) => l.differs_from(record),
                    None => false,
                };
                if hint {
                    hints.push(key.clone());
                }
            }
        }
        for key in hints {
            self.check(&key, now);
        }
    }

    /// An ICMP error for a datagram sent to `dest`; `payload` is that
    /// datagram. An unreachable host or port ends its probe at once.
    pub fn on_unreachable(&mut self, dest: SocketAddr, payload: &[u8], now: Instant) {
        let Some(txid) = Message::query_txid(payload) else {
            return;
        };
        let Some(p) = self.resolver.probes.get(&txid) else {
            return;
        };
        if p.to.is_some_and(|to| same_place(to, dest)) {
            log::trace!("lookup {}: {dest} unreachable", p.target);
            self.probe_failed(txid, ACM_STATUS_ENODATA as u8, now);
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
                let learned = Learned::derived(eui64_gid(mac));
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
        ACM_ADDRESS_IP, ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST, ACM_FLAGS_NODELAY, ACM_STATUS_ENOMEM,
        ACM_STATUS_ENOTCONN,
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
        let fx = f.e.take_effects();
        assert_eq!(fx.replies.len(), 1, "{fx:?}");
        assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
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

    fn peer_ip() -> Address {
        Address::Ip4(PEER_IP.into())
    }

    /// The queries among the effects, with where they went.
    fn sent_queries(fx: &Effects) -> Vec<(Query, Option<SocketAddr>)> {
        fx.datagrams
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
            .collect()
    }

    fn bound_gid(e: &Engine<FakeHost>, a: &Address) -> Option<Gid> {
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
        assert!(fx.wake, "the worker must learn of the new deadline");
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

    /// A query for `target` from the peer's address carrying `sender`,
    /// sent to `to` (a unicast address of this host, or a group).
    fn query_from_peer(
        e: &mut Engine<FakeHost>,
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
        IpAddr::V4(crate::wire::V4_GROUP)
    }

    /// The one reply among the effects: where it went, from, and its answer.
    fn sent_reply(fx: &Effects) -> (SocketAddr, Option<IpAddr>, Answer) {
        let [Datagram::Unicast { to, from, bytes }] = &fx.datagrams[..] else {
            panic!("one reply expected: {fx:?}")
        };
        assert!(
            bytes.len() <= crate::wire::QUERY_LEN,
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
        for to in [group(), IpAddr::V6(crate::wire::V6_GROUP)] {
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
            f.e.record_for(f.ep, None).unwrap(),
        ))
        .encode();
        f.e.on_datagram(peer(), Some(group()), &mine, f.t0);
        assert!(
            f.e.take_effects().datagrams.is_empty(),
            "our own multicast, looped back"
        );
        assert_eq!(f.e.drops().own, 1);
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
        assert_eq!(f.e.drops().unsolicited, 1);
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
        let withdrawal =
            Message::from(Announce::new(vec![peer_record(PEER)], true).unwrap()).encode();
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
        let moved =
            Message::from(Announce::new(vec![peer_record("fe80::c")], false).unwrap()).encode();
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
        let withdrawal =
            Message::from(Announce::new(vec![peer_record(PEER)], true).unwrap()).encode();
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
        let mut f = fixture(Config::default());
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
        let fx = f.e.take_effects();
        assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());

        // A name B does not hold, claimed in B's name: B refuses, and the
        // lookup fails once its group query's time is up.
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
        assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
        assert_eq!(bound_gid(&f.e, &Address::name("node-c").unwrap()), None);
    }

    #[test]
    fn a_name_two_hosts_confirm_with_different_gids_gets_no_answer() {
        let mut f = fixture(Config::default());
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
        let fx = f.e.take_effects();
        assert_eq!(fx.replies.len(), 1);
        assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
        assert_eq!(bound_gid(&f.e, &node_b()), None);
        assert_eq!(f.e.conflicts, 1);
    }

    #[test]
    fn names_are_asked_of_the_groups_and_this_host_announces_itself() {
        let mut f = fixture(Config::default());
        learn_peer_name(&mut f, 3);
        // Learned: the name, confirmed where the peer answered.
        assert_eq!(
            f.e.resolver.learned.get(&node_b()).unwrap().via,
            Some(peer())
        );
        assert_eq!(bound_gid(&f.e, &peer_ip()), None, "only the name was asked");

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
        assert_eq!(f.e.drops().unauthenticated, 3);
        assert_eq!(f.e.lookups_in_flight(), 1);

        let sealed = peer_auth.seal(found);
        assert!(
            sealed.len() <= crate::wire::QUERY_LEN + crate::wire::AUTH_TRAILER_LEN,
            "no larger than the sealed query"
        );
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
    fn with_a_key_queries_are_answered_and_plain_or_replayed_ones_ignored() {
        let mut f = fixture(Config::default());
        f.e.set_auth(Some(auth(KEY)));
        let peer_auth = auth(KEY);
        let q = Message::from(Query::new(
            std::num::NonZeroU64::new(9).unwrap(),
            WireAddress::new(Address::Ip4([10, 0, 0, 1].into())).unwrap(),
            peer_record(PEER),
        ))
        .encode();
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
                    e.on_datagram(from, Some(own_ip()), &ask(txid), t);
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
        assert_eq!(f.e.resolver.learned.len(), 2);
        assert_eq!(f.e.limits()[1], 4, "the oldest made room, two per answer");
        assert_eq!(
            f.e.cached(),
            1,
            "what left the bindings left the cache (a hint could not be checked)"
        );
        // What expires is swept without being asked for.
        f.e.on_timers(f.t0 + Duration::from_secs(24 * 3600 + 1));
        assert_eq!((f.e.resolver.learned.len(), f.e.cached()), (0, 0));
    }

    #[test]
    fn drops_are_summed_up_in_the_log_now_and_then() {
        let mut f = fixture(Config::default());
        for _ in 0..3 {
            f.e.on_datagram(peer(), None, b"garbage", f.t0);
        }
        f.e.on_timers(f.t0);
        assert_eq!(
            f.e.drops_logged.said.malformed, 3,
            "the first drops at once"
        );
        f.e.on_datagram(peer(), None, b"garbage", f.t0);
        f.e.on_timers(f.t0 + Duration::from_secs(1));
        assert_eq!(f.e.drops_logged.said.malformed, 3, "then once per interval");
        f.e.on_timers(f.t0 + DROP_SUMMARY_EVERY);
        assert_eq!(f.e.drops_logged.said.malformed, 4);
        assert_eq!(
            f.e.drops().to_string(),
            "4 (malformed 4, unsolicited 0, wrong source 0, own 0, unauthenticated 0, \
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
        // Every datagram names an address a peer can ask.
        let own = WireAddress::from(Ipv4Addr::new(10, 0, 0, 1));
        let decode = |d: &Datagram| {
            let Datagram::Multicast { bytes } = d else {
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
            peer.e.resolver.learned.insert(a.clone(), l, None);
        }
        for d in &last {
            let Datagram::Multicast { bytes } = d else {
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
    fn footprint(e: &Engine<FakeHost>) -> [usize; 13] {
        [
            e.ports.len(),
            e.endpoints.len(),
            e.addresses.len(),
            e.local.len(),
            e.cache.len(),
            e.resolver.lookups.len(),
            e.resolver.probes.len(),
            e.resolver.checking.len(),
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
