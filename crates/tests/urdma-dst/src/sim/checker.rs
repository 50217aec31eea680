//! What the simulation knows to be true and what it found wrong: the GIDs
//! each host held and when, the requests in flight, and the verdicts.
//! `check.rs` brings it what only the segment knows.

use super::{Pending, Violation, MS};
use ibacm_urdma::addr::Gid;
use std::collections::BTreeMap;

/// The most violations kept: the first ones explain a failing seed.
const KEPT: usize = 20;

/// What was true, what is asked, and what was found wrong.
pub struct Checker {
    /// Requests waiting for their replies, by id (issued in order).
    pub(crate) pending: BTreeMap<u64, Pending>,
    next_id: u64,
    /// Per host, the GIDs it held: (GID, from, until).
    history: Vec<Vec<(Gid, u64, Option<u64>)>>,
    /// How long after it changed an old GID may still be answered.
    pub staleness_ns: u64,
    pub violations: Vec<Violation>,
    pub answered: u64,
    pub succeeded: u64,
    /// Requests answered ETIMEDOUT.
    pub timed_out: u64,
    /// Requests resolved while their destination's daemon was down.
    pub resolved_while_down: u64,
    /// Per request: the host that asked, the destination, when, and the
    /// GID answered (`None`: an error), kept when `record` is on.
    pub answers: Vec<(usize, usize, u64, Option<Gid>)>,
    pub record: bool,
}

impl Checker {
    pub(crate) fn new(hosts: usize, staleness_ns: u64) -> Checker {
        Checker {
            pending: BTreeMap::new(),
            next_id: 1,
            history: vec![Vec::new(); hosts],
            staleness_ns,
            violations: Vec::new(),
            answered: 0,
            succeeded: 0,
            timed_out: 0,
            resolved_while_down: 0,
            answers: Vec::new(),
            record: false,
        }
    }

    pub(crate) fn violation(&mut self, now: u64, what: String) {
        if self.violations.len() < KEPT {
            self.violations.push(Violation { at_ns: now, what });
        }
    }

    /// A request made now: its id, the next in order.
    pub(crate) fn ask(&mut self, host: usize, dest: usize, by_name: bool, now: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let pending = Pending {
            host,
            dest,
            issued: now,
            by_name,
        };
        self.pending.insert(id, pending);
        id
    }

    /// The id the next request gets.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Host `host` holds `gid` from `now` on.
    pub(crate) fn holds(&mut self, host: usize, gid: Gid, now: u64) {
        self.history[host].push((gid, now, None));
    }

    /// Host `host`'s daemon is gone: its GID is no longer held, and its
    /// clients lost their connection with it.
    pub(crate) fn gone(&mut self, host: usize, now: u64) {
        if let Some(last) = self.history[host].last_mut() {
            last.2 = Some(now);
        }
        self.pending.retain(|_, p| p.host != host);
    }

    /// Requests are numbered as they are issued, in virtual time, so the
    /// first one pending is the oldest: if it is in time, all are. (A scan
    /// of them all after every step made a 256-host all-pairs run, 130,000
    /// requests pending at once, take hours.)
    pub(crate) fn check_deadlines(&mut self, now: u64, bound: u64) {
        let late = self
            .pending
            .iter()
            .next()
            .filter(|(_, p)| p.issued + bound < now)
            .map(|(id, p)| {
                format!(
                    "request {id} of host {} for host {} unanswered after {} ms",
                    p.host,
                    p.dest,
                    (now - p.issued) / MS
                )
            });
        if let Some(what) = late {
            self.violation(now, what);
        }
    }

    /// Requests never answered though nothing is left to happen.
    pub(crate) fn stuck(&mut self, now: u64) {
        let stuck: Vec<u64> = self.pending.keys().copied().collect();
        if !stuck.is_empty() {
            self.violation(now, format!("requests never answered: {stuck:?}"));
        }
    }

    /// Requests for `dest` still waiting.
    pub fn pending_for(&self, dest: usize) -> u64 {
        self.pending.values().filter(|p| p.dest == dest).count() as u64
    }

    /// Whether `dest` held `g` at `now`, or gave it up no more than the
    /// staleness allowed ago; if not, what it did with it.
    pub(crate) fn held(&self, dest: usize, g: Gid, now: u64) -> Result<(), String> {
        let stale = self.staleness_ns;
        let held = self.history[dest].iter().any(|&(h, from, until)| {
            h == g && from <= now && until.is_none_or(|u| u + stale >= now)
        });
        if held {
            return Ok(());
        }
        Err(match self.history[dest].iter().find(|h| h.0 == g) {
            Some((_, _, Some(u))) => format!("left {} ms before", (now - u) / MS),
            _ => "never held".into(),
        })
    }

    /// Whether `dest` held its address and name all the time since
    /// `since`.
    pub(crate) fn up_since(&self, dest: usize, since: u64) -> bool {
        self.history[dest]
            .iter()
            .any(|&(_, from, until)| from <= since && until.is_none())
    }
}
