//! What discovery has in flight: the lookups, the probes (queries) that
//! work for them, the checks of learned bindings, and the transaction ids
//! of probes that ended lately. One table, because their links must hold
//! together, and it keeps them:
//!
//! - a probe that works for a lookup is listed by that lookup, and only
//!   then; a check is listed in `checking` under the address it checks;
//! - ending a probe unlists it; ending a lookup ends its probes;
//! - a probe that ended with a reply possibly still on its way is
//!   remembered for one discovery stage, so that reply counts as late
//!   ([`InFlight::is_late`]) rather than unsolicited;
//! - every lookup's and probe's deadline is in one ordered index, so the
//!   next one and the due ones are found without looking at the others
//!   (a scan of every lookup at each poll made a burst of misses cost
//!   time quadratic in its size).

mod lookup;
mod probe;

use crate::addr::Address;
use crate::bounded::Expiring;
use crate::config::Config;
use crate::entropy::Seed;
use crate::fastmap::Map;
use crate::handle::EndpointId;
pub use lookup::{Doing, Lookup, SoFar, Stage, NO, UNKNOWN};
pub use probe::{Probe, Purpose, MAX_CHECKS, MAX_CLAIMS};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// How much is in flight ([`InFlight::sizes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlightSizes {
    pub lookups: usize,
    /// Probes, checks among them.
    pub probes: usize,
    pub checks: usize,
}

/// A probe with its deadline: when it is sent again or given up. Set
/// through [`InFlight::set_probe_deadline`], which indexes it.
struct Timed {
    probe: Probe,
    deadline: Instant,
}

pub struct InFlight {
    lookups: Map<Address, Lookup>,
    probes: Map<NonZeroU64, Timed>,
    /// Every lookup's deadline, and every probe's: exactly those of the
    /// tables.
    lookup_deadlines: BTreeSet<(Instant, Address)>,
    probe_deadlines: BTreeSet<(Instant, NonZeroU64)>,
    /// Checks in flight, by the address checked.
    checking: Map<Address, NonZeroU64>,
    /// The tries after a probe's first, by their own transaction ids: the
    /// probe's, and when the try left.
    tries: Map<NonZeroU64, (NonZeroU64, Instant)>,
    ended: Expiring<NonZeroU64, ()>,
    /// How long a probe's reply may still come after the probe ended: a
    /// whole discovery stage, every try of it at the longest a try can
    /// take (`rto.rs`).
    late_window: Duration,
    max_lookups: usize,
    /// Lookups refused because `max_lookups` were in flight.
    refused: u64,
    txid_key: Seed,
    txid_counter: u64,
    /// Probes asked by unicast, by the address asked: a host that says it
    /// has just started costs a look at its own probes, not at every
    /// probe, so no allowance that forged start queries could spend
    /// stands between a real one and its probes (docs/protocol.md, trust
    /// table: start query).
    by_dest: Map<IpAddr, Vec<NonZeroU64>>,
}

impl InFlight {
    /// Bounded by `cfg`, transaction ids keyed by `txid_key`.
    pub fn new(cfg: &Config, txid_key: Seed) -> InFlight {
        let timeout = Duration::from_millis(u64::from(cfg.timeout_ms));
        InFlight {
            lookups: Map::default(),
            probes: Map::default(),
            lookup_deadlines: BTreeSet::new(),
            probe_deadlines: BTreeSet::new(),
            checking: Map::default(),
            tries: Map::default(),
            ended: Expiring::new(cfg.max_lookups.saturating_mul(MAX_CLAIMS + 1)),
            late_window: timeout * crate::discovery::rto::CEILING * (cfg.retries + 1),
            max_lookups: cfg.max_lookups,
            refused: 0,
            txid_key,
            txid_counter: 0,
            by_dest: Map::default(),
        }
    }

    /// Transaction ids are what keeps an off-path host from forging replies,
    /// so they must not be guessable: a keyed PRF (HMAC-SHA256 with a
    /// random key) of a counter. Every probe has its own.
    pub fn new_txid(&mut self) -> NonZeroU64 {
        loop {
            self.txid_counter += 1;
            let value = self.txid_key.value(b"txid", self.txid_counter);
            if let Some(t) = NonZeroU64::new(value) {
                if !self.probes.contains_key(&t) && !self.tries.contains_key(&t) {
                    return t;
                }
            }
        }
    }

