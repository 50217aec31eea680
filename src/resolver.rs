//! What the provider knows about remote hosts beyond the hosts file, and the
//! lookups it has in flight: bindings learned through discovery, recently
//! failed destinations, and the requests waiting for each lookup.
//!
//! Plain data with explicit time, so the engine's asynchronous behaviour is
//! unit-testable without sockets or threads.

use crate::addr::{Address, Gid};
use crate::engine::Id;
use crate::fastmap::Map;
use crate::msg::MsgBuf;
use crate::wire::EndpointRecord;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::num::NonZeroU64;
use std::time::Instant;

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
    pub expires: Option<Instant>,
}

impl Learned {
    pub fn from_record(r: &EndpointRecord, expires: Option<Instant>) -> Learned {
        Learned {
            gid: r.gid(),
            lid: r.lid(),
            mtu: Some(r.mtu()),
            rate: Some(r.rate()),
            partitions: r.pkeys().iter().map(|p| p & 0x7fff).collect(),
            expires,
        }
    }

    pub fn derived(gid: Gid, expires: Option<Instant>) -> Learned {
        Learned {
            gid,
            lid: 0,
            mtu: None,
            rate: None,
            partitions: Vec::new(),
            expires,
        }
    }

    pub fn in_partition(&self, pkey: u16) -> bool {
        self.partitions.is_empty() || self.partitions.contains(&(pkey & 0x7fff))
    }
}

/// A request waiting for a lookup.
#[derive(Clone, Debug)]
pub struct Waiter {
    pub endpoint: Id,
    /// The daemon's request id (0 is the kernel).
    pub id: u64,
    pub request: MsgBuf,
    pub echo_source: Option<usize>,
}

/// Where a lookup is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Asking by discovery; `tries` sends so far.
    Discover { tries: u32 },
    /// Trying the derivation at this index of the configured list.
    Derive(usize),
}

#[derive(Debug)]
pub struct Lookup {
    pub txid: NonZeroU64,
    pub stage: Stage,
    pub deadline: Instant,
    /// The endpoint whose record the query carries.
    pub endpoint: Id,
    pub waiters: Vec<Waiter>,
    /// The status to fail with if no later stage succeeds.
    pub failure: u8,
}

/// A neighbour-table lookup the worker thread must make (netlink is not
/// for the daemon's event loop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourJob {
    pub dest: Address,
    pub ip: IpAddr,
    /// A datagram went to the address to make the kernel resolve it.
    pub poked: bool,
}

#[derive(Default)]
pub struct Resolver {
    pub learned: Map<Address, Learned>,
    /// Destinations whose last lookup failed: (status, until).
    pub failed: Map<Address, (u8, Instant)>,
    pub lookups: Map<Address, Lookup>,
    pub by_txid: Map<NonZeroU64, Address>,
    pub neighbour_jobs: Vec<NeighbourJob>,
    txid_key: RandomState,
    txid_counter: u64,
}

impl Resolver {
    /// Transaction ids are what keeps an off-path host from forging replies,
    /// so they must not be guessable: a keyed hash (SipHash with a random
    /// key) of a counter.
    pub fn new_txid(&mut self) -> NonZeroU64 {
        loop {
            self.txid_counter += 1;
            if let Some(t) = NonZeroU64::new(self.txid_key.hash_one(self.txid_counter)) {
                if !self.by_txid.contains_key(&t) {
                    return t;
                }
            }
        }
    }

    /// A live learned binding.
    pub fn learned(&mut self, a: &Address, now: Instant) -> Option<&Learned> {
        if self
            .learned
            .get(a)
            .is_some_and(|l| l.expires.is_some_and(|e| now >= e))
        {
            self.learned.remove(a);
        }
        self.learned.get(a)
    }

    /// A remembered failure still in force.
    pub fn failure(&mut self, a: &Address, now: Instant) -> Option<u8> {
        match self.failed.get(a) {
            Some(&(status, until)) if now < until => Some(status),
            Some(_) => {
                self.failed.remove(a);
                None
            }
            None => None,
        }
    }

    pub fn remove_lookup(&mut self, dest: &Address) -> Option<Lookup> {
        let l = self.lookups.remove(dest)?;
        self.by_txid.remove(&l.txid);
        Some(l)
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.lookups.values().map(|l| l.deadline).min()
    }

    /// Forgets every binding to `gid` (a withdrawn or replaced endpoint).
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn txids_are_unique_and_not_sequential() {
        let mut r = Resolver::default();
        let a = r.new_txid();
        let b = r.new_txid();
        assert_ne!(a, b);
        assert_ne!(b.get().wrapping_sub(a.get()), 1);
    }

    #[test]
    fn bindings_and_failures_expire() {
        let mut r = Resolver::default();
        let now = Instant::now();
        let a = Address::name("node2").unwrap();
        r.learned.insert(
            a.clone(),
            Learned::derived(Gid([1; 16]), Some(now + Duration::from_secs(1))),
        );
        assert!(r.learned(&a, now).is_some());
        assert!(r.learned(&a, now + Duration::from_secs(2)).is_none());
        r.failed
            .insert(a.clone(), (6, now + Duration::from_millis(10)));
        assert_eq!(r.failure(&a, now), Some(6));
        assert_eq!(r.failure(&a, now + Duration::from_millis(10)), None);
    }

    #[test]
    fn partitions_ignore_the_membership_bit() {
        let mut l = Learned::derived(Gid([1; 16]), None);
        assert!(l.in_partition(0x8001), "unknown partitions do not exclude");
        l.partitions = vec![0x7fff];
        assert!(l.in_partition(0xffff));
        assert!(!l.in_partition(0x8001));
    }
}
