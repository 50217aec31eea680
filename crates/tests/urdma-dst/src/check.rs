//! The checks the simulation makes: every reply against what was true on
//! the network when it was given, and every request against its bound.
//! [`Checker`] owns that truth (the GIDs each host held, when) and the
//! requests in flight, and keeps the verdicts; [`Sim::answer`] brings it
//! what only the segment knows (is the destination up, is the name stolen).

use crate::sim::{Pending, Sim, Violation, MS};
use acm_prov_sys::ACM_STATUS_ENODATA;
use ibacm_urdma::addr::Gid;
use ibacm_urdma::request::msg::MsgBuf;
use ibacm_urdma::request::path::PathRecord;
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
    fn held(&self, dest: usize, g: Gid, now: u64) -> Result<(), String> {
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
    fn up_since(&self, dest: usize, since: u64) -> bool {
        self.history[dest]
            .iter()
            .any(|&(_, from, until)| from <= since && until.is_none())
    }
}

impl Sim {
    pub(crate) fn violation(&mut self, what: String) {
        self.checker.violation(self.now, what);
    }

    /// Checks a reply against the truth and the bounds.
    pub(crate) fn answer(&mut self, id: u64, reply: &MsgBuf) {
        let now = self.now;
        let Some(p) = self.checker.pending.remove(&id) else {
            return self.violation(format!("request {id} answered twice or never asked"));
        };
        let c = &mut self.checker;
        c.answered += 1;
        let took = now - p.issued;
        if took > self.tuning.bound() {
            c.violation(
                now,
                format!(
                    "request {id} of host {} for host {} answered after {} ms",
                    p.host,
                    p.dest,
                    took / MS
                ),
            );
        }
        let mut answered = None;
        if reply.status() == 0 {
            c.succeeded += 1;
            let info = reply.entry(0).info;
            let g = PathRecord::decode(info.first_chunk().expect("64 bytes")).dgid;
            answered = Some(g);
            if self.hosts[p.dest].engine.is_none() {
                c.resolved_while_down += 1;
            }
            if let Err(what) = c.held(p.dest, g, now) {
                let (host, dest) = (p.host, p.dest);
                let what = format!(
                    "host {host} was told host {dest} is at {g}, which it {what} (request {id})"
                );
                c.violation(now, what);
            }
        } else if u32::from(reply.status()) == ACM_STATUS_ENODATA {
            // "Does not exist" is a wrong answer for a host whose daemon
            // held its address and name all the time the answer can rest
            // on: the request's lookup, and a no remembered before it.
            let since = p
                .issued
                .saturating_sub(u64::from(self.tuning.config().negative_timeout_ms) * MS);
            let up = self.checker.up_since(p.dest, since);
            // A name an impostor claims too gets no answer, by design: two
            // hosts claim it, and which one is right cannot be told.
            let stolen = self.impostor.steals(&self.hosts[p.dest].name)
                || crate::sim::adversary::claimed(self, p.dest, p.by_name);
            if up && !stolen {
                self.violation(format!(
                    "host {} was told host {} does not exist (ENODATA), which has been up \
                     all along (request {id})",
                    p.host, p.dest
                ));
            }
        } else if u32::from(reply.status()) == acm_prov_sys::ACM_STATUS_ETIMEDOUT {
            c.timed_out += 1;
        }
        if self.checker.record {
            self.checker.answers.push((p.host, p.dest, now, answered));
        }
        if self.adversary.is_some() {
            crate::sim::adversary::answered(self, &p, reply.status());
        }
    }
}
