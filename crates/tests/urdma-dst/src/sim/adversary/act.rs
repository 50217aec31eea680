//! The adversary's seeded actions: every message type and flag, from any
//! source, with any GID and the names and transaction ids it heard.

use super::forge::{announce, query, reply};
use super::{Adversary, OWN_IP};
use crate::sim::{Sim, MS};
use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::Message;
use std::net::IpAddr;

impl Adversary {
    /// One action, drawn.
    pub(super) fn tick(&mut self, sim: &mut Sim) {
        match self.rng.below(12) {
            0 => self.group_query(sim),
            1 => self.unicast_query(sim),
            2 => {
                let src = self.source();
                let gid = match self.heard.newcomers.back() {
                    Some(&g) if self.rng.chance(0.5) => g,
                    _ => self.gid(),
                };
                self.start_query(sim, src, gid);
            }
            3 => self.late_reply(sim),
            4 | 5 => self.announcement(sim, None, false),
            6 => {
                let to = self.victim().map(|(ip, ..)| IpAddr::V4(ip));
                if to.is_some() {
                    self.announcement(sim, to, false);
                }
            }
            7 => self.renewal(sim),
            8 => self.announcement(sim, None, true),
            9 => {
                for _ in 0..5 + self.rng.below(10) {
                    let withdrawn = self.rng.chance(0.5);
                    self.announcement(sim, None, withdrawn);
                }
            }
            _ => self.claim_heard(sim),
        }
    }

    /// The address a query asks for: a name, an honest host's address, a
    /// V address or its own.
    fn target(&mut self) -> Address {
        match self.rng.below(4) {
            0 => match self.victim() {
                Some((ip, ..)) => Address::Ip4(ip),
                None => self.name(),
            },
            1 => Address::Ip4(self.v()),
            2 => Address::Ip4(OWN_IP),
            _ => self.name(),
        }
    }

    /// A sender record for a query from `src`: it may list `src` or not.
    fn sender(&mut self, src: IpAddr) -> Option<ibacm_urdma::discovery::wire::EndpointRecord> {
        let gid = self.gid();
        let mut addrs = Vec::new();
        if self.rng.chance(0.7) {
            addrs.push(Address::from(src));
        }
        for _ in 0..self.rng.below(3) {
            addrs.push(self.name());
        }
        if addrs.is_empty() {
            addrs.push(Address::Ip4(self.v()));
        }
        self.record(gid, &addrs)
    }

    /// A query to the groups; now and then a start query.
    fn group_query(&mut self, sim: &mut Sim) {
        let src = self.source();
        let target = self.target();
        let txid = self.txid();
        if let Some(q) = self.sender(src).and_then(|r| query(txid, &target, r)) {
            self.emit(sim, src, None, &q);
        }
    }

    /// A query to one honest host.
    fn unicast_query(&mut self, sim: &mut Sim) {
        let Some((to, ..)) = self.victim() else {
            return;
        };
        let src = self.source();
        let target = self.target();
        let txid = self.txid();
        if let Some(q) = self.sender(src).and_then(|r| query(txid, &target, r)) {
            self.emit(sim, src, Some(IpAddr::V4(to)), &q);
        }
    }

    /// A start query from `src` of the endpoint `gid`: a group query for
    /// a name its record lists, with `src`.
    pub(super) fn start_query(&mut self, sim: &mut Sim, src: IpAddr, gid: ibacm_urdma::addr::Gid) {
        let name = self.name();
        let txid = self.txid();
        let record = self.record(gid, &[Address::from(src), name.clone()]);
        if let Some(q) = record.and_then(|r| query(txid, &name, r)) {
            self.emit(sim, src, None, &q);
        }
    }

