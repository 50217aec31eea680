//! What discovery knows about remote hosts and what it is asking them:
//! bindings learned, recently failed destinations, the lookups in flight
//! and the probes (queries) that work for them. The requests waiting for a
//! lookup are the request path's, not discovery's.
//!
//! Plain data with explicit time, so discovery's asynchronous behaviour is
//! unit-testable without sockets or threads. Every table has a bound.

use super::wire::EndpointRecord;
use crate::addr::{Address, Gid};
use crate::bounded::Expiring;
use crate::handle::EndpointId;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// How a stage ends if nothing binds: told no (ENODATA), or could not
/// find out (ETIMEDOUT).
pub const NO: u8 = acm_prov_sys::ACM_STATUS_ENODATA as u8;
pub const UNKNOWN: u8 = acm_prov_sys::ACM_STATUS_ETIMEDOUT as u8;

/// Hosts that may claim one name in answer to a group query and be asked
/// to confirm it; more claimants than this are dropped.
pub const MAX_CLAIMS: usize = 4;
/// Checks of learned bindings in flight at once; hints beyond it wait for
/// a later hint.
pub const MAX_CHECKS: usize = 1024;

/// A remote endpoint as discovery describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learned {
    pub gid: Gid,
    pub lid: u16,
    /// `enum ibv_mtu` / `enum ibv_rate` of the remote port, when known.
    pub mtu: Option<u8>,
    pub rate: Option<u8>,
    /// Partitions the remote endpoint is in (membership bit cleared); empty
    /// when unknown (derived GIDs).
    pub partitions: Vec<u16>,
    /// Who confirmed the binding: the address and port that answered the
    /// query (for an IP address, that address itself). A check asks
    /// there again. `None` for derived GIDs.
    pub via: Option<SocketAddr>,
    /// When its holder last confirmed it (set when it is bound).
    pub confirmed: Option<Instant>,
}

impl Learned {
    pub fn from_record(r: &EndpointRecord, via: SocketAddr) -> Learned {
        Learned {
            via: Some(via),
            ..Learned::described_by(r)
        }
    }

    /// What `r` says about its endpoint, confirmed by nobody.
    fn described_by(r: &EndpointRecord) -> Learned {
        Learned {
            gid: r.gid(),
            lid: r.lid(),
            mtu: Some(r.mtu()),
            rate: Some(r.rate()),
            partitions: r.pkeys().iter().map(|p| p & 0x7fff).collect(),
            via: None,
            confirmed: None,
        }
    }

    pub fn derived(gid: Gid) -> Learned {
        Learned {
            gid,
            lid: 0,
            mtu: None,
            rate: None,
            partitions: Vec::new(),
            via: None,
            confirmed: None,
        }
    }

    pub fn in_partition(&self, pkey: u16) -> bool {
        self.partitions.is_empty() || self.partitions.contains(&(pkey & 0x7fff))
    }

    /// Whether both say the same about the endpoint (where each was
    /// confirmed aside).
    pub fn same_endpoint(&self, other: &Learned) -> bool {
        (self.gid, self.lid, self.mtu, self.rate, &self.partitions)
            == (
                other.gid,
                other.lid,
                other.mtu,
                other.rate,
                &other.partitions,
            )
    }

    /// Whether `record` says anything else about the endpoint than this
    /// binding.
    pub fn differs_from(&self, record: &EndpointRecord) -> bool {
        !self.same_endpoint(&Learned::described_by(record))
    }
}

/// Where a lookup is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Asking by discovery: an IP address by unicast, a name of the
    /// segment's groups.
    Discover,
    /// A name: asking the system's resolver, then the addresses it gave.
    Nss,
    /// Trying the derivation at this index of the configured list.
    Derive(usize),
}

/// Why a query is out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A lookup's own query: by unicast to an IP address, or to the
    /// discovery groups for a name. Only a reply from the queried address
    /// binds it; an answer to a group query is a claim to confirm.
    Lookup,
    /// Asks a host that answered a group query, by unicast, whether it
    /// holds the name: its reply, which nobody else can see to forge,
    /// binds the name.
    Claim,
    /// Asks the holder of a learned binding again, because a query or an
    /// announcement said something else about it. Only the holder's
    /// reply changes the binding; no answer removes it.
    Check,
    /// Asks an address the system's resolver gave for a name whether its
    /// host is there: the reply binds the address, and confirms the name
    /// as a claim does.
    Address,
}

