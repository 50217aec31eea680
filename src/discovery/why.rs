//! Why a lookup could not find out: each stage's last word, kept on the
//! lookup while it runs, and the warning said when it fails so. A lookup
//! that ends with ETIMEDOUT is an error a client sees; the operator reads
//! whom it asked, how often and how it ended without turning on tracing.

use super::inflight::InFlight;
use super::inflight::{Probe, UNKNOWN};
use crate::addr::Address;
use crate::summary::Throttle;
use std::time::{Duration, Instant};

/// The shortest time between two warnings of failed lookups: a host gone
/// from the segment fails every lookup of it.
const FAILURE_LOG_EVERY: Duration = Duration::from_secs(1);

/// Records why the lookup of `key` could not find out at its current
/// stage (the last word of a stage replaces the one before).
pub(super) fn note(inflight: &mut InFlight, key: &Address, why: String) {
    if let Some(l) = inflight.lookup_mut(key) {
        match l.why.last_mut() {
            Some((stage, last)) if *stage == l.stage => *last = why,
            _ => l.why.push((l.stage, why)),
        }
    }
}

/// The stage of the lookup of `key` ran out of time: what its probes
/// still waited for.
pub(super) fn stage_over(inflight: &mut InFlight, key: &Address, now: Instant) {
    let Some(l) = inflight.lookup(key) else {
        return;
    };
    let waiting: Vec<String> = l
        .probes()
        .iter()
        .filter_map(|t| inflight.probes().get(*t))
        .map(|p| asked(p, now))
        .collect();
    let why = match (waiting.is_empty(), l.why.last()) {
        (true, Some((stage, earlier))) if *stage == l.stage => {
            format!("the stage's time ran out; earlier, {earlier}")
        }
        (true, _) => "the stage's time ran out".to_string(),
        (false, _) => format!("the stage's time ran out: {}", waiting.join("; ")),
    };
    note(inflight, key, why);
}

/// Whom probe `p` asked, how often and since when.
pub(super) fn asked(p: &Probe, now: Instant) -> String {
    let since = p.first_sent_at.unwrap_or(now);
    format!(
        "{} asked of {}, {} tr{} in {} ms",
        p.target,
        p.to.map_or_else(|| "the groups".to_string(), |to| to.to_string()),
        p.tries,
        if p.tries == 1 { "y" } else { "ies" },
        now.saturating_duration_since(since).as_millis()
    )
}

/// When a failed lookup was last warned of, and how many were not since.
#[derive(Default)]
pub(super) struct FailureLog(Throttle);

impl FailureLog {
    /// Warns that the lookup of `key` failed with `status` after `took`,
    /// because `why`: at most once a second, the lines held back counted
    /// in the next.
    pub(super) fn warn(
        &mut self,
        key: &Address,
        status: u8,
        took: Duration,
        why: &str,
        now: Instant,
    ) {
        let Some(held) = self.0.pass(now, FAILURE_LOG_EVERY) else {
            return;
        };
        let more = match held {
            0 => String::new(),
            n => format!(" ({n} more lookups failed since the last such line)"),
        };
        let status = match status {
            UNKNOWN => "ETIMEDOUT".to_string(),
            s => format!("status {s}"),
        };
        log::warn!(
            "lookup {key} failed ({status}) after {} ms: {}{more}",
            took.as_millis(),
            if why.is_empty() {
                "no stage found out"
            } else {
                why
            }
        );
    }
}
