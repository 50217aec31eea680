//! An adversary beside the honest hosts: a host of the segment without a
//! key that does whatever such a host can (docs/protocol.md, *Trust*: it
//! sends with any source address and reads the groups, not unicast
//! between two other hosts). It hears what a host there hears: the
//! groups' traffic, and unicast to the addresses it answers ARP for, its
//! own and "V" addresses no honest host holds. It remembers the sources,
//! GIDs, names and transaction ids it heard (`heard.rs`), and sends, as
//! its own seeded stream decides (`pick.rs`), every message and flag with
//! any source, GID and name (`act.rs`, built in `forge.rs`), some at once
//! on what it hears (`react.rs`), some as the known attacks, each staged
//! for the state of the cluster (`plans.rs`). What it sends is bounded per
//! run (`outbox.rs`). `check.rs` is its checker.
//!
//! It leaves a third of the honest hosts alone (by their address, drawn
//! from the seed): it never names them, so that the checker always has
//! lookups it must not have changed.

mod act;
mod check;
mod forge;
mod heard;
mod kept;
mod outbox;
mod pick;
mod plans;
mod react;

pub(crate) use check::{answered, bounds, claimed, delivered, overheard, unheld, verdict, QUIET};
pub use check::{Ledger, Tally};
pub use plans::{Attack, Step};

use super::{Event, Sim};
use forge::Forge;
use heard::Heard;
use ibacm_urdma::addr::Gid;
use ibacm_urdma::discovery::wire::Message;
use kept::{Announced, SlowClaims};
use outbox::Outbox;
use pick::Picker;
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

pub struct Adversary {
    /// Its draws: what it does, and what it puts in what it sends.
    pick: Picker,
    heard: Heard,
    forge: Forge,
    outbox: Outbox,
    attacks: Vec<Attack>,
    /// When its seeded actions run (ns, in order).
    windows: Vec<(u64, u64)>,
    announced: Announced,
    slow: SlowClaims,
    pub ledger: Ledger,
    /// Prints what it hears (`URDMA_DST_TRACE_ADVERSARY`, which prints
    /// what it sends too): how a failing seed is read.
    trace: bool,
}

impl Adversary {
    /// An adversary of `seed` running `attacks`, acting in `windows`
    /// (virtual ns), sending at most `budget` datagrams.
    pub fn new(seed: u64, attacks: Vec<Attack>, windows: Vec<(u64, u64)>, budget: u64) -> Self {
        let trace = std::env::var_os("URDMA_DST_TRACE_ADVERSARY").is_some();
        Adversary {
            pick: Picker::new(seed),
            heard: Heard::new(seed),
            forge: Forge::default(),
            outbox: Outbox::new(budget, trace),
            attacks,
            windows,
            announced: Announced::default(),
            slow: SlowClaims::default(),
            ledger: Ledger::default(),
            trace,
        }
    }

    /// Whether it leaves the honest host at `ip` alone.
    pub fn spares(&self, ip: Ipv4Addr) -> bool {
        self.heard.spares(ip)
    }

    pub fn runs(&self, attack: Attack) -> bool {
        self.attacks.contains(&attack)
    }

    /// Datagrams it sent.
    pub fn sent(&self) -> u64 {
        self.outbox.sent()
    }

    /// Sends `msg` from `from` to `to` (`None`: the groups), if the budget
    /// allows; the checker notes what it names.
    fn emit(&mut self, sim: &mut Sim, from: IpAddr, to: Option<IpAddr>, msg: &Message) -> bool {
        let sent = self.outbox.send(sim, from, to, msg);
        if sent {
            self.ledger.touch(from, msg);
        }
        sent
    }

    /// Queues the next seeded action: a little later in the window it is
    /// in, or at the start of the next one.
    fn next_tick(&mut self, sim: &mut Sim) {
        if self.outbox.spent() {
            return;
        }
        let at = sim.now + (20 + self.pick.below(140)) * super::MS;
        let next = self
            .windows
            .iter()
            .find(|(_, end)| *end > at)
            .map(|&(start, _)| start.max(at));
        if let Some(t) = next {
            sim.schedule(t, Event::Adversary(Due::Tick));
        }
    }
}

/// Sends `msg` from `from` to `to` (`None`: the groups) `after_ns` from
/// now.
fn later(sim: &mut Sim, after_ns: u64, from: IpAddr, to: Option<IpAddr>, msg: Message) {
    let due = Due::Send { from, to, msg };
    sim.schedule(sim.now + after_ns, Event::Adversary(due));
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
