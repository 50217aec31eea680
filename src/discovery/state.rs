//! What discovery knows about remote hosts: bindings learned, recently
//! failed destinations, and when each binding was last checked. What it
//! is asking them is in flight (`inflight/`); the requests waiting for a
//! lookup are the request path's, not discovery's.
//!
//! Plain data with explicit time, so discovery's asynchronous behaviour is
//! unit-testable without sockets or threads. Every table has a bound.

use super::inflight::MAX_CHECKS;
use super::wire::EndpointRecord;
use super::Binding;
use crate::addr::{Address, Gid};
use crate::bounded::Expiring;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A remote endpoint as discovery describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learned {
    pub gid: Gid,
    pub lid: u16,
    /// `enum ibv_mtu` / `enum ibv_rate` of the remote port, when known.
    pub mtu: Option<u8>,
    pub rate: Option<u8>,
    /// Partitions the remote endpoint is in (membership bit cleared); empty
    /// when unknown (derived GIDs).
    pub partitions: Vec<u16>,
    /// Who confirmed the binding: the address and port that answered the
    /// query (for an IP address, that address itself). A check asks
    /// there again. `None` for derived GIDs.
    pub via: Option<SocketAddr>,
    /// When its holder last confirmed it (set when it is bound).
    pub confirmed: Option<Instant>,
    /// How the lookup that bound it found it (`urdma-acm show`).
    pub source: Source,
}

/// How a binding was found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Source {
    /// Its holder answered a query.
    #[default]
    Discovery,
    /// The system's resolver named the address that answered.
    Dns,
    /// Derived from the address (`urdma_derive`).
    Derived,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Discovery => "discovery",
            Source::Dns => "dns",
            Source::Derived => "derived",
        }
    }
}

impl Learned {
    pub fn from_record(r: &EndpointRecord, via: SocketAddr) -> Learned {
        Learned {
            via: Some(via),
            ..Learned::described_by(r)
        }
    }

    /// What `r` says about its endpoint, confirmed by nobody.
    fn described_by(r: &EndpointRecord) -> Learned {
        Learned {
            gid: r.gid(),
            lid: r.lid(),
            mtu: Some(r.mtu()),
            rate: Some(r.rate()),
            partitions: r.pkeys().iter().map(|p| p & 0x7fff).collect(),
            via: None,
            confirmed: None,
            source: Source::Discovery,
        }
    }

    pub fn derived(gid: Gid) -> Learned {
        Learned {
            gid,
            lid: 0,
            mtu: None,
            rate: None,
            partitions: Vec::new(),
            via: None,
            confirmed: None,
            source: Source::Derived,
        }
    }

    pub fn in_partition(&self, pkey: u16) -> bool {
        self.partitions.is_empty() || self.partitions.contains(&(pkey & 0x7fff))
    }

    /// Whether both say the same about the endpoint (where each was
    /// confirmed aside).
    pub fn same_endpoint(&self, other: &Learned) -> bool {
        (self.gid, self.lid, self.mtu, self.rate, &self.partitions)
            == (
                other.gid,
                other.lid,
                other.mtu,
                other.rate,
                &other.partitions,
            )
    }

    /// Whether `record` says anything else about the endpoint than this
    /// binding.
    pub fn differs_from(&self, record: &EndpointRecord) -> bool {
        !self.same_endpoint(&Learned::described_by(record))
    }
}

/// A number for each of [`State`]'s two tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tables<T> {
    pub bindings: T,
    pub failures: T,
}

pub struct State {
    learned: Expiring<Address, Learned>,
    /// Destinations whose last lookup failed, with the status.
    failed: Expiring<Address, u8>,
    /// When each address was last checked: a binding is checked again
    /// only after [`super::CHECK_HOLDOFF`], so hints cannot
    /// turn into a stream of queries to one host.
    checked: Expiring<Address, ()>,
    /// How long a binding lasts: `urdma_addr_timeout`, and
    /// `urdma_reconfirm` for what a peer confirmed.
    addr_timeout: Option<Duration>,
    reconfirm: Option<Duration>,
}

impl Default for State {
    fn default() -> Self {
        let cfg = crate::config::Config::default();
        State::new(&cfg)
    }
}

