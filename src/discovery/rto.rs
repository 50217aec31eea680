//! How long one try of a query waits for its reply: `urdma_timeout` at
//! least, and longer while replies have lately taken longer, as TCP's
//! retransmission timer does (RFC 6298: a smoothed round-trip time and its
//! variation, the timer their sum with four times the variation).
//!
//! A fixed try time is wrong both ways under load: on a host or segment
//! whose replies take a second (hundreds of daemons on a few cores), every
//! query is sent three times, each copy adds to the load that made the
//! reply late, and the lookup ends with ETIMEDOUT while its reply is on
//! its way. The timer grows with what replies measure and shrinks back as
//! they speed up; it never goes below the configured try time, so a lost
//! datagram on an idle segment is asked again as soon as before.
//!
//! Samples come only from replies that bind (the unicast reply from the
//! queried address to a fresh transaction id: an off-path forger cannot
//! make one), timed from the try they answer: every try of a query has a
//! transaction id of its own (`inflight.rs`), so a reply that comes after
//! a second try still says which it answers. Loss and delay then look
//! different, as they must: a lost first try answered at once on the
//! second is a short sample and leaves the timer as it is, a reply to the
//! first try that comes after the second left is a long one. (Tries that
//! shared one id would force a choice between Karn's rule, which samples
//! only queries sent once and so never sees a reply slower than the try,
//! and timing from the first try, which takes every loss for delay.) The
//! ceiling bounds what an on-path host that delays replies can do: tries
//! of at most `CEILING` times the configured time.
//!
//! Each try of one query waits twice as long as the one before it, up to
//! the ceiling (RFC 6298 §5.5's back-off, per query, as CoAP and mDNS
//! space their retransmissions): the estimate is of the segment, and a
//! peer stalled for a second or two on a loaded host (hundreds of daemons
//! on two cores: the fleet bench saw replies 1.6 to 2.2 s late) is still
//! heard, while a host that is gone costs no more datagrams than before.

use std::time::Duration;

/// The longest try, as a multiple of `urdma_timeout`.
pub const CEILING: u32 = 4;

#[derive(Debug, Clone)]
pub struct RetryTimer {
    floor: Duration,
    /// The smoothed round-trip time and its mean deviation; none before
    /// the first sample.
    smoothed: Option<(Duration, Duration)>,
}

impl RetryTimer {
    /// A timer whose tries last `floor` (`urdma_timeout`) at least.
    pub fn new(floor: Duration) -> RetryTimer {
        RetryTimer {
            floor,
            smoothed: None,
        }
    }

    /// A reply came `rtt` after its query's first try left.
    pub fn sample(&mut self, rtt: Duration) {
        self.smoothed = Some(match self.smoothed {
            None => (rtt, rtt / 2),
            Some((srtt, var)) => {
                // RFC 6298's gains, 1/4 and 1/8.
                let dev = rtt.abs_diff(srtt);
                (srtt * 7 / 8 + rtt / 8, var * 3 / 4 + dev / 4)
            }
        });
    }

    /// How long a try waits now.
    pub fn timeout(&self) -> Duration {
        let measured = self
            .smoothed
            .map_or(Duration::ZERO, |(srtt, var)| srtt + var * 4);
        measured.clamp(self.floor, self.ceiling())
    }

    /// The longest a try can ever wait.
    pub fn ceiling(&self) -> Duration {
        self.floor * CEILING
    }

    /// How long try `n` of a query (0: the first) waits now.
    pub fn try_time(&self, n: u32) -> Duration {
        backoff(self.timeout(), n, self.ceiling())
    }
}

/// How long try `n` (0: the first) waits when the first waits `first`:
/// twice the one before, never more than `ceiling` (nor less than `first`).
pub fn backoff(first: Duration, n: u32, ceiling: Duration) -> Duration {
    first.saturating_mul(1 << n.min(16)).min(ceiling.max(first))
}

/// How long `tries` tries of one query take in all, the first waiting
/// `first`: a discovery stage's time.
pub fn stage_time(first: Duration, tries: u32, ceiling: Duration) -> Duration {
    (0..tries).map(|n| backoff(first, n, ceiling)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn each_try_of_a_query_waits_twice_the_one_before_up_to_the_ceiling() {
        let t = RetryTimer::new(500 * MS);
        let tries: Vec<Duration> = (0..4).map(|n| t.try_time(n)).collect();
        assert_eq!(tries, [500 * MS, 1_000 * MS, 2_000 * MS, 2_000 * MS]);
        assert_eq!(stage_time(500 * MS, 3, t.ceiling()), 3_500 * MS);
        // A try grown to the ceiling stays there.
        assert_eq!(stage_time(2_000 * MS, 3, t.ceiling()), 6_000 * MS);
        assert_eq!(backoff(500 * MS, 40, t.ceiling()), 2_000 * MS);
    }

    #[test]
    fn replies_faster_than_the_configured_try_leave_it_as_it_is() {
        let mut t = RetryTimer::new(500 * MS);
        assert_eq!(t.timeout(), 500 * MS);
        for _ in 0..100 {
            t.sample(MS / 5);
        }
        assert_eq!(t.timeout(), 500 * MS);
    }

    #[test]
    fn slow_replies_lengthen_the_try_and_fast_ones_shorten_it_again() {
        let mut t = RetryTimer::new(500 * MS);
        for _ in 0..20 {
            t.sample(700 * MS);
        }
        // A try now waits longer than the replies take.
        let loaded = t.timeout();
        assert!(loaded > 700 * MS && loaded <= 2_000 * MS, "{loaded:?}");
        for _ in 0..40 {
            t.sample(MS);
        }
        assert_eq!(t.timeout(), 500 * MS);
    }

    #[test]
    fn one_late_reply_is_not_a_trend_but_a_spread_widens_the_try() {
        let mut t = RetryTimer::new(500 * MS);
        for _ in 0..20 {
            t.sample(50 * MS);
        }
        t.sample(400 * MS);
        // srtt 94 ms, deviation 88 ms: 500 ms still covers it.
        assert_eq!(t.timeout(), 500 * MS);
        for _ in 0..5 {
            t.sample(450 * MS);
        }
        assert!(t.timeout() > 500 * MS, "{:?}", t.timeout());
    }

    #[test]
    fn no_delay_makes_a_try_longer_than_the_ceiling() {
        let mut t = RetryTimer::new(500 * MS);
        for _ in 0..10 {
            t.sample(Duration::from_secs(60));
        }
        assert_eq!(t.timeout(), 2_000 * MS);
        assert_eq!(t.ceiling(), 2_000 * MS);
    }
}
