//! The daemon's seven counters per endpoint (`ib_acme -P`, `ACM_CNTR_*`),
//! and where the last request's endpoint keeps them: every request bumps
//! two or three, and most come from the address the previous one came
//! from.

use crate::daemon::{Counter, Daemon, COUNTERS};
use crate::handle::{AddressId, EndpointId};
use crate::local::Local;
use acm_prov_sys::{
    ACM_STATUS_EDESTADDR, ACM_STATUS_EDESTTYPE, ACM_STATUS_EINVAL, ACM_STATUS_ENODATA,
    ACM_STATUS_ENOMEM, ACM_STATUS_ENOTCONN, ACM_STATUS_ESRCADDR, ACM_STATUS_ESRCTYPE,
    ACM_STATUS_ETIMEDOUT, ACM_STATUS_SUCCESS,
};

/// Why requests failed other than "no such destination" (`reason` of
/// `urdma_resolve_failures_total`, beside `no_data`): the daemon's one
/// error counter told apart.
pub const ERROR_REASONS: [&str; 6] = [
    "timeout",
    "no_memory",
    "invalid",
    "no_route",
    "port_down",
    "other",
];

/// The index in [`ERROR_REASONS`] of a failure status.
fn reason(status: u8) -> usize {
    match u32::from(status) {
        ACM_STATUS_ETIMEDOUT => 0,
        ACM_STATUS_ENOMEM => 1,
        ACM_STATUS_EINVAL | ACM_STATUS_ESRCADDR | ACM_STATUS_ESRCTYPE | ACM_STATUS_EDESTTYPE => 2,
        ACM_STATUS_EDESTADDR => 3,
        ACM_STATUS_ENOTCONN => 4,
        _ => 5,
    }
}

/// Where an endpoint's counters are; one that is nowhere bumps nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot(usize);

#[derive(Default)]
pub(super) struct Counters {
    /// Endpoints are few: a short scan costs less than hashing each time.
    per_endpoint: Vec<(EndpointId, [u64; COUNTERS])>,
    /// The address context of the last request, its endpoint and slot.
    /// Forgotten whenever an address or an endpoint goes, since the slots
    /// move.
    last_source: Option<(AddressId, EndpointId, Slot)>,
    /// Errors by reason, over every endpoint ([`ERROR_REASONS`]).
    pub errors: [u64; ERROR_REASONS.len()],
}

impl Counters {
    pub fn open(&mut self, ep: EndpointId) {
        self.per_endpoint.push((ep, [0; COUNTERS]));
    }

    pub fn close(&mut self, ep: EndpointId) {
        self.per_endpoint.retain(|(id, _)| *id != ep);
        self.last_source = None;
    }

    /// An address went: the last source may have been it.
    pub fn forget_source(&mut self) {
        self.last_source = None;
    }

    pub fn of(&self, ep: EndpointId) -> Option<[u64; COUNTERS]> {
        self.per_endpoint
            .iter()
            .find(|(id, _)| *id == ep)
            .map(|(_, c)| *c)
    }

    /// Each counter summed over the endpoints.
    pub fn totals(&self) -> [u64; COUNTERS] {
        let mut sums = [0u64; COUNTERS];
        for (_, c) in &self.per_endpoint {
            for (sum, n) in sums.iter_mut().zip(c) {
                *sum += n;
            }
        }
        sums
    }

    pub fn slot(&self, ep: EndpointId) -> Slot {
        Slot(
            self.per_endpoint
                .iter()
                .position(|(id, _)| *id == ep)
                .unwrap_or(usize::MAX),
        )
    }

    /// The endpoint of the address context `addr`, and its slot: found
    /// once per request and kept for the next (the lookups were a tenth of
    /// a cache hit).
    #[inline]
    pub fn source(&mut self, addr: AddressId, local: &Local) -> Option<(EndpointId, Slot)> {
        match self.last_source {
            Some((a, ep, slot)) if a == addr => Some((ep, slot)),
            _ => {
                let ep = local.address(addr)?.endpoint;
                let slot = self.slot(ep);
                self.last_source = Some((addr, ep, slot));
                Some((ep, slot))
            }
        }
    }

    #[inline]
    pub fn bump(&mut self, slot: Slot, c: Counter) {
        if let Some((_, counters)) = self.per_endpoint.get_mut(slot.0) {
            counters[c as usize] += 1;
        }
    }

    /// A request answered from the cache: `resolve` and `route_cache` at
    /// once.
    #[inline]
    pub fn bump_hit(&mut self, slot: Slot) {
        if let Some((_, counters)) = self.per_endpoint.get_mut(slot.0) {
            counters[Counter::Resolve as usize] += 1;
            counters[Counter::RouteCache as usize] += 1;
        }
    }

    /// Counter `c` of endpoint `ep`, and the daemon's own of the query and
    /// cache counters.
    pub fn count(&mut self, ep: EndpointId, c: Counter, daemon: &impl Daemon) {
        let slot = self.slot(ep);
        self.tally(slot, c, daemon);
    }

    /// [`Counters::count`] on the counters at `slot`, already found.
    #[inline]
    pub fn tally(&mut self, slot: Slot, c: Counter, daemon: &impl Daemon) {
        self.bump(slot, c);
        if matches!(
            c,
            Counter::AddrQuery | Counter::AddrCache | Counter::RouteQuery | Counter::RouteCache
        ) {
            daemon.increment_counter(c);
        }
    }

    /// A request answered from the cache: the endpoint's counters and the
    /// daemon's.
    #[inline]
    pub fn tally_hit(&mut self, slot: Slot, daemon: &impl Daemon) {
        self.bump_hit(slot);
        daemon.increment_counter(Counter::RouteCache);
    }

    /// Counts a reply's status the way `ib_acme -P` reports it.
    pub fn count_status(&mut self, ep: EndpointId, status: u8, daemon: &impl Daemon) {
        match u32::from(status) {
            ACM_STATUS_SUCCESS => {}
            ACM_STATUS_ENODATA => self.count(ep, Counter::NoData, daemon),
            _ => {
                self.errors[reason(status)] += 1;
                self.count(ep, Counter::Error, daemon)
            }
        }
    }
}
