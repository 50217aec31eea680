//! Each simulated host's two sides, scheduled by the runtime's own code
//! (`ibacm_urdma::runtime::schedule`) and run by its own round
//! (`ibacm_urdma::runtime::round`): calls made on the daemon's thread or a
//! resolver's hand their effects over; the worker, woken when it must act,
//! carries out its rounds and sleeps until the schedule says.

use super::{Event, Sim, NSS_DELAY};
use ibacm_urdma::daemon::NullDaemon;
use ibacm_urdma::discovery::Datagram;
use ibacm_urdma::discovery::{NeighbourJob, NssJob};
use ibacm_urdma::engine::{Engine, Outgoing, Tables};
use ibacm_urdma::runtime::round::{round, Neighbour, Wake, Worker};
use ibacm_urdma::runtime::schedule::Schedule;
use std::time::Instant;

impl Sim {
    /// Host `h`'s engine was called on the daemon's thread or a
    /// resolver's: as in the runtime, the replies go out at once and the
    /// rest is handed over to the host's worker, woken if it must act
    /// before it meant to.
    pub(crate) fn handed_over(&mut self, h: usize) {
        let Some(e) = self.hosts[h].engine.as_mut() else {
            return;
        };
        let tables = e.tables();
        let polled = e.poll();
        self.bounded(h, &tables);
        let Some(fx) = polled else {
            return;
        };
        let (replies, wake) = self.hosts[h].schedule.hand_over(fx);
        for r in &replies {
            self.answer(r.id, &r.msg);
        }
        if wake {
            self.wake(h);
        }
    }

    /// Host `h`'s worker wakes at its deadline: it asks the neighbour
    /// table what is due, runs the engine's timers and carries out the
    /// round.
    pub(crate) fn wake(&mut self, h: usize) {
        let now = self.clock.instant(self.now);
        round(
            &mut HostWorker { sim: self, h },
            now,
            Wake::Deadline,
            |_| {},
        );
    }

    /// A table of host `h` over its bound is a violation.
    fn bounded(&mut self, h: usize, tables: &Tables) {
        for t in tables.bounded() {
            if t.held > t.bound {
                let (table, held, bound) = (t.table, t.held, t.bound);
                let what = format!("host {h}: {table} holds {held}, over its bound {bound}");
                self.violation(what);
            }
        }
    }

    /// Host `h`'s worker received an input (given to its engine): it
    /// carries out its round and sleeps until the schedule says.
    pub(crate) fn after(&mut self, h: usize) {
        let now = self.clock.instant(self.now);
        round(&mut HostWorker { sim: self, h }, now, Wake::Input, |_| {});
    }
}

/// Host `h`'s worker, as a round acts through it: the simulated network,
/// DNS and kernel.
struct HostWorker<'a> {
    sim: &'a mut Sim,
    h: usize,
}

impl Worker<NullDaemon> for HostWorker<'_> {
    fn with_schedule<R>(&mut self, f: impl FnOnce(&mut Schedule) -> R) -> R {
        f(&mut self.sim.hosts[self.h].schedule)
    }

    fn with_engine<R>(
        &mut self,
        f: impl FnOnce(&mut Engine<NullDaemon>, &mut Schedule) -> R,
    ) -> Option<R> {
        let host = &mut self.sim.hosts[self.h];
        let e = host.engine.as_mut()?;
        let r = f(e, &mut host.schedule);
        let tables = e.tables();
        self.sim.bounded(self.h, &tables);
        Some(r)
    }

    fn neighbours(&mut self, due: Vec<NeighbourJob>) -> Vec<Neighbour> {
        self.sim.neighbour_jobs(self.h, due);
        Vec::new()
    }

    fn resolve(&mut self, job: NssJob) {
        let ev = Event::Nss {
            host: self.h,
            key: job.key,
            name: job.name,
        };
        self.sim.queue.push(self.sim.now + NSS_DELAY, ev);
    }

    fn answer(&mut self, replies: &[Outgoing]) {
        for r in replies {
            self.sim.answer(r.id, &r.msg);
        }
    }

    fn send(&mut self, datagrams: Vec<Datagram>) {
        for d in datagrams {
            self.sim.send(self.h, d);
        }
    }

    fn sleep_until(&mut self, at: Option<Instant>) {
        let (sim, h) = (&mut *self.sim, self.h);
        let next = at.map(|t| sim.clock.ns(t).max(sim.now));
        if let Some(t) = next {
            if sim.hosts[h].timer_at.is_none_or(|q| t < q) {
                sim.hosts[h].timer_at = Some(t);
                sim.schedule(t, Event::Timer { host: h });
            }
        }
    }
}
