//! When the discovery worker runs and what it carries out: the part of the
//! runtime's scheduling that needs no thread, given the time.
//!
//! Calls made on the daemon's thread and on the resolvers' hand their
//! effects over ([`Schedule::hand_over`]): the replies go out at once, from
//! the calling thread; what only the worker does (send, ask the resolvers
//! and the neighbour table) waits for it, and the worker is woken when it
//! has work or a deadline earlier than the one it sleeps until. At each
//! round ([`Schedule::round`]) the worker takes what was handed over, then
//! its own effects, in the order they were made, keeps the neighbour
//! lookups for their time, and sleeps until the earliest deadline.
//!
//! The worker thread (`worker.rs`) and the simulation (`urdma-dst`, one per
//! simulated host) run this same code, so a wake that comes too late (a
//! first announcement held back by the worker's first sleep) shows in the
//! simulation too.

use crate::discovery::{NeighbourJob, Work};
use crate::engine::{Effects, Outgoing};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct Schedule {
    /// Handed over for the worker, in the order it was made.
    outbox: Work,
    /// Neighbour lookups waiting for their time (the kernel resolving).
    neighbours: Vec<NeighbourJob>,
    /// When the worker means to wake next; `None` before its first round
    /// (any deadline is earlier) or when it sleeps until woken.
    wakes_at: Option<Instant>,
    /// The longest it sleeps (`None`: until its next deadline).
    idle: Option<Duration>,
}

impl Schedule {
    /// A worker that sleeps at most `idle` (`None`: until its next
    /// deadline, or until woken).
    pub fn new(idle: Option<Duration>) -> Schedule {
        Schedule {
            idle,
            ..Schedule::default()
        }
    }

    /// Takes the effects of a call made off the worker: keeps for the
    /// worker what only it does; returns the replies, for the caller to
    /// send, and whether the worker must be woken.
    pub fn hand_over(&mut self, fx: Effects) -> (Vec<Outgoing>, bool) {
        let earlier = match (fx.deadline, self.wakes_at) {
            (Some(d), Some(w)) => d < w,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let work = !fx.work.is_empty();
        self.outbox.extend(fx.work);
        (fx.replies, work || earlier)
    }

    /// The neighbour lookups due at `now`, for the worker to make before
    /// it takes the engine's lock (netlink is not for the event loop).
    pub fn due_neighbours(&mut self, now: Instant) -> Vec<NeighbourJob> {
        let (due, later) = std::mem::take(&mut self.neighbours)
            .into_iter()
            .partition(|j| j.at <= now);
        self.neighbours = later;
        due
    }

    /// One round of the worker at `now`, with `own`, the effects of its
    /// own calls: what it performs (what was handed over first; the
    /// neighbour lookups are kept for [`Schedule::due_neighbours`]), and
    /// when it wakes next (`None`: when woken).
    pub fn round(&mut self, own: Effects, now: Instant) -> (Effects, Option<Instant>) {
        let mut work = std::mem::take(&mut self.outbox);
        work.extend(own.work);
        self.neighbours.append(&mut work.neighbour_jobs);
        let fx = Effects { work, ..own };
        let due = [fx.deadline, self.neighbours.iter().map(|j| j.at).min()]
            .into_iter()
            .flatten()
            .min();
        self.wakes_at = match self.idle {
            Some(idle) => Some(due.map_or(now + idle, |d| d.min(now + idle))),
            None => due,
        };
        (fx, self.wakes_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Address;
    use crate::discovery::Datagram;

    fn datagram() -> Datagram {
        Datagram::Unicast {
            to: "10.0.0.2:6126".parse().unwrap(),
            from: None,
            bytes: vec![1],
        }
    }

    fn deadline(at: Instant) -> Effects {
        Effects {
            deadline: Some(at),
            ..Effects::default()
        }
    }

    #[test]
    fn a_worker_not_yet_asleep_is_woken_by_any_deadline() {
        // The worker's first sleep must not hold back what is due before
        // its end (commit cbce056: a first announcement 531 ms late).
        let t = Instant::now();
        let mut s = Schedule::new(Some(Duration::from_secs(1)));
        assert!(s.hand_over(deadline(t + Duration::from_millis(5))).1);
        let (_, wake) = s.round(deadline(t + Duration::from_millis(5)), t);
        assert_eq!(wake, Some(t + Duration::from_millis(5)));
        // Asleep until then: a later deadline does not wake it, an earlier
        // one and work do.
        assert!(!s.hand_over(deadline(t + Duration::from_millis(9))).1);
        assert!(s.hand_over(deadline(t + Duration::from_millis(2))).1);
        let work = Effects {
            work: Work {
                datagrams: vec![datagram()],
                ..Work::default()
            },
            ..Effects::default()
        };
        assert!(s.hand_over(work).1);
        assert_eq!(s.hand_over(Effects::default()), (Vec::new(), false));
    }

    #[test]
    fn what_was_handed_over_goes_first_and_replies_go_at_once() {
        let t = Instant::now();
        let mut s = Schedule::new(None);
        let reply = Outgoing {
            id: 7,
            msg: crate::request::msg::MsgBuf::default(),
            query: false,
        };
        let handed = Effects {
            replies: vec![reply.clone()],
            work: Work {
                datagrams: vec![datagram()],
                ..Work::default()
            },
            ..Effects::default()
        };
        let (replies, wake) = s.hand_over(handed);
        assert_eq!((replies, wake), (vec![reply], true));
        let own = Effects {
            work: Work {
                datagrams: vec![Datagram::Multicast {
                    family: crate::discovery::Family::V4,
                    bytes: vec![2],
                }],
                ..Work::default()
            },
            ..deadline(t + Duration::from_secs(3))
        };
        let (fx, wake) = s.round(own, t);
        assert_eq!(fx.work.datagrams.len(), 2);
        assert_eq!(fx.work.datagrams[0], datagram(), "handed over first");
        assert!(fx.replies.is_empty());
        assert_eq!(wake, Some(t + Duration::from_secs(3)), "no idle cap");
        let (fx, wake) = s.round(Effects::default(), t);
        assert!(fx.is_empty() && wake.is_none(), "taken once");
    }

    #[test]
    fn neighbour_lookups_wait_for_their_time_and_wake_the_worker() {
        let t = Instant::now();
        let job = |ms| NeighbourJob {
            dest: Address::Ip4([10, 0, 0, 2].into()),
            ip: "10.0.0.2".parse().unwrap(),
            poked: true,
            at: t + Duration::from_millis(ms),
        };
        let mut s = Schedule::new(Some(Duration::from_secs(1)));
        let own = Effects {
            work: Work {
                neighbour_jobs: vec![job(0), job(20)],
                ..Work::default()
            },
            ..deadline(t + Duration::from_secs(5))
        };
        let (fx, wake) = s.round(own, t);
        assert!(fx.work.neighbour_jobs.is_empty(), "kept, not performed");
        assert_eq!(wake, Some(t), "one is due now");
        assert_eq!(s.due_neighbours(t), vec![job(0)]);
        let (_, wake) = s.round(deadline(t + Duration::from_secs(5)), t);
        assert_eq!(wake, Some(t + Duration::from_millis(20)));
        assert!(s.due_neighbours(t + Duration::from_millis(19)).is_empty());
        assert_eq!(
            s.due_neighbours(t + Duration::from_millis(20)),
            vec![job(20)]
        );
        // Nothing due: the idle cap.
        let (_, wake) = s.round(Effects::default(), t);
        assert_eq!(wake, Some(t + Duration::from_secs(1)));
    }
}
