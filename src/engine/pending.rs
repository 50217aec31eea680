//! What the engine's next poll has to look at: whether anything happened
//! since the last one, and the time of the latest input.

use std::time::Instant;

#[derive(Default)]
pub(super) struct Pending {
    /// The time of the latest input that had one: what is due "at once"
    /// is due then.
    clock: Option<Instant>,
    /// Something happened since the last poll that may have produced
    /// effects or moved a deadline. A cache hit leaves it alone.
    changed: bool,
}

impl Pending {
    /// An input at `now`: it may produce effects.
    #[inline]
    pub fn input(&mut self, now: Instant) {
        self.changed = true;
        self.clock = Some(self.clock.map_or(now, |c| c.max(now)));
    }

    /// A change that came without a time (the daemon's port and address
    /// changes).
    #[inline]
    pub fn change(&mut self) {
        self.changed = true;
    }

    /// Whether anything happened since the last call.
    #[inline(always)]
    pub fn take(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// The time of the latest input (`None`: none came yet).
    pub fn clock(&self) -> Option<Instant> {
        self.clock
    }
}