    /// A random time in `0..span`, from the transaction id stream.
    pub fn jitter(&mut self, span: Duration) -> Duration {
        let ms = u64::try_from(span.as_millis()).unwrap_or(u64::MAX).max(1);
        Duration::from_millis(self.new_txid().get() % ms)
    }

    pub fn lookup(&self, key: &Address) -> Option<&Lookup> {
        self.lookups.get(key)
    }

    pub fn lookup_mut(&mut self, key: &Address) -> Option<&mut Lookup> {
        self.lookups.get_mut(key)
    }

    pub fn has_lookup(&self, key: &Address) -> bool {
        self.lookups.contains_key(key)
    }

    /// Whether a lookup for `key` can be started or joined; counts one
    /// refused when the table is full.
    pub fn room(&mut self, key: &Address, full: impl FnOnce() -> bool) -> bool {
        let room =
            self.lookups.contains_key(key) || (self.lookups.len() < self.max_lookups && !full());
        if !room {
            self.refused += 1;
        }
        room
    }

    pub fn start(&mut self, key: Address, lookup: Lookup) {
        let at = lookup.deadline;
        if let Some(old) = self.lookups.insert(key.clone(), lookup) {
            self.lookup_deadlines.remove(&(old.deadline, key.clone()));
        }
        self.lookup_deadlines.insert((at, key));
    }

    pub fn set_lookup_deadline(&mut self, key: &Address, at: Instant) {
        if let Some(l) = self.lookups.get_mut(key) {
            let old = std::mem::replace(&mut l.deadline, at);
            self.lookup_deadlines.remove(&(old, key.clone()));
            self.lookup_deadlines.insert((at, key.clone()));
        }
    }

    /// A new try of probe `txid`, leaving at `now`: its transaction id.
    pub fn add_try(&mut self, txid: NonZeroU64, now: Instant) -> Option<NonZeroU64> {
        self.probes.get(&txid)?;
        let t = self.new_txid();
        self.tries.insert(t, (txid, now));
        self.probe_mut(txid)?.retry_txids.push(t);
        Some(t)
    }

    /// The probe that the try `txid` (the probe's own, or a later try's)
    /// belongs to, and when that try left.
    pub fn try_of(&self, txid: NonZeroU64) -> Option<(NonZeroU64, Option<Instant>)> {
        match self.probes.get(&txid) {
            Some(t) => Some((txid, t.probe.first_sent_at)),
            None => self.tries.get(&txid).map(|&(p, at)| (p, Some(at))),
        }
    }

    /// The probes whose last try asked one of `ips` by unicast before
    /// `before`, not yet asked again for this, now marked as asked again:
    /// the host there says it has just started, and was first heard at
    /// `before`, so what they sent earlier may have found nobody
    /// listening. Each probe is asked again so once at most, so forged
    /// start queries cost a probe one datagram more at most.
    pub fn asked_of_restarted(&mut self, ips: &[IpAddr], before: Instant) -> Vec<NonZeroU64> {
        let mut found: Vec<NonZeroU64> = Vec::new();
        for ip in ips {
            for txid in self.by_dest.get(ip).into_iter().flatten() {
                let Some(t) = self.probes.get_mut(txid) else {
                    continue;
                };
                let p = &mut t.probe;
                if p.sent_at.is_some_and(|at| at < before) && !p.asked_again {
                    p.asked_again = true;
                    found.push(*txid);
                }
            }
        }
        // The table's order is its hasher's; the simulation needs one of
        // its own.
        found.sort_unstable();
        found.dedup();
        found
    }

    pub fn probe(&self, txid: NonZeroU64) -> Option<&Probe> {
        self.probes.get(&txid).map(|t| &t.probe)
    }

    pub fn probe_mut(&mut self, txid: NonZeroU64) -> Option<&mut Probe> {
        self.probes.get_mut(&txid).map(|t| &mut t.probe)
    }

