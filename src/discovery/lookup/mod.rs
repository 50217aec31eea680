//! The lookup state machine: a miss becomes a lookup that asks by
//! discovery (retried every `urdma_timeout` up to `urdma_retries` times,
//! within `urdma_timeout × (urdma_retries + 1)` in all), then tries the
//! configured derivations in order; lookups of one destination are one.
//! A name asked of the groups is claimed by whoever answers, and each
//! claimant is asked again by unicast before its claim counts.
//!
//! A lookup fails ENODATA only when every stage that could have known said
//! no (a holder refused, the system's resolver has no such name, holders
//! disagree); if any stage could not find out in time (silence, an ICMP
//! error, a stage cut short) it fails ETIMEDOUT, which is never
//! remembered: the next request asks again.

pub(super) mod decide;
mod derive;
mod names;

pub use derive::eui64_gid;
pub use names::NssError;

use super::inflight::{Doing, Lookup, Probe, Purpose, SoFar, Stage, NO, UNKNOWN};
use super::rto;
use super::state::{Learned, Source};
use super::why;
use super::wire::{Message, Query, WireAddress};
use super::{counts::Counts, inflight::InFlight, presence::Presence, state::State};
use super::{Datagram, Families, NeighbourJob, NssJob, Outcome, Output, Refused};
use crate::addr::{Address, Gid};
use crate::buggify::{Buggify, Fault};
use crate::config::{Config, Derivation, NameLookup};
use crate::entropy::Seed;
use crate::handle::EndpointId;
use crate::local::{ip_of, Local};
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// The lookups in flight and what times their tries: they run their
/// stages, decide on what hosts reply, and check a binding a hint
/// contradicts. What they find goes to the parts they are handed
/// ([`Cx`]): bindings to the `State`, datagrams, jobs and outcomes to the
/// `Output`, counts to the `Counts`.
pub(super) struct Lookups {
    /// Lookups, their probes and checks, linked (`inflight/`).
    inflight: InFlight,
    /// How long a try of a query waits (`rto.rs`).
    retry: rto::RetryTimers,
    /// Says in the log why lookups failed, now and then.
    failures_logged: why::FailureLog,
}

/// What a lookup acts on besides its own fields: discovery's other parts,
/// lent for one call.
pub(super) struct Cx<'a> {
    pub local: &'a Local,
    pub cfg: &'a Config,
    /// The families the discovery sockets are open for.
    pub families: Families,
    /// Discovery datagrams are authenticated.
    pub keyed: bool,
    pub state: &'a mut State,
    pub presence: &'a mut Presence,
    pub counts: &'a mut Counts,
    pub out: &'a mut Output,
    pub buggify: &'a mut Buggify,
}

/// The parts a lookup that ends writes to: its binding or failure, its
/// outcome, its count.
pub(super) struct Found<'a> {
    pub cfg: &'a Config,
    pub state: &'a mut State,
    pub out: &'a mut Output,
    pub counts: &'a mut Counts,
}

impl Cx<'_> {
    pub(super) fn found(&mut self) -> Found<'_> {
        Found {
            cfg: self.cfg,
            state: self.state,
            out: self.out,
            counts: self.counts,
        }
    }
}

impl Lookups {
    pub(super) fn new(cfg: &Config, seed: Seed) -> Lookups {
        Lookups {
            inflight: InFlight::new(cfg, seed),
            retry: rto::RetryTimers::new(cfg.timeout()),
            failures_logged: why::FailureLog::default(),
        }
    }

    /// What is in flight.
    pub(super) fn in_flight(&self) -> &InFlight {
        &self.inflight
    }

    pub(super) fn in_flight_mut(&mut self) -> &mut InFlight {
        &mut self.inflight
    }

    /// How long a try of a query waits now (`rto.rs`).
    pub(super) fn try_timers(&self) -> &rto::RetryTimers {
        &self.retry
    }

