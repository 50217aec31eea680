//! The checks the simulation makes: every reply against what was true on
//! the network when it was given, and every request against its bound.

use crate::sim::{Sim, Violation, MS, NSS_DELAY};
use acm_prov_sys::ACM_STATUS_ENODATA;
use ibacm_urdma::config::Derivation;
use ibacm_urdma::request::msg::MsgBuf;
use ibacm_urdma::request::path::PathRecord;

impl Sim {
    pub(crate) fn violation(&mut self, what: String) {
        if self.violations.len() < 20 {
            self.violations.push(Violation {
                at_ns: self.now,
                what,
            });
        }
    }

    /// Checks a reply against the truth and the bounds.
    pub(crate) fn answer(&mut self, id: u64, reply: &MsgBuf) {
        let Some(p) = self.pending.remove(&id) else {
            return self.violation(format!("request {id} answered twice or never asked"));
        };
        self.answered += 1;
        let took = self.now - p.issued;
        if took > self.bound() {
            self.violation(format!(
                "request {id} of host {} for host {} answered after {} ms",
                p.host,
                p.dest,
                took / MS
            ));
        }
        let mut answered = None;
        if reply.status() == 0 {
            self.succeeded += 1;
            let info = reply.entry(0).info;
            let g = PathRecord::decode(info.first_chunk().expect("64 bytes")).dgid;
            answered = Some(g);
            if self.hosts[p.dest].engine.is_none() {
                self.resolved_while_down += 1;
            }
            let now = self.now;
            let stale = self.staleness_ns;
            let held = self.history[p.dest].iter().any(|&(h, from, until)| {
                h == g && from <= now && until.is_none_or(|u| u + stale >= now)
            });
            if !held {
                self.violation(format!(
                    "host {} was told host {} is at {g}, which it {} (request {id})",
                    p.host,
                    p.dest,
                    match self.history[p.dest].iter().find(|h| h.0 == g) {
                        Some((_, _, Some(u))) => format!("left {} ms before", (now - u) / MS),
                        _ => "never held".into(),
                    }
                ));
            }
        } else if u32::from(reply.status()) == ACM_STATUS_ENODATA {
            // "Does not exist" is a wrong answer for a host whose daemon
            // held its address and name all the time the answer can rest
            // on: the request's lookup, and a no remembered before it.
            let since = p
                .issued
                .saturating_sub(u64::from(self.config().negative_timeout_ms) * MS);
            let up = self.history[p.dest]
                .iter()
                .any(|&(_, from, until)| from <= since && until.is_none());
            // A name an impostor claims too gets no answer, by design: two
            // hosts claim it, and which one is right cannot be told.
            let stolen = self
                .stolen
                .iter()
                .any(|a| a.to_string() == self.hosts[p.dest].name)
                || crate::sim::adversary::claimed(self, p.dest, p.by_name);
            if up && !stolen {
                self.violation(format!(
                    "host {} was told host {} does not exist (ENODATA), which has been up \
                     all along (request {id})",
                    p.host, p.dest
                ));
            }
        } else if u32::from(reply.status()) == acm_prov_sys::ACM_STATUS_ETIMEDOUT {
            self.timed_out += 1;
        }
        if self.record {
            self.answers.push((p.host, p.dest, self.now, answered));
        }
        if self.adversary.is_some() {
            crate::sim::adversary::answered(self, &p, reply.status());
        }
    }

    /// Every request is answered within its lookup's time (each stage's,
    /// at the longest try the replies' times can make, and one timeout for
    /// a neighbour lookup), and a little.
    pub fn bound(&self) -> u64 {
        let stages = u64::from(!self.tuning.no_segment) + u64::from(self.tuning.nss);
        let timeout = u64::from(self.tuning.timeout_ms) * MS;
        let neighbour = u64::from(self.tuning.derive == Some(Derivation::Eui64));
        let longest_try = timeout * u64::from(ibacm_urdma::discovery::RETRY_CEILING);
        stages * longest_try * u64::from(self.tuning.retries + 1)
            + stages * NSS_DELAY
            + neighbour * timeout
            + MS
    }

    /// Requests are numbered as they are issued, in virtual time, so the
    /// first one pending is the oldest: if it is in time, all are. (A scan
    /// of them all after every step made a 256-host all-pairs run, 130,000
    /// requests pending at once, take hours.)
    pub(crate) fn check_deadlines(&mut self) {
        let bound = self.bound();
        let late = self
            .pending
            .iter()
            .next()
            .filter(|(_, p)| p.issued + bound < self.now)
            .map(|(id, _)| *id);
        if let Some(id) = late {
            let p = &self.pending[&id];
            let what = format!(
                "request {id} of host {} for host {} unanswered after {} ms",
                p.host,
                p.dest,
                (self.now - p.issued) / MS
            );
            self.violation(what);
        }
    }
}
