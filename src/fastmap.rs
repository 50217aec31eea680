//! The hash map of every table on the request path.
//!
//! std's SipHash was half of a cache hit's instructions. foldhash is as
//! fast as unkeyed hashes but seeded at random per process, so keys a client
//! or a peer chooses still cannot be aimed at one bucket.

use std::hash::{BuildHasher, Hash, Hasher};

pub type Map<K, V> = std::collections::HashMap<K, V, State>;
pub type Set<K> = std::collections::HashSet<K, State>;

/// foldhash's [`foldhash::fast::RandomState`], with the whole hash of a key
/// inlined into the lookup: std's provided `hash_one` was left out of line,
/// and the key's `Hash` with it, each a call with the hasher's state in
/// memory on every cache hit.
#[derive(Clone, Default, Debug)]
pub struct State(foldhash::fast::RandomState);

impl BuildHasher for State {
    type Hasher = foldhash::fast::FoldHasher<'static>;

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
