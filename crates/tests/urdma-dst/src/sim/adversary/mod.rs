//! An adversary beside the honest hosts: a host of the segment without a
//! key that does whatever such a host can (docs/protocol.md, *Trust*: it
//! sends with any source address and reads the groups, not unicast
//! between two other hosts). It hears what a host there hears: the
//! groups' traffic, and unicast to the addresses it answers ARP for, its
//! own and "V" addresses no honest host holds. It remembers the sources,
//! GIDs, names and transaction ids it heard, and sends, as its own seeded
//! stream decides, every message and flag with any source, GID and name
//! (`act.rs`), some at once on what it hears (`react.rs`), some as the
//! known attacks, each staged for the state of the cluster (`plans.rs`).
//! What it sends is bounded per run. `check.rs` is its checker.
//!
//! It leaves a third of the honest hosts alone (by their address, drawn
//! from the seed): it never names them, so that the checker always has
//! lookups it must not have changed.

mod act;
mod check;
mod forge;
mod plans;
mod react;

pub(crate) use check::{answered, bounds, claimed, delivered, overheard, unheld, verdict, QUIET};
pub use check::{Ledger, Tally};
pub use plans::{Attack, Step};

use super::{Event, Sim, PORT};
use crate::net::Rng;
use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::discovery::wire::{EndpointRecord, Message, Query, V4_GROUP};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The adversary's own address.
pub const OWN_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 255, 99);
/// How many "V" addresses it uses: addresses of the segment that no honest
/// host holds, which it answers for.
pub const VS: usize = 32;
/// What it remembers of each kind: enough to choose from, bounded.
const MEMORY: usize = 64;

/// The `k`-th V address.
pub fn v_ip(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 254, 1 + (k % VS) as u8)
}

/// Whether the adversary receives what is sent to `ip`: its own address
/// or a V address.
fn answers_for(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a == OWN_IP || (0..VS).any(|k| v_ip(k) == a),
        IpAddr::V6(_) => false,
    }
}

/// The adversary's own GID.
pub fn own_gid() -> Gid {
    Gid([
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xad, 0xad, 0xad, 0xad, 0xad, 0xad, 0xad, 0xad,
    ])
}

/// What the adversary has queued for itself.
pub enum Due {
    /// A datagram reaches it: sent to one of its addresses, or (`to`
    /// none) to the groups.
    Hear {
        from: SocketAddr,
        to: Option<IpAddr>,
        bytes: Vec<u8>,
    },
    /// Its next seeded action, in one of its windows.
    Tick,
    /// A datagram it held back (a slow reply): to `to`, or the groups.
    Send {
        from: IpAddr,
        to: Option<IpAddr>,
        msg: Message,
    },
    /// A step of a staged attack.
    Plan(Step),
    /// A quiet minute begins (`sent`: none), or ends (`sent`: the honest
    /// group datagrams sent before it): the checker's (`check.rs`).
    Quiet { sent: Option<u64> },
}

/// What it heard: honest hosts (address, GID, names), transaction ids and
/// their queries, newest last; spared hosts are not kept.
#[derive(Default)]
struct Heard {
    hosts: Vec<(Ipv4Addr, Gid, Vec<Address>)>,
    queries: VecDeque<(u64, SocketAddr, Query)>,
    /// GIDs of hosts that just started (their start queries).
    newcomers: VecDeque<Gid>,
    /// A record an honest host sent: its LID, MTU, rate and partitions
    /// make forged records look like a host's.
    template: Option<EndpointRecord>,
}

pub struct Adversary {
    rng: Rng,
    seed: u64,
    attacks: Vec<Attack>,
    /// The most datagrams it sends in a run.
    budget: u64,
    /// Datagrams it sent.
    pub sent: u64,
    heard: Heard,
    /// Fresh names and GIDs made so far.
    fresh: u32,
    /// When its seeded actions run (ns, in order).
    windows: Vec<(u64, u64)>,
    /// Announcements it sent, for renewals.
    announced: VecDeque<(IpAddr, Message)>,
    /// Askers whose claim confirmations it answers slowly, and the names.
    slow: VecDeque<(IpAddr, Address)>,
    pub ledger: Ledger,
    /// Prints what it sends (`URDMA_DST_TRACE_ADVERSARY`): how a failing
    /// seed is read.
    trace: bool,
}

impl Adversary {
    /// An adversary of `seed` running `attacks`, acting in `windows`
    /// (virtual ns), sending at most `budget` datagrams.
    pub fn new(seed: u64, attacks: Vec<Attack>, windows: Vec<(u64, u64)>, budget: u64) -> Self {
        Adversary {
            rng: Rng::new(seed ^ 0xad7e_25a2_0000_0001),
            seed,
            attacks,
            budget,
            sent: 0,
            heard: Heard::default(),
            fresh: 0,
            windows,
            announced: VecDeque::new(),
            slow: VecDeque::new(),
            ledger: Ledger::default(),
            trace: std::env::var_os("URDMA_DST_TRACE_ADVERSARY").is_some(),
        }
    }

    /// Whether it leaves the honest host at `ip` alone.
    pub fn spares(&self, ip: Ipv4Addr) -> bool {
        let mut r = Rng::new(self.seed ^ u64::from(u32::from(ip)).wrapping_mul(0x9e37_79b9));
        r.below(3) == 0
    }