    pub fn probe_deadline(&self, txid: NonZeroU64) -> Option<Instant> {
        self.probes.get(&txid).map(|t| t.deadline)
    }

    pub fn set_probe_deadline(&mut self, txid: NonZeroU64, at: Instant) {
        if let Some(t) = self.probes.get_mut(&txid) {
            let old = std::mem::replace(&mut t.deadline, at);
            self.probe_deadlines.remove(&(old, txid));
            self.probe_deadlines.insert((at, txid));
        }
    }

    pub fn checking(&self, key: &Address) -> bool {
        self.checking.contains_key(key)
    }

    pub fn checks(&self) -> usize {
        self.checking.len()
    }

    /// Adds a probe due at `deadline`, listed by the lookup it works for (a
    /// check: under the address it checks).
    pub fn add_probe(&mut self, txid: NonZeroU64, probe: Probe, deadline: Instant) {
        match probe.purpose {
            Purpose::Check => {
                self.checking.insert(probe.target.clone(), txid);
            }
            _ => {
                if let Some(l) = self.lookups.get_mut(&probe.key) {
                    l.probes.push(txid);
                }
            }
        }
        if let Some(to) = probe.to {
            self.by_dest.entry(to.ip()).or_default().push(txid);
        }
        if let Some(old) = self.probes.insert(txid, Timed { probe, deadline }) {
            self.probe_deadlines.remove(&(old.deadline, txid));
        }
        self.probe_deadlines.insert((deadline, txid));
    }

    /// Ends a probe that was never answered and never will be (never sent,
    /// or its endpoint gone).
    pub fn remove_probe(&mut self, txid: NonZeroU64) -> Option<Probe> {
        let p = self.take_probe(txid)?;
        match p.purpose {
            Purpose::Check => {
                if self.checking.get(&p.target) == Some(&txid) {
                    self.checking.remove(&p.target);
                }
            }
            _ => {
                if let Some(l) = self.lookups.get_mut(&p.key) {
                    l.probes.retain(|t| *t != txid);
                }
            }
        }
        Some(p)
    }

    /// Ends a probe whose reply may still come (again): it will be late.
    pub fn end_probe(&mut self, txid: NonZeroU64, now: Instant) -> Option<Probe> {
        let p = self.remove_probe(txid)?;
        self.remember_ended(txid, &p, now);
        Some(p)
    }

    /// Ends every probe of lookup `key` (its stage is over).
    pub fn end_probes_of(&mut self, key: &Address, now: Instant) {
        let txids = self
            .lookups
            .get_mut(key)
            .map(|l| std::mem::take(&mut l.probes))
            .unwrap_or_default();
        for t in txids {
            if let Some(p) = self.take_probe(t) {
                self.remember_ended(t, &p, now);
            }
        }
    }

    /// Takes probe `txid` out of the table and the index, with its tries,
    /// and nothing else.
    fn take_probe(&mut self, txid: NonZeroU64) -> Option<Probe> {
        let t = self.probes.remove(&txid)?;
        self.probe_deadlines.remove(&(t.deadline, txid));
        if let Some(to) = t.probe.to {
            if let Some(v) = self.by_dest.get_mut(&to.ip()) {
                v.retain(|x| *x != txid);
                if v.is_empty() {
                    self.by_dest.remove(&to.ip());
                }
            }
        }
        for r in &t.probe.retry_txids {
            self.tries.remove(r);
        }
        Some(t.probe)
    }

    /// Ends a lookup with its probes, none of which can be answered any
    /// more (its endpoint closed).
    pub fn remove_lookup(&mut self, key: &Address) -> Option<Lookup> {
        self.take_lookup(key).map(|(l, _)| l)
    }

    /// Takes lookup `key` out with its probes, which it returns.
    fn take_lookup(&mut self, key: &Address) -> Option<(Lookup, Vec<(NonZeroU64, Probe)>)> {
        let l = self.lookups.remove(key)?;
        self.lookup_deadlines.remove(&(l.deadline, key.clone()));
        let probes = l
            .probes
            .iter()
            .filter_map(|t| Some((*t, self.take_probe(*t)?)))
            .collect();
        Some((l, probes))
    }