/// A query in flight, by its transaction id.
#[derive(Clone, Debug)]
pub struct Probe {
    /// The address asked about.
    pub target: Address,
    /// The lookup it works for (for a check: the target).
    pub key: Address,
    /// Where the query went; `None`: the discovery groups. A reply must
    /// come from there.
    pub to: Option<SocketAddr>,
    pub purpose: Purpose,
    /// Sends so far, and when the last one left.
    pub tries: u32,
    pub sent_at: Option<Instant>,
    /// The endpoint whose record the query carries.
    pub endpoint: EndpointId,
    /// A group query that some host answered: it is not sent again.
    pub answered: bool,
}

/// A neighbour-table lookup the worker thread must make (netlink is not
/// for the daemon's event loop).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeighbourJob {
    pub dest: Address,
    pub ip: IpAddr,
    /// A datagram went to the address to make the kernel resolve it.
    pub poked: bool,
    /// When to ask: at once, then again every
    /// [`super::NEIGHBOUR_POLL`] while the kernel resolves the neighbour.
    pub at: Instant,
}

/// A name for the system's resolver, which may block for seconds: the
/// runtime asks it on threads of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NssJob {
    pub key: Address,
    pub name: String,
    /// When the answer is no use any more.
    pub deadline: Instant,
}

pub struct State {
    pub learned: Expiring<Address, Learned>,
    /// Destinations whose last lookup failed, with the status.
    pub failed: Expiring<Address, u8>,
    /// When each address was last checked: a binding is checked again
    /// only after [`super::CHECK_HOLDOFF`], so hints cannot
    /// turn into a stream of queries to one host.
    pub checked: Expiring<Address, ()>,
    /// Group queries answered lately, by transaction id and asker: the
    /// asker sends each one to the IPv4 and the IPv6 group, and one answer
    /// is enough (a second one costs a second confirmation).
    pub answered_groups: Expiring<(u64, Gid), ()>,
}

impl Default for State {
    fn default() -> Self {
        let cfg = crate::config::Config::default();
        State::new(&cfg)
    }
}

impl State {
    pub fn new(cfg: &crate::config::Config) -> State {
        let max_learned = cfg.max_learned;
        State {
            learned: Expiring::new(max_learned),
            failed: Expiring::new(max_learned),
            checked: Expiring::new(MAX_CHECKS * 4),
            answered_groups: Expiring::new(MAX_CHECKS * 4),
        }
    }

    /// A live learned binding.
    pub fn learned(&mut self, a: &Address, now: Instant) -> Option<&Learned> {
        self.learned.get_live(a, now)
    }

    /// A remembered failure still in force.
    pub fn failure(&mut self, a: &Address, now: Instant) -> Option<u8> {
        self.failed.get_live(a, now).copied()
    }

    /// Forgets every binding to `gid` (a withdrawn or replaced endpoint).
    pub fn forget_gid(&mut self, gid: Gid) -> Vec<Address> {
        let gone: Vec<Address> = self
            .learned
            .iter()
            .filter(|(_, l)| l.gid == gid)
            .map(|(a, _)| a.clone())
            .collect();
        for a in &gone {
            self.learned.remove(a);
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bindings_and_failures_expire() {
        let mut r = State::default();
        let now = Instant::now();
        let a = Address::name("node2").unwrap();
        r.learned.insert(
            a.clone(),
            Learned::derived(Gid([1; 16])),
            Some(now + Duration::from_secs(1)),
        );
        assert!(r.learned(&a, now).is_some());
        assert!(r.learned(&a, now + Duration::from_secs(2)).is_none());
        r.failed
            .insert(a.clone(), 6, Some(now + Duration::from_millis(10)));
        assert_eq!(r.failure(&a, now), Some(6));
        assert_eq!(r.failure(&a, now + Duration::from_millis(10)), None);
    }

    #[test]
    fn partitions_ignore_the_membership_bit() {
        let mut l = Learned::derived(Gid([1; 16]));
        assert!(l.in_partition(0x8001), "unknown partitions do not exclude");
        l.partitions = vec![0x7fff];
        assert!(l.in_partition(0xffff));
        assert!(!l.in_partition(0x8001));
    }
}