    pub(super) fn try_timers_mut(&mut self) -> &mut rto::RetryTimers {
        &mut self.retry
    }

    /// Whether a lookup for `key` can be started or joined; counts one
    /// refused when the table of lookups in flight is full.
    pub(super) fn room(&mut self, cx: &mut Cx<'_>, key: &Address) -> Result<(), Refused> {
        let up = cx.families.any();
        let possible = match key {
            Address::Name(_) => up,
            Address::Ip4(_) | Address::Ip6(_) => up || !cx.cfg.derive.is_empty(),
            Address::Gid(_) | Address::Lid(_) => false,
        };
        if !possible {
            return Err(Refused::Unknown);
        }
        let buggify = &mut cx.buggify;
        match self
            .inflight
            .room(key, || buggify.fires(Fault::LookupsFull))
        {
            true => Ok(()),
            false => Err(Refused::Full),
        }
    }

    /// Starts a lookup for `key` on behalf of endpoint `ep` (whose record
    /// the queries carry), unless one is in flight. The caller
    /// ([`crate::discovery::Discovery::resolve`]) has made sure of [`Lookups::room`];
    /// the lookup ends with an [`Outcome`], maybe at once.
    pub(super) fn start(&mut self, cx: &mut Cx<'_>, ep: EndpointId, key: Address, now: Instant) {
        if self.inflight.has_lookup(&key) {
            return;
        }
        if self.inflight.checking(&key) {
            // Its holder is being asked already: the check's reply ends
            // the lookup (`check_confirmed`), instead of a second query
            // with the same answer.
            log::trace!("lookup {key}: started, waiting for its check");
            let mut lookup = Lookup::new(Stage::Discover, ep, NO, now);
            lookup.doing = Doing::AwaitingCheck;
            lookup.try_time = self.retry.timeout(ip_of(&key), now);
            let stage = rto::stage_time(lookup.try_time, cx.cfg.retries + 1, self.retry.ceiling());
            self.inflight.start(key.clone(), lookup);
            return self.inflight.set_lookup_deadline(&key, now + stage);
        }
        log::trace!("lookup {key}: started");
        let first = asking(cx.cfg, cx.families.any(), &key).first().copied();
        let lookup = Lookup::new(Stage::Discover, ep, NO, now);
        self.inflight.start(key.clone(), lookup);
        self.run_stage(cx, key, first.unwrap_or(Stage::Derive(0)), now);
    }

    fn run_stage(&mut self, cx: &mut Cx<'_>, key: Address, stage: Stage, now: Instant) {
        let timeout = cx.cfg.timeout();
        let Some(l) = self.inflight.lookup(&key) else {
            return;
        };
        let (ep, so_far) = (l.endpoint, l.so_far);
        match stage {
            Stage::Discover => self.discover(cx, key, ep, now),
            Stage::Nss => self.ask_resolver(cx, key, now),
            Stage::Derive(i) => match cx.cfg.derive.get(i).copied() {
                None => {
                    let status = match so_far {
                        SoFar::ToldNo => NO,
                        SoFar::Unsure => UNKNOWN,
                    };
                    self.fail(cx.found(), &key, status, now)
                }
                Some(Derivation::Ipv4Mapped) => match key {
                    Address::Ip4(v4) => {
                        let gid = Gid(v4.to_ipv6_mapped().octets());
                        self.succeed(cx.found(), &key, Learned::derived(gid), now)
                    }
                    _ => self.run_stage(cx, key, Stage::Derive(i + 1), now),
                },
                Some(Derivation::Eui64) => match ip_of(&key) {
                    Some(ip) => {
                        if let Some(l) = self.inflight.lookup_mut(&key) {
                            l.stage = Stage::Derive(i);
                        }
                        self.inflight.set_lookup_deadline(&key, now + timeout);
                        // The query (if any) already made the kernel
                        // resolve the neighbour.
                        let poked = cx.families.any();
                        cx.out.work.neighbour_jobs.push(NeighbourJob {
                            dest: key,
                            ip,
                            poked,
                            at: now,
                        });
                    }
                    None => self.run_stage(cx, key, Stage::Derive(i + 1), now),
                },
            },
        }
    }

