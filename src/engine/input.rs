//! What comes into the engine besides the daemon's requests and the
//! datagrams that reach the discovery port (each through a door of its
//! own: they are the bulk of what comes in): the other inputs that come
//! with a time ([`Input`], through [`super::Engine::input`]) and the
//! daemon's changes to this host that hand back no handle ([`Topology`],
//! through [`super::Engine::change`]). Each is one value, so that the
//! engine has one door per kind of caller and routes each to the parts it
//! concerns.

use crate::addr::Address;
use crate::discovery::{Families, NeighbourJob, NssError};
use crate::handle::{AddressId, DeviceId, EndpointId, PortId};
use std::net::{IpAddr, SocketAddr};

/// An input at a time, besides a datagram: what the worker (or the
/// simulation) hears from the sockets' errors, the system's resolver and
/// the neighbour table, and what it says about itself.
pub enum Input<'a> {
    /// Retries, stage changes, announcements and sweeps that are due.
    Timers,
    /// An ICMP error for a datagram sent to this address, with what it
    /// quotes of the datagram.
    Unreachable(SocketAddr, &'a [u8]),
    /// What the system's resolver said about the name of the lookup of
    /// this key.
    Nss(&'a Address, Result<Vec<IpAddr>, NssError>),
    /// The result of a neighbour lookup for an `eui64` derivation: the
    /// job, and the MAC address the table holds.
    Neighbour(NeighbourJob, Option<[u8; 6]>),
    /// The discovery sockets opened for these families (none: they did
    /// not).
    DiscoveryUp(Families),
    /// Whatever runs the engine now calls it with [`Input::Timers`] by
    /// each deadline it reports. Until it says so, every cache hit reads
    /// the clock; from then on, a hit on a path far from the end of its
    /// lifetimes does not (the timers take it off that way in time).
    TimersRun,
    /// Nothing runs the timers any more (the worker stopped): every cache
    /// hit reads the clock again.
    TimersStopped,
    /// The worker failed, and until it is back nothing runs the timers:
    /// every lookup ends, and each request waiting for one is answered
    /// with this status (a request never answered would hang its client).
    WorkerFailed(u8),
}

/// A change the daemon makes to this host's devices, ports, endpoints and
/// addresses, or tells of, that hands back nothing. (Opening one hands
/// back a handle of its own kind, so each kind of opening is a call of
/// its own.)
pub enum Topology {
    /// The device and everything on it go.
    CloseDevice(DeviceId),
    /// The port and its endpoints go; paths to this host's own addresses
    /// may now lead elsewhere.
    ClosePort(PortId),
    /// The endpoint and its addresses go, and every request still waiting
    /// on it is answered: its port is going down.
    CloseEndpoint(EndpointId),
    RemoveAddress(AddressId),
    /// An event the daemon forwarded for a port
    /// ([`super::EVENT_CLIENT_REREGISTER`] is the only one it forwards).
    PortEvent {
        port: PortId,
        event: u32,
    },
}
