//! How a host that joins a running segment learns whom to ask for its
//! names, and why one that has run for a week still knows.
//!
//! Names are asked of the host that announced them (`hints/`); a host
//! announces itself when it starts and when its endpoints change, and
//! renews its announcements every two fifths of `urdma_addr_timeout`
//! (`announce.rs`), so what its peers heard never expires while it runs.
//! A host that joins later heard none of it: it sends a *start query* with
//! its first announcements, a group query for one of its own addresses,
//! which no host answers (only the holder would, and the asker is the
//! holder), and every host that hears it, or hears an endpoint it never
//! heard announce itself, announces itself in turn: at a time of its own
//! within a window that grows with the segment, and at most once per a
//! period that grows with it too, so that what each host receives of these
//! answers does not grow with the number of hosts.
//!
//! Whatever this teaches is a hint, heard on a group, where the name's
//! holder hears a forgery too and contradicts it (`hints/`); a forged
//! start query costs the segment one announcement per host, paced. Only
//! with a key is a host welcomed by unicast, and only then does it take
//! the names of announcements sent to it alone: without one, anyone could
//! send such a welcome for any name, and the holder, who does not hear it,
//! could not contradict it; and an address heard in an announcement could
//! be anyone's, so nothing is aimed there (docs/protocol.md, trust table:
//! start query, announcement to this host alone).

use super::{Around, Presence};
use crate::addr::{Address, Gid};
use crate::bounded::{earliest, Expiring};
use crate::discovery::announce::welcome_pace;
use crate::discovery::hints::Hints;
use crate::discovery::inflight::Probes;
use crate::discovery::ratelimit::RateLimiter;
use crate::discovery::state::State;
use crate::discovery::wire::{EndpointRecord, Message, Query, WireAddress};
use crate::discovery::{record_for, Datagram, Families};
use crate::local::Local;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// A host that joined is answered once in this long: it sends its start
/// query twice, a second apart, and also announces itself.
pub(in crate::discovery) const WELCOMED_FOR: Duration = Duration::from_secs(5);
/// A host answers at most this many hosts that joined by unicast per
/// welcome period; more in one period (half a cluster joining) are
/// answered on the groups, by one announcement for all. A rack restarting
/// (32 of 256 hosts) stays within it: its hosts are welcomed one by one,
/// and the hosts that stayed do not each receive every other's welcome.
pub(in crate::discovery) const UNICAST_WELCOMES: usize = 64;
/// For this long after its start query, a host takes announcements sent
/// to it alone as hints: the welcomes of the segment's hosts, which leave
/// one to two welcome windows (at most 10 s each) after they heard it.
pub(in crate::discovery) const WELCOME_LISTEN: Duration = Duration::from_secs(22);
/// Hosts remembered as welcomed; more (a flood of forged start queries)
/// are welcomed again, at the welcomes' pace.
const MAX_WELCOMED: usize = 1024;
/// At most this many welcomes a second look through every endpoint heard
/// for one announced from the joining host's address (a record that lists
/// no name: a daemon still giving its endpoint its addresses); more are
/// answered on the groups. A flood of forged start queries must not make
/// each one cost a look at every endpoint; a rack of 32 back at once sends
/// 64 start queries, within the allowance of four seconds.
const ADDRESS_SCANS_PER_SECOND: u32 = 20;

/// Hosts that joined and were answered with an announcement lately, the
/// addresses welcomed by unicast, and whether this host listens for the
/// welcomes its own start query asked for.
pub(super) struct Welcomes {
    /// Endpoints welcomed lately, once each in [`WELCOMED_FOR`], with
    /// when each was first heard.
    welcomed: Expiring<Gid, Instant>,
    /// Addresses welcomed by unicast lately, likewise.
    welcomed_at: Expiring<IpAddr, ()>,
    /// Until when announcements sent to this host alone are the welcomes
    /// its start query asked for.
    listen_until: Option<Instant>,
    /// The pace of looks for hosts heard at an address.
    scans: RateLimiter,
}

