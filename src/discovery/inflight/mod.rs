//! What discovery has in flight: the lookups, the probes (queries) that
//! work for them (`probes.rs`), and the checks of learned bindings. One
//! table, because their links must hold together, and it keeps them:
//!
//! - a probe that works for a lookup is listed by that lookup, and only
//!   then; a check is listed in `checking` under the address it checks;
//! - ending a probe unlists it; ending a lookup ends its probes;
//! - a probe that ended with a reply possibly still on its way is
//!   remembered for one discovery stage, so that reply counts as late
//!   ([`Probes::is_late`]) rather than unsolicited;
//! - every lookup's and probe's deadline is in an ordered index, so the
//!   next one and the due ones are found without looking at the others
//!   (a scan of every lookup at each poll made a burst of misses cost
//!   time quadratic in its size).

mod lookup;
mod probe;
mod probes;

use crate::addr::Address;
use crate::config::Config;
use crate::entropy::Seed;
use crate::fastmap::Map;
use crate::handle::EndpointId;
pub use lookup::{Doing, Lookup, SoFar, Stage, NO, UNKNOWN};
pub use probe::{Probe, Purpose, MAX_CHECKS, MAX_CLAIMS};
pub use probes::Probes;
use std::collections::BTreeSet;
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

pub struct InFlight {
    lookups: Map<Address, Lookup>,
    /// Every lookup's deadline: exactly those of the table.
    lookup_deadlines: BTreeSet<(Instant, Address)>,
    probes: Probes,
    /// Checks in flight, by the address checked.
    checking: Map<Address, NonZeroU64>,
    max_lookups: usize,
    /// Lookups refused because `max_lookups` were in flight.
    refused: u64,
}

impl InFlight {
    /// Bounded by `cfg`, transaction ids keyed by `txid_key`.
    pub fn new(cfg: &Config, txid_key: Seed) -> InFlight {
        let timeout = Duration::from_millis(u64::from(cfg.timeout_ms));
        let ended = cfg.max_lookups.saturating_mul(MAX_CLAIMS + 1);
        let late_window = timeout * crate::discovery::rto::CEILING * (cfg.retries + 1);
        InFlight {
            lookups: Map::default(),
            lookup_deadlines: BTreeSet::new(),
            probes: Probes::new(ended, late_window, txid_key),
            checking: Map::default(),
            max_lookups: cfg.max_lookups,
            refused: 0,
        }
    }

    /// The probes, to read and to change what links none of them to
    /// another (a lookup, a check): their tries, deadlines, fields.
    pub fn probes(&self) -> &Probes {
        &self.probes
    }

    pub fn probes_mut(&mut self) -> &mut Probes {
        &mut self.probes
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
        self.probes.insert(txid, probe, deadline);
    }

    /// Ends a probe that was never answered and never will be (never sent,
    /// or its endpoint gone).
    pub fn remove_probe(&mut self, txid: NonZeroU64) -> Option<Probe> {
        let p = self.probes.take(txid)?;
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
        self.probes.remember_ended(txid, &p, now);
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
            if let Some(p) = self.probes.take(t) {
                self.probes.remember_ended(t, &p, now);
            }
        }
    }

    /// Takes lookup `key` out with its probes, which it returns.
    fn take_lookup(&mut self, key: &Address) -> Option<(Lookup, Vec<(NonZeroU64, Probe)>)> {
        let l = self.lookups.remove(key)?;
        self.lookup_deadlines.remove(&(l.deadline, key.clone()));
        let probes = l
            .probes
            .iter()
            .filter_map(|t| Some((*t, self.probes.take(*t)?)))
            .collect();
        Some((l, probes))
    }

    /// Ends a lookup whose replies may still come: they will be late.
    pub fn end_lookup(&mut self, key: &Address, now: Instant) -> Option<Lookup> {
        let (l, probes) = self.take_lookup(key)?;
        for (t, p) in &probes {
            self.probes.remember_ended(*t, p, now);
        }
        Some(l)
    }

    /// Forgets everything, with no outcome (see `Discovery::abandon_all`).
    pub fn clear(&mut self) {
        self.lookups.clear();
        self.lookup_deadlines.clear();
        self.probes.clear();
        self.checking.clear();
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
                        if let Some(p) = self.probes.get_mut(*t) {
                            p.endpoint = to;
                        }
                    }
                }
                None => gone.push(key.clone()),
            }
        }
        for key in gone {
            // Its endpoint closed: none of its probes can be answered.
            self.take_lookup(&key);
        }
        for t in self.probes.sent_from(ep) {
            match (other, self.probes.get_mut(t)) {
                (Some(e), Some(p)) => p.endpoint = e,
                _ => {
                    self.remove_probe(t);
                }
            }
        }
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
        lookup.into_iter().chain(self.probes.next_deadline()).min()
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
        let a = f.probes_mut().new_txid();
        let b = f.probes_mut().new_txid();
        assert_ne!(a, b);
        assert_ne!(b.get().wrapping_sub(a.get()), 1);
    }

    /// What the index must say, found by looking at every entry.
    fn scanned(f: &InFlight, now: Instant) -> (Option<Instant>, Vec<NonZeroU64>, Vec<Address>) {
        let (every_probe, _) = f.probes.scanned();
        let all = f.lookups.values().map(|l| l.deadline);
        let next = all.chain(every_probe.iter().map(|(_, at)| *at)).min();
        let due_probes = every_probe.iter().filter(|(_, at)| *at <= now);
        let mut probes: Vec<_> = due_probes.map(|(t, _)| *t).collect();
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
                    let txid = f.probes_mut().new_txid();
                    let probe = Probe::unsent(k.clone(), k, None, Purpose::Lookup, ep);
                    f.add_probe(txid, probe, at);
                    txids.push(txid);
                }
                // A probe added again under its txid, due as it was.
                2 if r & 1 == 0 => {
                    if let Some(&t) = txids.get((r >> 32) as usize % txids.len().max(1)) {
                        let probe = f.probes().get(t).cloned();
                        if let (Some(probe), Some(deadline)) = (probe, f.probes().deadline(t)) {
                            f.add_probe(t, probe, deadline);
                        }
                    }
                }
                3 => {
                    if let Some(&t) = txids.get((r >> 32) as usize % txids.len().max(1)) {
                        f.probes_mut().set_deadline(t, at);
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
                (f.next_deadline(), f.probes().due(now), f.due_lookups(now));
            probes.sort();
            lookups.sort();
            assert_eq!((next, probes, lookups), scanned(&f, now), "step {step}");
            assert_eq!(f.lookup_deadlines.len(), f.lookups.len());
            let (every_probe, indexed) = f.probes.scanned();
            assert_eq!(indexed, every_probe.len());
        }
        assert!(!f.lookups.is_empty() && f.probes.len() > 0, "a mixed run");
    }
}
