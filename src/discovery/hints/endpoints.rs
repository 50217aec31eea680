//! The endpoints heard announcing names, each kept once for all its
//! names: its GID, the addresses it announced from, how many names it
//! holds here. A name's hint refers to its endpoint by slot.

use super::Tick;
use crate::addr::Gid;
use crate::fastmap::Map;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The addresses an endpoint announced from: it announces from one
/// address per family; the first of each is kept, and the first heard is
/// the one asked.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Sources {
    pub(super) v4: Option<Ipv4Addr>,
    pub(super) v6: Option<Ipv6Addr>,
    v6_first: bool,
}

impl Sources {
    pub(super) fn add(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(a) if self.v4.is_none() => {
                self.v6_first = self.v6.is_some();
                self.v4 = Some(a);
            }
            IpAddr::V6(a) if self.v6.is_none() => {
                self.v6_first = self.v4.is_none();
                self.v6 = Some(a);
            }
            _ => {}
        }
    }

    /// Whether `ip` is another address of a family this endpoint was
    /// already heard from: an endpoint announces from one address per
    /// family, so two are two hosts, one of them using the other's GID.
    pub(super) fn clashes(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.v4.is_some_and(|v| v != a),
            IpAddr::V6(a) => self.v6.is_some_and(|v| v != a),
        }
    }

    pub(super) fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.v4 == Some(a),
            IpAddr::V6(a) => self.v6 == Some(a),
        }
    }

    pub(super) fn first(&self) -> Option<IpAddr> {
        let (v4, v6) = (self.v4.map(IpAddr::V4), self.v6.map(IpAddr::V6));
        match self.v6_first {
            true => v6.or(v4),
            false => v4.or(v6),
        }
    }
}

/// An endpoint heard announcing names: its GID, the addresses it announced
/// them from, and how many of the names it holds here.
#[derive(Clone, Debug)]
pub(super) struct Endpoint {
    pub(super) gid: Gid,
    pub(super) at: Sources,
    pub(super) names: u32,
    /// When it was first heard (or the endpoint it took its names over
    /// from, at the same address) and last heard announcing one of them.
    pub(super) since: Tick,
    pub(super) heard: Tick,
    /// Heard with its GID from two addresses of one family: one of them
    /// is not the endpoint, and its names are asked of the groups (as if
    /// disputed) for as long as it is kept (docs/protocol.md, trust
    /// table: group announcement).
    pub(super) conflicted: bool,
}

/// The endpoints, by slot; a slot is reused once its endpoint holds no
/// name.
#[derive(Default)]
pub(super) struct Endpoints {
    all: Vec<Endpoint>,
    /// Slots of `all` free for reuse.
    free: Vec<u32>,
    by_gid: Map<Gid, u32>,
}

impl std::ops::Index<u32> for Endpoints {
    type Output = Endpoint;
    fn index(&self, e: u32) -> &Endpoint {
        &self.all[e as usize]
    }
}

impl std::ops::IndexMut<u32> for Endpoints {
    fn index_mut(&mut self, e: u32) -> &mut Endpoint {
        &mut self.all[e as usize]
    }
}

impl Endpoints {
    /// The slot of endpoint `gid`, made if new, heard at `t` from `from`,
    /// and whether that made it conflicted (heard from a second address of
    /// one family).
    pub(super) fn heard(&mut self, gid: Gid, from: IpAddr, t: Tick) -> (u32, bool) {
        let e = match self.by_gid.get(&gid) {
            Some(&e) => e,
            None => {
                let ep = Endpoint {
                    gid,
                    at: Sources::default(),
                    names: 0,
                    since: t,
                    heard: t,
                    conflicted: false,
                };
                let e = match self.free.pop() {
                    Some(e) => {
                        self.all[e as usize] = ep;
                        e
                    }
                    None => {
                        self.all.push(ep);
                        (self.all.len() - 1) as u32
                    }
                };
                self.by_gid.insert(gid, e);
                e
            }
        };
        let ep = &mut self.all[e as usize];
        ep.heard = ep.heard.max(t);
        let clash = ep.at.clashes(from) && !ep.conflicted;
        if clash {
            log::debug!(
                "discovery: {gid} announced from {from} and from {}; its names are asked of the groups",
                ep.at.first().map_or_else(String::new, |a| a.to_string())
            );
            ep.conflicted = true;
        }
        ep.at.add(from);
        (e, clash)
    }

    /// One name fewer for endpoint `e`; it goes with its last.
    pub(super) fn release(&mut self, e: u32) {
        let Some(ep) = self.all.get_mut(e as usize) else {
            return;
        };
        ep.names -= 1;
        if ep.names == 0 {
            let gid = ep.gid;
            self.by_gid.remove(&gid);
            self.free.push(e);
        }
    }

    /// How many endpoints hold names here.
    pub(super) fn holders(&self) -> usize {
        self.by_gid.len()
    }

    /// Slots, free ones too.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.all.len()
    }

    /// Every slot, free ones too (they hold no name).
    pub(super) fn iter(&self) -> impl Iterator<Item = &Endpoint> {
        self.all.iter()
    }

    /// Whether endpoint `gid` holds names here.
    #[cfg(test)]
    pub(super) fn holds(&self, gid: Gid) -> bool {
        self.by_gid.contains_key(&gid)
    }

    pub(super) fn clear(&mut self) {
        self.all.clear();
        self.free.clear();
        self.by_gid.clear();
    }
}