impl Welcomes {
    pub(super) fn new() -> Welcomes {
        Welcomes {
            welcomed: Expiring::new(MAX_WELCOMED),
            welcomed_at: Expiring::new(MAX_WELCOMED),
            listen_until: None,
            scans: RateLimiter::new(ADDRESS_SCANS_PER_SECOND),
        }
    }

    /// Whether announcements sent to this host alone are welcomes it asked
    /// for with its start query.
    pub(super) fn listening(&self, now: Instant) -> bool {
        self.listen_until.is_some_and(|t| now < t)
    }

    /// When the endpoint `gid`, welcomed lately, was first heard: by then
    /// it was listening.
    pub(super) fn arrived_at(&mut self, gid: Gid, now: Instant) -> Option<Instant> {
        self.welcomed.get_live(&gid, now).copied()
    }

    /// Marks endpoint `gid` welcomed, heard first at `now`, until `until`;
    /// false if it was welcomed lately.
    pub(super) fn first_heard(&mut self, gid: Gid, now: Instant, until: Instant) -> bool {
        self.welcomed.mark_with(gid, now, now, until)
    }

    /// Marks address `ip` welcomed by unicast until `until`; false if it
    /// was lately.
    pub(super) fn first_at(&mut self, ip: IpAddr, now: Instant, until: Instant) -> bool {
        self.welcomed_at.mark(ip, now, until)
    }

    /// Whether a look through every endpoint heard is within its pace.
    pub(super) fn may_scan(&mut self, from: IpAddr, now: Instant) -> bool {
        self.scans.allow(from, now)
    }

    /// Announcements sent to this host alone are welcomes until `until`.
    pub(super) fn listen(&mut self, until: Instant) {
        self.listen_until = Some(until);
    }

    pub(super) fn sweep(&mut self, now: Instant) {
        self.welcomed.sweep(now, |_, _| {});
        self.welcomed_at.sweep(now, |_, _| {});
    }

    pub(super) fn sweep_due(&self) -> Option<Instant> {
        earliest(self.welcomed.sweep_due(), self.welcomed_at.sweep_due())
    }
}

/// Whether `ip` is where this host heard, settled, one of the names of
/// `record`: a host of the segment that restarted, which may be welcomed
/// by unicast. Welcomes by unicast go only there, or where [`bound_at`]
/// says, or where this host heard names announced from, settled
/// (`Hints::heard_from`), and to each address once in [`WELCOMED_FOR`]:
/// every host of the segment answers one start query, and a forged one
/// must not turn that into a flood aimed at an address of the forger's
/// choosing.
fn known_at(hints: &mut Hints, record: &EndpointRecord, ip: IpAddr, now: Instant) -> bool {
    record
        .addresses()
        .iter()
        .map(|w| w.address())
        .filter(|a| matches!(a, Address::Name(_)))
        .any(|name| hints.held_at(name, ip, now))
}

/// Whether `ip` is bound here, confirmed by a reply from `ip` itself: a
/// host of the segment, which may be welcomed by unicast though its record
/// lists no name yet (a daemon can send its start query before it gave
/// its endpoint its names).
fn bound_at(state: &State, ip: IpAddr) -> bool {
    state
        .binding(&Address::from(ip))
        .and_then(|l| l.via)
        .is_some_and(|via| via.ip() == ip)
}

