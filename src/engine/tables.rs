//! How full the engine's bounded tables are, against their bounds, and
//! what the bounds cost so far: for the metrics, the log and the tests.

use crate::discovery::Status;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tables {
    /// Destinations in the cache, and its bound.
    pub cached: usize,
    pub max_cached: usize,
    /// Destinations evicted to make room, so far.
    pub cache_evicted: u64,
    /// Requests waiting for a lookup: bounded by the lookups in flight
    /// and what each endpoint's clients ask at once.
    pub waiting: usize,
    /// Discovery's tables.
    pub discovery: Status,
}

/// What the tables' bounds cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Destinations evicted from the full cache.
    pub cache_evicted: u64,
    pub bindings_evicted: u64,
    pub failures_evicted: u64,
    /// Lookups refused: the table of lookups in flight was full.
    pub lookups_refused: u64,
    /// Hints left unchecked: too many checks were in flight.
    pub checks_skipped: u64,
}

/// A table with a bound: how many it holds, and the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded {
    pub table: &'static str,
    pub held: usize,
    pub bound: usize,
}

impl Tables {
    /// The tables with bounds, each with its bound: destination cache,
    /// bindings, remembered failures, lookups in flight.
    pub fn bounded(&self) -> [Bounded; 4] {
        let d = &self.discovery;
        let table = |table, held, bound| Bounded { table, held, bound };
        [
            table("destination cache", self.cached, self.max_cached),
            table("bindings", d.bindings, d.max_bindings),
            table("failures", d.failures, d.max_bindings),
            table("lookups", d.lookups, d.max_lookups),
        ]
    }

    /// What reached a table's bound so far.
    pub fn limits(&self) -> Limits {
        let d = &self.discovery;
        Limits {
            cache_evicted: self.cache_evicted,
            bindings_evicted: d.bindings_evicted,
            failures_evicted: d.failures_evicted,
            lookups_refused: d.lookups_refused,
            checks_skipped: d.checks_skipped,
        }
    }
}
