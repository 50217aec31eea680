//! Per-source limit on discovery replies. A reply is never larger than its
//! query, so a forged source gains no amplification; the limit also bounds
//! how much traffic one source can make this host send anywhere.

use crate::fastmap::Map;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

/// Seconds of the rate a source may spend at once: a host resolving a
/// burst of new destinations asks many at a time, then nothing.
pub const BURST_SECONDS: u32 = 4;
/// Sources tracked one by one; beyond that (a spoofed flood), the rest
/// share one bucket, so memory stays bounded.
const MAX_SOURCES: usize = 4096;
/// The shortest time between two sweeps of a full table: without it, a
/// flood from new sources while every tracked one is busy would scan the
/// whole table once per datagram.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// The tokens it holds at `now`: what it had plus the refill since.
    fn level(&self, rate: f64, burst: f64, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        (self.tokens + elapsed * rate).min(burst)
    }
}

pub struct RateLimiter {
    /// Replies per second per source; 0 is no limit.
    rate: f64,
    burst: f64,
    buckets: Map<IpAddr, Bucket>,
    overflow: Option<Bucket>,
    swept_at: Option<Instant>,
}

impl RateLimiter {
    pub fn new(per_second: u32) -> RateLimiter {
        RateLimiter {
            rate: f64::from(per_second),
            burst: f64::from(per_second) * f64::from(BURST_SECONDS),
            buckets: Map::default(),
            overflow: None,
            swept_at: None,
        }
    }

    /// Takes one from the allowance every source shares: a limiter used
    /// so paces work, whoever asks for it.
    pub fn allow_any(&mut self, now: Instant) -> bool {
        self.allow(IpAddr::V4(Ipv4Addr::UNSPECIFIED), now)
    }

    /// Takes one reply's worth from `src`'s allowance.
    pub fn allow(&mut self, src: IpAddr, now: Instant) -> bool {
        if self.rate == 0.0 {
            return true;
        }
        let (rate, burst) = (self.rate, self.burst);
        let known = self.buckets.contains_key(&src);
        let sweep_due = self
            .swept_at
            .is_none_or(|t| now.saturating_duration_since(t) >= SWEEP_EVERY);
        if !known && self.buckets.len() >= MAX_SOURCES && sweep_due {
            // A full bucket is the same as none: forget idle sources.
            self.buckets
                .retain(|_, b| b.level(rate, burst, now) < burst);
            self.swept_at = Some(now);
        }
        let tracked = known || self.buckets.len() < MAX_SOURCES;
        let fresh = Bucket {
            tokens: burst,
            at: now,
        };
        let mut bucket = match self.buckets.get(&src) {
            Some(b) => *b,
            None if tracked => fresh,
            None => self.overflow.unwrap_or(fresh),
        };
        bucket.tokens = bucket.level(rate, burst, now);
        bucket.at = now;
        let allowed = bucket.tokens >= 1.0;
        if allowed {
            bucket.tokens -= 1.0;
        }
        if tracked {
            self.buckets.insert(src, bucket);
        } else {
            self.overflow = Some(bucket);
        }
        allowed
    }

    pub fn sources(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    fn ip(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
    }

    #[test]
    fn a_burst_passes_then_the_rate_holds_per_source() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(100);
        let passed = (0..1000).filter(|_| l.allow(ip(1), t0)).count();
        assert_eq!(passed, 400, "four seconds' worth at once");
        assert!(l.allow(ip(2), t0), "another source has its own allowance");
        let t1 = t0 + Duration::from_millis(500);
        let passed = (0..1000).filter(|_| l.allow(ip(1), t1)).count();
        assert_eq!(passed, 50, "then 100 per second");
        let t2 = t1 + Duration::from_secs(60);
        let passed = (0..1000).filter(|_| l.allow(ip(1), t2)).count();
        assert_eq!(passed, 400, "idle time refills up to the burst, no more");
    }

    #[test]
    fn zero_is_no_limit() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(0);
        assert!((0..100_000).all(|_| l.allow(ip(1), t0)));
        assert_eq!(l.sources(), 0);
    }

    #[test]
    fn a_spoofed_flood_is_bounded_in_memory_and_shares_one_allowance() {
        let t0 = Instant::now();
        let mut l = RateLimiter::new(1);
        // Every source spends its whole burst, so none is idle.
        for n in 0..MAX_SOURCES as u32 {
            for _ in 0..BURST_SECONDS {
                assert!(l.allow(ip(n), t0));
            }
        }
        assert_eq!(l.sources(), MAX_SOURCES);
        let passed = (0..10_000)
            .filter(|n| l.allow(ip(MAX_SOURCES as u32 + n), t0))
            .count();
        assert_eq!(
            passed, BURST_SECONDS as usize,
            "new sources share one bucket"
        );
        assert_eq!(l.sources(), MAX_SOURCES);
        // Once the tracked sources are idle again they are forgotten.
        let later = t0 + Duration::from_secs(u64::from(BURST_SECONDS));
        assert!(l.allow(ip(1_000_000), later));
        assert_eq!(l.sources(), 1);
    }
}