impl Presence {
    /// The endpoint `gid`, at `from`, joined the segment: this host
    /// announces itself to it, once for all it sends, at a time of its own
    /// within a window that grows with the segment
    /// (`announce::welcome_pace`): by unicast while few join, or to the
    /// groups, at most once a welcome period, when many do.
    pub(in crate::discovery) fn welcome(
        &mut self,
        local: &Local,
        record: &EndpointRecord,
        from: IpAddr,
        around: &mut Around<'_>,
        now: Instant,
    ) {
        let gid = record.gid();
        let until = now + WELCOMED_FOR;
        // Marked first, since the mark also says when the endpoint was
        // first heard (`arrived_at`); while this host's own announcements
        // are still to come, they are the welcome.
        if !self.welcomes.first_heard(gid, now, until) {
            return;
        }
        self.announcer.newcomer(now);
        if self.announcer.announcing() {
            return;
        }
        let (within, every) = welcome_pace(self.hints.endpoints_heard());
        let after = around.probes.jitter(within);
        let pace = (every, UNICAST_WELCOMES);
        // Without a key a newcomer takes no hint from a welcome sent to it
        // alone, and an address heard in an announcement may be anyone's:
        // a host is welcomed on the groups (docs/protocol.md, trust
        // table: start query).
        let keyed = around.keyed;
        let unicast = welcome_address(record, from).filter(|&ip| {
            keyed
                && (known_at(&mut self.hints, record, ip, now)
                    || bound_at(around.state, ip)
                    || (self.welcomes.may_scan(from, now) && self.hints.heard_from(ip, now)))
        });
        if let Some(ip) = unicast {
            if !self.welcomes.first_at(ip, now, until) {
                return;
            }
            let to = SocketAddr::new(ip, around.port);
            let source = local
                .endpoint_for(ip)
                .and_then(|ep| local.source_for(ep, ip));
            // A window later than a welcome to the groups would leave: a
            // burst that passes the bound within it is answered by the
            // group announcement alone, since what left stays sent.
            if self
                .announcer
                .welcome_to((to, source), within + after, pace, now)
            {
                return;
            }
        }
        log::trace!(
            "discovery: welcoming {gid} from {from} on the groups: {}",
            match unicast {
                Some(_) => "past the unicast bound, or a group welcome is due",
                None if !keyed => "no key: welcomes go to the groups",
                None => "nothing heard settled, nor bound, at its address",
            }
        );
        self.announcer.welcome(after, (within, every), now);
    }

    /// Sends this host's start query: on the groups, for one of its own
    /// addresses (a name, if it has one), carrying that endpoint's record.
    /// A reply can only come from a host that holds the same address (a
    /// misconfiguration); it counts as late, like one to a probe that
    /// ended. None if this host has no address yet: the daemon gives an
    /// endpoint its addresses after it opens it, and this host's thread
    /// may come between.
    pub(super) fn start_query(
        &mut self,
        local: &Local,
        (families, probes): (Families, &mut Probes),
        now: Instant,
    ) -> Option<impl Iterator<Item = Datagram>> {
        let pick = |name: bool| {
            local.endpoint_ids().find_map(|ep| {
                local
                    .addresses_of(ep)
                    .find(|a| matches!(a, Address::Name(_)) == name)
                    .map(|a| (ep, a.clone()))
            })
        };
        let (ep, target) = pick(true).or_else(|| pick(false))?;
        let (Ok(wire), Some(record)) = (
            WireAddress::new(target.clone()),
            record_for(local, ep, Some(&target)),
        ) else {
            return None;
        };
        let txid = probes.new_txid();
        probes.remember_sent(txid, now);
        self.welcomes.listen(now + WELCOME_LISTEN);
        let bytes = Message::from(Query::new(txid, wire, record)).encode();
        log::debug!("discovery: start query for {target} on the groups");
        // One family is enough: every host listens on both groups.
        let one = match families {
            Families { v4: true, .. } => Families::V4,
            other => other,
        };
        Some(one.multicast(bytes))
    }
}

/// Where to welcome the endpoint of `record`, heard from `from`: one of
/// the addresses its record lists (it takes hints only from a source its
/// record lists, and a group datagram's source may be an interface's
/// link-local address), of `from`'s family if it has one.
fn welcome_address(record: &EndpointRecord, from: IpAddr) -> Option<IpAddr> {
    let ips: Vec<IpAddr> = record
        .addresses()
        .iter()
        .filter_map(|w| crate::local::ip_of(w.address()))
        .collect();
    let same = ips.iter().find(|ip| ip.is_ipv4() == from.is_ipv4());
    same.or(ips.first()).copied()
}

/// Whether a query that arrived on a group is a start query: its asker
/// asks for an address its own record lists.
pub(in crate::discovery) fn is_start_query(q: &Query) -> bool {
    q.sender().addresses().contains(q.target())
}
