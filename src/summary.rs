//! Numbers summed up in the log at the daemon's default level: an operator
//! sees a flood or a table at its bound without turning on tracing, and a
//! flood costs a line per interval, not a line per datagram.

use std::time::{Duration, Instant};

/// How often a summary may be logged again.
pub const EVERY: Duration = Duration::from_secs(10);

/// What a summary in the log said last, and when: it is logged again when
/// its numbers changed, at most every [`EVERY`].
#[derive(Default)]
pub struct Summary<T> {
    pub said: T,
    at: Option<Instant>,
}

impl<T: PartialEq + Clone> Summary<T> {
    /// Whether `value` is to be logged at `now`; if so, it counts as said.
    pub fn due(&mut self, value: &T, now: Instant) -> bool {
        if *value == self.said || self.at.is_some_and(|t| now < t + EVERY) {
            return false;
        }
        self.said = value.clone();
        self.at = Some(now);
        true
    }

    /// When `value` is to be logged, if it differs from what was said:
    /// at once (`now`) or once [`EVERY`] has passed since.
    pub fn due_at(&self, value: &T, now: Instant) -> Option<Instant> {
        (*value != self.said).then(|| self.at.map_or(now, |t| (t + EVERY).max(now)))
    }
}

/// A line that may be written at most once per interval: the ones held
/// back in between are counted, for the next line to say.
#[derive(Default)]
pub struct Throttle {
    at: Option<Instant>,
    held: u64,
}

impl Throttle {
    /// Whether a line may be written at `now`, at most once per `every`:
    /// if so, how many were held back since the last one.
    pub fn pass(&mut self, now: Instant, every: Duration) -> Option<u64> {
        if self.at.is_some_and(|t| now < t + every) {
            self.held += 1;
            return None;
        }
        self.at = Some(now);
        Some(std::mem::take(&mut self.held))
    }
}
