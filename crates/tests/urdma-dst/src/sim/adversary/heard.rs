//! The adversary's memory of what it heard: the honest hosts it may name
//! (address, GID, names), the queries in flight and the hosts that just
//! started. Bounded, so that a long run does not make it slower; the
//! hosts it spares are never kept, so it never names them.

use super::{answers_for, remember};
use crate::net::Rng;
use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::discovery::wire::{EndpointRecord, Query, WireAddress};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// An honest host it heard and may name.
#[derive(Clone)]
pub(super) struct Host {
    pub(super) ip: Ipv4Addr,
    pub(super) gid: Gid,
    pub(super) names: Vec<Address>,
}

/// A query it heard: when, and from whom.
#[derive(Clone, PartialEq)]
pub(super) struct Asked {
    pub(super) at: u64,
    pub(super) from: SocketAddr,
    pub(super) query: Query,
}

/// The honest hosts it leaves alone: a third of them, by their address,
/// drawn from the seed.
#[derive(Clone, Copy)]
struct Spared {
    seed: u64,
}

impl Spared {
    fn contains(self, ip: Ipv4Addr) -> bool {
        let mut r = Rng::new(self.seed ^ u64::from(u32::from(ip)).wrapping_mul(0x9e37_79b9));
        r.below(3) == 0
    }
}

/// What it heard, newest last.
pub(super) struct Heard {
    spared: Spared,
    hosts: Vec<Host>,
    queries: VecDeque<Asked>,
    /// GIDs of hosts that just started (their start queries).
    newcomers: VecDeque<Gid>,
}

impl Heard {
    /// Nothing heard yet, by the adversary of `seed`.
    pub(super) fn new(seed: u64) -> Self {
        Heard {
            spared: Spared { seed },
            hosts: Vec::new(),
            queries: VecDeque::new(),
            newcomers: VecDeque::new(),
        }
    }

    /// Whether it leaves the honest host at `ip` alone.
    pub(super) fn spares(&self, ip: Ipv4Addr) -> bool {
        self.spared.contains(ip)
    }

    /// Remembers the host behind `record`, heard from `from`, if the record
    /// lists that address and it may name the host.
    pub(super) fn note(&mut self, from: SocketAddr, record: &EndpointRecord) {
        let IpAddr::V4(ip) = from.ip() else {
            return;
        };
        let lists = record
            .addresses()
            .iter()
            .any(|w| *w.address() == Address::Ip4(ip));
        if !lists || self.spares(ip) || answers_for(from.ip()) {
            return;
        }
        let names: Vec<Address> = record
            .addresses()
            .iter()
            .map(|w| w.address().clone())
            .filter(|a| matches!(a, Address::Name(_)))
            .collect();
        match self.hosts.iter_mut().find(|h| h.ip == ip) {
            Some(h) => {
                h.gid = record.gid();
                for n in names {
                    if !h.names.contains(&n) {
                        h.names.push(n);
                    }
                }
            }
            None => self.hosts.push(Host {
                ip,
                gid: record.gid(),
                names,
            }),
        }
    }

    /// A query heard at `at` from `from`.
    pub(super) fn asked(&mut self, at: u64, from: SocketAddr, query: Query) {
        remember(&mut self.queries, Asked { at, from, query });
    }

    /// The endpoint `gid` just started.
    pub(super) fn newcomer(&mut self, gid: Gid) {
        remember(&mut self.newcomers, gid);
    }

    /// The endpoint that started last.
    pub(super) fn last_newcomer(&self) -> Option<Gid> {
        self.newcomers.back().copied()
    }

    /// How many hosts it may name.
    pub(super) fn hosts(&self) -> u64 {
        self.hosts.len() as u64
    }

    /// The `i`-th host it may name.
    pub(super) fn host(&self, i: u64) -> &Host {
        &self.hosts[i as usize]
    }

    /// How many queries it remembers.
    pub(super) fn queries(&self) -> u64 {
        self.queries.len() as u64
    }

    /// The `i`-th query it remembers.
    pub(super) fn query(&self, i: u64) -> &Asked {
        &self.queries[i as usize]
    }

    /// The newest query heard less than `within` ns before `now`.
    pub(super) fn recent(&self, now: u64, within: u64) -> Option<&Asked> {
        self.queries
            .iter()
            .rev()
            .find(|q| now.saturating_sub(q.at) < within)
    }

    /// Up to `most` names of the hosts it may name, but those in `own`.
    pub(super) fn names_besides(&self, own: &[WireAddress], most: usize) -> Vec<Address> {
        self.hosts
            .iter()
            .flat_map(|h| h.names.iter())
            .filter(|n| !own.iter().any(|w| w.address() == *n))
            .take(most)
            .cloned()
            .collect()
    }

    /// Whether `a` is a name of a host it heard and may name (or one of
    /// its fresh ones).
    pub(super) fn may_name(&self, a: &Address) -> bool {
        match a {
            Address::Name(n) if n.starts_with("zz") => true,
            Address::Name(_) => self.hosts.iter().any(|h| h.names.contains(a)),
            _ => false,
        }
    }
}
