//! The hash map of every table on the request path.
//!
//! std's SipHash was half of a cache hit's instructions. foldhash is as
//! fast as unkeyed hashes but seeded at random per process, so keys a client
//! or a peer chooses still cannot be aimed at one bucket.

pub type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type Set<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
