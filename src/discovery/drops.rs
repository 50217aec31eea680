//! What discovery refused, by reason: the numbers an operator reads to see
//! an attack or a misconfigured peer.

/// Discovery datagrams dropped, by reason; each drop is also logged.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DropCounts {
    pub malformed: u64,
    pub unsolicited: u64,
    pub wrong_source: u64,
    pub own: u64,
    /// Without a valid MAC of a known key (authentication on).
    pub unauthenticated: u64,
    /// Verified, but seen before or outside the time window.
    pub replayed: u64,
    /// Queries left unanswered by the per-source reply limit.
    pub rate_limited: u64,
}

impl DropCounts {
    pub fn total(&self) -> u64 {
        self.malformed
            + self.unsolicited
            + self.wrong_source
            + self.own
            + self.unauthenticated
            + self.replayed
            + self.rate_limited
    }
}

impl std::fmt::Display for DropCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (malformed {}, unsolicited {}, wrong source {}, own {}, unauthenticated {}, \
             replayed {}, rate-limited {})",
            self.total(),
            self.malformed,
            self.unsolicited,
            self.wrong_source,
            self.own,
            self.unauthenticated,
            self.replayed,
            self.rate_limited
        )
    }
}
