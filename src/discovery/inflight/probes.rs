//! The probes in flight, by transaction id: their deadlines in one
//! ordered index, the transaction ids of their later tries, the addresses
//! they asked, and the ids of probes that ended lately (a reply to one is
//! late, not unsolicited). Which lookup lists a probe is [`super::InFlight`]'s.

use super::probe::Probe;
use crate::bounded::Expiring;
use crate::entropy::Seed;
use crate::fastmap::Map;
use crate::handle::EndpointId;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// A probe with its deadline: when it is sent again or given up. Set
/// through [`Probes::set_deadline`], which indexes it.
struct Timed {
    probe: Probe,
    deadline: Instant,
}

pub struct Probes {
    probes: Map<NonZeroU64, Timed>,
    /// Every probe's deadline: exactly those of the table.
    deadlines: BTreeSet<(Instant, NonZeroU64)>,
    /// The tries after a probe's first, by their own transaction ids: the
    /// probe's, and when the try left.
    tries: Map<NonZeroU64, (NonZeroU64, Instant)>,
    /// Probes asked by unicast, by the address asked: a host that says it
    /// has just started costs a look at its own probes, not at every
    /// probe, so no allowance that forged start queries could spend
    /// stands between a real one and its probes (docs/protocol.md, trust
    /// table: start query).
    by_dest: Map<IpAddr, Vec<NonZeroU64>>,
    ended: Expiring<NonZeroU64, ()>,
    /// How long a probe's reply may still come after the probe ended: a
    /// whole discovery stage, every try of it at the longest a try can
    /// take (`rto.rs`).
    late_window: Duration,
    txid_key: Seed,
    txid_counter: u64,
}

impl Probes {
    /// Remembering up to `ended` probes that ended, for `late_window`;
    /// transaction ids keyed by `txid_key`.
    pub(super) fn new(ended: usize, late_window: Duration, txid_key: Seed) -> Probes {
        Probes {
            probes: Map::default(),
            deadlines: BTreeSet::new(),
            tries: Map::default(),
            by_dest: Map::default(),
            ended: Expiring::new(ended),
            late_window,
            txid_key,
            txid_counter: 0,
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

    pub fn get(&self, txid: NonZeroU64) -> Option<&Probe> {
        self.probes.get(&txid).map(|t| &t.probe)
    }

    pub fn get_mut(&mut self, txid: NonZeroU64) -> Option<&mut Probe> {
        self.probes.get_mut(&txid).map(|t| &mut t.probe)
    }

    pub fn deadline(&self, txid: NonZeroU64) -> Option<Instant> {
        self.probes.get(&txid).map(|t| t.deadline)
    }

    pub fn set_deadline(&mut self, txid: NonZeroU64, at: Instant) {
        if let Some(t) = self.probes.get_mut(&txid) {
            let old = std::mem::replace(&mut t.deadline, at);
            self.deadlines.remove(&(old, txid));
            self.deadlines.insert((at, txid));
        }
    }

    /// Adds `probe`, due at `deadline` (in place of one under `txid`).
    pub(super) fn insert(&mut self, txid: NonZeroU64, probe: Probe, deadline: Instant) {
        if let Some(to) = probe.to {
            self.by_dest.entry(to.ip()).or_default().push(txid);
        }
        if let Some(old) = self.probes.insert(txid, Timed { probe, deadline }) {
            self.deadlines.remove(&(old.deadline, txid));
        }
        self.deadlines.insert((deadline, txid));
    }

    /// Takes probe `txid` out of the table and the index, with its tries,
    /// and nothing else.
    pub(super) fn take(&mut self, txid: NonZeroU64) -> Option<Probe> {
        let t = self.probes.remove(&txid)?;
        self.deadlines.remove(&(t.deadline, txid));
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

    /// A new try of probe `txid`, leaving at `now`: its transaction id.
    pub fn add_try(&mut self, txid: NonZeroU64, now: Instant) -> Option<NonZeroU64> {
        self.probes.get(&txid)?;
        let t = self.new_txid();
        self.tries.insert(t, (txid, now));
        self.get_mut(txid)?.retry_txids.push(t);
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

    /// A reply to probe `txid` (`p`), which just ended, or to any of its
    /// tries, is late for one stage.
    pub(super) fn remember_ended(&mut self, txid: NonZeroU64, p: &Probe, now: Instant) {
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

    /// The probes sent from endpoint `ep`.
    pub(super) fn sent_from(&self, ep: EndpointId) -> Vec<NonZeroU64> {
        self.probes
            .iter()
            .filter(|(_, t)| t.probe.endpoint == ep)
            .map(|(t, _)| *t)
            .collect()
    }

    /// The probes due by `now`, earliest first.
    pub fn due(&self, now: Instant) -> Vec<NonZeroU64> {
        self.deadlines
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, t)| *t)
            .collect()
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    pub(super) fn len(&self) -> usize {
        self.probes.len()
    }

    /// Forgets every probe; what ended lately stays late.
    pub(super) fn clear(&mut self) {
        self.probes.clear();
        self.deadlines.clear();
        self.tries.clear();
        self.by_dest.clear();
    }

    pub fn sweep(&mut self, now: Instant) {
        self.ended.sweep(now, |_, _| {});
    }

    /// When [`Probes::sweep`] may have something to remove.
    pub fn sweep_due(&self) -> Option<Instant> {
        self.ended.sweep_due()
    }

    /// Every probe's deadline, from the table, and how many the index
    /// holds: for the test of the index.
    #[cfg(test)]
    pub(super) fn scanned(&self) -> (Vec<(NonZeroU64, Instant)>, usize) {
        let all = self.probes.iter().map(|(t, p)| (*t, p.deadline));
        (all.collect(), self.deadlines.len())
    }
}
