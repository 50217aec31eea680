//! The engine's deadlines, in one table: whatever runs the engine asks it
//! for the earliest ([`Timers::next`]) and calls
//! [`super::Engine::on_timers`] then, and nothing is due that the table
//! does not hold.

use std::time::Instant;

/// What a deadline is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timer {
    /// The earliest retry or stage deadline of discovery's lookups.
    Lookup,
    /// Discovery's next announcement, withdrawal or paced batch.
    Announce,
    /// What expired leaves the destination cache and discovery's tables.
    Sweep,
    /// Cached paths near the end of a lifetime stop being hits without
    /// the clock.
    Review,
}

const TIMERS: usize = 4;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timers([Option<Instant>; TIMERS]);

impl Timers {
    pub fn set(&mut self, timer: Timer, at: Option<Instant>) {
        self.0[timer as usize] = at;
    }

    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.0[timer as usize]
    }

    /// The earliest deadline of all.
    pub fn next(&self) -> Option<Instant> {
        self.0.iter().flatten().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_earliest_deadline_of_any_timer_is_next() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Sweep, Some(t0 + Duration::from_secs(1)));
        t.set(Timer::Lookup, Some(t0 + Duration::from_millis(5)));
        assert_eq!(t.next(), Some(t0 + Duration::from_millis(5)));
        assert_eq!(t.get(Timer::Announce), None);
        t.set(Timer::Lookup, None);
        assert_eq!(t.next(), Some(t0 + Duration::from_secs(1)));
    }
}
