//! Resolved destinations per endpoint, with the address and route lifetimes
//! of the configuration.

use crate::addr::{Address, EntryAddress};
use crate::bounded::{earliest, Order};
use crate::fastmap::Map;
use crate::handle::EndpointId;
use crate::request::path::{Dest, PathRecord, PATH_RECORD_LEN};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// How long before either lifetime of an entry ends a hit stops answering
/// it without reading the clock. The engine's timers take the entry off
/// that path by then ([`Cache::review`]); what runs them may be this late
/// and still no path is answered past its lifetime.
pub const REVIEW_LEAD: Duration = Duration::from_secs(1);
/// A review takes off the clockless path what is due within this of it
/// too: entries due at times of their own (a cache filled over a job's
/// seconds) would wake the timers once each, dozens of times a second.
const REVIEW_BATCH: Duration = Duration::from_millis(500);

#[derive(Clone, Debug)]
pub struct CacheEntry {
    /// The path as built, before per-request fields (service id) are set.
    pub path: PathRecord,
    /// `path` encoded: what a hit on an address sends as it is.
    pub wire: [u8; PATH_RECORD_LEN],
    /// The remote end, to rebuild the path when only the route expired.
    pub dest: Dest,
    /// When the address→GID binding must be looked up again.
    pub addr_expires: Option<Instant>,
    /// When the path must be rebuilt.
    pub route_expires: Option<Instant>,
    /// Its place in the cache's insertion order.
    seq: u64,
    /// A hit may answer it without reading the clock: neither lifetime
    /// ends within [`REVIEW_LEAD`] of the last review.
    fresh: bool,
}

impl CacheEntry {
    /// An entry for `path`, encoded once here so that hits send it as is.
    pub fn new(
        path: PathRecord,
        dest: Dest,
        addr_expires: Option<Instant>,
        route_expires: Option<Instant>,
    ) -> CacheEntry {
        CacheEntry {
            path,
            wire: path.encode(),
            dest,
            addr_expires,
            route_expires,
            seq: 0,
            fresh: false,
        }
    }

    /// Neither lifetime ended by `now`: the path may be answered as it is.
    /// Out of line: on the hit path it is for the few entries near the end
    /// of a lifetime, or for all where nothing runs the timers.
    #[inline(never)]
    fn live_at(&self, now: Instant) -> bool {
        live(self.addr_expires, now) && live(self.route_expires, now)
    }
}

/// The destinations of one endpoint. Addresses of a fixed size are keyed
/// by their type and bits, a key whose hash and comparison are inlined into
/// a lookup (those of [`Address`], with names among its variants, were a
/// call each, with the address in memory); names by their text.
#[derive(Default)]
struct Table {
    fixed: Map<(u16, u128), CacheEntry>,
    names: Map<Box<str>, CacheEntry>,
}

/// The [`Table`] key of an address: its type and bits, or a name's text.
#[inline(always)]
fn key(a: &Address) -> Result<(u16, u128), &str> {
    match (a.fixed_bits(), a) {
        (Some(bits), a) => Ok((a.wire_type(), bits)),
        (None, Address::Name(n)) => Err(n),
        (None, a) => Ok((a.wire_type(), 0)),
    }
}

impl Table {
    #[inline]
    fn get(&self, a: &Address) -> Option<&CacheEntry> {
        match key(a) {
            Ok(k) => self.fixed.get(&k),
            Err(n) => self.names.get(n),
        }
    }

