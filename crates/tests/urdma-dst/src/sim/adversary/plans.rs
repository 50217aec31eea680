//! The known attacks, each a plan the adversary carries out at the times
//! the scenario stages it (`crate::attack`), besides its seeded actions.

use super::forge::{announce, query};
use super::{later, own_gid, v_ip, Adversary, Due, OWN_IP, VS};
use crate::sim::{Event, Sim, MS};
use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::discovery::wire::Message;
use std::net::{IpAddr, Ipv4Addr};

/// The attacks the adversary knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attack {
    /// At once on a start query, a welcome sent to the newcomer alone,
    /// listing the adversary's address and other hosts' names.
    ForgedWelcome,
    /// Names announced, then withdrawn, round after round: the hints'
    /// order queue must not keep their places.
    AnnounceWithdraw,
    /// Fresh names announced at V addresses, then start queries whose
    /// records list those addresses and names: welcomes aimed at V.
    WelcomesToV,
    /// New names announced until every hint table is full.
    NameFlood,
    /// Claims of the names lookups ask the groups for (some disputed for
    /// the purpose), confirmed 3 s late to stretch the askers' try timer.
    SlowClaims,
    /// Forged start queries from many sources: 25 in a second around
    /// the starts, and 100 a second while a host is down and lookups of it
    /// wait for its start query to ask it again.
    StartFlood,
    /// Queries forged from host A to host B until B's reply allowance for
    /// A is spent, then a hint that makes A check B.
    Starve,
}

impl Attack {
    pub const ALL: [Attack; 7] = [
        Attack::ForgedWelcome,
        Attack::AnnounceWithdraw,
        Attack::WelcomesToV,
        Attack::NameFlood,
        Attack::SlowClaims,
        Attack::StartFlood,
        Attack::Starve,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Attack::ForgedWelcome => "forged-welcome",
            Attack::AnnounceWithdraw => "announce-withdraw",
            Attack::WelcomesToV => "welcomes-to-v",
            Attack::NameFlood => "name-flood",
            Attack::SlowClaims => "slow-claims",
            Attack::StartFlood => "start-flood",
            Attack::Starve => "starve",
        }
    }

    pub fn parse(s: &str) -> Option<Attack> {
        Attack::ALL.into_iter().find(|a| a.name() == s)
    }
}

/// A step of a plan.
pub enum Step {
    AnnounceWithdraw {
        round: u32,
    },
    VAnnounce,
    VStart,
    NameFlood,
    /// Honest names announced from a V address: their holders defend
    /// them, and lookups of them go to the groups, where it claims them.
    Dispute,
    /// `count` start queries, one every `every_ms`, each from a source of
    /// its own.
    StartFlood {
        count: u64,
        every_ms: u64,
    },
    /// One query forged from `a` to `b`, and the next until `until`.
    StarveFlood {
        a: Ipv4Addr,
        b: Ipv4Addr,
        until: u64,
    },
    /// A query forged from `b` to `a` whose record moves `b`: `a` checks
    /// `b`'s binding with `b`.
    StarveHint {
        a: Ipv4Addr,
        b: Ipv4Addr,
    },
}

/// Fresh names announced per datagram (the most an announcement lists
/// besides its address).
const PER_ANNOUNCEMENT: usize = 15;
/// V addresses welcomes are aimed at.
const AIMED: usize = 12;

impl Adversary {
    /// Carries out `step`, now.
    pub(super) fn plan(&mut self, sim: &mut Sim, step: Step) {
        match step {
            Step::AnnounceWithdraw { round } => self.announce_withdraw(sim, round),
            Step::VAnnounce => {
                for k in 0..AIMED {
                    let (v, name) = (IpAddr::V4(v_ip(k)), aimed_name(k));
                    let gid = self.pick.fresh_gid();
                    self.announce_names(sim, v, gid, &[name], false);
                }
            }
            Step::VStart => {
                for k in 0..AIMED {
                    let (v, name) = (IpAddr::V4(v_ip(k)), aimed_name(k));
                    let gid = self.pick.fresh_gid();
                    let txid = self.pick.txid(&self.heard);
                    let record = self.forge.record(gid, &[Address::from(v), name.clone()]);
                    let q = record.and_then(|r| query(txid, &name, r));
                    self.send_now(sim, v, None, q);
                }
            }
            Step::NameFlood => {
                for k in 0..6 {
                    let names: Vec<Address> = (0..PER_ANNOUNCEMENT)
                        .map(|_| self.pick.fresh_name())
                        .collect();
                    let (v, gid) = (IpAddr::V4(v_ip(AIMED + k)), self.pick.fresh_gid());
                    self.announce_names(sim, v, gid, &names, false);
                }
            }
            Step::Dispute => {
                let names: Vec<Address> = (0..3)
                    .filter_map(|_| self.pick.victim(&self.heard))
                    .filter_map(|h| h.names.first().cloned())
                    .collect();
                let v = IpAddr::V4(self.pick.v());
                self.announce_names(sim, v, own_gid(), &names, false);
            }
            Step::StartFlood { count, every_ms } => {
                let gid = self.pick.fresh_gid();
                self.start_flood(sim, gid, count, every_ms * MS);
            }
            Step::StarveFlood { a, b, until } => self.starve(sim, a, b, until),
            Step::StarveHint { a, b } => {
                let record = self.forge.record(own_gid(), &[Address::Ip4(b)]);
                let txid = self.pick.txid(&self.heard);
                let q = record.and_then(|r| query(txid, &Address::Ip4(a), r));
                self.send_now(sim, IpAddr::V4(b), Some(IpAddr::V4(a)), q);
            }
        }
    }

