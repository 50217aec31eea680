//! The hash map of every table on the request path.
//!
//! std's SipHash was half of a cache hit's instructions. foldhash is as
//! fast as unkeyed hashes; seeded at random once per process, keys a client
//! or a peer chooses still cannot be aimed at one bucket. A simulation sets
//! the seed ([`set_seed`]) so that every table iterates in the same order,
//! run after run, and a failing run replays exactly.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

pub type Map<K, V> = std::collections::HashMap<K, V, Seeded>;
pub type Set<K> = std::collections::HashSet<K, Seeded>;

/// The seed of every map made from now on; 0 until chosen.
static SEED: AtomicU64 = AtomicU64::new(0);

/// Makes every map made from now on hash with `seed` (simulations only:
/// the daemon's seed is random).
pub fn set_seed(seed: u64) {
    SEED.store(seed | 1, Ordering::Relaxed);
}

fn seed() -> u64 {
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
        set_seed(42);
        assert_eq!(order(), order());
    }
}
