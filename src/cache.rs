//! Resolved destinations per endpoint, with the address and route lifetimes
//! of the configuration.

use crate::addr::Address;
use crate::fastmap::Map;
use crate::path::{Dest, PathRecord, PATH_RECORD_LEN};
use std::time::Instant;

/// Opaque endpoint key of the cache.
pub type EndpointKey = u64;

#[derive(Clone, Debug)]
pub struct Entry {
    /// The path as built, before per-request fields (service id) are set.
    pub path: PathRecord,
    /// `path` encoded: what a hit on an address sends as it is.
    pub wire: [u8; PATH_RECORD_LEN],
    /// The remote end, to rebuild the path when only the route expired.
    pub dest: Dest,
    /// When the address→GID binding must be looked up again.
    pub addr_expires: Option<Instant>,
    /// When the path must be rebuilt.
    pub route_expires: Option<Instant>,
}

impl Entry {
    /// An entry for `path`, encoded once here so that hits send it as is.
    pub fn new(
        path: PathRecord,
        dest: Dest,
        addr_expires: Option<Instant>,
        route_expires: Option<Instant>,
    ) -> Entry {
        Entry {
            path,
            wire: path.encode(),
            dest,
            addr_expires,
            route_expires,
        }
    }
}

/// What a lookup found.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    /// A path that is still good, and its encoding.
    Route(PathRecord, [u8; PATH_RECORD_LEN]),
    /// The binding is good but the route expired: rebuild the path.
    Address(Dest),
    Miss,
}

/// A table per endpoint. Endpoints are few (one per partition of each
/// port), so finding one by a short scan is cheaper than hashing its key on
/// every request.
#[derive(Default)]
pub struct Cache {
    per_endpoint: Vec<(EndpointKey, Map<Address, Entry>)>,
}

fn live(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_none_or(|d| now < d)
}

impl Cache {
    pub fn lookup(&mut self, ep: EndpointKey, dest: &Address, now: Instant) -> Lookup {
        let Some((_, map)) = self.per_endpoint.iter_mut().find(|(k, _)| *k == ep) else {
            return Lookup::Miss;
        };
        match map.get(dest) {
            Some(e) if live(e.addr_expires, now) && live(e.route_expires, now) => {
                Lookup::Route(e.path, e.wire)
            }
            Some(e) if live(e.addr_expires, now) => Lookup::Address(e.dest),
            Some(_) => {
                map.remove(dest);
                Lookup::Miss
            }
            None => Lookup::Miss,
        }
    }

    pub fn insert(&mut self, ep: EndpointKey, dest: Address, entry: Entry) {
        let i = match self.per_endpoint.iter().position(|(k, _)| *k == ep) {
            Some(i) => i,
            None => {
                self.per_endpoint.push((ep, Map::default()));
                self.per_endpoint.len() - 1
            }
        };
        self.per_endpoint[i].1.insert(dest, entry);
    }

    /// Drops `dest` from every endpoint: its binding changed.
    pub fn evict(&mut self, dest: &Address) -> usize {
        self.per_endpoint
            .iter_mut()
            .filter_map(|(_, m)| m.remove(dest))
            .count()
    }

    pub fn flush_endpoint(&mut self, ep: EndpointKey) -> usize {
        match self.per_endpoint.iter().position(|(k, _)| *k == ep) {
            Some(i) => self.per_endpoint.swap_remove(i).1.len(),
            None => 0,
        }
    }

    /// Drops everything: used when this host's own addresses or ports
    /// change, since any cached path may lead to them.
    pub fn flush_all(&mut self) {
        self.per_endpoint.clear();
    }

    pub fn len(&self) -> usize {
        self.per_endpoint.iter().map(|(_, m)| m.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lifetimes_decide_between_route_address_and_miss() {
        let mut c = Cache::default();
        let now = Instant::now();
        let dest = Address::name("node2").unwrap();
        let path = PathRecord {
            dlid: 9,
            ..Default::default()
        };
        let to = Dest {
            gid: Default::default(),
            lid: 9,
            mtu: None,
            rate: None,
        };
        c.insert(
            1,
            dest.clone(),
            Entry::new(
                path,
                to,
                Some(now + Duration::from_secs(60)),
                Some(now + Duration::from_secs(10)),
            ),
        );
        assert_eq!(c.lookup(1, &dest, now), Lookup::Route(path, path.encode()));
        assert_eq!(c.lookup(2, &dest, now), Lookup::Miss, "keyed by endpoint");
        assert_eq!(
            c.lookup(1, &dest, now + Duration::from_secs(11)),
            Lookup::Address(to)
        );
        assert_eq!(
            c.lookup(1, &dest, now + Duration::from_secs(61)),
            Lookup::Miss
        );
        assert!(c.is_empty(), "an expired binding is dropped");
        c.insert(1, dest.clone(), Entry::new(path, to, None, None));
        assert_eq!(
            c.lookup(1, &dest, now + Duration::from_secs(1 << 30)),
            Lookup::Route(path, path.encode())
        );
        c.insert(2, dest.clone(), Entry::new(path, to, None, None));
        assert_eq!(c.evict(&dest), 2);
        c.insert(1, dest.clone(), Entry::new(path, to, None, None));
        assert_eq!(c.flush_endpoint(1), 1);
        assert_eq!(c.lookup(1, &dest, now), Lookup::Miss);
    }
}
