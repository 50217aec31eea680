//! What discovery counts: what it refused, by reason (an attack or a
//! misconfigured peer shows there), what it sent and received, and how its
//! lookups ended. Exported as metrics (`crate::metrics`).

/// Discovery datagrams dropped, by reason; each drop is also logged.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DropCounts {
    pub malformed: u64,
    pub unsolicited: u64,
    /// Replies to this host's own queries that came after it stopped
    /// waiting for them (a try answered twice, a lookup already decided):
    /// normal under loss or load, so not counted as unsolicited.
    pub late: u64,
    pub wrong_source: u64,
    pub own: u64,
    /// Without a valid MAC of a known key (authentication on).
    pub unauthenticated: u64,
    /// Verified, but seen before, or older than the newest from its source.
    pub replayed: u64,
    /// Verified, but stamped more than the tolerated skew away from this
    /// host's clock: a clock that is off, more often than an old replay.
    pub stale: u64,
    /// Verified, but not checkable for replay: the memory of recent
    /// messages was full (a flood of valid messages, or a too small bound).
    pub replay_full: u64,
    /// Queries left unanswered by the per-source reply limit.
    pub rate_limited: u64,
}

/// Which count a dropped datagram adds to.
pub type DropReason = fn(&mut DropCounts) -> &mut u64;

impl DropCounts {
    /// Counts a datagram from `from` dropped for `reason`, and says why in
    /// the trace log.
    pub fn count(
        &mut self,
        reason: DropReason,
        from: std::net::SocketAddr,
        why: impl std::fmt::Display,
    ) {
        *reason(self) += 1;
        let total = self.total();
        log::trace!("discovery: dropped a datagram from {from}: {why} ({total} dropped so far)");
    }

    /// Verified datagrams refused as old or uncheckable: none in normal
    /// operation with keys and synchronised clocks.
    pub fn replay_window(&self) -> u64 {
        self.replayed + self.stale + self.replay_full
    }

    pub fn total(&self) -> u64 {
        self.malformed
            + self.unsolicited
            + self.late
            + self.wrong_source
            + self.own
            + self.unauthenticated
            + self.replayed
            + self.stale
            + self.replay_full
            + self.rate_limited
    }
}

impl std::fmt::Display for DropCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (malformed {}, unsolicited {}, late {}, wrong source {}, own {}, \
             unauthenticated {}, replayed {}, stale {}, replay memory full {}, \
             rate-limited {})",
            self.total(),
            self.malformed,
            self.unsolicited,
            self.late,
            self.wrong_source,
            self.own,
            self.unauthenticated,
            self.replayed,
            self.stale,
            self.replay_full,
            self.rate_limited
        )
    }
}

/// Datagrams received and sent, by kind: the load discovery puts on the
/// segment.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Traffic {
    pub received: u64,
    /// Queries to one host: lookups of IP addresses, confirmations, checks.
    pub unicast_queries: u64,
    /// Queries to the groups: lookups of names on the segment.
    pub group_queries: u64,
    /// Start queries: to the groups, when discovery starts, so that the
    /// hosts of the segment announce themselves.
    pub start_queries: u64,
    pub replies: u64,
    /// Announcements and withdrawals.
    pub announcements: u64,
}

/// Everything discovery counts, in one value ([`super::Discovery::counts`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts {
    pub drops: DropCounts,
    pub traffic: Traffic,
    pub lookups: LookupStats,
    /// Hints not checked because `MAX_CHECKS` (`inflight/probe.rs`) checks were
    /// in flight.
    pub checks_skipped: u64,
    /// Checks whose holder never answered: the binding was kept.
    pub checks_unanswered: u64,
    /// Name lookups left unanswered because hosts with different GIDs
    /// confirmed the name.
    pub conflicts: u64,
    /// Names heard announced by two endpoints: each is asked of the
    /// groups, not of one host (docs/protocol.md, *Name hints*).
    pub disputed_names: u64,
}

/// How lookups ended, and how long they took.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LookupStats {
    pub resolved: crate::metrics::Histogram,
    pub failed: crate::metrics::Histogram,
    /// Names asked of the system's resolver, and how many it did not know.
    pub nss_asked: u64,
    pub nss_failed: u64,
    /// Of those, the resolver's failures (not "no such name").
    pub nss_errors: u64,
}
