//! The adversary's draws: which action it takes, and what it puts in what
//! it sends (sources, GIDs, names, transaction ids), drawn from what it
//! heard or made fresh. One seeded stream: a run replays exactly.

use super::heard::{Asked, Heard, Host};
use super::{own_gid, v_ip, OWN_IP, VS};
use crate::net::Rng;
use ibacm_urdma::addr::{Address, Gid};
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU64;

pub(super) struct Picker {
    rng: Rng,
    /// Fresh names and GIDs made so far.
    fresh: u32,
}

impl Picker {
    /// The draws of the adversary of `seed`.
    pub(super) fn new(seed: u64) -> Self {
        Picker {
            rng: Rng::new(seed ^ 0xad7e_25a2_0000_0001),
            fresh: 0,
        }
    }

    /// A number below `n`.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    /// True with probability `p`.
    pub(super) fn chance(&mut self, p: f64) -> bool {
        self.rng.chance(p)
    }

    /// A fresh name, held by nobody.
    pub(super) fn fresh_name(&mut self) -> Address {
        self.fresh += 1;
        Address::name(&format!("zz{}", self.fresh)).expect("a name")
    }

    /// A fresh GID, held by nobody.
    pub(super) fn fresh_gid(&mut self) -> Gid {
        self.fresh += 1;
        let mut g = own_gid().0;
        g[12..16].copy_from_slice(&self.fresh.to_be_bytes());
        Gid(g)
    }

    /// A V address.
    pub(super) fn v(&mut self) -> Ipv4Addr {
        v_ip(self.rng.below(VS as u64) as usize)
    }

    /// Where a claim or a welcome says the name is: its own address or a
    /// V address.
    pub(super) fn own_or_v(&mut self) -> IpAddr {
        match self.rng.chance(0.5) {
            true => IpAddr::V4(OWN_IP),
            false => IpAddr::V4(self.v()),
        }
    }

    /// An honest host it heard and may name.
    pub(super) fn victim(&mut self, heard: &Heard) -> Option<Host> {
        let n = heard.hosts();
        (n > 0).then(|| heard.host(self.rng.below(n)).clone())
    }

    /// A query it heard.
    pub(super) fn asked(&mut self, heard: &Heard) -> Option<Asked> {
        let n = heard.queries();
        (n > 0).then(|| heard.query(self.rng.below(n)).clone())
    }

    /// Where a datagram claims to come from: its own address, a V
    /// address, or an honest host's.
    pub(super) fn source(&mut self, heard: &Heard) -> IpAddr {
        match self.rng.below(3) {
            0 => IpAddr::V4(OWN_IP),
            1 => match self.victim(heard) {
                Some(h) => IpAddr::V4(h.ip),
                None => IpAddr::V4(self.v()),
            },
            _ => IpAddr::V4(self.v()),
        }
    }

    /// A GID to put in a record: its own, an honest host's, or fresh.
    pub(super) fn gid(&mut self, heard: &Heard) -> Gid {
        match self.rng.below(3) {
            0 => own_gid(),
            1 => match self.victim(heard) {
                Some(h) => h.gid,
                None => self.fresh_gid(),
            },
            _ => self.fresh_gid(),
        }
    }

    /// A name to put in a message: one it heard, or a fresh one.
    pub(super) fn name(&mut self, heard: &Heard) -> Address {
        match self.victim(heard) {
            Some(h) if !h.names.is_empty() && self.rng.chance(0.7) => {
                h.names[self.rng.below(h.names.len() as u64) as usize].clone()
            }
            _ => self.fresh_name(),
        }
    }

    /// A transaction id: one it heard, or any.
    pub(super) fn txid(&mut self, heard: &Heard) -> NonZeroU64 {
        let n = heard.queries();
        if n > 0 && self.rng.chance(0.7) {
            return heard.query(self.rng.below(n)).query.txid();
        }
        NonZeroU64::new(self.rng.next_u64() | 1).expect("odd")
    }

    /// The address a query asks for: a name, an honest host's address, a
    /// V address or its own.
    pub(super) fn target(&mut self, heard: &Heard) -> Address {
        match self.rng.below(4) {
            0 => match self.victim(heard) {
                Some(h) => Address::Ip4(h.ip),
                None => self.name(heard),
            },
            1 => Address::Ip4(self.v()),
            2 => Address::Ip4(OWN_IP),
            _ => self.name(heard),
        }
    }

    /// The GID and addresses of a query's sender record, from `src`: it
    /// may list `src` or not.
    pub(super) fn sender(&mut self, heard: &Heard, src: IpAddr) -> (Gid, Vec<Address>) {
        let gid = self.gid(heard);
        let mut addrs = Vec::new();
        if self.rng.chance(0.7) {
            addrs.push(Address::from(src));
        }
        for _ in 0..self.rng.below(3) {
            addrs.push(self.name(heard));
        }
        if addrs.is_empty() {
            addrs.push(Address::Ip4(self.v()));
        }
        (gid, addrs)
    }
}
