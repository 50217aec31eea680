//! The hash map of every table on the request path.
//!
//! std's SipHash was half of a cache hit's instructions. foldhash is as
//! fast as unkeyed hashes; seeded at random once per process, keys a client
//! or a peer chooses still cannot be aimed at one bucket. A simulation
//! seeds the maps its thread makes ([`seed_thread`]) so that every table
//! iterates in the same order, run after run, and a failing run replays
//! exactly, whatever other simulations run on other threads.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

pub type Map<K, V> = std::collections::HashMap<K, V, Seeded>;
pub type Set<K> = std::collections::HashSet<K, Seeded>;

/// The process's random seed; 0 until chosen.
static SEED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The seed of the maps this thread makes, when set (0: the process's).
    static THREAD_SEED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Makes every map this thread makes from now on hash with `seed`
/// (simulations and tests: the daemon's seed is random).
pub fn seed_thread(seed: u64) {
    THREAD_SEED.with(|s| s.set(seed | 1));
}

fn seed() -> u64 {
    let own = THREAD_SEED.with(std::cell::Cell::get);
    if own != 0 {
        return own;
    }
    match SEED.load(Ordering::Relaxed) {
        0 => {
            let random = std::collections::hash_map::RandomState::new().hash_one(0u64) | 1;
            match SEED.compare_exchange(0, random, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => random,
                Err(chosen) => chosen,
            }
        }
        s => s,
    }
}

/// foldhash with the process's seed, and the whole hash of a key inlined
/// into the lookup: std's provided `hash_one` was left out of line, and
/// the key's `Hash` with it, each a call with the hasher's state in memory
/// on every cache hit.
#[derive(Clone, Debug)]
pub struct Seeded(foldhash::fast::FixedState);

impl Default for Seeded {
    fn default() -> Self {
        Seeded(foldhash::fast::FixedState::with_seed(seed()))
    }
}

impl BuildHasher for Seeded {
    type Hasher = <foldhash::fast::FixedState as BuildHasher>::Hasher;

    #[inline(always)]
    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }

    // What the provided method does, but inlined (calling foldhash's
    // `hash_one` instead would get std's out-of-line one back).
    #[allow(clippy::manual_hash_one)]
    #[inline(always)]
    fn hash_one<T: Hash>(&self, x: T) -> u64 {
        let mut h = self.build_hasher();
        x.hash(&mut h);
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_made_after_one_seed_iterate_alike() {
        let order = || {
            let m: Map<u32, ()> = (0..64).map(|i| (i, ())).collect();
            m.keys().copied().collect::<Vec<_>>()
        };
        seed_thread(42);
        assert_eq!(order(), order());
    }

    #[test]
    fn each_thread_keeps_its_own_seed() {
        let order = |seed: u64| {
            std::thread::spawn(move || {
                seed_thread(seed);
                let m: Map<u32, ()> = (0..64).map(|i| (i, ())).collect();
                m.keys().copied().collect::<Vec<_>>()
            })
        };
        // Two simulations at once, seeded differently, then one seeded as
        // the first: the first's order comes back, whatever ran beside it.
        let (a, b) = (order(7), order(8));
        let (a, b) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(order(7).join().unwrap(), a);
        assert_ne!(a, b, "64 keys in the same order under two seeds");
    }
}
