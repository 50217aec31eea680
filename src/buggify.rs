//! Faults the core injects into itself, at chosen places, when a seeded
//! simulation asks for them (FoundationDB's BUGGIFY): a datagram the core
//! meant to send that never leaves, a resolver that could not find out, a
//! table of lookups that is full, a binding evicted early, a reply held
//! back as if over its rate, a timer that wakes for nothing.
//!
//! Each is something that happens in production only under load or bad
//! luck, so the ordinary tests rarely reach the code that copes with it.
//! The simulation turns a random subset of them on for a run and checks
//! its invariants after every step all the same: no wrong answer, no "does
//! not exist" for a host that exists, every request answered in time.
//!
//! A shipped daemon never turns them on: [`Buggify::off`] is the default,
//! and a site that is off costs one test of a flag.

use std::fmt;

/// A place where the core can fail on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A datagram the core produced is lost before it leaves.
    DatagramLost,
    /// The system's resolver could not find out (`EAI_AGAIN`).
    ResolverFailed,
    /// The table of lookups in flight is full.
    LookupsFull,
    /// A learned binding is evicted when it is read.
    BindingEvicted,
    /// A reply to a query is held back, as if over `urdma_reply_rate`.
    ReplyWithheld,
    /// The next deadline is now, whatever is due.
    EarlyWake,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::DatagramLost,
        Fault::ResolverFailed,
        Fault::LookupsFull,
        Fault::BindingEvicted,
        Fault::ReplyWithheld,
        Fault::EarlyWake,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fault::DatagramLost => "datagram lost",
            Fault::ResolverFailed => "resolver failed",
            Fault::LookupsFull => "lookups full",
            Fault::BindingEvicted => "binding evicted",
            Fault::ReplyWithheld => "reply withheld",
            Fault::EarlyWake => "early wake",
        })
    }
}

/// How many times each fault was injected, in [`Fault::ALL`]'s order.
pub type Injected = [u64; Fault::ALL.len()];

/// Which faults fire, and how often: off, or on for a set of them, each
/// firing at a site with a given chance, drawn from a seeded generator.
#[derive(Clone, Debug, Default)]
pub struct Buggify {
    on: Option<On>,
}

#[derive(Clone, Debug)]
struct On {
    enabled: [bool; Fault::ALL.len()],
    /// Chance of firing, in parts of 2^32.
    chance: u64,
    state: u64,
    injected: Injected,
}

impl Buggify {
    /// No faults: what every shipped build runs.
    pub fn off() -> Buggify {
        Buggify::default()
    }

    /// The faults in `enabled`, each firing with `percent` % chance where
    /// it can, drawn from `seed`.
    pub fn new(seed: u64, enabled: &[Fault], percent: u8) -> Buggify {
        let mut on = [false; Fault::ALL.len()];
        for f in enabled {
            on[f.index()] = true;
        }
        Buggify {
            on: Some(On {
                enabled: on,
                chance: (u64::from(percent.min(100)) << 32) / 100,
                state: seed,
                injected: Injected::default(),
            }),
        }
    }

    /// Whether `fault` happens here, this time.
    #[inline]
    pub fn fires(&mut self, fault: Fault) -> bool {
        let Some(on) = &mut self.on else {
            return false;
        };
        if !on.enabled[fault.index()] {
            return false;
        }
        let fired = splitmix(&mut on.state) >> 32 < on.chance;
        if fired {
            on.injected[fault.index()] += 1;
        }
        fired
    }

    /// How many times each fault fired so far.
    pub fn injected(&self) -> Injected {
        self.on
            .as_ref()
            .map_or_else(Injected::default, |on| on.injected)
    }
}

/// SplitMix64: tiny, fast and good enough to decide where faults fall.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_never_fires_and_on_fires_only_what_is_enabled_at_its_rate() {
        let mut off = Buggify::off();
        assert!(Fault::ALL.iter().all(|&f| !off.fires(f)));
        assert_eq!(off.injected(), Injected::default());

        let mut b = Buggify::new(7, &[Fault::DatagramLost], 10);
        let fired = (0..10_000).filter(|_| b.fires(Fault::DatagramLost)).count();
        assert!((800..1200).contains(&fired), "{fired} of 10000 at 10 %");
        assert!(!(0..1000).any(|_| b.fires(Fault::EarlyWake)));
        assert_eq!(b.injected()[0], fired as u64);
        assert_eq!(b.injected()[1..], [0; 5]);

        let mut always = Buggify::new(1, &Fault::ALL, 100);
        assert!(Fault::ALL.iter().all(|&f| always.fires(f)));
    }

    #[test]
    fn the_same_seed_fires_at_the_same_places() {
        let run = |seed| {
            let mut b = Buggify::new(seed, &Fault::ALL, 25);
            (0..200)
                .map(|i| b.fires(Fault::ALL[i % 6]))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
