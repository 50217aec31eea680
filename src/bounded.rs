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

#[derive(Debug)]
struct Slot<V> {
    value: V,
    expires: Option<Instant>,
    seq: u64,
}

#[derive(Debug)]
pub struct Expiring<K, V> {
    map: Map<K, Slot<V>>,
    order: VecDeque<(u64, K)>,
    next_seq: u64,
    cap: usize,
    /// Entries dropped to make room for new ones.
    pub evicted: u64,
    /// Entries removed by [`Expiring::sweep`] or found expired.
    pub expired: u64,
}

impl<K: Hash + Eq + Clone, V> Expiring<K, V> {
    pub fn new(cap: usize) -> Self {
        Expiring {
            map: Map::default(),
            order: VecDeque::new(),
            next_seq: 0,
            cap: cap.max(1),
            evicted: 0,
            expired: 0,
        }
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
            dropped = self.pop_oldest();
            if dropped.is_some() {
                self.evicted += 1;
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.map.insert(
            k.clone(),
            Slot {
                value,
                expires,
                seq,
            },
        );
        self.order.push_back((seq, k));
        self.compact();
        dropped
    }

    /// Gives `k` a new lifetime, as if inserted again.
    pub fn refresh(&mut self, k: &K, expires: Option<Instant>) {
        let seq = self.next_seq;
        if let Some(s) = self.map.get_mut(k) {
            s.expires = expires;
            s.seq = seq;
            self.next_seq += 1;
            self.order.push_back((seq, k.clone()));
            self.compact();
        }
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        // Its place in the order is skipped when it reaches the front.
        self.map.remove(k).map(|s| s.value)
    }

    /// Removes every entry that expired by `now`, handing each to `gone`.
    pub fn sweep(&mut self, now: Instant, mut gone: impl FnMut(K, V)) {
        while let Some((seq, k)) = self.order.front() {
            match self.map.get(k) {
                Some(s) if s.seq == *seq => {
                    if s.expires.is_none_or(|e| now < e) {
                        break;
                    }
                    let (_, k) = self.order.pop_front().expect("front exists");
                    if let Some(s) = self.map.remove(&k) {
                        self.expired += 1;
                        gone(k, s.value);
                    }
                }
                // Replaced or removed since: not its place any more.
                _ => {
                    self.order.pop_front();
                }
            }
        }
    }

    /// When the oldest live entry expires (for the sweep's timer).
    pub fn next_expiry(&mut self) -> Option<Instant> {
        while let Some((seq, k)) = self.order.front() {
            match self.map.get(k) {
                Some(s) if s.seq == *seq => return s.expires,
                _ => {
                    self.order.pop_front();
                }
            }
        }
        None
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
    }

    fn pop_oldest(&mut self) -> Option<K> {
        while let Some((seq, k)) = self.order.pop_front() {
            if self.map.get(&k).is_some_and(|s| s.seq == seq) {
                self.map.remove(&k);
                return Some(k);
            }
        }
        None
    }

    /// Replaced and removed entries leave their old places in the order;
    /// when those outnumber the live ones, the order is rebuilt, so it never
    /// holds more than about twice the table.
    fn compact(&mut self) {
        if self.order.len() <= 2 * self.map.len() + 64 {
            return;
        }
        let map = &self.map;
        self.order
            .retain(|(seq, k)| map.get(k).is_some_and(|s| s.seq == *seq));
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
        assert_eq!(t.expired, 6);
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
