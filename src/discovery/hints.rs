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

use crate::addr::{Address, Gid};
use crate::bounded::Expiring;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a hint is kept before it is used: time for the name's holder
/// to hear a forged announcement and contradict it, with room to spare.
pub const SETTLE: Duration = Duration::from_secs(1);
/// How soon a host answers an announcement of one of its names by another
/// endpoint with an announcement of its own (well within [`SETTLE`]).
pub const DEFEND_DELAY: Duration = Duration::from_millis(200);
/// Addresses kept per hint: an endpoint announces from one address per
/// family.
const MAX_ADDRS: usize = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Hint {
    /// Announced by the endpoint with this GID, from these addresses, first
    /// heard at `since`.
    Held {
        gid: Gid,
        at: Vec<IpAddr>,
        since: Instant,
    },
    /// Announced by two endpoints: the groups decide.
    Disputed,
}

/// What announcements said about names, bounded, each entry kept for
/// `urdma_addr_timeout` after it was last heard.
pub struct Hints {
    table: Expiring<Address, Hint>,
    /// The endpoints heard announcing names, kept as long as hints.
    endpoints: Expiring<Gid, ()>,
    lifetime: Option<Duration>,
    /// Names found announced by two endpoints.
    pub disputed: u64,
}

impl Hints {
    pub fn new(cap: usize, lifetime: Option<Duration>) -> Hints {
        Hints {
            table: Expiring::new(cap),
            endpoints: Expiring::new(cap),
            lifetime,
            disputed: 0,
        }
    }

    /// Endpoint `gid` announced names on a group; true if none of its
    /// announcements was heard before.
    pub fn endpoint_heard(&mut self, gid: Gid, now: Instant) -> bool {
        let new = self.endpoints.get_live(&gid, now).is_none();
        self.endpoints
            .insert(gid, (), self.lifetime.map(|d| now + d));
        new
    }

    /// An announcement heard on a group: the endpoint `gid` holds `name`,
    /// and the announcement came from `from`, one of its addresses.
    pub fn heard(&mut self, name: &Address, gid: Gid, from: IpAddr, now: Instant) {
        let expires = self.lifetime.map(|d| now + d);
        let next = match self.table.get_live(name, now).cloned() {
            None => Hint::Held {
                gid,
                at: vec![from],
                since: now,
            },
            Some(Hint::Held {
                gid: was,
                mut at,
                since,
            }) => {
                if was == gid {
                    if !at.contains(&from) && at.len() < MAX_ADDRS {
                        at.push(from);
                    }
                    Hint::Held { gid, at, since }
                } else if at.contains(&from) {
                    // The host at that address came back with other
                    // hardware; asking the address still reaches it.
                    Hint::Held {
                        gid,
                        at: vec![from],
                        since,
                    }
                } else {
                    log::debug!(
                        "discovery: {name} announced by {gid} at {from} and by {was} at {}; \
                         asked of the groups",
                        at[0]
                    );
                    self.disputed += 1;
                    Hint::Disputed
                }
            }
            Some(Hint::Disputed) => Hint::Disputed,
        };
        self.table.insert(name.clone(), next, expires);
    }

    /// An announcement heard on a group withdrew `name` from endpoint
    /// `gid`. At worst (forged) the name is asked of the groups again.
    pub fn withdrawn(&mut self, name: &Address, gid: Gid) {
        if matches!(self.table.get(name), Some(Hint::Held { gid: g, .. }) if *g == gid) {
            self.table.remove(name);
        }
    }

    /// The host `name` was asked of refused it: it moved.
    pub fn forget(&mut self, name: &Address) {
        self.table.remove(name);
    }

    /// The address to ask for `name`, if its announcements agree and the
    /// first is old enough.
    pub fn whom(&mut self, name: &Address, now: Instant) -> Option<IpAddr> {
        match self.table.get_live(name, now)? {
            Hint::Held { at, since, .. } if *since + SETTLE <= now => at.first().copied(),
            _ => None,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.len()
    }

    #[cfg(test)]
    fn evicted(&self) -> u64 {
        self.table.evicted
    }

    pub fn sweep(&mut self, now: Instant) {
        self.table.sweep(now, |_, _| {});
        self.endpoints.sweep(now, |_, _| {});
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Address {
        Address::Name(s.into())
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const A: Gid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    const B: Gid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);

    #[test]
    fn a_name_is_asked_of_its_announcer_once_the_hint_settled() {
        let t = Instant::now();
        let mut h = Hints::new(16, None);
        h.heard(&name("x"), A, ip("10.0.0.1"), t);
        h.heard(&name("x"), A, ip("fd00::1"), t);
        assert_eq!(h.whom(&name("x"), t + SETTLE / 2), None);
        assert_eq!(h.whom(&name("x"), t + SETTLE), Some(ip("10.0.0.1")));
        assert_eq!(h.whom(&name("y"), t + SETTLE), None);
    }

    #[test]
    fn two_endpoints_announcing_one_name_send_it_to_the_groups() {
        let t = Instant::now();
        let mut h = Hints::new(16, None);
        h.heard(&name("x"), A, ip("10.0.0.1"), t);
        h.heard(&name("x"), B, ip("10.0.0.66"), t + SETTLE / 2);
        assert_eq!(h.whom(&name("x"), t + SETTLE * 2), None);
        // The first one again does not settle it.
        h.heard(&name("x"), A, ip("10.0.0.1"), t + SETTLE * 2);
        assert_eq!(h.whom(&name("x"), t + SETTLE * 4), None);
        assert_eq!(h.disputed, 1);
    }

    #[test]
    fn a_new_gid_from_a_known_address_is_the_same_host() {
        let t = Instant::now();
        let mut h = Hints::new(16, None);
        h.heard(&name("x"), A, ip("10.0.0.1"), t);
        h.heard(&name("x"), A, ip("fd00::1"), t);
        h.heard(&name("x"), B, ip("fd00::1"), t + SETTLE);
        assert_eq!(h.whom(&name("x"), t + SETTLE), Some(ip("fd00::1")));
        // A withdrawal of the old GID no longer applies; of the new one does.
        h.withdrawn(&name("x"), A);
        assert!(h.whom(&name("x"), t + SETTLE).is_some());
        h.withdrawn(&name("x"), B);
        assert_eq!(h.whom(&name("x"), t + SETTLE), None);
    }

    #[test]
    fn hints_expire_and_stay_bounded() {
        let t = Instant::now();
        let mut h = Hints::new(2, Some(Duration::from_secs(60)));
        for (i, n) in ["x", "y", "z"].iter().enumerate() {
            h.heard(&name(n), A, ip(&format!("10.0.0.{}", i + 1)), t);
        }
        assert_eq!((h.len(), h.evicted()), (2, 1));
        assert_eq!(h.whom(&name("z"), t + SETTLE), Some(ip("10.0.0.3")));
        assert_eq!(h.whom(&name("z"), t + Duration::from_secs(60)), None);
    }
}
