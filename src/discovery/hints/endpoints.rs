//! The endpoints heard announcing names, each kept once for all its
//! names: its GID, the addresses it announced from, how many names it
//! holds here. A name's hint refers to its endpoint by slot.
//!
//! The same table says which GIDs announced themselves on a group lately,
//! names kept or not (whom not to welcome again as a newcomer): one entry
//! per GID of the segment serves both, since every host keeps one for
//! every other (10^8 in a simulated segment of 10,000 hosts). A GID kept
//! for its announcement alone (its names withdrawn, disputed, or refused
//! by a full table) counts against a bound of its own; a flood of those
//! makes room by dropping the oldest of them, never an endpoint that
//! holds names.

use super::{alive, Tick};
use crate::addr::Gid;
use crate::fastmap::Map;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The slot of a GID that holds no name here.
const NO_SLOT: u32 = u32::MAX;
/// When a GID that never announced itself on a group did (it was heard in
/// an announcement sent to this host alone, or as a name's new holder).
const NEVER: Tick = Tick::MAX;
/// Places the queue of GIDs kept without names may hold beyond twice
/// them before it is rebuilt.
const QUEUE_SLACK: usize = 64;

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

/// What is kept of a GID: the slot of its endpoint while it holds names
/// here, and when it last announced itself on a group.
#[derive(Clone, Copy, Debug)]
struct Known {
    slot: u32,
    announced: Tick,
}

/// The endpoints, by slot; a slot is reused once its endpoint holds no
/// name.
pub(super) struct Endpoints {
    all: Vec<Endpoint>,
    /// Slots of `all` free for reuse.
    free: Vec<u32>,
    by_gid: Map<Gid, Known>,
    /// The GIDs kept without names, oldest announcement first when
    /// queued; one announced again since, or holding names again, is
    /// moved back or dropped when it reaches the front.
    unnamed: VecDeque<(Tick, Gid)>,
    /// The most GIDs kept without names.
    cap: usize,
    lifetime: Option<Tick>,
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
    /// At most `cap` GIDs kept without names, each a `lifetime` after it
    /// last announced itself.
    pub(super) fn new(cap: usize, lifetime: Option<Tick>) -> Endpoints {
        Endpoints {
            all: Vec::new(),
            free: Vec::new(),
            by_gid: Map::default(),
            unnamed: VecDeque::new(),
            cap: cap.max(1),
            lifetime,
        }
    }