    /// [`Table::get`] of the address a request carries, read in place (a
    /// name is lower-cased on the stack, as [`Address::name`] stores it).
    #[inline]
    fn get_entry(&self, a: EntryAddress) -> Option<&CacheEntry> {
        if let Some(bits) = a.fixed_bits() {
            return self.fixed.get(&(a.kind(), bits));
        }
        let name = a.name_bytes()?;
        let mut lower = [0u8; crate::addr::ADDR_LEN];
        let lower = &mut lower[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        self.names.get(std::str::from_utf8(lower).ok()?)
    }

    fn get_mut(&mut self, a: &Address) -> Option<&mut CacheEntry> {
        match key(a) {
            Ok(k) => self.fixed.get_mut(&k),
            Err(n) => self.names.get_mut(n),
        }
    }

    fn remove(&mut self, a: &Address) -> Option<CacheEntry> {
        match key(a) {
            Ok(k) => self.fixed.remove(&k),
            Err(n) => self.names.remove(n),
        }
    }

    fn insert(&mut self, a: Address, e: CacheEntry) -> Option<CacheEntry> {
        match a {
            // The name itself becomes the key.
            Address::Name(n) => self.names.insert(n, e),
            a => match key(&a) {
                Ok(k) => self.fixed.insert(k, e),
                Err(n) => self.names.insert(n.into(), e),
            },
        }
    }

    fn len(&self) -> usize {
        self.fixed.len() + self.names.len()
    }
}

/// When an entry must be taken off the clockless path: the first of its
/// lifetimes' ends, [`REVIEW_LEAD`] early. Ordered by that time first.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Review {
    at: Instant,
    seq: u64,
    key: (EndpointId, Address),
}

/// What a lookup found.
#[derive(Debug, PartialEq)]
pub enum CacheLookup {
    /// A path that is still good, and its encoding.
    Route(PathRecord, [u8; PATH_RECORD_LEN]),
    /// The binding is good but the route expired: rebuild the path.
    Address(Dest),
    Miss,
}

/// A table per endpoint. Endpoints are few (one per partition of each
/// port), so finding one by a short scan is cheaper than hashing its key on
/// every request.
///
/// Bounded: beside the tables, entries are kept in insertion order (which
/// is expiry order, the address lifetime being one configured value), so
/// the sweep removes what expired in time proportional to what it removes,
/// and a full cache drops its oldest entry. Hits never touch the order.
///
/// Most hits do not read the clock: an entry is answered as a hit while it
/// is *fresh*, and the engine's timers end that ([`Cache::next_review`],
/// [`Cache::review`]) [`REVIEW_LEAD`] before either of its lifetimes does;
/// from then on the time decides, as it decides for every entry where
/// nothing runs the timers ([`Cache::set_reviewed`] false).
pub struct Cache {
    per_endpoint: Vec<(EndpointId, Table)>,
    order: Order<(EndpointId, Address)>,
    reviews: BinaryHeap<Reverse<Review>>,
    reviewed: bool,
    len: usize,
    cap: usize,
    /// No address lifetime ends before this (see
    /// [`crate::bounded::Expiring::sweep_due`]).
    sweep_at: Option<Instant>,
    /// Entries dropped to make room.
    pub evicted: u64,
    /// Entries removed because their address lifetime ended.
    pub expired: u64,
}

fn live(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_none_or(|d| now < d)
}

impl Cache {
    pub fn new(cap: usize) -> Cache {
        Cache {
            per_endpoint: Vec::new(),
            order: Order::default(),
            reviews: BinaryHeap::new(),
            reviewed: false,
            len: 0,
            cap: cap.max(1),
            sweep_at: None,
            evicted: 0,
            expired: 0,
        }
    }

    /// The entry of `ep` for `dest` if neither of its lifetimes ended by
    /// `now`: what [`Cache::lookup`] reports as [`CacheLookup::Route`], found
    /// without copying the entry or changing the cache, so that a hit can
    /// be answered straight from [`CacheEntry::wire`].
    #[cfg(test)]
    pub fn hit(&self, ep: EndpointId, dest: &Address, now: Instant) -> Option<&CacheEntry> {
        let (_, map) = self.per_endpoint.iter().find(|(k, _)| *k == ep)?;
        map.get(dest).filter(|e| e.live_at(now))
    }

    /// The entry of `ep` for the destination of a request, as it carries
    /// it, if neither of its lifetimes ended: what [`Cache::lookup`]
    /// reports as [`CacheLookup::Route`]. A fresh entry is answered
    /// without calling `now`; any other is decided by it.
    #[inline]
    pub fn hit_entry(
        &self,
        ep: EndpointId,
        dest: EntryAddress<'_>,
        now: impl FnOnce() -> Instant,
    ) -> Option<&CacheEntry> {
        let (_, map) = self.per_endpoint.iter().find(|(k, _)| *k == ep)?;
        map.get_entry(dest).filter(|e| e.fresh || e.live_at(now()))
    }