    /// The discovery stage: an IP address asked of itself by unicast, a
    /// name of the host that announced it (`hints/`) or of the groups.
    fn discover(&mut self, cx: &mut Cx<'_>, key: Address, ep: EndpointId, now: Instant) {
        let port = cx.cfg.discovery_port;
        let hinted = match key {
            Address::Name(_) => cx.presence.hints_mut().whom(&key, now),
            _ => None,
        };
        // Every try at the time a try to whom it asks takes now
        // (`rto.rs`).
        let try_time = self.retry.timeout(hinted.or(ip_of(&key)), now);
        if let Some(l) = self.inflight.lookup_mut(&key) {
            l.try_time = try_time;
        }
        let (to, purpose) = match hinted {
            // The one host that announced the name: its reply binds
            // the name as a confirmed claim does.
            Some(ip) => (Some(SocketAddr::new(ip, port)), Purpose::Claim),
            None => (
                ip_of(&key).map(|ip| SocketAddr::new(ip, port)),
                Purpose::Lookup,
            ),
        };
        let sent = self.send_probe(cx, &key, key.clone(), to, purpose, ep, now);
        if sent.is_none() {
            // Not asked: the stage could not find out.
            log::debug!("lookup {key}: no record of the source endpoint to send");
            if let Some(l) = self.inflight.lookup_mut(&key) {
                l.stage = Stage::Discover;
            }
            why::note(
                &mut self.inflight,
                &key,
                "no record of the source endpoint to send".into(),
            );
            return self.next_stage(cx, &key, UNKNOWN, now);
        }
        let disputed = hinted.is_none() && cx.presence.hints_mut().disputed(&key, now);
        if let Some(l) = self.inflight.lookup_mut(&key) {
            l.stage = Stage::Discover;
            l.doing = match (hinted, disputed) {
                (Some(_), _) => Doing::AskingAnnouncer,
                (None, true) => Doing::AskingDisputed,
                (None, false) => Doing::Asking,
            };
        }
        let discovery_time = rto::stage_time(try_time, cx.cfg.retries + 1, self.retry.ceiling());
        self.inflight
            .set_lookup_deadline(&key, now + discovery_time);
    }

    /// The system resolver's stage (names only): the runtime asks it.
    fn ask_resolver(&mut self, cx: &mut Cx<'_>, key: Address, now: Instant) {
        let Address::Name(name) = &key else {
            return self.run_stage(cx, key.clone(), Stage::Derive(0), now);
        };
        let tries = cx.cfg.retries + 1;
        let deadline = now + rto::stage_time(cx.cfg.timeout(), tries, self.retry.ceiling());
        cx.out.work.resolver_jobs.push(NssJob {
            key: key.clone(),
            name: name.to_string(),
            deadline,
        });
        if let Some(l) = self.inflight.lookup_mut(&key) {
            l.stage = Stage::Nss;
            l.doing = Doing::Resolving;
        }
        self.inflight.set_lookup_deadline(&key, deadline);
    }