    /// The slot of endpoint `gid`, made if new, heard at `t` from `from`,
    /// and whether that made it conflicted (heard from a second address of
    /// one family).
    pub(super) fn heard(&mut self, gid: Gid, from: IpAddr, t: Tick) -> (u32, bool) {
        let known = self.by_gid.get(&gid).copied();
        let e = match known {
            Some(k) if k.slot != NO_SLOT => k.slot,
            _ => {
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
                let announced = known.map_or(NEVER, |k| k.announced);
                self.by_gid.insert(gid, Known { slot: e, announced });
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
            self.free.push(e);
            match self.by_gid.get_mut(&gid) {
                Some(k) if k.announced != NEVER => {
                    // Still no newcomer for as long as its announcement.
                    k.slot = NO_SLOT;
                    let announced = k.announced;
                    self.queue_unnamed(announced, gid);
                }
                _ => {
                    self.by_gid.remove(&gid);
                }
            }
        }
    }

    /// Endpoint `gid` announced itself on a group at `t`; true if it had
    /// not within a lifetime (never, or it expired): a newcomer.
    pub(super) fn announced(&mut self, gid: Gid, t: Tick) -> bool {
        let lifetime = self.lifetime;
        match self.by_gid.get_mut(&gid) {
            Some(k) => {
                let new = k.announced == NEVER || !alive(lifetime, k.announced, t);
                // A GID kept without names keeps its place in the queue
                // until it reaches the front, then moves back.
                k.announced = t;
                new
            }
            None => {
                let k = Known {
                    slot: NO_SLOT,
                    announced: t,
                };
                self.by_gid.insert(gid, k);
                self.queue_unnamed(t, gid);
                true
            }
        }
    }

    /// Keeps `gid`, now without names, announced at `announced`, within
    /// the bound: the oldest of those kept so make room.
    fn queue_unnamed(&mut self, announced: Tick, gid: Gid) {
        if self.unnamed.len() >= 2 * self.unnamed_len() + QUEUE_SLACK {
            self.rebuild_queue();
        }
        self.unnamed.push_back((announced, gid));
        self.within_bound();
    }

    /// Drops the oldest GIDs kept without names until they are `cap`.
    fn within_bound(&mut self) {
        while self.unnamed_len() > self.cap && self.pop_unnamed(|_| true) {}
    }

    /// How many GIDs are kept without names: every GID kept but those
    /// whose endpoint holds a slot.
    fn unnamed_len(&self) -> usize {
        self.by_gid.len() - self.holders()
    }

    /// Takes the front of the queue of GIDs kept without names: drops it
    /// if it holds names again or is gone, moves it back if it announced
    /// since it was queued, and otherwise removes it if `goes` says so
    /// of when it announced. False once nothing was removed or moved
    /// (the queue is empty, or `goes` said no).
    fn pop_unnamed(&mut self, goes: impl Fn(Tick) -> bool) -> bool {
        let Some(&(queued, gid)) = self.unnamed.front() else {
            return false;
        };
        match self.by_gid.get(&gid).copied() {
            Some(k) if k.slot == NO_SLOT && k.announced > queued => {
                self.unnamed.pop_front();
                self.unnamed.push_back((k.announced, gid));
            }
            Some(k) if k.slot == NO_SLOT => {
                if !goes(k.announced) {
                    return false;
                }
                self.unnamed.pop_front();
                self.by_gid.remove(&gid);
            }
            _ => {
                self.unnamed.pop_front();
            }
        }
        true
    }

    /// The queue again from the GIDs kept without names, oldest
    /// announcement first: what holds names again or is gone leaves it.
    fn rebuild_queue(&mut self) {
        let mut kept: Vec<(Tick, Gid)> = self
            .by_gid
            .iter()
            .filter(|(_, k)| k.slot == NO_SLOT)
            .map(|(g, k)| (k.announced, *g))
            .collect();
        kept.sort_unstable();
        self.unnamed = kept.into();
    }

    /// Forgets the GIDs kept without names whose announcement is a
    /// lifetime old at `t`.
    pub(super) fn sweep(&mut self, t: Tick) {
        let lifetime = self.lifetime;
        if lifetime.is_none() {
            return;
        }
        while self
            .unnamed
            .front()
            .is_some_and(|&(queued, _)| !alive(lifetime, queued, t))
            && self.pop_unnamed(|announced| !alive(lifetime, announced, t))
        {}
    }

    /// The tick at which [`Endpoints::sweep`] may have something to
    /// forget.
    pub(super) fn sweep_due(&self) -> Option<Tick> {
        let (queued, _) = self.unnamed.front()?;
        Some(queued.saturating_add(self.lifetime?))
    }

    /// How many endpoints hold names here: the slots in use.
    pub(super) fn holders(&self) -> usize {
        self.all.len() - self.free.len()
    }

    /// GIDs kept: holding names, or announced lately.
    pub(super) fn gids_kept(&self) -> usize {
        self.by_gid.len()
    }

    /// Places in the queue of the GIDs kept without names.
    pub(super) fn queue_len(&self) -> usize {
        self.unnamed.len()
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
        self.by_gid.get(&gid).is_some_and(|k| k.slot != NO_SLOT)
    }

    /// Forgets every endpoint's names; the GIDs that announced themselves
    /// stay known, so none is welcomed again as a newcomer.
    pub(super) fn clear(&mut self) {
        self.all.clear();
        self.free.clear();
        self.by_gid.retain(|_, k| {
            k.slot = NO_SLOT;
            k.announced != NEVER
        });
        self.rebuild_queue();
        self.within_bound();
    }
}
