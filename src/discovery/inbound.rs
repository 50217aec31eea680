//! What arrives at the discovery port, and the trust rules it meets.
//!
//! The source address of a datagram proves nothing (anyone on the segment
//! can forge it), but a reply to a unicast query with a fresh,
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

use super::auth::Rejection;
use super::counts::DropReason;
use super::inflight::{Probe, Purpose, MAX_CHECKS, MAX_CLAIMS};
use super::lookup::{Cx, Lookups, Try};
use super::presence::Around;
use super::responder::Answered;
use super::state::Learned;
use super::wire::{Answer, Message, Query, Reply};
use super::{Discovery, Outcome, CHECK_HOLDOFF};
use crate::addr::Address;
use crate::local::{ip_of, Local};
use acm_prov_sys::{ACM_STATUS_ENODATA, ACM_STATUS_ETIMEDOUT};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU64;
use std::time::Instant;

/// Whether a reply came from where its query went (the port too: a reply
/// from another port of the host is not the provider's).
fn same_place(a: SocketAddr, b: SocketAddr) -> bool {
    a.ip() == b.ip() && a.port() == b.port()
}

impl Discovery {
    /// One datagram that arrived at the discovery port. `to` is the address
    /// it was sent to, when the socket reports it.
    pub fn on_datagram(
        &mut self,
        local: &Local,
        from: SocketAddr,
        to: Option<IpAddr>,
        bytes: &[u8],
        now: Instant,
    ) {
        self.counts.traffic.received += 1;
        let decoded = match &mut self.auth {
            None => Message::decode(bytes),
            Some(auth) => match auth.open(bytes, from.ip()) {
                Ok(body) => Message::decode_authenticated(body),
                Err(r) => {
                    let reason: DropReason = match r {
                        Rejection::Stale(_) => |d| &mut d.stale,
                        Rejection::Busy => |d| &mut d.replay_full,
                        Rejection::Replayed | Rejection::Older(_) => |d| &mut d.replayed,
                        _ => |d| &mut d.unauthenticated,
                    };
                    return self.counts.drops.count(reason, from, r);
                }
            },
        };
        let q = match decoded {
            Err(e) => {
                return self.counts.drops.count(
                    |d| &mut d.malformed,
                    from,
                    format_args!("malformed: {e}"),
                )
            }
            Ok(Message::Query(q)) => q,
            Ok(Message::Reply(r)) => return inbound!(self, local).on_reply(r, from, now),
            Ok(Message::Announce(a)) => {
                let mut around = Around {
                    keyed: self.auth.is_some(),
                    port: self.cfg.discovery_port,
                    state: &self.state,
                    probes: self.lookups.in_flight_mut().probes_mut(),
                };
                let place = (from, to);
                let counts = &mut self.counts;
                let checks =
                    (self.presence).on_announce(local, &a, place, &mut around, counts, now);
                let mut inbound = inbound!(self, local);
                return checks.iter().for_each(|key| inbound.check(key, now));
            }
        };
        // A query from another host: a hint about the address it asked
        // from, a start query to welcome, and a question that only the
        // holder of its target answers (`responder.rs`).
        if local.is_own_gid(q.sender().gid()) {
            return self
                .counts
                .drops
                .count(|d| &mut d.own, from, "our own query");
        }
        inbound!(self, local).on_query(&q, from, to, now);
        match self
            .responder
            .answer(local, &q, (from, to), &mut self.buggify, now)
        {
            Answered::Reply(d) => {
                self.counts.traffic.replies += 1;
                self.out.work.datagrams.push(d);
            }
            Answered::RateLimited => {
                self.counts
                    .drops
                    .count(|d| &mut d.rate_limited, from, "over urdma_reply_rate")
            }
            Answered::Nothing => {}
        }
    }

    /// An ICMP error for a datagram sent to `dest`; `payload` is that
    /// datagram. An unreachable host or port ends its probe at once, as
    /// one that could not find out: nothing listening there now (a daemon
    /// starting or restarting, a neighbour not resolved under load) says
    /// nothing about whether the address is a destination.
    pub fn on_unreachable(
        &mut self,
        local: &Local,
        dest: SocketAddr,
        payload: &[u8],
        now: Instant,
    ) {
        let Some(txid) = Message::query_txid(payload) else {
            return;
        };
        let Some(p) = self.lookups.in_flight().probes().get(txid) else {
            return;
        };
        if p.to.is_some_and(|to| same_place(to, dest)) {
            log::trace!("lookup {}: {dest} unreachable", p.target);
            let status = ACM_STATUS_ETIMEDOUT as u8;
            inbound!(self, local).failed(txid, status, "unreachable", now);
        }
    }
}

/// One datagram's effect on the lookups, by the trust rules: what it
/// binds, the lookups it advances, the checks it starts.
pub(super) struct Inbound<'l, 'c, 'a> {
    pub lookups: &'l mut Lookups,
    pub cx: &'c mut Cx<'a>,
}

