//! The engine's deadlines, each named by what it is for: whatever runs the
//! engine asks for the earliest ([`Deadlines::next`], handed out as
//! [`super::Effects::deadline`]) and puts in [`super::Input::Timers`]
//! then, and nothing is due that they do not hold.
//!
//! They are read from their owners (discovery, the cache, the sweeps) at
//! each poll that follows a change, not kept beside them: every input that
//! can move one marks the engine changed, so the poll after it is the one
//! place they are read, and a copy kept up to date between polls would be
//! read by nobody.

use std::time::Instant;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deadlines {
    /// The earliest retry or stage deadline of discovery's lookups.
    pub lookup: Option<Instant>,
    /// Discovery's next announcement, withdrawal or paced batch.
    pub announce: Option<Instant>,
    /// What expired leaves the destination cache and discovery's tables.
    pub sweep: Option<Instant>,
    /// Cached paths near the end of a lifetime stop being hits without
    /// the clock.
    pub review: Option<Instant>,
}

impl Deadlines {
    /// The earliest deadline of all.
    pub fn next(&self) -> Option<Instant> {
        [self.lookup, self.announce, self.sweep, self.review]
            .into_iter()
            .flatten()
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_earliest_deadline_of_any_timer_is_next() {
        let t0 = Instant::now();
        let mut t = Deadlines::default();
        assert_eq!(t.next(), None);
        t.sweep = Some(t0 + Duration::from_secs(1));
        t.lookup = Some(t0 + Duration::from_millis(5));
        assert_eq!(t.next(), Some(t0 + Duration::from_millis(5)));
        t.lookup = None;
        assert_eq!(t.next(), Some(t0 + Duration::from_secs(1)));
    }
}
