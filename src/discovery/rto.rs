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
//! transaction id of its own (`inflight/probes.rs`), so a reply that comes after
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

//!
//! Replies are timed per peer (the address asked), as TCP times each
//! connection: a host that answers slowly, on purpose or under load, slows
//! only the queries asked of it (docs/protocol.md, trust table: reply). A
//! query to a peer never timed, and every group query, waits what the
//! peers timed lately say in the middle: the median of the latest
//! [`SEGMENT_PEERS`] and the floor, which one slow host cannot move. What a peer taught
//! fades: the excess over `urdma_timeout` halves every [`DECAY`] without a
//! sample, so one slow reply on a segment that rarely asks does not
//! lengthen its tries for good.

use crate::fastmap::Map;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The longest try, as a multiple of `urdma_timeout`.
pub const CEILING: u32 = 4;
/// What a peer's replies taught beyond `urdma_timeout` halves for every
/// this long without a sample.
pub const DECAY: Duration = Duration::from_secs(30);
/// A peer not timed for this long starts afresh at its next sample.
const STALE: Duration = Duration::from_secs(300);
/// Peers timed one by one; more (a host that asks many) replace the one
/// timed longest ago.
const PEERS: usize = 1024;
/// The latest peers timed whose median times what has no timer of its own.
pub const SEGMENT_PEERS: usize = 16;

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
    #[cfg(test)]
    pub fn timeout(&self) -> Duration {
        self.faded(0)
    }

    /// How long a try waits after `halvings` times [`DECAY`] without a
    /// sample: the excess over the floor halved as often.
    fn faded(&self, halvings: u32) -> Duration {
        let measured = self
            .smoothed
            .map_or(Duration::ZERO, |(srtt, var)| srtt + var * 4);
        let excess = measured.saturating_sub(self.floor) / (1u32 << halvings.min(31));
        // Faded below a millisecond it is gone, and nothing is left to fade.
        let excess = if excess < Duration::from_millis(1) {
            Duration::ZERO
        } else {
            excess
        };
        (self.floor + excess).min(self.ceiling())
    }

    /// The longest a try can ever wait.
    pub fn ceiling(&self) -> Duration {
        self.floor * CEILING
    }

    /// How long try `n` of a query (0: the first) waits now.
    #[cfg(test)]
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

/// The try times of every peer asked, and of the segment.
#[derive(Debug, Clone)]
pub struct RetryTimers {
    floor: Duration,
    /// Each peer's timer, with when it was last sampled.
    peers: Map<IpAddr, (RetryTimer, Instant)>,
    /// The latest peers sampled, each once, the latest last.
    recent: VecDeque<IpAddr>,
    /// The segment's try time as of `segment_at` (for the metrics, which
    /// have no clock of their own).
    segment: Duration,
    segment_at: Option<Instant>,
}

impl RetryTimers {
    /// Timers whose tries last `floor` (`urdma_timeout`) at least.
    pub fn new(floor: Duration) -> RetryTimers {
        RetryTimers {
            floor,
            peers: Map::default(),
            recent: VecDeque::new(),
            segment: floor,
            segment_at: None,
        }
    }

    /// `peer` answered a try `rtt` after it left.
    pub fn sample(&mut self, peer: IpAddr, rtt: Duration, now: Instant) {
        if !self.peers.contains_key(&peer) && self.peers.len() >= PEERS {
            let oldest = self.peers.iter().min_by_key(|(_, (_, at))| *at);
            if let Some(ip) = oldest.map(|(ip, _)| *ip) {
                self.peers.remove(&ip);
            }
        }
        let floor = self.floor;
        let (timer, at) = self
            .peers
            .entry(peer)
            .or_insert_with(|| (RetryTimer::new(floor), now));
        if now.saturating_duration_since(*at) >= STALE {
            *timer = RetryTimer::new(floor);
        }
        timer.sample(rtt);
        *at = now;
        self.recent.retain(|ip| *ip != peer);
        self.recent.push_back(peer);
        if self.recent.len() > SEGMENT_PEERS {
            self.recent.pop_front();
        }
        self.refresh(now);
    }

    fn peer(&self, peer: &IpAddr, now: Instant) -> Option<Duration> {
        let (timer, at) = self.peers.get(peer)?;
        let idle = now.saturating_duration_since(*at).as_millis() / DECAY.as_millis();
        Some(timer.faded(u32::try_from(idle).unwrap_or(u32::MAX)))
    }

