//! A table with a capacity and a lifetime per entry: what the provider
//! keeps about remote hosts must stay within a known size whatever the
//! network and the clients send, and what expired must leave without a
//! client asking for it again.
//!
//! Entries are kept in insertion order beside the map. Lifetimes in a table
//! are uniform (one configured timeout), so insertion order is expiry
//! order: the sweep pops expired entries from the front in time
//! proportional to what it removes, and a full table makes room by
//! dropping its oldest entry. Replacing an entry moves it to the back; the
//! old position is skipped when it reaches the front.

use crate::fastmap::Map;
use std::collections::VecDeque;
use std::hash::Hash;
use std::time::Instant;

/// Keys in the order they were last stamped, for a table that stores each
/// entry's stamp beside it. Replacing or removing an entry leaves its old
/// item here; `current` (does this stamp still belong to this key's entry?)
/// tells the live items from those, which are dropped when they reach the
/// front or outnumber the live ones. [`Expiring`] and the destination cache
/// are both built on it.
#[derive(Debug)]
pub struct Order<K> {
    items: VecDeque<(u64, K)>,
    next: u64,
}

impl<K> Default for Order<K> {
    fn default() -> Self {
        Order {
            items: VecDeque::new(),
            next: 0,
        }
    }
}

impl<K> Order<K> {
    /// Puts `k` at the back; the returned stamp goes with its entry.
    pub fn stamp(&mut self, k: K) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.items.push_back((seq, k));
        seq
    }

    /// The oldest live key, once the stale items before it are dropped.
    pub fn oldest(&mut self, current: impl Fn(u64, &K) -> bool) -> Option<&K> {
        while let Some((seq, k)) = self.items.front() {
            if current(*seq, k) {
                break;
            }
            self.items.pop_front();
        }
        self.items.front().map(|(_, k)| k)
    }

    /// Takes the oldest live key out of the order (the table removes its
    /// entry).
    pub fn pop_oldest(&mut self, current: impl Fn(u64, &K) -> bool) -> Option<K> {
        self.oldest(current)?;
        self.items.pop_front().map(|(_, k)| k)
    }

    /// Rebuilds the order when stale items outnumber the `live` entries,
    /// so that it never holds more than about twice the table.
    pub fn compact(&mut self, live: usize, current: impl Fn(u64, &K) -> bool) {
        if self.items.len() > 2 * live + 64 {
            self.items.retain(|(seq, k)| current(*seq, k));
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Every item, live or stale, oldest first.
    pub fn items(&self) -> impl Iterator<Item = &(u64, K)> {
        self.items.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
}

#[derive(Debug)]
struct Slot<V> {
    value: V,
    expires: Option<Instant>,
    seq: u64,
}

#[derive(Debug)]
pub struct Expiring<K, V> {
    map: Map<K, Slot<V>>,
    order: Order<K>,
    cap: usize,
    /// No entry expires before this (`None`: none expires): the next
    /// expiry, or earlier if the entry that was due was removed or renewed
    /// since. Kept on insert, set exactly by each sweep.
    sweep_at: Option<Instant>,
    /// Entries dropped to make room for new ones.
    pub evicted: u64,
    /// Entries removed by [`Expiring::sweep`] or found expired.
    pub expired: u64,
}

/// The earlier of two times, where `None` is never.
pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Whether `seq` is the stamp of `k`'s entry in `map`.
fn current<K: Hash + Eq, V>(map: &Map<K, Slot<V>>, seq: u64, k: &K) -> bool {
    map.get(k).is_some_and(|s| s.seq == seq)
}

impl<K: Hash + Eq + Clone, V> Expiring<K, V> {
    pub fn new(cap: usize) -> Self {
        Expiring {
            map: Map::default(),
            order: Order::default(),
            cap: cap.max(1),
            sweep_at: None,
            evicted: 0,
            expired: 0,
        }
    }

    /// When a sweep may have something to remove (`None`: never, until an
    /// entry with a lifetime comes): the engine sleeps until then.
    pub fn sweep_due(&self) -> Option<Instant> {
        self.sweep_at
    }

    fn due_by(&mut self, expires: Option<Instant>) {
        self.sweep_at = earliest(self.sweep_at, expires);
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The entry, whether or not it has expired.
    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k).map(|s| &s.value)
    }

    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.map.get_mut(k).map(|s| &mut s.value)
    }

    /// The entry if it is still alive at `now`; an expired one is removed.
    pub fn get_live(&mut self, k: &K, now: Instant) -> Option<&V> {
        let expired = self
            .map
            .get(k)
            .is_some_and(|s| s.expires.is_some_and(|e| now >= e));
        if expired {
            self.map.remove(k);
            self.expired += 1;
            return None;
        }
        self.map.get(k).map(|s| &s.value)
    }

    pub fn contains(&self, k: &K) -> bool {
        self.map.contains_key(k)
    }

    pub fn expires(&self, k: &K) -> Option<Option<Instant>> {
        self.map.get(k).map(|s| s.expires)
    }

    /// Inserts or replaces `k`, which moves to the back of the order. A
    /// full table first drops its oldest entry, which is returned.
    pub fn insert(&mut self, k: K, value: V, expires: Option<Instant>) -> Option<K> {
        let mut dropped = None;
        if !self.map.contains_key(&k) && self.map.len() >= self.cap {
            dropped = self.remove_oldest().map(|(old, _)| old);
            if dropped.is_some() {
                self.evicted += 1;
            }
        }
        let seq = self.order.stamp(k.clone());
        self.map.insert(
            k,
            Slot {
                value,
                expires,
                seq,
            },
        );
        self.due_by(expires);
        self.compact();
        dropped
    }

    /// Gives `k` a new lifetime, as if inserted again.
    pub fn refresh(&mut self, k: &K, expires: Option<Instant>) {
        if self.map.contains_key(k) {
            let seq = self.order.stamp(k.clone());
            if let Some(s) = self.map.get_mut(k) {
                s.expires = expires;
                s.seq = seq;
            }
            self.due_by(expires);
            self.compact();
        }
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        // Its place in the order is skipped when it reaches the front.
        self.map.remove(k).map(|s| s.value)
    }

    /// Removes every entry that expired by `now`, handing each to `gone`.
    pub fn sweep(&mut self, now: Instant, mut gone: impl FnMut(K, V)) {
        while self.next_expiry().is_some_and(|e| now >= e) {
            let Some((k, v)) = self.remove_oldest() else {
                break;
            };
            self.expired += 1;
            gone(k, v);
        }
        self.sweep_at = self.next_expiry();
    }

    /// When the oldest live entry expires (for the sweep's timer).
    pub fn next_expiry(&mut self) -> Option<Instant> {
        let map = &self.map;
        let k = self.order.oldest(|seq, k| current(map, seq, k))?;
        self.map.get(k).and_then(|s| s.expires)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.map.iter().map(|(k, s)| (k, &s.value))
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.map.retain(|k, s| keep(k, &mut s.value));
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.sweep_at = None;
    }

    fn remove_oldest(&mut self) -> Option<(K, V)> {
        let map = &self.map;
        let k = self.order.pop_oldest(|seq, k| current(map, seq, k))?;
        let s = self.map.remove(&k)?;
        Some((k, s.value))
    }

    fn compact(&mut self) {
        let map = &self.map;
        self.order.compact(map.len(), |seq, k| current(map, seq, k));
    }
}