    /// Ends a lookup whose replies may still come: they will be late.
    pub fn end_lookup(&mut self, key: &Address, now: Instant) -> Option<Lookup> {
        let (l, probes) = self.take_lookup(key)?;
        for (t, p) in &probes {
            self.remember_ended(*t, p, now);
        }
        Some(l)
    }

    /// A reply to probe `txid` (`p`), which just ended, or to any of its
    /// tries, is late for one stage.
    fn remember_ended(&mut self, txid: NonZeroU64, p: &Probe, now: Instant) {
        for t in std::iter::once(txid).chain(p.retry_txids.iter().copied()) {
            self.remember_sent(t, now);
        }
    }

    /// Replies to `txid`, a query sent without a probe (a start query),
    /// are expected for one stage: late, not unsolicited.
    pub fn remember_sent(&mut self, txid: NonZeroU64, now: Instant) {
        self.ended.insert(txid, (), Some(now + self.late_window));
    }

    /// Whether a reply to `txid` is one to a probe that ended lately.
    pub fn is_late(&mut self, txid: NonZeroU64, now: Instant) -> bool {
        self.ended.get_live(&txid, now).is_some()
    }

    /// Forgets everything, with no outcome (see `Discovery::abandon_all`).
    pub fn clear(&mut self) {
        self.lookups.clear();
        self.probes.clear();
        self.lookup_deadlines.clear();
        self.probe_deadlines.clear();
        self.checking.clear();
        self.tries.clear();
        self.by_dest.clear();
    }

    /// Endpoint `ep` is closing: a lookup it carried goes on with the
    /// endpoint `carrier` names for it, or ends; a check sent from it goes
    /// on from `other`, or ends.
    pub fn endpoint_closed(
        &mut self,
        ep: EndpointId,
        carrier: impl Fn(&Address) -> Option<EndpointId>,
        other: Option<EndpointId>,
    ) {
        let mut gone = Vec::new();
        for (key, l) in self.lookups.iter_mut() {
            if l.endpoint != ep {
                continue;
            }
            match carrier(key) {
                Some(to) => {
                    l.endpoint = to;
                    for t in &l.probes {
                        if let Some(t) = self.probes.get_mut(t) {
                            t.probe.endpoint = to;
                        }
                    }
                }
                None => gone.push(key.clone()),
            }
        }
        for key in gone {
            self.remove_lookup(&key);
        }
        let checks: Vec<NonZeroU64> = self
            .probes
            .iter()
            .filter(|(_, t)| t.probe.endpoint == ep)
            .map(|(t, _)| *t)
            .collect();
        for t in checks {
            match (other, self.probe_mut(t)) {
                (Some(e), Some(p)) => p.endpoint = e,
                _ => {
                    self.remove_probe(t);
                }
            }
        }
    }

