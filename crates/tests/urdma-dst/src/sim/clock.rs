//! Virtual time as the hosts see it: the `Instant` their engines are
//! given, and the wall clock each reads for authentication, off by a skew
//! of its own.

use super::stack::Authenticated;
use super::MS;
use crate::net::Rng;
use ibacm_urdma::config::keyfile::KeyFile;
use ibacm_urdma::discovery::auth::Auth;
use ibacm_urdma::discovery::seal::{Keyring, WallClock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const OLD_KEY: &str = "1 000102030405060708090a0b0c0d0e0f";
const NEW_KEY: &str = "2 f0e0d0c0b0a090807060504030201000";
/// The wall clock's reading at virtual time 0.
const EPOCH_US: u64 = 1_800_000_000_000_000;

pub(crate) struct Clock {
    /// Virtual time 0.
    base: Instant,
    /// Virtual time in ns, for the hosts' wall clocks.
    now_ns: Arc<AtomicU64>,
    /// Each host's wall-clock error, in µs, once drawn.
    skews: HashMap<usize, i64>,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock {
            base: Instant::now(),
            now_ns: Arc::new(AtomicU64::new(0)),
            skews: HashMap::new(),
        }
    }

    /// Virtual time `t` (ns) as an engine sees it.
    pub(crate) fn instant(&self, t: u64) -> Instant {
        self.base + Duration::from_nanos(t)
    }

    /// An engine's `Instant` in virtual ns.
    pub(crate) fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// The hosts' wall clocks move on to `t`.
    pub(crate) fn set(&self, t: u64) {
        self.now_ns.store(t, Ordering::Relaxed);
    }

    /// Host `host`'s keys (which one signs depends on when it starts,
    /// `now`) and its clock, off by a skew of its own, drawn from `rng`
    /// the first time.
    pub(crate) fn auth_for(
        &mut self,
        host: usize,
        a: Authenticated,
        now: u64,
        rng: &mut Rng,
    ) -> Auth {
        let rotated = a.rotate_at_ms.is_some_and(|t| now >= t * MS);
        let keys = match rotated {
            true => format!("{NEW_KEY}\n{OLD_KEY}\n"),
            false => format!("{OLD_KEY}\n{NEW_KEY}\n"),
        };
        let ring = Keyring::new(&KeyFile::parse(keys, "sim").expect("keys"));
        // A host's clock keeps its error across restarts (one set back
        // would be refused until it caught up: docs/protocol.md).
        let span = 2 * a.skew_ms * 1000 + 1;
        let skew = *self.skews.entry(host).or_insert_with(|| {
            let draw = rng.below(span);
            draw as i64 - (a.skew_ms * 1000) as i64
        });
        let clock = self.now_ns.clone();
        Auth::new(
            ring,
            WallClock::new(move || {
                let t = EPOCH_US + clock.load(Ordering::Relaxed) / 1000;
                t.saturating_add_signed(skew)
            }),
        )
    }
}