impl State {
    pub fn new(cfg: &crate::config::Config) -> State {
        let max_learned = cfg.max_learned;
        State {
            learned: Expiring::new(max_learned),
            failed: Expiring::new(max_learned),
            checked: Expiring::new(MAX_CHECKS * 4),
            addr_timeout: cfg.addr_timeout.duration(),
            reconfirm: cfg.reconfirm,
        }
    }

    /// The live binding of `a`, as the request path takes it.
    pub(super) fn live(&mut self, a: &Address, now: Instant) -> Option<Binding> {
        let l = self.learned.get_live(a, now)?.clone();
        let reconfirm_at = self.reconfirm_at(&l);
        Some(Binding {
            learned: l,
            reconfirm_at,
        })
    }

    /// `learned`, bound now: as [`State::bind`] keeps it.
    pub(super) fn bound(&self, mut learned: Learned, now: Instant) -> Binding {
        learned.confirmed = Some(now);
        let reconfirm_at = self.reconfirm_at(&learned);
        Binding {
            learned,
            reconfirm_at,
        }
    }

    /// When `l`'s holder must confirm it again: what a peer confirmed is
    /// good for `urdma_reconfirm`; what was derived stays as long as
    /// addresses do.
    fn reconfirm_at(&self, l: &Learned) -> Option<Instant> {
        let reconfirm = self.reconfirm.filter(|_| l.via.is_some());
        reconfirm.zip(l.confirmed).map(|(r, c)| c + r)
    }

    /// The binding of `a`, live or not yet swept.
    pub fn binding(&self, a: &Address) -> Option<&Learned> {
        self.learned.get(a)
    }

    /// The status of a failed lookup of `a` still remembered.
    pub fn failure(&mut self, a: &Address, now: Instant) -> Option<u8> {
        self.failed.get_live(a, now).copied()
    }

    /// How many failures are remembered.
    pub fn failures(&self) -> usize {
        self.failed.len()
    }

    /// Forgets remembered failures (`None`: all of them): what they were
    /// about changed elsewhere, so they are asked again.
    pub fn forget_failures(&mut self, which: Option<&[Address]>) {
        match which {
            None => self.failed.clear(),
            Some(addrs) => {
                for a in addrs {
                    self.failed.remove(a);
                }
            }
        }
    }

    /// Remembers that the lookup of `key` failed with `status`, until
    /// `until`.
    pub(super) fn remember_failure(&mut self, key: &Address, status: u8, until: Instant) {
        self.failed.insert(key.clone(), status, Some(until));
    }

    /// Binds `key` (and, for a binding from a peer's record, its GID) to
    /// `learned`, confirmed now, and forgets a failure of `key`; returns
    /// what now leads elsewhere or was evicted to make room (it leaves the
    /// destination cache).
    pub(super) fn bind(
        &mut self,
        key: &Address,
        mut learned: Learned,
        now: Instant,
    ) -> Vec<Address> {
        learned.confirmed = Some(now);
        let addr_timeout = self.addr_timeout.map(|a| now + a);
        let expires = match (addr_timeout, self.reconfirm_at(&learned)) {
            (Some(a), Some(r)) => Some(a.min(r)),
            (a, r) => a.or(r),
        };
        let mut keys = vec![key.clone()];
        if learned.via.is_some() && *key != Address::Gid(learned.gid) {
            keys.push(Address::Gid(learned.gid));
        }
        self.failed.remove(key);
        let mut changed = Vec::new();
        for k in keys {
            match self.learned.get(&k) {
                // The common case (asked again): only the lifetime changes.
                Some(old) if old.same_endpoint(&learned) && old.via == learned.via => {
                    self.learned.refresh(&k, expires);
                    if let Some(l) = self.learned.get_mut(&k) {
                        l.confirmed = learned.confirmed;
                    }
                    continue;
                }
                Some(old) if !old.same_endpoint(&learned) => {
                    log::trace!("discovery: {k} is now {}", learned.gid);
                    changed.push(k.clone());
                }
                _ => {}
            }
            if let Some(dropped) = self.learned.insert(k, learned.clone(), expires) {
                changed.push(dropped);
            }
        }
        changed
    }

    /// Every binding, with when it must be confirmed again.
    pub fn bindings(&self) -> impl Iterator<Item = (&Address, &Learned, Option<Instant>)> {
        self.learned
            .iter()
            .map(|(a, l)| (a, l, self.learned.expires(a).flatten()))
    }

