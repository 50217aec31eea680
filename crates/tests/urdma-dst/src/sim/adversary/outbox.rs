//! What the adversary sends, bounded: a run's worth of datagrams, so that
//! a run ends and what the hosts did about it can be judged.

use crate::sim::{Sim, PORT};
use ibacm_urdma::discovery::wire::{Message, V4_GROUP};
use std::net::{IpAddr, SocketAddr};

pub(super) struct Outbox {
    /// The most datagrams it sends in a run.
    budget: u64,
    /// Datagrams it sent.
    sent: u64,
    /// Prints what it sends (`URDMA_DST_TRACE_ADVERSARY`): how a failing
    /// seed is read.
    trace: bool,
}

impl Outbox {
    /// At most `budget` datagrams, printed if `trace`.
    pub(super) fn new(budget: u64, trace: bool) -> Self {
        Outbox {
            budget,
            sent: 0,
            trace,
        }
    }

    /// Datagrams it sent.
    pub(super) fn sent(&self) -> u64 {
        self.sent
    }

    /// Whether the budget is spent: it sends nothing more.
    pub(super) fn spent(&self) -> bool {
        self.sent >= self.budget
    }

    /// Sends `msg` from `from` to `to` (`None`: the groups), if the budget
    /// allows.
    pub(super) fn send(
        &mut self,
        sim: &mut Sim,
        from: IpAddr,
        to: Option<IpAddr>,
        msg: &Message,
    ) -> bool {
        if self.spent() {
            return false;
        }
        self.sent += 1;
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
}
