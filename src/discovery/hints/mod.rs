//! Whom to ask for a name. Every host announces the names it holds when it
//! starts and when they change, so a host that heard those announcements
//! can ask the one host that said it holds a name by unicast, instead of
//! asking the groups, which every host of the segment receives.
//!
//! A hint only chooses whom to ask: the name is bound by that host's reply
//! to a unicast query with a fresh transaction id, as after a claim. What a
//! forged announcement could do is name the wrong host, which would then
//! confirm; so a name is asked of one host only when every announcement
//! heard for it came from one endpoint (one GID, or a new GID from an
//! address already heard) and the first of them is [`SETTLE`] old. A host
//! that hears its own name announced by another endpoint announces itself
//! within [`DEFEND_DELAY`] (`announce.rs`), so whoever heard the forgery
//! also hears the holder, sees two endpoints, and asks the groups, whose
//! claims and confirmations detect the conflict as before.

//!
//! Every host keeps a hint for every name of the segment, so the table is
//! laid out for size (a simulated segment of 10,000 hosts holds 10^8 of
//! them): a name is kept as a keyed 64-bit digest, with the endpoint that
//! announced it (its GID and addresses kept once for all its names) and two
//! times in tenths of a second. Two names with one digest look like one
//! name announced by two endpoints: disputed, asked of the groups, never
//! answered wrong (a host asked for a name it does not hold refuses it).

use crate::addr::{Address, Gid};
mod endpoints;

use crate::bounded::earliest;
use crate::fastmap::{Map, Seeded};
use endpoints::{Endpoint, Endpoints};
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a hint is kept before it is used: time for the name's holder
/// to hear a forged announcement and contradict it, with room to spare.
pub const SETTLE: Duration = Duration::from_secs(1);
/// How soon a host answers an announcement of one of its names by another
/// endpoint with an announcement of its own (well within [`SETTLE`]).
pub const DEFEND_DELAY: Duration = Duration::from_millis(200);
/// Places the order queue may hold beyond twice the names kept before
/// it is compacted.
const ORDER_SLACK: usize = 64;
/// The unit of the times kept: tenths of a second since the table's first
/// use (13 years fit).
const TICK_MS: u128 = 100;

type Tick = u32;

/// A name's hint: the endpoint that announced it (an index into
/// [`Hints::endpoints`], [`DISPUTED`] once two endpoints did), when that
/// was first heard and when last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NameHint {
    endpoint: u32,
    since: Tick,
    heard: Tick,
}

const DISPUTED: u32 = u32::MAX;

/// What announcements said about names, bounded, each name kept for
/// `urdma_addr_timeout` after it was last heard, each endpoint as long as
/// one of its names.
/// How many names are kept, and places in their order's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintSizes {
    pub names: usize,
    pub queue: usize,
    /// GIDs kept: holding names, or announced lately.
    pub endpoints: usize,
    /// Places in the queue of the GIDs kept without names.
    pub endpoint_queue: usize,
}

pub struct Hints {
    names: Map<u64, NameHint>,
    /// Names in the order they were first heard, each with the time it was
    /// last heard when queued: the sweep and a full table look at the
    /// front, and move a name heard again since to the back.
    order: VecDeque<(Tick, u64)>,
    /// The endpoints heard announcing names, by slot, and the GIDs that
    /// announced themselves lately, whether or not their names are kept
    /// (the table full, or every one disputed), each for a lifetime after
    /// it was last heard: one heard again is no newcomer to welcome, or
    /// two hosts would welcome each other without end.
    endpoints: Endpoints,
    digest: Seeded,
    cap: usize,
    lifetime: Option<Tick>,
    epoch: Option<Instant>,
    /// Names not kept because the table was full (`Hints::heard`).
    pub refused: u64,
}

impl Hints {
    pub fn new(cap: usize, lifetime: Option<Duration>) -> Hints {
        let lifetime =
            lifetime.map(|d| Tick::try_from(d.as_millis() / TICK_MS).unwrap_or(Tick::MAX));
        Hints {
            names: Map::default(),
            order: VecDeque::new(),
            endpoints: Endpoints::new(cap, lifetime),
            digest: Seeded::default(),
            cap: cap.max(1),
            lifetime,
            epoch: None,
            refused: 0,
        }
    }