    /// How long a first try to `peer` (the groups: `None`) waits now.
    pub fn timeout(&self, peer: Option<IpAddr>, now: Instant) -> Duration {
        if let Some(t) = peer.and_then(|p| self.peer(&p, now)) {
            return t;
        }
        // The floor counts as one more peer: a host that timed one peer
        // alone (which may be the one that wants it slow) keeps the floor.
        let mut times: Vec<Duration> = self
            .recent
            .iter()
            .filter_map(|p| self.peer(p, now))
            .chain([self.floor])
            .collect();
        times.sort_unstable();
        times[(times.len() - 1) / 2]
    }

    /// The longest a try can ever wait.
    pub fn ceiling(&self) -> Duration {
        self.floor * CEILING
    }

    /// The segment's try time, as of the last sample or
    /// [`RetryTimers::refresh`].
    pub fn current(&self) -> Duration {
        self.segment
    }

    /// Brings [`RetryTimers::current`] up to `now`.
    pub fn refresh(&mut self, now: Instant) {
        self.segment = self.timeout(None, now);
        self.segment_at = Some(now);
    }

    /// When [`RetryTimers::current`] fades next, while it is above the
    /// floor.
    pub fn refresh_due(&self) -> Option<Instant> {
        let at = self.segment_at?;
        (self.segment > self.floor).then_some(at + DECAY)
    }
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
    fn the_documents_give_the_stage_time_the_code_takes() {
        let cfg = crate::config::Config::default();
        let (first, tries) = (cfg.timeout(), cfg.retries + 1);
        let ceiling = first * CEILING;
        let secs = |d: Duration| format!("{} s", d.as_secs_f64());
        let (usual, slow) = (
            secs(stage_time(first, tries, ceiling)),
            secs(stage_time(ceiling, tries, ceiling)),
        );
        let sample = include_str!("../../ibacm.conf");
        let man = include_str!("../../docs/man/ibacm_urdma.7");
        let demo = include_str!("../../scripts/demo.sh");
        for (doc, text) in [("ibacm.conf", sample), ("ibacm_urdma.7", man)] {
            let flat = text.replace("\n# ", " ").replace('\n', " ");
            assert!(
                flat.contains(&format!("{usual} at the defaults"))
                    && flat.contains(&format!("{slow} at most")),
                "{doc} must say a stage takes {usual}, at most {slow}"
            );
        }
        assert!(demo.contains(&format!(": {usual})")), "the demo's {usual}");
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

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    #[test]
    fn a_slow_peer_slows_only_the_queries_asked_of_it() {
        let t0 = Instant::now();
        let mut t = RetryTimers::new(500 * MS);
        for i in 0..5u8 {
            t.sample(ip(i), MS, t0);
        }
        // A claimant that confirms 3.4 s late, over and over.
        for n in 0..20u64 {
            t.sample(ip(66), 3_400 * MS, t0 + MS * n as u32);
        }
        let now = t0 + 20 * MS;
        assert_eq!(t.timeout(Some(ip(66)), now), 2_000 * MS);
        assert_eq!(t.timeout(Some(ip(1)), now), 500 * MS);
        assert_eq!(t.timeout(Some(ip(99)), now), 500 * MS, "never timed");
        assert_eq!(t.timeout(None, now), 500 * MS, "the groups");
        assert_eq!(t.current(), 500 * MS);
    }

    #[test]
    fn a_segment_whose_peers_are_slow_waits_longer_for_all() {
        let t0 = Instant::now();
        let mut t = RetryTimers::new(500 * MS);
        for i in 0..10u8 {
            for _ in 0..10 {
                t.sample(ip(i), 900 * MS, t0);
            }
        }
        assert!(t.timeout(None, t0) > 900 * MS, "{:?}", t.timeout(None, t0));
        assert!(t.timeout(Some(ip(200)), t0) > 900 * MS);
    }

    #[test]
    fn what_a_slow_reply_taught_fades_on_a_segment_that_rarely_asks() {
        let t0 = Instant::now();
        let mut t = RetryTimers::new(500 * MS);
        t.sample(ip(1), 1_000 * MS, t0);
        t.sample(ip(2), 1_000 * MS, t0);
        assert!(t.current() > 1_000 * MS, "both slow: the segment too");
        let grown = t.timeout(Some(ip(1)), t0);
        assert!(grown > 1_000 * MS, "{grown:?}");
        assert_eq!(t.refresh_due(), Some(t0 + DECAY));
        let later = t0 + DECAY * 2;
        let faded = t.timeout(Some(ip(1)), later);
        // Measured 1 s + 4 × 0.5 s = 3 s (capped at 2 s): 0.5 s + 2.5 s / 4.
        assert_eq!(faded, 1_125 * MS);
        t.refresh(t0 + DECAY * 20);
        assert_eq!(t.current(), 500 * MS);
        assert_eq!(t.refresh_due(), None, "nothing more to fade");
    }
}
