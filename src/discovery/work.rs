//! What discovery wants done outside itself, in one value ([`Work`]): the
//! engine hands it on with its replies (`engine/effects.rs`), and the
//! runtime's schedule keeps it for the worker (`runtime/schedule.rs`).

use crate::addr::Address;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

/// A discovery datagram to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datagram {
    /// To one host; `from` pins the source address (replies to unicast
    /// queries must come from the queried address).
    Unicast {
        to: SocketAddr,
        from: Option<IpAddr>,
        bytes: Vec<u8>,
    },
    /// To the discovery group of one address family, on every interface
    /// that has it.
    Multicast { family: Family, bytes: Vec<u8> },
}

/// An address family of the discovery sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

/// The address families discovery can send on: one group datagram goes
/// out once per family, each copy sealed on its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Families {
    pub v4: bool,
    pub v6: bool,
}

impl Families {
    pub const NONE: Families = Families {
        v4: false,
        v6: false,
    };
    pub const V4: Families = Families {
        v4: true,
        v6: false,
    };
    pub const V6: Families = Families {
        v4: false,
        v6: true,
    };
    pub const BOTH: Families = Families { v4: true, v6: true };

    pub fn any(self) -> bool {
        self.v4 || self.v6
    }

    /// One group datagram per family.
    pub fn multicast(self, bytes: Vec<u8>) -> impl Iterator<Item = Datagram> {
        let v6 = self.v6.then(|| Datagram::Multicast {
            family: Family::V6,
            bytes: bytes.clone(),
        });
        let v4 = self.v4.then_some(Datagram::Multicast {
            family: Family::V4,
            bytes,
        });
        v4.into_iter().chain(v6)
    }
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

/// Work for the runtime: datagrams to send, names for the system's
/// resolver, neighbour lookups. Discovery's output, the engine's effects
/// and the schedule's queue all carry it.
#[derive(Debug, Default, PartialEq)]
pub struct Work {
    /// To the network, in this order.
    pub datagrams: Vec<Datagram>,
    /// Names the runtime must ask the system's resolver about.
    pub resolver_jobs: Vec<NssJob>,
    /// Neighbour lookups for the runtime to make, each at its `at`
    /// (netlink is not for the daemon's event loop).
    pub neighbour_jobs: Vec<NeighbourJob>,
}

impl Work {
    /// Adds `later`'s work after this one's.
    pub fn extend(&mut self, later: Work) {
        self.datagrams.extend(later.datagrams);
        self.resolver_jobs.extend(later.resolver_jobs);
        self.neighbour_jobs.extend(later.neighbour_jobs);
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.datagrams.is_empty() && self.resolver_jobs.is_empty() && self.neighbour_jobs.is_empty()
    }
}