    fn tick(&mut self, now: Instant) -> Tick {
        let epoch = *self.epoch.get_or_insert(now);
        let t = now.saturating_duration_since(epoch).as_millis() / TICK_MS;
        Tick::try_from(t).unwrap_or(Tick::MAX)
    }

    fn key(&self, name: &Address) -> u64 {
        self.digest.hash_one(name)
    }

    /// Whether what was last heard at `heard` is still kept at `now`.
    fn live(&self, heard: Tick, now: Tick) -> bool {
        alive(self.lifetime, heard, now)
    }

    /// The hint of `name` if it is still kept; an expired one goes.
    fn get_live(&mut self, name: &Address, now: Instant) -> Option<(u64, NameHint)> {
        let (key, t) = (self.key(name), self.tick(now));
        let hint = *self.names.get(&key)?;
        if self.live(hint.heard, t) {
            return Some((key, hint));
        }
        self.remove(key);
        None
    }

    /// Endpoint `gid` announced names on a group; true if it was not heard
    /// doing so within a lifetime (never, or it expired): a newcomer.
    pub fn endpoint_heard(&mut self, gid: Gid, now: Instant) -> bool {
        let t = self.tick(now);
        self.endpoints.announced(gid, t)
    }

    /// How many endpoints were heard announcing names: the size of the
    /// segment, as far as this host knows.
    pub fn endpoints_heard(&self) -> usize {
        self.endpoints.holders()
    }

    fn remove(&mut self, key: u64) {
        if let Some(h) = self.names.remove(&key) {
            if h.endpoint != DISPUTED {
                self.endpoints.release(h.endpoint);
            }
            self.compact();
        }
    }

    /// An announcement heard on a group: the endpoint `gid` holds `name`,
    /// and the announcement came from `from`, one of its addresses. True
    /// if that made the name disputed.
    pub fn heard(&mut self, name: &Address, gid: Gid, from: IpAddr, now: Instant) -> bool {
        let t = self.tick(now);
        let old = self.get_live(name, now);
        let key = old.map_or_else(|| self.key(name), |(k, _)| k);
        let mut disputed = false;
        let next = match old.map(|(_, h)| h) {
            None => {
                // Full, a new name is not kept rather than one heard: what
                // the table holds stays until its holder stops renewing
                // it, and a flood of names (docs/protocol.md, trust table:
                // group announcement) cannot push a segment's names out.
                // A name not kept is asked of the groups.
                if self.names.len() >= self.cap && !self.expire_oldest(t) {
                    self.refused += 1;
                    return false;
                }
                self.push_order(t, key);
                let (e, clash) = self.endpoints.heard(gid, from, t);
                disputed = clash;
                self.endpoints[e].names += 1;
                NameHint {
                    endpoint: e,
                    since: t,
                    heard: t,
                }
            }
            Some(h) if h.endpoint == DISPUTED => NameHint { heard: t, ..h },
            Some(h) => {
                let was = self.endpoints[h.endpoint].clone();
                if was.gid == gid {
                    disputed = self.endpoints.heard(gid, from, t).1;
                    NameHint { heard: t, ..h }
                } else if was.at.contains(from) && !was.conflicted {
                    // The host at that address came back with other
                    // hardware; asking the address still reaches it (not
                    // if two hosts used the old GID: that address may be
                    // the one that was not its).
                    let (e, clash) = self.endpoints.heard(gid, from, t);
                    disputed = clash;
                    let ep = &mut self.endpoints[e];
                    ep.names += 1;
                    ep.since = ep.since.min(was.since);
                    self.endpoints.release(h.endpoint);
                    NameHint {
                        endpoint: e,
                        heard: t,
                        ..h
                    }
                } else {
                    log::debug!(
                        "discovery: {name} announced by {gid} at {from} and by {} at {}; \
                         asked of the groups",
                        was.gid,
                        was.at.first().map_or_else(String::new, |a| a.to_string())
                    );
                    disputed = true;
                    self.endpoints.release(h.endpoint);
                    NameHint {
                        endpoint: DISPUTED,
                        heard: t,
                        ..h
                    }
                }
            }
        };
        self.names.insert(key, next);
        disputed
    }

