//! What the adversary does on what it hears: it remembers the hosts, names,
//! GIDs and transaction ids, and answers at once when that pays: a forged
//! welcome to a host that just started, a claim of a name a lookup asks
//! the groups for, and the confirmation of its claims (slowly, to stretch
//! the asker's try timer).

use super::forge::{announce, reply};
use super::{later, own_gid, Adversary, Attack};
use crate::sim::{Sim, MS};
use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::{EndpointRecord, Message, Query};
use std::net::{IpAddr, SocketAddr};

impl Adversary {
    /// A datagram reached it, on a group or sent to one of its addresses.
    pub(super) fn hear(
        &mut self,
        sim: &mut Sim,
        from: SocketAddr,
        to: Option<IpAddr>,
        bytes: &[u8],
    ) {
        if self.trace {
            let m: String = format!("{:?}", Message::decode(bytes))
                .chars()
                .take(250)
                .collect();
            eprintln!(
                "{} us: adversary hears from {from} to {to:?}: {m}",
                sim.now / 1000
            );
        }
        match (Message::decode(bytes), to) {
            (Ok(Message::Query(q)), None) => self.group_query_heard(sim, from, q),
            (Ok(Message::Query(q)), Some(to)) => self.asked(sim, from, to, &q),
            (Ok(Message::Announce(a)), _) if !a.withdrawn() => {
                for r in a.records() {
                    self.note(from, r);
                }
            }
            _ => {}
        }
    }

    /// Learns from `record`, heard from `from`: the look of its forged
    /// records, and the host behind it.
    fn note(&mut self, from: SocketAddr, record: &EndpointRecord) {
        if from.is_ipv4() {
            self.forge.learn(record);
        }
        self.heard.note(from, record);
    }

    /// A query on the groups: a host that just started (a start query),
    /// or a lookup in flight.
    fn group_query_heard(&mut self, sim: &mut Sim, from: SocketAddr, q: Query) {
        self.note(from, q.sender());
        let start = q.sender().addresses().contains(q.target());
        if !start {
            if self.runs(Attack::SlowClaims) || self.pick.chance(0.3) {
                self.claim(sim, from, &q);
            }
            self.heard.asked(sim.now, from, q);
            return;
        }
        self.heard.newcomer(q.sender().gid());
        if self.runs(Attack::ForgedWelcome) {
            self.forged_welcome(sim, from, &q);
        }
        if self.runs(Attack::StartFlood) && self.pick.chance(0.3) {
            self.start_flood(sim, q.sender().gid(), 25, 40 * MS);
        }
    }

    /// At once, to a host that just started, an announcement from its own
    /// address (or a V address) listing that address and other hosts'
    /// names: taken as a welcome, it would send their lookups there.
    fn forged_welcome(&mut self, sim: &mut Sim, newcomer: SocketAddr, q: &Query) {
        let at = self.pick.own_or_v();
        let names = self.heard.names_besides(q.sender().addresses(), 15);
        if names.is_empty() {
            return;
        }
        let records = self.forge.records(own_gid(), at, &names);
        let a = announce(records, false);
        self.send_now(sim, at, Some(newcomer.ip()), a);
    }

    /// A query sent to `to`, one of its addresses: a claim's
    /// confirmation, a lookup its forged hints sent there, a check. A name
    /// it may name or the address itself is confirmed FOUND from there
    /// (slowly, for a claim it stretches), else REFUSED, or nothing.
    fn asked(&mut self, sim: &mut Sim, from: SocketAddr, to: IpAddr, q: &Query) {
        self.heard.asked(sim.now, from, q.clone());
        let target = q.target().address().clone();
        if target != Address::from(to) && !self.heard.may_name(&target) {
            if self.pick.chance(0.5) {
                let r = reply(q.txid(), &target, None);
                self.send_now(sim, to, Some(from.ip()), r);
            }
            return;
        }
        let record = self
            .forge
            .record(own_gid(), &[Address::from(to), target.clone()]);
        let Some(r) = reply(q.txid(), &target, record) else {
            return;
        };
        match self.slow.settle(from.ip(), &target) {
            true => {
                // 3 to 3.4 s after the first try: while the claim's probe
                // still waits, so that the reply counts as a sample.
                let after = (3_000 + self.pick.below(400)) * MS;
                later(sim, after, to, Some(from.ip()), r);
            }
            false if self.pick.chance(0.1) => {}
            false => self.send_now(sim, to, Some(from.ip()), Some(r)),
        }
    }
}