    /// A reply to a query it heard, late or never asked: FOUND or
    /// REFUSED, from its address, a V address or the host asked.
    fn late_reply(&mut self, sim: &mut Sim) {
        let n = self.heard.queries.len() as u64;
        if n == 0 {
            return;
        }
        let (_, asker, q) = self.heard.queries[self.rng.below(n) as usize].clone();
        let src = self.source();
        let target = q.target().address().clone();
        let gid = self.gid();
        let found = match self.rng.chance(0.7) {
            true => self.record(gid, &[Address::from(src), target.clone()]),
            false => None,
        };
        let txid = match self.rng.chance(0.8) {
            true => q.txid(),
            false => self.txid(),
        };
        if let Some(r) = reply(txid, &target, found) {
            let after = self.rng.below(3_000) * MS;
            self.later(sim, after, src, Some(asker.ip()), r);
        }
    }

    /// An announcement of names at a source, to the groups or to `to`
    /// alone, withdrawn or not; kept for renewals.
    fn announcement(&mut self, sim: &mut Sim, to: Option<IpAddr>, withdrawn: bool) {
        let src = self.source();
        let gid = self.gid();
        let names: Vec<Address> = (0..1 + self.rng.below(4)).map(|_| self.name()).collect();
        let Some(a) = announce(self.records(gid, src, &names), withdrawn) else {
            return;
        };
        if self.emit(sim, src, to, &a) && !withdrawn && to.is_none() {
            if self.announced.len() >= super::MEMORY {
                self.announced.pop_front();
            }
            self.announced.push_back((src, a));
        }
    }

    /// One of its announcements again, unchanged.
    fn renewal(&mut self, sim: &mut Sim) {
        let n = self.announced.len() as u64;
        if n > 0 {
            let (src, a) = self.announced[self.rng.below(n) as usize].clone();
            self.emit(sim, src, None, &a);
        }
    }

    /// A claim of a name a group query it heard asks for: FOUND from its
    /// address or a V address, sent to the asker.
    fn claim_heard(&mut self, sim: &mut Sim) {
        let recent: Vec<_> = self
            .heard
            .queries
            .iter()
            .filter(|(at, ..)| sim.now.saturating_sub(*at) < 3_000 * MS)
            .cloned()
            .collect();
        if let Some((_, asker, q)) = recent.last() {
            self.claim(sim, *asker, q);
        }
    }

    /// Claims what `q`, from `asker`, asks for, if it is a name of a host
    /// it may name: FOUND from its own address or a V address.
    pub(super) fn claim(
        &mut self,
        sim: &mut Sim,
        asker: std::net::SocketAddr,
        q: &ibacm_urdma::discovery::wire::Query,
    ) {
        let target = q.target().address().clone();
        if !self.may_name(&target) {
            return;
        }
        let at = match self.rng.chance(0.5) {
            true => IpAddr::V4(OWN_IP),
            false => IpAddr::V4(self.v()),
        };
        let record = self.record(super::own_gid(), &[Address::from(at), target.clone()]);
        let Some(r) = reply(q.txid(), &target, record) else {
            return;
        };
        if self.emit(sim, at, Some(asker.ip()), &r) && self.runs(super::Attack::SlowClaims) {
            super::remember(&mut self.slow, (asker.ip(), target));
        }
    }

    /// Whether `a` is a name of a host it heard and may name (or one of
    /// its fresh ones).
    pub(super) fn may_name(&self, a: &Address) -> bool {
        match a {
            Address::Name(n) if n.starts_with("zz") => true,
            Address::Name(_) => self
                .heard
                .hosts
                .iter()
                .any(|(_, _, names)| names.contains(a)),
            _ => false,
        }
    }

    /// Announcements of `names` at `src` by `gid`, to the groups.
    pub(super) fn announce_names(
        &mut self,
        sim: &mut Sim,
        src: IpAddr,
        gid: ibacm_urdma::addr::Gid,
        names: &[Address],
        withdrawn: bool,
    ) {
        for chunk in names.chunks(15) {
            if let Some(a) = announce(self.records(gid, src, chunk), withdrawn) {
                self.emit(sim, src, None, &a);
            }
        }
    }

    /// Sends `m` from `src` to `to` now.
    pub(super) fn send_now(
        &mut self,
        sim: &mut Sim,
        src: IpAddr,
        to: Option<IpAddr>,
        m: Option<Message>,
    ) {
        if let Some(m) = m {
            self.emit(sim, src, to, &m);
        }
    }
}