    /// Whether the engine's timers run [`Cache::review`] by each
    /// [`Cache::next_review`] from `now` on; while they do not, no entry is
    /// fresh.
    pub fn set_reviewed(&mut self, reviewed: bool, now: Instant) {
        self.reviewed = reviewed;
        self.reviews.clear();
        for (_, t) in &mut self.per_endpoint {
            t.fixed.values_mut().for_each(|e| e.fresh = false);
            t.names.values_mut().for_each(|e| e.fresh = false);
        }
        if reviewed {
            let live: Vec<_> = {
                let tables = &self.per_endpoint;
                self.order
                    .items()
                    .filter(|(seq, k)| Self::is_at(tables, *seq, k))
                    .map(|(_, k)| k.clone())
                    .collect()
            };
            for (ep, a) in live {
                self.schedule(ep, &a, now);
            }
        }
    }

    /// Makes the entry of `ep` for `a` fresh if neither of its lifetimes
    /// ends within [`REVIEW_LEAD`] of `now`, and schedules its review.
    fn schedule(&mut self, ep: EndpointId, a: &Address, now: Instant) {
        if !self.reviewed {
            return;
        }
        let Some((_, t)) = self.per_endpoint.iter_mut().find(|(k, _)| *k == ep) else {
            return;
        };
        let Some(e) = t.get_mut(a) else { return };
        let ends = [e.addr_expires, e.route_expires];
        // None: lifetimes without an end; Some(None): too early to tell.
        let review = ends
            .into_iter()
            .flatten()
            .min()
            .map(|t| t.checked_sub(REVIEW_LEAD));
        e.fresh = review.is_none_or(|t| t.is_some_and(|t| t > now));
        if let (true, Some(Some(at))) = (e.fresh, review) {
            let seq = e.seq;
            self.reviews.push(Reverse(Review {
                at,
                seq,
                key: (ep, a.clone()),
            }));
        }
    }

    /// When [`Cache::review`] next has an entry to take off the clockless
    /// path (or an item of one since replaced: a harmless early call).
    pub fn next_review(&self) -> Option<Instant> {
        self.reviews.peek().map(|Reverse(r)| r.at)
    }

    /// Takes off the clockless path every entry whose review is due, and
    /// those due within the next 500 ms with them (one wakeup for a batch).
    pub fn review(&mut self, now: Instant) {
        while let Some(Reverse(r)) = self.reviews.peek() {
            if r.at > now + REVIEW_BATCH {
                break;
            }
            let Some(Reverse(r)) = self.reviews.pop() else {
                break;
            };
            let (ep, a) = &r.key;
            if let Some((_, t)) = self.per_endpoint.iter_mut().find(|(k, _)| k == ep) {
                if let Some(e) = t.get_mut(a).filter(|e| e.seq == r.seq) {
                    e.fresh = false;
                }
            }
        }
    }

    pub fn lookup(&mut self, ep: EndpointId, dest: &Address, now: Instant) -> CacheLookup {
        let Some((_, map)) = self.per_endpoint.iter_mut().find(|(k, _)| *k == ep) else {
            return CacheLookup::Miss;
        };
        match map.get(dest) {
            Some(e) if e.live_at(now) => CacheLookup::Route(e.path, e.wire),
            Some(e) if live(e.addr_expires, now) => CacheLookup::Address(e.dest),
            Some(_) => {
                map.remove(dest);
                self.len -= 1;
                self.expired += 1;
                CacheLookup::Miss
            }
            None => CacheLookup::Miss,
        }
    }

