//! Each simulated host's two sides, scheduled by the runtime's own code
//! (`ibacm_urdma::runtime::schedule`): calls made on the daemon's thread
//! or a resolver's hand their effects over; the worker, woken when it must
//! act, carries out its rounds and sleeps until the schedule says.

use super::{Event, Sim, NSS_DELAY};
use ibacm_urdma::engine::Effects;

impl Sim {
    /// Host `h`'s engine was called on the daemon's thread or a
    /// resolver's: as in the runtime, the replies go out at once and the
    /// rest is handed over to the host's worker, woken if it must act
    /// before it meant to.
    pub(crate) fn handed_over(&mut self, h: usize) {
        let Some(fx) = self.polled(h) else {
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

    /// Host `h`'s worker wakes: it asks the neighbour table what is due,
    /// runs the engine's timers and carries out the round.
    pub(crate) fn wake(&mut self, h: usize) {
        let now = self.instant(self.now);
        let due = self.hosts[h].schedule.due_neighbours(now);
        self.neighbour_jobs(h, due);
        if let Some(e) = self.hosts[h].engine.as_mut() {
            e.on_timers(now);
            self.after(h);
        }
    }

    /// Host `h`'s engine, polled; a table over its bound is a violation.
    fn polled(&mut self, h: usize) -> Option<Effects> {
        let e = self.hosts[h].engine.as_mut()?;
        let sizes = e.tables().sizes();
        let polled = e.poll();
        for (i, (size, cap)) in sizes.into_iter().enumerate() {
            if size > cap {
                let what = format!("host {h}: table {i} holds {size}, over its bound {cap}");
                self.violation(what);
            }
        }
        polled
    }

    /// Host `h`'s worker ran the engine: it carries out its round (what
    /// was handed over, then its own effects) and sleeps until the
    /// schedule says.
    pub(crate) fn after(&mut self, h: usize) {
        if self.hosts[h].engine.is_none() {
            return;
        }
        let own = self.polled(h).unwrap_or_default();
        let now = self.instant(self.now);
        let (fx, wake) = self.hosts[h].schedule.round(own, now);
        for job in fx.work.resolver_jobs {
            let ev = Event::Nss {
                host: h,
                key: job.key,
                name: job.name,
            };
            self.queue.push(self.now + NSS_DELAY, ev);
        }
        for r in &fx.replies {
            self.answer(r.id, &r.msg);
        }
        for d in fx.work.datagrams {
            self.send(h, d);
        }
        let next =
            wake.map(|t| (t.saturating_duration_since(self.base).as_nanos() as u64).max(self.now));
        if let Some(t) = next {
            if self.hosts[h].timer_at.is_none_or(|q| t < q) {
                self.hosts[h].timer_at = Some(t);
                self.schedule(t, Event::Timer { host: h });
            }
        }
    }
}