impl Inbound<'_, '_, '_> {
    /// The asker of query `q`, from `from` (to `to`, when the socket
    /// says): a changed record is checked with its holder, never taken; a
    /// start query is welcomed.
    fn on_query(&mut self, q: &Query, from: SocketAddr, to: Option<IpAddr>, now: Instant) {
        // The asker's record is a hint about the address it asked from,
        // never a binding: a changed record is checked with its holder.
        let source = Address::from(from.ip());
        let lists_source = q
            .sender()
            .addresses()
            .iter()
            .any(|w| *w.address() == source);
        // Whether the source, if the asker's record lists it, is bound,
        // and elsewhere than the asker says.
        let moved = lists_source
            .then(|| {
                self.cx
                    .state
                    .binding(&source)
                    .map(|l| l.differs_from(q.sender()))
            })
            .flatten();
        if moved == Some(true) {
            self.check(&source, now);
        }
        // Where the socket cannot say, the query may have been a group's:
        // never refuse it then.
        let group = to.is_none_or(|ip| ip.is_multicast());
        if group && super::welcome::is_start_query(q) {
            log::trace!(
                "discovery: {from} started ({}); announcing ourselves",
                match moved {
                    _ if !lists_source => "its record lists other addresses",
                    Some(true) => "bound elsewhere: checking",
                    Some(false) => "bound to it",
                    None => "not bound",
                }
            );
            let mut around = Around {
                keyed: self.cx.keyed,
                port: self.cx.cfg.discovery_port,
                state: self.cx.state,
                probes: self.lookups.in_flight_mut().probes_mut(),
            };
            let (local, record) = (self.cx.local, q.sender());
            (self.cx.presence).welcome(local, record, from.ip(), &mut around, now);
            if lists_source {
                self.ask_again(q, from, now);
            }
        }
    }

    /// A probe that got no answer it can use (`Lookups::probe_failed`).
    fn failed(&mut self, txid: NonZeroU64, status: u8, what: &str, now: Instant) {
        self.lookups.probe_failed(self.cx, txid, status, what, now);
    }

    /// The host that sent start query `q` from `from` has just started:
    /// what was asked of it before it was first heard may have found
    /// nobody listening, and would wait out its try (2 s for a last one)
    /// before asking again: a lookup across a peer's restart would fail.
    /// Asked once more now; the reply still binds only as a reply does.
    /// What left after it was heard reached it, and asked again would
    /// double what a restarted host answers.
    fn ask_again(&mut self, q: &Query, from: SocketAddr, now: Instant) {
        let ips: Vec<IpAddr> = q
            .sender()
            .addresses()
            .iter()
            .filter_map(|w| ip_of(w.address()))
            .collect();
        let since = self.cx.presence.arrived_at(q.sender().gid(), now);
        let before = since.unwrap_or(now);
        for txid in self
            .lookups
            .in_flight_mut()
            .probes_mut()
            .asked_of_restarted(&ips, before)
        {
            log::trace!("discovery: asking {from} again: it has just started");
            self.lookups.transmit(self.cx, txid, Try::Extra, now);
        }
    }

    fn on_reply(&mut self, r: Reply, from: SocketAddr, now: Instant) {
        let (txid, try_sent) = match self.lookups.in_flight().probes().try_of(r.txid()) {
            Some(t) => t,
            None => (r.txid(), None),
        };
        let Some(p) = self.lookups.in_flight().probes().get(txid) else {
            if self.lookups.in_flight_mut().probes_mut().is_late(txid, now) {
                return self.cx.counts.drops.count(
                    |d| &mut d.late,
                    from,
                    "a reply no longer awaited",
                );
            }
            return self.cx.counts.drops.count(
                |d| &mut d.unsolicited,
                from,
                "no query with that transaction id",
            );
        };
        if r.target().address() != &p.target {
            return self.cx.counts.drops.count(
                |d| &mut d.unsolicited,
                from,
                "reply does not match its query",
            );
        }
        match p.to {
            Some(to) if !same_place(to, from) => {
                return self.cx.counts.drops.count(
                    |d| &mut d.wrong_source,
                    from,
                    "reply not from the queried address",
                )
            }
            Some(_) => {}
            None => return self.on_claim(txid, r, from, now),
        }
        // The holder's own reply to one try: how long replies take
        // (`rto.rs`).
        if let Some(took) = try_sent.map(|sent| now.saturating_duration_since(sent)) {
            self.lookups.try_timers_mut().sample(from.ip(), took, now);
        }
        match r.answer() {
            Answer::Found(record) => {
                let learned = Learned::from_record(record, from);
                let p = self
                    .lookups
                    .in_flight_mut()
                    .end_probe(txid, now)
                    .expect("probe exists");
                match p.purpose {
                    Purpose::Lookup => {
                        self.lookups
                            .succeed(self.cx.found(), &p.target, learned, now)
                    }
                    Purpose::Claim | Purpose::Address => {
                        log::trace!("lookup {}: {from} confirms {}", p.key, learned.gid);
                        if p.purpose == Purpose::Address {
                            // Asked by unicast, answered from there: as
                            // good as a lookup of the address itself.
                            let changed = self.cx.state.bind(&p.target, learned.clone(), now);
                            self.cx.out.changed(changed);
                        }
                        if let Some(l) = self.lookups.in_flight_mut().lookup_mut(&p.key) {
                            l.confirmed.push((from, learned));
                        }
                        self.lookups.settle(self.cx, &p.key, now);
                    }
                    Purpose::Check => self.check_confirmed(&p.target, learned, now),
                }
            }
            Answer::Refused => {
                log::trace!("discovery: {from} refused {}", r.target().address());
                self.failed(txid, ACM_STATUS_ENODATA as u8, "refused", now);
            }
        }
    }

    /// A host answered a lookup's group query: it claims the name. Anyone
    /// who can read the group's traffic could answer in its place, so the
    /// claim counts only once the host confirms it by unicast.
    fn on_claim(&mut self, group: NonZeroU64, r: Reply, from: SocketAddr, now: Instant) {
        if matches!(r.answer(), Answer::Refused) || from.port() != self.cx.cfg.discovery_port {
            return self.cx.counts.drops.count(
                |d| &mut d.unsolicited,
                from,
                "not an answer to a group query",
            );
        }
        let key = r.target().address().clone();
        let Some(l) = self.lookups.in_flight().lookup(&key) else {
            return;
        };
        let claims: Vec<&Probe> = l
            .probes()
            .iter()
            .filter_map(|t| self.lookups.in_flight().probes().get(*t))
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
            return self.cx.counts.drops.count(
                |d| &mut d.unsolicited,
                from,
                "too many hosts claim the name",
            );
        }
        let ep = l.endpoint;
        if let Some(p) = self.lookups.in_flight_mut().probes_mut().get_mut(group) {
            p.answered = true;
        }
        log::trace!("lookup {key}: claimed by {from}; asking it to confirm");
        let sent = self.lookups.send_probe(
            self.cx,
            &key,
            key.clone(),
            Some(from),
            Purpose::Claim,
            ep,
            now,
        );
        if let Some(p) = sent.and_then(|t| self.lookups.in_flight_mut().probes_mut().get_mut(t)) {
            p.claimed = true;
        }
    }

    /// A hint, heard from `heard`, that the binding of `key` changed: asks
    /// its holder again by unicast, unless it was asked very recently or is
    /// being asked now. Only the holder's reply changes the binding (see
    /// [`Purpose::Check`]).
    fn check(&mut self, key: &Address, now: Instant) {
        if !self.cx.families.any() || self.lookups.in_flight().checking(key) {
            return;
        }
        if !self.cx.state.check_due(key, now) {
            log::trace!("discovery: not checking {key}: checked within the last second");
            return;
        }
        let Some(via) = self.cx.state.binding(key).and_then(|l| l.via) else {
            // Derived bindings are not discovery's to check.
            log::trace!("discovery: not checking {key}: not bound, or derived");
            return;
        };
        if self.lookups.in_flight().checks() >= MAX_CHECKS {
            self.cx.counts.checks_skipped += 1;
            return;
        }
        let to = match ip_of(key) {
            Some(ip) => SocketAddr::new(ip, self.cx.cfg.discovery_port),
            None => via,
        };
        let Some(ep) = self.cx.local.endpoint_for(to.ip()) else {
            log::trace!("discovery: not checking {key}: no endpoint to ask {to} from");
            return;
        };
        log::trace!("discovery: checking {key} at {to}");
        let sent =
            self.lookups
                .send_probe(self.cx, key, key.clone(), Some(to), Purpose::Check, ep, now);
        if sent.is_some() {
            self.cx.state.checked(key, now + CHECK_HOLDOFF);
            // In doubt until its holder answers: requests wait for the
            // reply rather than take a GID that may have gone
            // (`Discovery::resolve`).
            self.cx.out.outcomes.push(Outcome::Changed(key.clone()));
        }
    }

    /// A binding's holder answered a check.
    fn check_confirmed(&mut self, key: &Address, learned: Learned, now: Instant) {
        let before = self.cx.state.binding(key).map(|l| l.gid);
        let gid = learned.gid;
        log::trace!("discovery: {key} confirmed at {gid}");
        let changed = self.cx.state.bind(key, learned.clone(), now);
        self.cx.out.changed(changed);
        // The host at this address has a new GID (back after a crash with
        // new hardware, so nothing was withdrawn): what is still bound to
        // the old one went with it, and is asked again when needed.
        if let (Some(old), true) = (before, ip_of(key).is_some()) {
            if old != gid {
                for gone in self.cx.state.forget_gid(old) {
                    log::trace!("discovery: {gone} forgotten: its host moved to {gid}");
                    self.cx.out.outcomes.push(Outcome::Changed(gone));
                }
            }
        }
        // Requests that came while the binding was in doubt waited for
        // this reply.
        if self.lookups.in_flight().has_lookup(key) {
            self.lookups.succeed(self.cx.found(), key, learned, now);
        }
    }
}
