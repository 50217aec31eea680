//! One round of the discovery worker, written once for the worker thread
//! (`worker.rs`) and the simulation (`urdma-dst`, one per simulated host):
//! the neighbour lookups due are asked, the engine gets its inputs and runs
//! its timers, its effects join what was handed over ([`Schedule::round`]),
//! and, the engine released, the round is carried out and the worker
//! sleeps until the schedule says. Only what it acts through differs: the
//! sockets, resolver threads, netlink and locks of the runtime, or the
//! simulated network, DNS and kernel ([`Worker`]).

use super::schedule::Schedule;
use crate::daemon::Daemon;
use crate::discovery::Datagram;
use crate::discovery::{NeighbourJob, NssJob};
use crate::engine::{Engine, Input, Outgoing};
use std::time::Instant;

/// A neighbour lookup and the MAC it found (`None`: none).
pub type Neighbour = (NeighbourJob, Option<[u8; 6]>);

/// What a round runs besides the inputs it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The neighbour lookups due and the engine's timers: every round of
    /// the worker thread (it cannot tell what woke it, and timers run early
    /// find nothing due), and the simulation's at its deadlines.
    Deadline,
    /// The inputs alone: the simulation delivers each datagram or answer
    /// in a round of its own, between its deadlines.
    Input,
}

/// What a worker acts through, besides the round's logic.
pub trait Worker<D: Daemon> {
    /// Runs `f` on the schedule alone (before the engine is taken).
    fn with_schedule<R>(&mut self, f: impl FnOnce(&mut Schedule) -> R) -> R;

    /// Runs `f` on the engine and the schedule, taken in that order;
    /// `None`: there is no engine (a simulated host that is down).
    fn with_engine<R>(&mut self, f: impl FnOnce(&mut Engine<D>, &mut Schedule) -> R) -> Option<R>;

    /// Asks the neighbour table about `due`; the answers it has at once
    /// (netlink answers in place; the simulated kernel later, as an input
    /// of its own).
    fn neighbours(&mut self, due: Vec<NeighbourJob>) -> Vec<Neighbour>;

    /// Asks the system's resolver for a name.
    fn resolve(&mut self, job: NssJob);

    /// Sends the daemon's replies.
    fn answer(&mut self, replies: &[Outgoing]);

    /// Sends the datagrams, in this order.
    fn send(&mut self, datagrams: Vec<Datagram>);

    /// The worker sleeps until `at` (`None`: until woken).
    fn sleep_until(&mut self, at: Option<Instant>);
}

/// One round of worker `w` at `now`: `inputs` (what it received) go to the
/// engine first, then, for a [`Wake::Deadline`], the neighbours' answers
/// and the timers; what was handed over and the engine's own effects are
/// carried out once the engine is released.
pub fn round<D: Daemon, W: Worker<D>>(
    w: &mut W,
    now: Instant,
    wake: Wake,
    inputs: impl FnOnce(&mut Engine<D>),
) {
    let answers = match wake {
        // Netlink before the engine's lock.
        Wake::Deadline => {
            let due = w.with_schedule(|s| s.due_neighbours(now));
            w.neighbours(due)
        }
        Wake::Input => Vec::new(),
    };
    let ran = w.with_engine(|e, schedule| {
        inputs(e);
        for (job, mac) in answers {
            e.input(Input::Neighbour(job, mac), now);
        }
        if wake == Wake::Deadline {
            e.input(Input::Timers, now);
        }
        #[cfg(feature = "fault-injection")]
        crate::fault::in_worker(e);
        let own = e.poll().unwrap_or_default();
        schedule.round(own, now)
    });
    let Some((mut fx, next)) = ran else {
        return;
    };
    for job in fx.work.resolver_jobs.drain(..) {
        w.resolve(job);
    }
    w.answer(&fx.replies);
    w.send(fx.work.datagrams);
    w.sleep_until(next);
}
