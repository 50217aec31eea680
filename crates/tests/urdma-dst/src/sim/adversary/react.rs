//! What the adversary does on what it hears: it remembers the hosts, names,
//! GIDs and transaction ids, and answers at once when that pays: a forged
//! welcome to a host that just started, a claim of a name a lookup asks
//! the groups for, and the confirmation of its claims (slowly, to stretch
//! the asker's try timer).

use super::forge::reply;
use super::{remember, Adversary, Attack, OWN_IP};
use crate::sim::{Sim, MS};
use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::{Announce, EndpointRecord, Message, Query};
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
            (Ok(Message::Announce(a)), _) => self.announcement_heard(from, &a),
            _ => {}
        }
    }

    /// Remembers the host behind `record`, heard from `from`, unless it
    /// spares it.
    fn note(&mut self, from: SocketAddr, record: &EndpointRecord) {
        let IpAddr::V4(ip) = from.ip() else {
            return;
        };
        if self.heard.template.is_none() {
            self.heard.template = Some(record.clone());
        }
        let lists = record
            .addresses()
            .iter()
            .any(|w| *w.address() == Address::Ip4(ip));
        if !lists || self.spares(ip) || super::answers_for(from.ip()) {
            return;
        }
        let names: Vec<Address> = record
            .addresses()
            .iter()
            .map(|w| w.address().clone())
            .filter(|a| matches!(a, Address::Name(_)))
            .collect();
        match self.heard.hosts.iter_mut().find(|h| h.0 == ip) {
            Some(h) => {
                h.1 = record.gid();
                for n in names {
                    if !h.2.contains(&n) {
                        h.2.push(n);
                    }
                }
            }
            None => self.heard.hosts.push((ip, record.gid(), names)),
        }
    }

    fn announcement_heard(&mut self, from: SocketAddr, a: &Announce) {
        if !a.withdrawn() {
            for r in a.records() {
                self.note(from, r);
            }
        }
    }

    /// A query on the groups: a host that just started (a start query),
    /// or a lookup in flight.
    fn group_query_heard(&mut self, sim: &mut Sim, from: SocketAddr, q: Query) {
        self.note(from, q.sender());
        let start = q.sender().addresses().contains(q.target());
        if !start {
            if self.runs(Attack::SlowClaims) || self.rng.chance(0.3) {
                self.claim(sim, from, &q);
            }
            remember(&mut self.heard.queries, (sim.now, from, q));
            return;
        }
        remember(&mut self.heard.newcomers, q.sender().gid());
        if self.runs(Attack::ForgedWelcome) {
            self.forged_welcome(sim, from, &q);
        }
        if self.runs(Attack::StartFlood) && self.rng.chance(0.3) {
            self.start_flood(sim, q.sender().gid(), 25, 40 * MS);
        }
    }

    /// At once, to a host that just started, an announcement from its own
    /// address (or a V address) listing that address and other hosts'
    /// names: taken as a welcome, it would send their lookups there.
    fn forged_welcome(&mut self, sim: &mut Sim, newcomer: SocketAddr, q: &Query) {
        let at = match self.rng.chance(0.5) {
            true => IpAddr::V4(OWN_IP),
            false => IpAddr::V4(self.v()),
        };
        let own = q.sender().addresses();
        let names: Vec<Address> = self
            .heard
            .hosts
            .iter()
            .flat_map(|h| h.2.iter())
            .filter(|n| !own.iter().any(|w| w.address() == *n))
            .take(15)
            .cloned()
            .collect();
        if names.is_empty() {
            return;
        }
        let records = self.records(super::own_gid(), at, &names);
        let a = super::forge::announce(records, false);
        self.send_now(sim, at, Some(newcomer.ip()), a);
    }

    /// A query sent to `to`, one of its addresses: a claim's
    /// confirmation, a lookup its forged hints sent there, a check. A name
    /// it may name or the address itself is confirmed FOUND from there
    /// (slowly, for a claim it stretches), else REFUSED, or nothing.
    fn asked(&mut self, sim: &mut Sim, from: SocketAddr, to: IpAddr, q: &Query) {
        remember(&mut self.heard.queries, (sim.now, from, q.clone()));
        let target = q.target().address().clone();
        if target != Address::from(to) && !self.may_name(&target) {
            if self.rng.chance(0.5) {
                let r = reply(q.txid(), &target, None);
                self.send_now(sim, to, Some(from.ip()), r);
            }
            return;
        }
        let record = self.record(super::own_gid(), &[Address::from(to), target.clone()]);
        let Some(r) = reply(q.txid(), &target, record) else {
            return;
        };
        let slow = self
            .slow
            .iter()
            .position(|(ip, n)| *ip == from.ip() && *n == target);
        match slow {
            Some(i) => {
                // Once, 3 to 3.4 s after the first try: while the claim's
                // probe still waits, so that the reply counts as a sample.
                self.slow.remove(i);
                let after = (3_000 + self.rng.below(400)) * MS;
                self.later(sim, after, to, Some(from.ip()), r);
            }
            None if self.rng.chance(0.1) => {}
            None => self.send_now(sim, to, Some(from.ip()), Some(r)),
        }
    }
}
