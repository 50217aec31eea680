//! The checks the simulation makes: every reply against what was true on
//! the network when it was given, and every request against its bound.
//! The segment's `Checker` (`sim/checker.rs`) owns that truth (the GIDs
//! each host held, when) and the requests in flight, and keeps the
//! verdicts; [`Sim::answer`] brings it what only the segment knows (is the
//! destination up, is the name stolen).

use crate::sim::{Sim, MS};
use acm_prov_sys::ACM_STATUS_ENODATA;
use ibacm_urdma::request::msg::MsgBuf;
use ibacm_urdma::request::path::PathRecord;

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