    /// Makes room, if the name first heard longest ago has expired by
    /// `t` (names heard again since are moved to the back on the way).
    fn expire_oldest(&mut self, t: Tick) -> bool {
        while let Some(&(queued, key)) = self.order.front() {
            match self.names.get(&key).copied() {
                None => {
                    self.order.pop_front();
                }
                Some(h) if h.heard > queued => {
                    self.order.pop_front();
                    self.order.push_back((h.heard, key));
                }
                Some(h) if !self.live(h.heard, t) => {
                    self.order.pop_front();
                    self.remove(key);
                    return true;
                }
                Some(_) => return false,
            }
        }
        false
    }

    /// Queues `key`, first heard at `t`. Names withdrawn or forgotten
    /// leave their places behind, so the queue is compacted whenever it
    /// holds twice the names it serves: a name announced and withdrawn
    /// over and over costs no memory (docs/protocol.md, trust table:
    /// withdrawal).
    fn push_order(&mut self, t: Tick, key: u64) {
        self.compact();
        self.order.push_back((t, key));
    }

    /// Drops the places of names no longer kept, and all but the first of
    /// a name's, once they are at least as many as twice the names kept
    /// and [`ORDER_SLACK`]: each compaction halves the queue at least, so
    /// it costs a name heard or removed O(1) on average.
    fn compact(&mut self) {
        if self.order.len() < 2 * self.names.len() + ORDER_SLACK {
            return;
        }
        let names = &self.names;
        let mut seen = std::collections::HashSet::with_capacity(names.len());
        self.order
            .retain(|(_, k)| names.contains_key(k) && seen.insert(*k));
    }

    /// An announcement heard on a group withdrew `name` from endpoint
    /// `gid`. At worst (forged) the name is asked of the groups again.
    pub fn withdrawn(&mut self, name: &Address, gid: Gid) {
        let key = self.key(name);
        let held_by = |h: &NameHint| h.endpoint != DISPUTED;
        if let Some(h) = self.names.get(&key).filter(|h| held_by(h)) {
            if self.endpoints[h.endpoint].gid == gid {
                self.remove(key);
            }
        }
    }

    /// The host `name` was asked of refused it: it moved.
    pub fn forget(&mut self, name: &Address) {
        let key = self.key(name);
        self.remove(key);
    }

    /// The address to ask for `name`, if its announcements agree and the
    /// first is old enough.
    pub fn whom(&mut self, name: &Address, now: Instant) -> Option<IpAddr> {
        let (_, h) = self.get_live(name, now)?;
        let settled = self.tick(now) >= h.since.saturating_add(settle_ticks());
        match h.endpoint {
            DISPUTED => None,
            e if settled && !self.endpoints[e].conflicted => self.endpoints[e].at.first(),
            _ => None,
        }
    }

    /// Whether an endpoint holding names here was heard announcing them
    /// from `ip`, the first time at least [`SETTLE`] ago: a host of the
    /// segment is at that address, whatever its record lists now. A scan
    /// of every endpoint, for the rare record that lists no name: callers
    /// pace it.
    pub fn heard_from(&mut self, ip: IpAddr, now: Instant) -> bool {
        let t = self.tick(now);
        self.endpoints.iter().any(|e| {
            e.names > 0
                && !e.conflicted
                && e.at.contains(ip)
                && self.live(e.heard, t)
                && t >= e.since.saturating_add(settle_ticks())
        })
    }

    /// Whether `name` was announced, settled, from `ip`: the address is a
    /// host of the segment's, known to hold the name.
    pub fn held_at(&mut self, name: &Address, ip: IpAddr, now: Instant) -> bool {
        let Some((_, h)) = self.get_live(name, now) else {
            return false;
        };
        let settled = self.tick(now) >= h.since.saturating_add(settle_ticks());
        settled
            && h.endpoint != DISPUTED
            && !self.endpoints[h.endpoint].conflicted
            && self.endpoints[h.endpoint].at.contains(ip)
    }

