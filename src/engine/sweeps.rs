//! When the engine's tables are swept of what expired, and the summary of
//! what their bounds cost, said in the log at most once per
//! [`crate::summary::EVERY`] when it changed.

use super::cache::Cache;
use super::tables::{Limits, Tables};
use crate::bounded::earliest;
use crate::discovery::Discovery;
use crate::summary::Summary;
use std::time::{Duration, Instant};

/// What expired is swept from the tables when it expires, at most this
/// often: an engine with nothing due to expire sleeps.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(super) struct Sweeps {
    /// When the tables were last swept.
    swept_at: Option<Instant>,
    /// What the last summary of tables at their bounds said, and when.
    limits_logged: Summary<Limits>,
}

impl Sweeps {
    /// When the tables are next swept, as of the engine's clock `now`:
    /// when the cache or discovery may have something expired, or a
    /// summary of `tables` (theirs) is due, but not within [`SWEEP_EVERY`]
    /// of the last sweep.
    pub fn due(
        &self,
        cache: &Cache,
        discovery: &Discovery,
        tables: &Tables,
        now: Instant,
    ) -> Option<Instant> {
        let summary = self.limits_logged.due_at(&tables.limits(), now);
        let due = [cache.sweep_due(), discovery.sweep_due(now), summary]
            .into_iter()
            .fold(None, earliest)?;
        Some(self.swept_at.map_or(due, |t| due.max(t + SWEEP_EVERY)))
    }

    /// The tables were swept at `now`, and are as `tables` says: says in
    /// the log, like discovery's drops, when they reached their bounds.
    pub fn swept(&mut self, tables: &Tables, now: Instant) {
        self.swept_at = Some(now);
        let limits = tables.limits();
        if !self.limits_logged.due(&limits, now) {
            return;
        }
        let Limits {
            cache_evicted: cache,
            bindings_evicted: learned,
            failures_evicted: failed,
            lookups_refused: refused,
            checks_skipped: skipped,
        } = limits;
        let t = tables.discovery;
        let (learned_cap, lookups_cap) = (t.max_bindings, t.max_lookups);
        log::info!(
            "tables at their bounds so far: destination cache {cache} evicted (of {}), \
             bindings {learned} evicted (of {learned_cap}), failures {failed} evicted, \
             lookups refused {refused} (of {lookups_cap} in flight), hints left unchecked {skipped}",
            tables.max_cached,
        );
    }
}