    /// The probes due by `now`, earliest first.
    pub fn due_probes(&self, now: Instant) -> Vec<NonZeroU64> {
        self.probe_deadlines
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, t)| *t)
            .collect()
    }

    /// The lookups whose stage is over by `now`, earliest first.
    pub fn due_lookups(&self, now: Instant) -> Vec<Address> {
        self.lookup_deadlines
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, k)| k.clone())
            .collect()
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        let lookup = self.lookup_deadlines.first().map(|(at, _)| *at);
        let probe = self.probe_deadlines.first().map(|(at, _)| *at);
        lookup.into_iter().chain(probe).min()
    }

    pub fn sweep(&mut self, now: Instant) {
        self.ended.sweep(now, |_, _| {});
    }

    /// When [`InFlight::sweep`] may have something to remove.
    pub fn sweep_due(&self) -> Option<Instant> {
        self.ended.sweep_due()
    }

    /// Lookups, probes and checks in flight.
    pub fn sizes(&self) -> InFlightSizes {
        InFlightSizes {
            lookups: self.lookups.len(),
            probes: self.probes.len(),
            checks: self.checking.len(),
        }
    }

    pub fn max_lookups(&self) -> usize {
        self.max_lookups
    }

    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;

    #[test]
    fn txids_are_unique_and_not_sequential() {
        let mut f = InFlight::new(&Config::default(), Seed::random());
        let a = f.new_txid();
        let b = f.new_txid();
        assert_ne!(a, b);
        assert_ne!(b.get().wrapping_sub(a.get()), 1);
    }

    /// What the index must say, found by looking at every entry.
    fn scanned(f: &InFlight, now: Instant) -> (Option<Instant>, Vec<NonZeroU64>, Vec<Address>) {
        let all = f.lookups.values().map(|l| l.deadline);
        let next = all.chain(f.probes.values().map(|t| t.deadline)).min();
        let due_probes = f.probes.iter().filter(|(_, t)| t.deadline <= now);
        let mut probes: Vec<_> = due_probes.map(|(k, _)| *k).collect();
        probes.sort();
        let due_lookups = f.lookups.iter().filter(|(_, l)| l.deadline <= now);
        let mut lookups: Vec<_> = due_lookups.map(|(k, _)| k.clone()).collect();
        lookups.sort();
        (next, probes, lookups)
    }

    #[test]
    fn the_deadline_index_holds_exactly_the_deadlines_of_the_tables() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let ep = EndpointId::from_raw(1);
        let key = |n: u64| Address::Ip4([10, 0, (n >> 8) as u8, n as u8].into());
        let mut f = InFlight::new(&Config::default(), Seed::from_u64(7));
        let rng = Seed::from_u64(11);
        let mut txids = Vec::new();
        for step in 0..3_000u64 {
            let r = rng.value(b"op", step);
            let k = key(r % 64);
            let at = ms((r >> 8) % 5_000);
            match (r >> 24) % 7 {
                // Also a lookup started again, at the same time or not.
                0 => {
                    let at = f
                        .lookup(&k)
                        .filter(|_| r & 1 == 0)
                        .map_or(at, |l| l.deadline);
                    f.start(k, Lookup::new(Stage::Discover, ep, 0, at));
                }
                1 => f.set_lookup_deadline(&k, at),
                2 if f.has_lookup(&k) => {
                    let txid = f.new_txid();
                    let probe = Probe {
                        target: k.clone(),
                        key: k,
                        to: None,
                        purpose: Purpose::Lookup,
                        tries: 0,
                        first_sent_at: None,
                        sent_at: None,
                        retry_txids: Vec::new(),
                        endpoint: ep,
                        answered: false,
                        asked_again: false,
                        claimed: false,
                    };
                    f.add_probe(txid, probe, at);
                    txids.push(txid);
                }
                // A probe added again under its txid, due as it was.
                2 if r & 1 == 0 => {
                    if let Some(&t) = txids.get((r >> 32) as usize % txids.len().max(1)) {
                        if let Some(Timed { probe, deadline }) = f.probes.get(&t) {
                            let (probe, deadline) = (probe.clone(), *deadline);
                            f.add_probe(t, probe, deadline);
                        }
                    }
                }
                3 => {
                    if let Some(&t) = txids.get((r >> 32) as usize % txids.len().max(1)) {
                        f.set_probe_deadline(t, at);
                    }
                }
                4 => {
                    if let Some(&t) = txids.get((r >> 32) as usize % txids.len().max(1)) {
                        f.end_probe(t, at);
                    }
                }
                5 => {
                    f.end_lookup(&k, at);
                }
                _ => f.end_probes_of(&k, at),
            }
            let now = ms((r >> 40) % 5_000);
            let (next, mut probes, mut lookups) =
                (f.next_deadline(), f.due_probes(now), f.due_lookups(now));
            probes.sort();
            lookups.sort();
            assert_eq!((next, probes, lookups), scanned(&f, now), "step {step}");
            assert_eq!(f.lookup_deadlines.len(), f.lookups.len());
            assert_eq!(f.probe_deadlines.len(), f.probes.len());
        }
        assert!(!f.lookups.is_empty() && !f.probes.is_empty(), "a mixed run");
    }
}