    /// What the hints say, for `urdma-acm show`: the hint of `name`, or
    /// with none, the endpoints heard announcing names (names are kept as
    /// digests: they cannot be listed).
    pub fn view(&self, name: Option<&Address>, now: Instant) -> Vec<crate::control::Hint> {
        let t = self.epoch.map_or(0, |e| {
            Tick::try_from(now.saturating_duration_since(e).as_millis() / TICK_MS)
                .unwrap_or(Tick::MAX)
        });
        let seconds = |ticks: Tick| f64::from(ticks) * TICK_MS as f64 / 1000.0;
        let expires = |heard: Tick| {
            self.lifetime
                .map(|l| seconds(heard.saturating_add(l).saturating_sub(t)))
        };
        let endpoint = |e: &Endpoint| {
            let from = [e.at.v4.map(IpAddr::V4), e.at.v6.map(IpAddr::V6)];
            (
                e.gid.to_string(),
                from.iter().flatten().map(IpAddr::to_string).collect(),
            )
        };
        match name {
            Some(name) => {
                let Some(h) = self.names.get(&self.key(name)) else {
                    return Vec::new();
                };
                if !self.live(h.heard, t) {
                    return Vec::new();
                }
                let e = (h.endpoint != DISPUTED).then(|| &self.endpoints[h.endpoint]);
                let (gid, from) = e.map_or(("disputed".into(), Vec::new()), endpoint);
                vec![crate::control::Hint {
                    name: name.to_string(),
                    gid,
                    from,
                    names: 1,
                    age: seconds(t.saturating_sub(h.heard)),
                    expires_in: expires(h.heard),
                    conflicted: e.is_some_and(|e| e.conflicted),
                }]
            }
            None => self
                .endpoints
                .iter()
                .filter(|e| e.names > 0 && self.live(e.heard, t))
                .map(|e| {
                    let (gid, from) = endpoint(e);
                    crate::control::Hint {
                        name: String::new(),
                        gid,
                        from,
                        names: e.names,
                        age: seconds(t.saturating_sub(e.heard)),
                        expires_in: expires(e.heard),
                        conflicted: e.conflicted,
                    }
                })
                .collect(),
        }
    }

    /// Forgets every name heard (`urdma-acm forget --all`); the endpoints
    /// heard stay known, so none is welcomed again as a newcomer.
    pub fn clear(&mut self) -> usize {
        let n = self.names.len();
        self.names.clear();
        self.order.clear();
        self.endpoints.clear();
        n
    }

    /// Whether `name` was announced by two endpoints lately.
    pub fn disputed(&mut self, name: &Address, now: Instant) -> bool {
        self.get_live(name, now)
            .is_some_and(|(_, h)| h.endpoint == DISPUTED || self.endpoints[h.endpoint].conflicted)
    }

    /// Names kept, and places in the queue of their order (fewer than
    /// twice the names and [`ORDER_SLACK`], and one).
    pub fn sizes(&self) -> HintSizes {
        HintSizes {
            names: self.names.len(),
            queue: self.order.len(),
            endpoints: self.endpoints.gids_kept(),
            endpoint_queue: self.endpoints.queue_len(),
        }
    }

    /// The most names kept.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Forgets the names not heard for a lifetime, oldest first: the front
    /// of the order, a name heard again since moved to the back.
    pub fn sweep(&mut self, now: Instant) {
        let Some(life) = self.lifetime else {
            return;
        };
        let t = self.tick(now);
        self.endpoints.sweep(t);
        while let Some(&(queued, key)) = self.order.front() {
            if t < queued.saturating_add(life) {
                break;
            }
            self.order.pop_front();
            match self.names.get(&key) {
                Some(h) if self.live(h.heard, t) => self.order.push_back((h.heard, key)),
                Some(_) => self.remove(key),
                None => {}
            }
        }
    }

    /// When [`Hints::sweep`] may have something to remove.
    pub fn sweep_due(&self) -> Option<Instant> {
        let at = |tick: Option<Tick>| Some(self.epoch? + ticks(tick?));
        earliest(at(self.endpoints.sweep_due()), at(self.names_due()))
    }

    fn names_due(&self) -> Option<Tick> {
        let (queued, _) = self.order.front()?;
        Some(queued.saturating_add(self.lifetime?))
    }
}

/// Whether what happened at `at` is still kept at `now`, `lifetime`
/// after it (`None`: for ever).
fn alive(lifetime: Option<Tick>, at: Tick, now: Tick) -> bool {
    lifetime.is_none_or(|l| now < at.saturating_add(l))
}

/// How long `t` ticks last.
fn ticks(t: Tick) -> Duration {
    Duration::from_millis(u64::from(t) * TICK_MS as u64)
}

fn settle_ticks() -> Tick {
    (SETTLE.as_millis() / TICK_MS) as Tick
}

#[cfg(test)]
mod tests;