    /// Caches `entry` at `now`; fresh if the timers are run and neither
    /// lifetime ends within [`REVIEW_LEAD`].
    pub fn insert(&mut self, ep: EndpointId, dest: Address, mut entry: CacheEntry, now: Instant) {
        let i = match self.per_endpoint.iter().position(|(k, _)| *k == ep) {
            Some(i) => i,
            None => {
                self.per_endpoint.push((ep, Table::default()));
                self.per_endpoint.len() - 1
            }
        };
        entry.seq = self.order.stamp((ep, dest.clone()));
        self.sweep_at = earliest(self.sweep_at, entry.addr_expires);
        let key = self.reviewed.then(|| dest.clone());
        if self.per_endpoint[i].1.insert(dest, entry).is_none() {
            self.len += 1;
            if self.len > self.cap && self.remove_oldest() {
                self.evicted += 1;
            }
        }
        let tables = &self.per_endpoint;
        self.order
            .compact(self.len, |seq, k| Self::is_at(tables, seq, k));
        if self.reviews.len() > 2 * self.len + 64 {
            self.reviews
                .retain(|Reverse(r)| Self::is_at(tables, r.seq, &r.key));
        }
        if let Some(a) = key {
            self.schedule(ep, &a, now);
        }
    }

    /// The entry of `ep` for `a`.
    fn entry<'a>(
        tables: &'a [(EndpointId, Table)],
        (ep, a): &(EndpointId, Address),
    ) -> Option<&'a CacheEntry> {
        tables
            .iter()
            .find(|(k, _)| k == ep)
            .and_then(|(_, m)| m.get(a))
    }

    /// Whether `seq` is the stamp of the live entry of `key`.
    fn is_at(tables: &[(EndpointId, Table)], seq: u64, key: &(EndpointId, Address)) -> bool {
        Self::entry(tables, key).is_some_and(|e| e.seq == seq)
    }

    fn remove_at(&mut self, ep: EndpointId, a: &Address) -> Option<CacheEntry> {
        let (_, m) = self.per_endpoint.iter_mut().find(|(k, _)| *k == ep)?;
        let e = m.remove(a)?;
        self.len -= 1;
        Some(e)
    }

    /// Removes the oldest entry; false if there is none.
    fn remove_oldest(&mut self) -> bool {
        let tables = &self.per_endpoint;
        match self.order.pop_oldest(|seq, k| Self::is_at(tables, seq, k)) {
            Some((ep, a)) => self.remove_at(ep, &a).is_some(),
            None => false,
        }
    }

    /// Removes every entry whose address lifetime ended by `now`.
    pub fn sweep(&mut self, now: Instant) {
        loop {
            let tables = &self.per_endpoint;
            let expired = self
                .order
                .oldest(|seq, k| Self::is_at(tables, seq, k))
                .and_then(|k| Self::entry(tables, k))
                .is_some_and(|e| !live(e.addr_expires, now));
            if !expired || !self.remove_oldest() {
                break;
            }
            self.expired += 1;
        }
        let tables = &self.per_endpoint;
        self.sweep_at = self
            .order
            .oldest(|seq, k| Self::is_at(tables, seq, k))
            .and_then(|k| Self::entry(tables, k))
            .and_then(|e| e.addr_expires);
    }

    /// When a sweep may have something to remove (`None`: never).
    pub fn sweep_due(&self) -> Option<Instant> {
        self.sweep_at
    }

    /// Drops `dest` from every endpoint: its binding changed.
    pub fn evict(&mut self, dest: &Address) -> usize {
        let n = self
            .per_endpoint
            .iter_mut()
            .filter_map(|(_, m)| m.remove(dest))
            .count();
        self.len -= n;
        n
    }

    pub fn flush_endpoint(&mut self, ep: EndpointId) -> usize {
        match self.per_endpoint.iter().position(|(k, _)| *k == ep) {
            Some(i) => {
                let n = self.per_endpoint.swap_remove(i).1.len();
                self.len -= n;
                n
            }
            None => 0,
        }
    }

    /// Drops everything: used when this host's own addresses or ports
    /// change, since any cached path may lead to them.
    pub fn flush_all(&mut self) {
        self.per_endpoint.clear();
        self.order.clear();
        self.reviews.clear();
        self.len = 0;
        self.sweep_at = None;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// What the cache keeps beside its entries: for the tests that it
    /// stays in proportion to them.
    #[cfg(test)]
    pub fn bookkeeping(&self) -> Bookkeeping {
        Bookkeeping {
            order: self.order.len(),
            reviews: self.reviews.len(),
        }
    }
}

/// The items of the cache's insertion order and of its reviews.
#[cfg(test)]
pub struct Bookkeeping {
    pub order: usize,
    pub reviews: usize,
}

#[cfg(test)]
mod tests;