    /// Sends a new query for `target`, to `to` (the groups if `None`),
    /// carrying endpoint `ep`'s record, with a transaction id of its own,
    /// for the lookup of `key` (a check: of `target`), which lists it.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::discovery) fn send_probe(
        &mut self,
        cx: &mut Cx<'_>,
        key: &Address,
        target: Address,
        to: Option<SocketAddr>,
        purpose: Purpose,
        ep: EndpointId,
        now: Instant,
    ) -> Option<NonZeroU64> {
        let txid = self.inflight.probes_mut().new_txid();
        let probe = Probe::unsent(key.clone(), target, to, purpose, ep);
        self.inflight.add_probe(txid, probe, now);
        if self.transmit(cx, txid, Try::Next, now) {
            Some(txid)
        } else {
            self.inflight.remove_probe(txid);
            None
        }
    }

    /// Sends probe `txid`'s query (again: under a transaction id of the
    /// try's own, and a late reply to an earlier try still counts). False
    /// if it cannot be built any more (its endpoint is gone).
    pub(in crate::discovery) fn transmit(
        &mut self,
        cx: &mut Cx<'_>,
        txid: NonZeroU64,
        send: Try,
        now: Instant,
    ) -> bool {
        let Some(p) = self.inflight.probes().get(txid) else {
            return false;
        };
        // The try time of whom it asks, once for this try's wait and the
        // stage's length below (`rto.rs`).
        let timeout = self.retry.timeout(p.to.map(|t| t.ip()), now);
        let this_wait = rto::backoff(timeout, p.tries, self.retry.ceiling());
        let (Ok(target), Some(sender)) = (
            WireAddress::new(p.target.clone()),
            super::record_for(cx.local, p.endpoint, None),
        ) else {
            return false;
        };
        let (first, to, endpoint) = (p.tries == 0, p.to, p.endpoint);
        let Some(this_try) = (if first {
            Some(txid)
        } else {
            self.inflight.probes_mut().add_try(txid, now)
        }) else {
            return false;
        };
        let bytes = Message::from(Query::new(this_try, target, sender)).encode();
        match to {
            Some(to) => {
                cx.counts.traffic.unicast_queries += 1;
                cx.out.work.datagrams.push(Datagram::Unicast {
                    to,
                    from: cx.local.source_for(endpoint, to.ip()),
                    bytes,
                });
            }
            None => {
                cx.counts.traffic.group_queries += 1;
                cx.out.work.datagrams.extend(cx.families.multicast(bytes));
            }
        }
        if send == Try::Extra {
            return true;
        }
        let Some(p) = self.inflight.probes_mut().get_mut(txid) else {
            return false;
        };
        p.tries += 1;
        p.first_sent_at.get_or_insert(now);
        p.sent_at = Some(now);
        let (key, purpose) = (p.key.clone(), p.purpose);
        self.inflight
            .probes_mut()
            .set_deadline(txid, now + this_wait);
        // A try that grew since the stage began (`rto.rs`) lengthens the
        // stage as if it had been planned with it, so that it does not cut
        // the last tries short: at most every try at the longest.
        let (tries, ceiling) = (cx.cfg.retries + 1, self.retry.ceiling());
        let grown = match self.inflight.lookup_mut(&key) {
            Some(l) if purpose != Purpose::Check && l.stage == Stage::Discover => {
                let more = rto::stage_time(timeout, tries, ceiling)
                    .saturating_sub(rto::stage_time(l.try_time, tries, ceiling));
                l.try_time = l.try_time.max(timeout);
                (!more.is_zero()).then(|| l.deadline() + more)
            }
            _ => None,
        };
        if let Some(at) = grown {
            self.inflight.set_lookup_deadline(&key, at);
        }
        true
    }

    /// Moves a lookup past a stage that failed with `status` (ENODATA: it
    /// was told no; anything else: it could not find out); the stage's
    /// probes end with it.
    pub(super) fn next_stage(&mut self, cx: &mut Cx<'_>, key: &Address, status: u8, now: Instant) {
        let Some(l) = self.inflight.lookup_mut(key) else {
            return;
        };
        if status != NO {
            l.so_far = SoFar::Unsure;
        }
        l.failure = NO;
        l.doing = Doing::Asking;
        l.confirmed.clear();
        let stage = l.stage;
        self.inflight.end_probes_of(key, now);
        let next = after(cx.cfg, cx.families.any(), key, stage);
        self.run_stage(cx, key.clone(), next, now);
    }

    /// Completes a lookup with a binding.
    pub(super) fn succeed(
        &mut self,
        cx: Found<'_>,
        key: &Address,
        mut learned: Learned,
        now: Instant,
    ) {
        log::trace!("lookup {key}: {}", learned.gid);
        if let Some(l) = self.inflight.lookup(key) {
            learned.source = match l.stage {
                Stage::Discover => Source::Discovery,
                Stage::Nss => Source::Dns,
                Stage::Derive(_) => Source::Derived,
            };
        }
        let bound = cx.state.bound(learned.clone(), now);
        let changed = cx.state.bind(key, learned, now);
        cx.out.changed(changed);
        if let Some(l) = self.inflight.end_lookup(key, now) {
            cx.counts
                .lookups
                .resolved
                .observe(now.saturating_duration_since(l.started));
            cx.out.outcomes.push(Outcome::Resolved(key.clone(), bound));
        }
    }

    /// Completes a lookup without a binding. Only a no (ENODATA) is
    /// remembered for `urdma_negative_timeout`: not finding out in time
    /// says nothing about the destination, and the next request asks again.
    fn fail(&mut self, cx: Found<'_>, key: &Address, status: u8, now: Instant) {
        log::trace!("lookup {key}: failed with status {status}");
        if status == NO && cx.cfg.negative_timeout_ms > 0 {
            let until = now + Duration::from_millis(u64::from(cx.cfg.negative_timeout_ms));
            cx.state.remember_failure(key, status, until);
        }
        if let Some(l) = self.inflight.end_lookup(key, now) {
            let took = now.saturating_duration_since(l.started);
            if status != NO {
                let why: Vec<&str> = l.why.iter().map(|(_, w)| w.as_str()).collect();
                self.failures_logged
                    .warn(key, status, took, &why.join("; then "), now);
            }
            cx.counts.lookups.failed.observe(took);
            cx.out.outcomes.push(Outcome::Failed(key.clone(), status));
        }
    }

    /// A probe whose try timed out: sent again while it has tries left
    /// (and its lookup time), else given up.
    pub(super) fn probe_due(&mut self, cx: &mut Cx<'_>, txid: NonZeroU64, now: Instant) {
        let Some(p) = self.inflight.probes().get(txid) else {
            return;
        };
        let in_time = match p.purpose {
            Purpose::Check => true,
            _ => self
                .inflight
                .lookup(&p.key)
                .is_some_and(|l| l.deadline() > now),
        };
        if p.answered {
            // A group query some host answered: the claims decide now. Its
            // time is up, so whoever else holds the name and did not answer
            // (lost, overloaded) was not heard: a claimant that then refuses
            // says no only for itself.
            let key = p.key.clone();
            let why = format!(
                "{}: claimed, no claim confirmed in time",
                why::asked(p, now)
            );
            self.inflight.end_probe(txid, now);
            why::note(&mut self.inflight, &key, why);
            return self.probe_ended(cx, &key, Some(UNKNOWN), now);
        }
        if p.purpose == Purpose::Claim && p.tries >= cx.cfg.retries.max(1) {
            // A hinted host silent for all tries but its last may be gone:
            // the groups are asked beside it, with a try's time left. Not
            // sooner: a host slow under load answers the groups no faster,
            // and every group query costs every host of the segment.
            let key = p.key.clone();
            self.ask_groups(cx, &key, now);
        }
        let Some(p) = self.inflight.probes().get(txid) else {
            return;
        };
        if p.tries <= cx.cfg.retries && in_time {
            log::trace!(
                "lookup {}: try {} timed out, asking again",
                p.target,
                p.tries
            );
            if self.transmit(cx, txid, Try::Next, now) {
                return;
            }
        }
        self.probe_failed(cx, txid, UNKNOWN, NO_REPLY, now);
    }

    /// A probe that got no answer it can use: a refusal by the address's
    /// holder (ENODATA), or an ICMP error or silence (ETIMEDOUT: nobody
    /// there could say); `what` says which, for the log.
    pub(in crate::discovery) fn probe_failed(
        &mut self,
        cx: &mut Cx<'_>,
        txid: NonZeroU64,
        status: u8,
        what: &str,
        now: Instant,
    ) {
        let Some(p) = self.inflight.end_probe(txid, now) else {
            return;
        };
        if status != NO && p.purpose != Purpose::Check {
            why::note(
                &mut self.inflight,
                &p.key,
                format!("{}: {what}", why::asked(&p, now)),
            );
        }
        match p.purpose {
            Purpose::Check if what == NO_REPLY => {
                // Silence is no sign the binding is wrong: a host gone
                // takes its GID with it (nothing else answers to it), and a
                // holder whose reply allowance a forger drained with
                // queries in the asker's name is silent too. It stays, as
                // confirmed last; waiting requests take it (docs/protocol.md,
                // trust table: check).
                log::trace!("discovery: check of {}: no reply; kept", p.target);
                cx.counts.checks_unanswered += 1;
                let kept = cx.state.binding(&p.target).cloned();
                let waits = self
                    .inflight
                    .lookup(&p.target)
                    .is_some_and(|l| l.doing == Doing::AwaitingCheck);
                match kept {
                    Some(l) if waits => self.succeed(cx.found(), &p.target, l, now),
                    None if waits => self.run_stage(cx, p.target, Stage::Discover, now),
                    _ => {}
                }
            }
            Purpose::Check => {
                log::trace!(
                    "discovery: check of {} failed ({status}); forgotten",
                    p.target
                );
                if cx.state.forget(&p.target) {
                    cx.out.outcomes.push(Outcome::Changed(p.target.clone()));
                }
                let waits = self
                    .inflight
                    .lookup(&p.target)
                    .is_some_and(|l| l.doing == Doing::AwaitingCheck);
                if waits {
                    // The lookup's own stage, asked of the address itself
                    // by the check, ends as the check did; a name may have
                    // moved to another host, and is asked afresh.
                    match ip_of(&p.target) {
                        Some(_) => self.next_stage(cx, &p.target, status, now),
                        None => self.run_stage(cx, p.target, Stage::Discover, now),
                    }
                }
            }
            Purpose::Lookup | Purpose::Claim | Purpose::Address => {
                if p.claimed && what == NO_REPLY {
                    if let Some(l) = self.inflight.lookup_mut(&p.key) {
                        l.claim_silent = true;
                    }
                }
                self.probe_ended(cx, &p.key, Some(status), now)
            }
        }
    }
}