    /// Round `round` of announcing fresh names and withdrawing them: 60
    /// names from one V address, withdrawn 50 ms later; four rounds, the
    /// first after withdrawing what it announced before.
    fn announce_withdraw(&mut self, sim: &mut Sim, round: u32) {
        if round == 0 {
            // Room first: what it announced before, withdrawn.
            for (src, a) in self.announced.take() {
                if let Message::Announce(a) = a {
                    let w = announce(a.records().to_vec(), true);
                    self.send_now(sim, src, None, w);
                }
            }
        }
        let v = IpAddr::V4(v_ip(AIMED + 6 + round as usize));
        let gid = self.pick.fresh_gid();
        let names: Vec<Address> = (0..4 * PER_ANNOUNCEMENT)
            .map(|_| self.pick.fresh_name())
            .collect();
        self.announce_names(sim, v, gid, &names, false);
        for chunk in names.chunks(PER_ANNOUNCEMENT) {
            if let Some(w) = announce(self.forge.records(gid, v, chunk), true) {
                later(sim, 50 * MS, v, None, w);
            }
        }
        if round < 3 {
            let next = Due::Plan(Step::AnnounceWithdraw { round: round + 1 });
            sim.schedule(sim.now + 100 * MS, Event::Adversary(next));
        }
    }

    /// `count` start queries, one every `every_ns`, each from a source of
    /// its own (V addresses, its own, honest hosts'), the first of
    /// endpoint `gid`.
    pub(super) fn start_flood(&mut self, sim: &mut Sim, gid: Gid, count: u64, every_ns: u64) {
        for k in 0..count {
            let src = match k {
                0 => IpAddr::V4(OWN_IP),
                k if k % 3 == 0 => match self.pick.victim(&self.heard) {
                    Some(h) => IpAddr::V4(h.ip),
                    None => IpAddr::V4(v_ip(k as usize)),
                },
                k => IpAddr::V4(v_ip((k as usize) % VS)),
            };
            let g = if k == 0 { gid } else { self.pick.fresh_gid() };
            let name = self.pick.name(&self.heard);
            let txid = self.pick.txid(&self.heard);
            let record = self.forge.record(g, &[Address::from(src), name.clone()]);
            if let Some(q) = record.and_then(|r| query(txid, &name, r)) {
                later(sim, k * every_ns, src, None, q);
            }
        }
    }

    /// One query forged from `a` to `b` for a name nobody holds (refused,
    /// to `a`, while `b`'s allowance for `a` lasts), the next in 25 ms.
    fn starve(&mut self, sim: &mut Sim, a: Ipv4Addr, b: Ipv4Addr, until: u64) {
        let record = self.forge.record(own_gid(), &[Address::Ip4(v_ip(VS - 1))]);
        let txid = self.pick.txid(&self.heard);
        let target = Address::name("zz-starve").expect("a name");
        let q = record.and_then(|r| query(txid, &target, r));
        self.send_now(sim, IpAddr::V4(a), Some(IpAddr::V4(b)), q);
        let next = sim.now + 25 * MS;
        if next < until {
            let due = Due::Plan(Step::StarveFlood { a, b, until });
            sim.schedule(next, Event::Adversary(due));
        }
    }
}

/// The fresh name announced at the `k`-th V address welcomes are aimed
/// at.
fn aimed_name(k: usize) -> Address {
    Address::name(&format!("zz-aimed{k}")).expect("a name")
}
