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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;

    fn ep(n: u64) -> EndpointId {
        EndpointId::from_raw(n)
    }
    use std::time::Duration;

    #[test]
    fn lifetimes_decide_between_route_address_and_miss() {
        let mut c = Cache::new(16);
        let now = Instant::now();
        let dest = Address::name("node2").unwrap();
        let path = PathRecord {
            dlid: 9,
            ..Default::default()
        };
        let to = Dest {
            gid: Default::default(),
            lid: 9,
            mtu: None,
            rate: None,
        };
        c.insert(
            ep(1),
            dest.clone(),
            CacheEntry::new(
                path,
                to,
                Some(now + Duration::from_secs(60)),
                Some(now + Duration::from_secs(10)),
            ),
            now,
        );
        assert_eq!(
            c.hit(ep(1), &dest, now).map(|e| e.wire),
            Some(path.encode())
        );
        assert!(c.hit(ep(2), &dest, now).is_none(), "keyed by endpoint");
        assert!(c.hit(ep(1), &dest, now + Duration::from_secs(11)).is_none());
        assert!(c.hit(ep(1), &dest, now + Duration::from_secs(61)).is_none());
        assert_eq!(
            c.lookup(ep(1), &dest, now),
            CacheLookup::Route(path, path.encode())
        );
        assert_eq!(
            c.lookup(ep(2), &dest, now),
            CacheLookup::Miss,
            "keyed by endpoint"
        );
        assert_eq!(
            c.lookup(ep(1), &dest, now + Duration::from_secs(11)),
            CacheLookup::Address(to)
        );
        assert_eq!(
            c.lookup(ep(1), &dest, now + Duration::from_secs(61)),
            CacheLookup::Miss
        );
        assert!(c.is_empty(), "an expired binding is dropped");
        c.insert(
            ep(1),
            dest.clone(),
            CacheEntry::new(path, to, None, None),
            now,
        );
        assert_eq!(
            c.lookup(ep(1), &dest, now + Duration::from_secs(1 << 30)),
            CacheLookup::Route(path, path.encode())
        );
        c.insert(
            ep(2),
            dest.clone(),
            CacheEntry::new(path, to, None, None),
            now,
        );
        assert_eq!(c.evict(&dest), 2);
        c.insert(
            ep(1),
            dest.clone(),
            CacheEntry::new(path, to, None, None),
            now,
        );
        assert_eq!(c.flush_endpoint(ep(1)), 1);
        assert_eq!(c.lookup(ep(1), &dest, now), CacheLookup::Miss);
    }

    #[test]
    fn every_kind_of_address_is_a_key_of_its_own() {
        let now = Instant::now();
        let bits: [u8; 16] = "fd00::2".parse::<std::net::Ipv6Addr>().unwrap().octets();
        let keys = [
            Address::Ip4([0, 0, 0, 2].into()),
            Address::Lid(2),
            Address::Ip6(bits.into()),
            Address::Gid(crate::addr::Gid(bits)),
            Address::name("node2").unwrap(),
        ];
        let mut c = Cache::new(16);
        c.set_reviewed(true, now);
        for (i, k) in keys.iter().enumerate() {
            let to = Dest {
                gid: Default::default(),
                lid: i as u16,
                mtu: None,
                rate: None,
            };
            c.insert(
                ep(1),
                k.clone(),
                CacheEntry::new(PathRecord::default(), to, None, None),
                now,
            );
        }
        assert_eq!(c.len(), keys.len());
        let wire = |kind: u16, bytes: &[u8]| {
            let mut info = [0; crate::addr::ADDR_LEN];
            info[..bytes.len()].copy_from_slice(bytes);
            (kind, info)
        };
        let entries = [
            wire(acm_prov_sys::ACM_ADDRESS_IP, &[0, 0, 0, 2]),
            wire(acm_prov_sys::ACM_ADDRESS_LID, &[0, 2]),
            wire(acm_prov_sys::ACM_ADDRESS_IP6, &bits),
            wire(acm_prov_sys::ACM_ADDRESS_GID, &bits),
            wire(acm_prov_sys::ACM_ADDRESS_NAME, b"NODE2"),
        ];
        for (i, (k, (kind, info))) in keys.iter().zip(&entries).enumerate() {
            assert_eq!(c.hit(ep(1), k, now).map(|e| e.dest.lid), Some(i as u16));
            let e = EntryAddress::check(*kind, info).unwrap();
            assert_eq!(
                c.hit_entry(ep(1), e, || unreachable!("fresh"))
                    .map(|e| e.dest.lid),
                Some(i as u16)
            );
            assert!(
                c.hit_entry(ep(2), e, || unreachable!("absent")).is_none(),
                "keyed by endpoint"
            );
        }
        let (kind, info) = wire(acm_prov_sys::ACM_ADDRESS_NAME, b"node3");
        let other = EntryAddress::check(kind, &info).unwrap();
        assert!(c
            .hit_entry(ep(1), other, || unreachable!("absent"))
            .is_none());
        assert_eq!(c.evict(&Address::name("NODE2").unwrap()), 1);
        assert_eq!(c.evict(&keys[3]), 1);
        assert_eq!(c.len(), 3);
        assert!(c.hit(ep(1), &keys[3], now).is_none());
        assert_eq!(c.hit(ep(1), &keys[2], now).map(|e| e.dest.lid), Some(2));
    }

    #[test]
    fn the_cache_is_bounded_and_swept() {
        let now = Instant::now();
        let to = Dest {
            gid: Default::default(),
            lid: 9,
            mtu: None,
            rate: None,
        };
        let entry = |secs: u64| {
            CacheEntry::new(
                PathRecord::default(),
                to,
                Some(now + Duration::from_secs(secs)),
                None,
            )
        };
        let mut c = Cache::new(3);
        for i in 0..5u8 {
            c.insert(
                ep(1),
                Address::Ip4([10, 0, 0, i].into()),
                entry(u64::from(i) + 1),
                now,
            );
        }
        assert_eq!((c.len(), c.evicted), (3, 2), "the two oldest made room");
        assert_eq!(
            c.lookup(ep(1), &Address::Ip4([10, 0, 0, 0].into()), now),
            CacheLookup::Miss
        );
        c.sweep(now + Duration::from_millis(3500));
        assert_eq!((c.len(), c.expired), (2, 1), "10.0.0.2 expired at 3 s");
        c.evict(&Address::Ip4([10, 0, 0, 3].into()));
        c.sweep(now + Duration::from_secs(60));
        assert_eq!((c.len(), c.expired), (0, 2));
        // Replacing one destination again and again keeps the order small.
        for _ in 0..10_000 {
            c.insert(ep(2), Address::Lid(5), entry(1000), now);
        }
        assert!(c.order.len() <= 2 * c.len() + 65);
    }

    #[test]
    fn entries_filled_over_seconds_are_reviewed_a_few_times_a_second() {
        // 200 entries whose lifetimes end 50 ms apart, over 10 s: the
        // timers wake for their reviews at most twice a second, not 200
        // times, and no entry stays fresh past its review.
        let now = Instant::now();
        let mut c = Cache::new(1000);
        c.set_reviewed(true, now);
        let to = Dest {
            gid: Default::default(),
            lid: 1,
            mtu: None,
            rate: None,
        };
        for i in 0..200u32 {
            let ends = now + Duration::from_secs(2) + Duration::from_millis(u64::from(i) * 50);
            let e = CacheEntry::new(PathRecord::default(), to, Some(ends), None);
            c.insert(ep(1), Address::Lid(i as u16 + 1), e, now);
        }
        let mut wakes = 0;
        while let Some(t) = c.next_review() {
            c.review(t);
            wakes += 1;
            for i in 0..200u32 {
                let a = Address::Lid(i as u16 + 1);
                let review =
                    now + Duration::from_secs(1) + Duration::from_millis(u64::from(i) * 50);
                let fresh = c.per_endpoint[0].1.get(&a).is_some_and(|e| e.fresh);
                assert!(!fresh || review > t, "entry {i} fresh past its review");
            }
        }
        assert!((10..=21).contains(&wakes), "{wakes}");
    }

    /// The entry a request for `a` finds without a clock, if fresh.
    fn fresh(c: &Cache, a: &Address) -> Option<u16> {
        let (kind, info) = match a {
            Address::Ip4(ip) => {
                let mut info = [0; crate::addr::ADDR_LEN];
                info[..4].copy_from_slice(&ip.octets());
                (acm_prov_sys::ACM_ADDRESS_IP, info)
            }
            _ => unreachable!("IPv4 only here"),
        };
        let e = EntryAddress::check(kind, &info).unwrap();
        let read = std::cell::Cell::new(false);
        let far = Instant::now() + Duration::from_secs(1 << 20);
        let hit = c.hit_entry(ep(1), e, || {
            read.set(true);
            far
        });
        hit.filter(|_| !read.get()).map(|e| e.dest.lid)
    }

    #[test]
    fn hits_skip_the_clock_only_until_a_review_near_the_end_of_a_lifetime() {
        let now = Instant::now();
        let secs = Duration::from_secs;
        let entry = |lid: u16, addr: Option<u64>, route: Option<u64>| {
            let to = Dest {
                gid: Default::default(),
                lid,
                mtu: None,
                rate: None,
            };
            CacheEntry::new(
                PathRecord::default(),
                to,
                addr.map(|s| now + secs(s)),
                route.map(|s| now + secs(s)),
            )
        };
        let ip = |n: u8| Address::Ip4([10, 0, 0, n].into());
        let mut c = Cache::new(64);
        c.insert(ep(1), ip(1), entry(1, Some(60), Some(10)), now);
        assert_eq!(fresh(&c, &ip(1)), None, "nothing runs the reviews yet");
        c.set_reviewed(true, now);
        assert_eq!(fresh(&c, &ip(1)), Some(1), "made fresh when they run");
        assert_eq!(c.next_review(), Some(now + secs(10) - REVIEW_LEAD));
        c.insert(ep(1), ip(2), entry(2, Some(3600), None), now);
        c.insert(ep(1), ip(3), entry(3, None, None), now);
        // A lifetime that ends within the lead is never answered blind.
        c.insert(ep(1), ip(4), entry(4, Some(1), None), now);
        assert_eq!(fresh(&c, &ip(4)), None);
        c.review(now + secs(8));
        assert_eq!(fresh(&c, &ip(1)), Some(1), "not due yet");
        c.review(now + secs(9));
        assert_eq!(fresh(&c, &ip(1)), None, "the route ends within the lead");
        let mut info = [0; crate::addr::ADDR_LEN];
        info[..4].copy_from_slice(&[10, 0, 0, 1]);
        let e1 = EntryAddress::check(acm_prov_sys::ACM_ADDRESS_IP, &info).unwrap();
        let at = |s: f64| now + Duration::from_secs_f64(s);
        assert!(
            c.hit_entry(ep(1), e1, || at(9.5)).is_some(),
            "the clock decides"
        );
        assert!(c.hit_entry(ep(1), e1, || at(10.0)).is_none(), "route over");
        assert_eq!(
            c.lookup(ep(1), &ip(1), now + secs(9)),
            CacheLookup::Route(PathRecord::default(), PathRecord::default().encode()),
            "still good when the clock is read"
        );
        assert_eq!(c.next_review(), Some(now + secs(3600) - REVIEW_LEAD));
        // A replaced entry is not reviewed by its predecessor's item.
        c.insert(ep(1), ip(2), entry(22, Some(7200), None), now);
        c.review(now + secs(3600));
        assert_eq!(fresh(&c, &ip(2)), Some(22));
        assert_eq!(fresh(&c, &ip(3)), Some(3), "no end, no review");
        // Replacing one entry again and again keeps the reviews few.
        for _ in 0..10_000 {
            c.insert(ep(1), ip(5), entry(5, Some(100), None), now);
        }
        assert!(c.reviews.len() <= 2 * c.len() + 65);
        c.set_reviewed(false, now);
        assert_eq!((fresh(&c, &ip(2)), fresh(&c, &ip(3))), (None, None));
        assert_eq!(c.next_review(), None);
    }
}
