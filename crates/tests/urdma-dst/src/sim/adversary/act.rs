//! The adversary's seeded actions: every message type and flag, from any
//! source, with any GID and the names and transaction ids it heard.

use super::forge::{announce, query, reply};
use super::{later, own_gid, Adversary, Attack};
use crate::sim::{Sim, MS};
use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::discovery::wire::{Message, Query};
use std::net::{IpAddr, SocketAddr};

impl Adversary {
    /// One action, drawn.
    pub(super) fn tick(&mut self, sim: &mut Sim) {
        match self.pick.below(12) {
            0 => self.lookup(sim, None),
            1 => {
                if let Some(h) = self.pick.victim(&self.heard) {
                    self.lookup(sim, Some(IpAddr::V4(h.ip)));
                }
            }
            2 => {
                let src = self.pick.source(&self.heard);
                let gid = match self.heard.last_newcomer() {
                    Some(g) if self.pick.chance(0.5) => g,
                    _ => self.pick.gid(&self.heard),
                };
                self.start_query(sim, src, gid);
            }
            3 => self.late_reply(sim),
            4 | 5 => self.announcement(sim, None, false),
            6 => {
                let to = self.pick.victim(&self.heard).map(|h| IpAddr::V4(h.ip));
                if to.is_some() {
                    self.announcement(sim, to, false);
                }
            }
            7 => self.renewal(sim),
            8 => self.announcement(sim, None, true),
            9 => {
                for _ in 0..5 + self.pick.below(10) {
                    let withdrawn = self.pick.chance(0.5);
                    self.announcement(sim, None, withdrawn);
                }
            }
            _ => {
                // A claim of a name a group query it heard asks for.
                if let Some(a) = self.heard.recent(sim.now, 3_000 * MS).cloned() {
                    self.claim(sim, a.from, &a.query);
                }
            }
        }
    }

    /// A query, to the groups (now and then a start query) or to the
    /// honest host `to`.
    fn lookup(&mut self, sim: &mut Sim, to: Option<IpAddr>) {
        let src = self.pick.source(&self.heard);
        let target = self.pick.target(&self.heard);
        let txid = self.pick.txid(&self.heard);
        let (gid, addrs) = self.pick.sender(&self.heard, src);
        if let Some(q) = self
            .forge
            .record(gid, &addrs)
            .and_then(|r| query(txid, &target, r))
        {
            self.emit(sim, src, to, &q);
        }
    }

    /// A start query from `src` of the endpoint `gid`: a group query for
    /// a name its record lists, with `src`.
    fn start_query(&mut self, sim: &mut Sim, src: IpAddr, gid: Gid) {
        let name = self.pick.name(&self.heard);
        let txid = self.pick.txid(&self.heard);
        let record = self.forge.record(gid, &[Address::from(src), name.clone()]);
        if let Some(q) = record.and_then(|r| query(txid, &name, r)) {
            self.emit(sim, src, None, &q);
        }
    }

    /// A reply to a query it heard, late or never asked: FOUND or
    /// REFUSED, from its address, a V address or the host asked.
    fn late_reply(&mut self, sim: &mut Sim) {
        let Some(asked) = self.pick.asked(&self.heard) else {
            return;
        };
        let src = self.pick.source(&self.heard);
        let target = asked.query.target().address().clone();
        let gid = self.pick.gid(&self.heard);
        let found = match self.pick.chance(0.7) {
            true => self
                .forge
                .record(gid, &[Address::from(src), target.clone()]),
            false => None,
        };
        let txid = match self.pick.chance(0.8) {
            true => asked.query.txid(),
            false => self.pick.txid(&self.heard),
        };
        if let Some(r) = reply(txid, &target, found) {
            let after = self.pick.below(3_000) * MS;
            later(sim, after, src, Some(asked.from.ip()), r);
        }
    }

    /// An announcement of names at a source, to the groups or to `to`
    /// alone, withdrawn or not; kept for renewals.
    fn announcement(&mut self, sim: &mut Sim, to: Option<IpAddr>, withdrawn: bool) {
        let src = self.pick.source(&self.heard);
        let gid = self.pick.gid(&self.heard);
        let names: Vec<Address> = (0..1 + self.pick.below(4))
            .map(|_| self.pick.name(&self.heard))
            .collect();
        let Some(a) = announce(self.forge.records(gid, src, &names), withdrawn) else {
            return;
        };
        if self.emit(sim, src, to, &a) && !withdrawn && to.is_none() {
            self.announced.keep(src, a);
        }
    }

    /// One of its announcements again, unchanged.
    fn renewal(&mut self, sim: &mut Sim) {
        let n = self.announced.count();
        if n > 0 {
            let (src, a) = self.announced.get(self.pick.below(n)).clone();
            self.emit(sim, src, None, &a);
        }
    }

    /// Claims what `q`, from `asker`, asks for, if it is a name of a host
    /// it may name: FOUND from its own address or a V address.
    pub(super) fn claim(&mut self, sim: &mut Sim, asker: SocketAddr, q: &Query) {
        let target = q.target().address().clone();
        if !self.heard.may_name(&target) {
            return;
        }
        let at = self.pick.own_or_v();
        let record = self
            .forge
            .record(own_gid(), &[Address::from(at), target.clone()]);
        let Some(r) = reply(q.txid(), &target, record) else {
            return;
        };
        if self.emit(sim, at, Some(asker.ip()), &r) && self.runs(Attack::SlowClaims) {
            self.slow.owe(asker.ip(), target);
        }
    }

    /// Announcements of `names` at `src` by `gid`, to the groups.
    pub(super) fn announce_names(
        &mut self,
        sim: &mut Sim,
        src: IpAddr,
        gid: Gid,
        names: &[Address],
        withdrawn: bool,
    ) {
        for chunk in names.chunks(15) {
            if let Some(a) = announce(self.forge.records(gid, src, chunk), withdrawn) {
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