/// A table of marks: keys that count as seen until their mark expires,
/// for rules of the kind "once per period per key".
impl<K: Hash + Eq + Clone> Expiring<K, ()> {
    /// Whether `k` is unmarked at `now` (never marked, or its mark
    /// expired); if so, it is marked until `until`.
    pub fn mark(&mut self, k: K, now: Instant, until: Instant) -> bool {
        self.mark_with(k, (), now, until)
    }
}

impl<K: Hash + Eq + Clone, V> Expiring<K, V> {
    /// [`Expiring::mark`], the mark carrying `v`: kept as the first one
    /// left it until it expires.
    pub fn mark_with(&mut self, k: K, v: V, now: Instant, until: Instant) -> bool {
        if self.get_live(&k, now).is_some() {
            return false;
        }
        self.insert(k, v, Some(until));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_full_table_drops_its_oldest_entry() {
        let mut t: Expiring<u32, &str> = Expiring::new(2);
        assert_eq!(t.insert(1, "a", None), None);
        assert_eq!(t.insert(2, "b", None), None);
        assert_eq!(t.insert(1, "a2", None), None, "a replacement needs no room");
        assert_eq!(
            t.insert(3, "c", None),
            Some(2),
            "1 was renewed, 2 is oldest"
        );
        assert_eq!((t.len(), t.evicted), (2, 1));
        assert_eq!(t.get(&1), Some(&"a2"));
    }

    #[test]
    fn a_mark_holds_until_it_expires() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut t: Expiring<u32, ()> = Expiring::new(4);
        assert!(t.mark(7, t0, t0 + s), "first time");
        assert!(!t.mark(7, t0 + s / 2, t0 + s * 2), "marked");
        assert!(t.mark(8, t0, t0 + s), "each key its own");
        assert!(t.mark(7, t0 + s, t0 + s * 3), "expired: marked again");
        assert!(!t.mark(7, t0 + s * 2, t0 + s * 4), "until the new expiry");
    }

    #[test]
    fn the_sweep_removes_what_expired_and_only_that() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut t: Expiring<u32, u32> = Expiring::new(100);
        for i in 0..10 {
            t.insert(i, i, Some(t0 + s * i));
        }
        t.refresh(&0, Some(t0 + s * 20));
        t.remove(&5);
        let mut gone = Vec::new();
        t.sweep(t0 + s * 7, |k, _| gone.push(k));
        assert_eq!(gone, [1, 2, 3, 4, 6, 7], "0 was renewed, 5 removed");
        assert_eq!(t.next_expiry(), Some(t0 + s * 8));
        assert_eq!(t.sweep_due(), Some(t0 + s * 8), "set by the sweep");
        assert_eq!(t.expired, 6);
        t.insert(20, 20, Some(t0 + s * 7));
        assert_eq!(t.sweep_due(), Some(t0 + s * 7), "an entry due sooner");
        assert!(t.get_live(&8, t0 + s * 9).is_none(), "expired on sight too");
    }

    #[test]
    fn the_order_stays_bounded_under_endless_renewal() {
        let mut t: Expiring<u32, ()> = Expiring::new(10);
        for i in 0..100_000u32 {
            t.insert(i % 5, (), None);
        }
        assert!(t.order.len() <= 2 * t.len() + 65, "{}", t.order.len());
    }
}