    /// Every failure remembered, with its status and when it is dropped.
    pub fn remembered_failures(&self) -> impl Iterator<Item = (&Address, u8, Option<Instant>)> {
        self.failed
            .iter()
            .map(|(a, s)| (a, *s, self.failed.expires(a).flatten()))
    }

    /// Forgets every binding and failure.
    pub fn forget_all(&mut self) -> usize {
        let n = self.learned.len() + self.failed.len();
        self.learned.clear();
        self.failed.clear();
        n
    }

    /// Forgets the binding of `a`; whether there was one.
    pub fn forget(&mut self, a: &Address) -> bool {
        self.learned.remove(a).is_some()
    }

    /// Forgets every binding to `gid`, and says which.
    pub fn forget_gid(&mut self, gid: Gid) -> Vec<Address> {
        let gone: Vec<Address> = self
            .learned
            .iter()
            .filter(|(_, l)| l.gid == gid)
            .map(|(a, _)| a.clone())
            .collect();
        for a in &gone {
            self.learned.remove(a);
        }
        gone
    }

    /// The addresses bound here that `record`, announced (or `withdrawn`),
    /// says something else about: hints, each to be checked.
    pub(super) fn contradicted_by(&self, record: &EndpointRecord, withdrawn: bool) -> Vec<Address> {
        let addresses = record.addresses().iter().map(|w| w.address());
        addresses
            .filter(|key| match self.learned.get(key) {
                Some(l) if withdrawn => l.gid == record.gid(),
                Some(l) => l.differs_from(record),
                None => false,
            })
            .cloned()
            .collect()
    }

    /// Whether `key` may be checked: not checked lately.
    pub(super) fn check_due(&mut self, key: &Address, now: Instant) -> bool {
        self.checked.get_live(key, now).is_none()
    }

    /// Notes that `key` was checked; not again before `until`.
    pub(super) fn checked(&mut self, key: &Address, until: Instant) {
        self.checked.insert(key.clone(), (), Some(until));
    }

    /// Bindings and failures held.
    pub fn sizes(&self) -> Tables<usize> {
        Tables {
            bindings: self.learned.len(),
            failures: self.failed.len(),
        }
    }

    /// Bindings and failures evicted to make room so far.
    pub fn evicted(&self) -> Tables<u64> {
        Tables {
            bindings: self.learned.evicted,
            failures: self.failed.evicted,
        }
    }

    /// How many bindings it holds at most.
    pub fn capacity(&self) -> usize {
        self.learned.capacity()
    }

    /// Forgets what expired.
    pub fn sweep(&mut self, now: Instant) {
        self.learned.sweep(now, |_, _| {});
        self.failed.sweep(now, |_, _| {});
        self.checked.sweep(now, |_, _| {});
    }

    /// When an entry may expire first.
    pub fn sweep_due(&self) -> Option<Instant> {
        [
            self.learned.sweep_due(),
            self.failed.sweep_due(),
            self.checked.sweep_due(),
        ]
        .into_iter()
        .fold(None, crate::bounded::earliest)
    }

    /// Binds `a` to `l` for good, as if learned long ago.
    #[cfg(test)]
    pub(crate) fn insert(&mut self, a: Address, l: Learned) {
        self.learned.insert(a, l, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bindings_and_failures_expire() {
        let mut r = State::new(&crate::config::Config {
            addr_timeout: crate::config::Lifetime::Minutes(1),
            ..Default::default()
        });
        let now = Instant::now();
        let a = Address::name("node2").unwrap();
        assert!(r.bind(&a, Learned::derived(Gid([1; 16])), now).is_empty());
        assert!(r.live(&a, now + Duration::from_secs(59)).is_some());
        assert!(r.live(&a, now + Duration::from_secs(60)).is_none());
        r.remember_failure(&a, 6, now + Duration::from_millis(10));
        assert_eq!(r.failure(&a, now), Some(6));
        assert_eq!(r.failure(&a, now + Duration::from_millis(10)), None);
    }

    #[test]
    fn partitions_ignore_the_membership_bit() {
        let mut l = Learned::derived(Gid([1; 16]));
        assert!(l.in_partition(0x8001), "unknown partitions do not exclude");
        l.partitions = vec![0x7fff];
        assert!(l.in_partition(0xffff));
        assert!(!l.in_partition(0x8001));
    }
}