/// What [`Lookups::probe_failed`] is told of a probe whose every try went
/// unanswered.
const NO_REPLY: &str = "no reply";

/// How [`Lookups::transmit`] sends a probe's query.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Try {
    /// The next of its tries: counted, and the probe waits the try's time.
    Next,
    /// Once more now, in the try that runs: its tries and deadlines stay
    /// as they are, so a forger that makes a host send one cannot make a
    /// lookup give up sooner.
    Extra,
}

/// The stages that ask someone, in order, before the derivations: for
/// a name those `urdma_name_lookup` lists, for an IP address its
/// owner; none without the discovery sockets.
fn asking(cfg: &Config, up: bool, key: &Address) -> Vec<Stage> {
    if !up {
        return Vec::new();
    }
    match key {
        Address::Name(_) => cfg
            .name_lookup
            .iter()
            .map(|n| match n {
                NameLookup::Segment => Stage::Discover,
                NameLookup::Nss => Stage::Nss,
            })
            .collect(),
        _ => vec![Stage::Discover],
    }
}

/// The stage after `stage` for a lookup of `key`.
fn after(cfg: &Config, up: bool, key: &Address, stage: Stage) -> Stage {
    if let Stage::Derive(i) = stage {
        return Stage::Derive(i + 1);
    }
    let asking = asking(cfg, up, key);
    let next = asking.iter().position(|s| *s == stage).map(|i| i + 1);
    next.and_then(|i| asking.get(i).copied())
        .unwrap_or(Stage::Derive(0))
}