    pub fn runs(&self, attack: Attack) -> bool {
        self.attacks.contains(&attack)
    }

    /// Sends `msg` from `from` to `to` (`None`: the groups), if the budget
    /// allows; notes what it names.
    fn emit(&mut self, sim: &mut Sim, from: IpAddr, to: Option<IpAddr>, msg: &Message) -> bool {
        if self.sent >= self.budget {
            return false;
        }
        self.sent += 1;
        self.ledger.touch(from, msg);
        if self.trace {
            let m: String = format!("{msg:?}").chars().take(300).collect();
            eprintln!(
                "{} us: adversary from {from} to {to:?}: {m}",
                sim.now / 1000
            );
        }
        let bytes = msg.encode();
        let src = SocketAddr::new(from, PORT);
        match to {
            None => sim.send_to_group(None, src, IpAddr::V4(V4_GROUP), &bytes),
            Some(ip) => sim.route(None, src, SocketAddr::new(ip, PORT), bytes),
        }
        true
    }

    /// Sends `msg` `after_ns` from now.
    fn later(
        &mut self,
        sim: &mut Sim,
        after_ns: u64,
        from: IpAddr,
        to: Option<IpAddr>,
        msg: Message,
    ) {
        let due = Due::Send { from, to, msg };
        sim.schedule(sim.now + after_ns, Event::Adversary(due));
    }

    /// Queues the next seeded action: a little later in the window it is
    /// in, or at the start of the next one.
    fn next_tick(&mut self, sim: &mut Sim) {
        if self.sent >= self.budget {
            return;
        }
        let at = sim.now + (20 + self.rng.below(140)) * super::MS;
        let next = self
            .windows
            .iter()
            .find(|(_, end)| *end > at)
            .map(|&(start, _)| start.max(at));
        if let Some(t) = next {
            sim.schedule(t, Event::Adversary(Due::Tick));
        }
    }

    /// A fresh name, held by nobody.
    fn fresh_name(&mut self) -> Address {
        self.fresh += 1;
        Address::name(&format!("zz{}", self.fresh)).expect("a name")
    }

    /// A fresh GID, held by nobody.
    fn fresh_gid(&mut self) -> Gid {
        self.fresh += 1;
        let mut g = own_gid().0;
        g[12..16].copy_from_slice(&self.fresh.to_be_bytes());
        Gid(g)
    }

    /// A V address, drawn.
    fn v(&mut self) -> Ipv4Addr {
        v_ip(self.rng.below(VS as u64) as usize)
    }

    /// An honest host it heard and may name, drawn.
    fn victim(&mut self) -> Option<(Ipv4Addr, Gid, Vec<Address>)> {
        let n = self.heard.hosts.len() as u64;
        (n > 0).then(|| self.heard.hosts[self.rng.below(n) as usize].clone())
    }

    /// Where a datagram claims to come from: its own address, a V
    /// address, or an honest host's.
    fn source(&mut self) -> IpAddr {
        match self.rng.below(3) {
            0 => IpAddr::V4(OWN_IP),
            1 => match self.victim() {
                Some((ip, ..)) => IpAddr::V4(ip),
                None => IpAddr::V4(self.v()),
            },
            _ => IpAddr::V4(self.v()),
        }
    }

    /// A GID to put in a record: its own, an honest host's, or fresh.
    fn gid(&mut self) -> Gid {
        match self.rng.below(3) {
            0 => own_gid(),
            1 => match self.victim() {
                Some((_, g, _)) => g,
                None => self.fresh_gid(),
            },
            _ => self.fresh_gid(),
        }
    }

    /// A name to put in a message: one it heard, or a fresh one.
    fn name(&mut self) -> Address {
        match self.victim() {
            Some((_, _, names)) if !names.is_empty() && self.rng.chance(0.7) => {
                names[self.rng.below(names.len() as u64) as usize].clone()
            }
            _ => self.fresh_name(),
        }
    }

    /// A transaction id: one it heard, or any.
    fn txid(&mut self) -> std::num::NonZeroU64 {
        let n = self.heard.queries.len() as u64;
        if n > 0 && self.rng.chance(0.7) {
            return self.heard.queries[self.rng.below(n) as usize].2.txid();
        }
        std::num::NonZeroU64::new(self.rng.next_u64() | 1).expect("odd")
    }
}

/// Something the adversary hears or does, now.
pub(crate) fn step(sim: &mut Sim, due: Due) {
    if let Due::Quiet { sent } = due {
        return check::quiet(sim, sent);
    }
    let Some(mut a) = sim.adversary.take() else {
        return;
    };
    match due {
        Due::Hear { from, to, bytes } => a.hear(sim, from, to, &bytes),
        Due::Tick => {
            a.tick(sim);
            a.next_tick(sim);
        }
        Due::Send { from, to, msg } => {
            a.emit(sim, from, to, &msg);
        }
        Due::Plan(s) => a.plan(sim, s),
        Due::Quiet { .. } => {}
    }
    sim.adversary = Some(a);
}

/// `x` remembered in `v`, once, the oldest forgotten past [`MEMORY`].
fn remember<T: PartialEq>(v: &mut VecDeque<T>, x: T) {
    if !v.contains(&x) {
        if v.len() >= MEMORY {
            v.pop_front();
        }
        v.push_back(x);
    }
}
