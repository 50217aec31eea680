//! The provider's state, as one value the runtime keeps behind a lock:
//! this host's endpoints ([`Local`]), the static hosts file, the request
//! path (`resolve.rs`, over the cache and path records of
//! [`crate::request`], and the requests waiting for a lookup) and discovery
//! ([`Discovery`]), which it drives through a narrow interface and whose
//! outcomes it turns into replies.
//!
//! Everything here is safe Rust with explicit time. The boundary turns the
//! daemon's pointers into the ids and values used here.
//!
//! One contract, for the runtime and the simulation alike: inputs come in
//! as calls, each with the time when it has one: the daemon's requests
//! (handled by the request path, `resolve.rs`), its port and address
//! changes (opens, and one [`Topology`] for the rest), and the worker's
//! datagrams and other [`Input`]s (timers, the resolver's and the
//! neighbour table's answers); the engine routes each to the parts it
//! concerns. Everything the engine wants done comes out of one door,
//! [`Engine::poll`], as one [`Effects`]: replies, datagrams (one per
//! address family for a group), resolver and neighbour jobs, and the next
//! deadline, the earliest of the named ones ([`timers`]). The engine never sends,
//! sleeps or reads a clock; the caller performs the effects after releasing
//! the engine's lock, so no daemon helper that answers a client is called
//! while the engine is held. Only the log is: a `log` line written under
//! the lock takes the daemon's log lock inside `acm_write`
//! ([`crate::log`]), which comes last in every lock order
//! (docs/architecture.md).

mod cache;
mod counters;
mod effects;
mod input;
pub mod inspect;
pub mod metrics;
mod pending;
pub mod reconfigure;
mod resolve;
mod sweeps;
mod tables;
pub mod timers;
mod waiters;

pub use effects::{Effects, Outgoing, Response};
pub use input::{Input, Topology};
use pending::Pending;
use resolve::{Requests, Sources};
use sweeps::Sweeps;
pub use tables::{Bounded, Limits, Tables};
pub use waiters::Waiter;

use crate::addr::Address;
use crate::buggify::Buggify;
use crate::config::hosts::Hosts;
use crate::config::Config;
use crate::daemon::{Daemon, COUNTERS};
use crate::discovery::Discovery;
use crate::entropy::Seed;
use crate::handle::{AddressId, DeviceId, EndpointId, PortId};
use crate::local::{Local, Offer, PortInfo, Refused};
use crate::request::msg::MsgBuf;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;
use timers::Deadlines;

/// What ports offer when verbs does not say, as `cfg` sets it: at start,
/// and again when the options file changes (`reconfigure.rs`).
fn offer(cfg: &Config) -> Offer {
    Offer {
        mtu: cfg.mtu,
        rate_gbps: cfg.rate_gbps,
    }
}

/// `IBV_EVENT_CLIENT_REREGISTER`, the only event the daemon forwards.
pub const EVENT_CLIENT_REREGISTER: acm_prov_sys::ibv_event_type =
    acm_prov_sys::ibv_event_type_IBV_EVENT_CLIENT_REREGISTER;

pub struct Engine<D: Daemon> {
    daemon: D,
    cfg: Config,
    /// Shared so that a reload can compare the old file with the new one
    /// off the daemon's event loop and without the engine's lock.
    hosts: Arc<Hosts>,
    local: Local,
    discovery: Discovery,
    /// The destination cache, the requests waiting for lookups, the
    /// daemon's counters per endpoint.
    requests: Requests,
    /// What the next [`Engine::poll`] has to look at, and the time.
    pending: Pending,
    /// When the tables are swept, and the summary of their bounds.
    sweeps: Sweeps,
}

impl<D: Daemon> Engine<D> {
    /// An engine whose transaction ids are keyed from the kernel's random
    /// source.
    pub fn new(daemon: D, cfg: Config, hosts: Hosts) -> Self {
        Engine::seeded(daemon, cfg, hosts, Seed::random(), Buggify::off())
    }

    /// An engine whose transaction ids are keyed by `seed` and that injects
    /// the faults of `buggify` into itself (off but in simulations): with
    /// [`crate::fastmap::seed_thread`], one that runs the same way every time.
    pub fn seeded(daemon: D, cfg: Config, hosts: Hosts, seed: Seed, buggify: Buggify) -> Self {
        let offer = offer(&cfg);
        Engine {
            local: Local::new(offer),
            requests: Requests::new(cfg.max_cached),
            discovery: Discovery::new(&cfg, seed, buggify),
            daemon,
            cfg,
            hosts: Arc::new(hosts),
            pending: Pending::default(),
            sweeps: Sweeps::default(),
        }
    }

    pub fn daemon(&self) -> &D {
        &self.daemon
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// What the engine wants done, once per change: `None` when nothing
    /// happened since the last call (every cache hit), so the caller's
    /// timers stand.
    #[inline(always)]
    pub fn poll(&mut self) -> Option<Effects> {
        if !self.pending.take() {
            return None;
        }
        Some(self.effects())
    }

    /// What [`Engine::poll`] hands over when something happened: out of
    /// line, so that the test of the flag is all a cache hit pays. What
    /// discovery decided is acted on first, by the request path.
    #[inline(never)]
    fn effects(&mut self) -> Effects {
        let out = self.discovery.take_output();
        let clock = self.pending.clock();
        // Outcomes follow inputs, and every input sets the clock.
        debug_assert!(out.outcomes.is_empty() || clock.is_some());
        if let Some(now) = clock {
            let (requests, s) = self.request_path();
            for outcome in out.outcomes {
                requests.apply(outcome, now, &s);
            }
        }
        let due = self.discovery.deadlines(clock);
        let deadlines = Deadlines {
            lookup: due.lookups,
            announce: due.announcements,
            review: self.requests.cache.next_review(),
            sweep: clock.and_then(|now| {
                let tables = self.tables();
                let (cache, discovery) = (&self.requests.cache, &self.discovery);
                self.sweeps.due(cache, discovery, &tables, now)
            }),
        };
        Effects {
            replies: self.requests.waiting.take_replies(),
            work: out.work,
            deadline: deadlines.next(),
        }
    }

    /// Handles a `resolve` made on behalf of the local address `addr` at
    /// `now`. `None`: the request waits for a lookup and is answered later
    /// through the effects.
    pub fn resolve_at(
        &mut self,
        addr: AddressId,
        req: &MsgBuf,
        id: u64,
        now: Instant,
    ) -> Option<MsgBuf> {
        let mut msg = req.clone();
        self.resolve_in_place(addr, &mut msg, id, || now)
            .then_some(msg)
    }

    /// [`Engine::resolve_at`] without copies: `msg` is the request and, when
    /// this returns true, the reply to send. False: the engine holds a copy
    /// of the request and answers it later.
    ///
    /// `now` is not called for a hit on a fresh path (see
    /// the destination cache in `engine/cache.rs`): the clock is the largest cost a
    /// hit would have had.
    ///
    /// Inlined into the daemon's callback, its one caller there: one call
    /// frame less per request.
    #[inline]
    pub fn resolve_in_place(
        &mut self,
        addr: AddressId,
        msg: &mut MsgBuf,
        id: u64,
        now: impl Fn() -> Instant,
    ) -> bool {
        let r = &mut self.requests;
        let Some(source) = r.resolve_hit(addr, msg, &self.local, &self.daemon, &now) else {
            return true;
        };
        let now = now();
        self.pending.input(now);
        let (r, mut s) = self.request_path();
        r.resolve_miss(source, msg, id, now, &mut s)
    }

    /// Handles a `query` (`ib_acme -v`): there is no SA to ask, so the
    /// record is checked against what this provider would build.
    pub fn query_at(&mut self, addr: AddressId, req: &MsgBuf, now: Instant) -> Response {
        let (r, mut s) = self.request_path();
        r.query(addr, req, now, &mut s)
    }

    /// The request path, and what it answers from besides its own state.
    fn request_path(&mut self) -> (&mut Requests, Sources<'_, D>) {
        let s = Sources {
            local: &self.local,
            hosts: &self.hosts,
            cfg: &self.cfg,
            daemon: &self.daemon,
            discovery: &mut self.discovery,
        };
        (&mut self.requests, s)
    }

    pub fn open_device(&mut self, guid: u64) -> DeviceId {
        self.local.open_device(guid)
    }

    pub fn open_port(&mut self, dev: DeviceId, info: PortInfo) -> Result<PortId, Refused> {
        let id = self.local.add_port(dev, info)?;
        self.pending.change();
        // Paths to this host's own addresses may now lead elsewhere.
        self.requests.cache.flush_all();
        self.discovery.schedule_announce();
        Ok(id)
    }

    pub fn open_endpoint(&mut self, port: PortId, pkey: u16) -> Option<EndpointId> {
        let id = self.local.add_endpoint(port, pkey)?;
        self.requests.counters.open(id);
        Some(id)
    }

    /// Adds one of this host's addresses. The daemon may add an address it
    /// already has (after a netlink overrun); that returns a fresh handle.
    pub fn add_address(&mut self, ep: EndpointId, address: Address) -> Option<AddressId> {
        let id = self.local.add_address(ep, address)?;
        self.pending.change();
        self.requests.cache.flush_all();
        self.discovery.schedule_announce();
        Some(id)
    }

    /// Puts in force a change to this host's devices, ports, endpoints or
    /// addresses: this host's tables, discovery (what it announces and
    /// withdraws, the lookups of an endpoint that goes) and the request
    /// path (the paths cached through it, the requests waiting on it).
    pub fn change(&mut self, change: Topology) {
        match change {
            Topology::CloseDevice(dev) => {
                self.pending.change();
                for p in self.local.ports_of_device(dev) {
                    self.change(Topology::ClosePort(p));
                }
                self.local.remove_device(dev);
            }
            Topology::ClosePort(port) => {
                self.pending.change();
                let Some(p) = self.local.port(port) else {
                    return;
                };
                for ep in p.endpoints.clone() {
                    self.change(Topology::CloseEndpoint(ep));
                }
                self.local.remove_port(port);
                self.requests.cache.flush_all();
            }
            Topology::CloseEndpoint(ep) => {
                self.pending.change();
                let Some(e) = self.local.endpoint(ep) else {
                    return;
                };
                let addresses = e.addresses.clone();
                self.discovery.withdraw(&self.local, ep, None);
                self.requests.counters.forget_source();
                let mut removed = false;
                for a in addresses {
                    removed |= self.local.remove_address(a).is_some();
                }
                if removed {
                    self.requests.cache.flush_all();
                }
                self.requests
                    .endpoint_closed(ep, &self.local, &mut self.discovery, &self.daemon);
                self.local.remove_endpoint(ep);
            }
            Topology::RemoveAddress(addr) => {
                self.pending.change();
                if let Some(a) = self.local.address(addr) {
                    let (ep, address) = (a.endpoint, a.address.clone());
                    self.discovery.withdraw(&self.local, ep, Some(&address));
                }
                self.requests.counters.forget_source();
                if self.local.remove_address(addr).is_some() {
                    self.requests.cache.flush_all();
                }
            }
            Topology::PortEvent { port, event } => {
                let Some(p) = self.local.port(port) else {
                    return;
                };
                if event == EVENT_CLIENT_REREGISTER {
                    let flushed = p
                        .endpoints
                        .iter()
                        .map(|&ep| self.requests.cache.flush_endpoint(ep));
                    let n: usize = flushed.sum();
                    log::debug!(
                        "port {}: client reregister, {n} cached destinations flushed",
                        p.info.port_num
                    );
                } else {
                    log::trace!("port {}: event {event} ignored", p.info.port_num);
                }
            }
        }
    }

    /// Routes an input at `now` to the parts it concerns; what follows
    /// from it comes out of the next [`Engine::poll`].
    pub fn input(&mut self, input: Input<'_>, now: Instant) {
        self.pending.input(now);
        let (local, discovery) = (&self.local, &mut self.discovery);
        match input {
            Input::Timers => {
                // Not gated on the deadlines: an entry cached since the
                // last poll may be due before the deadline last handed
                // out, and a review with nothing due is a look at the
                // heap's top.
                self.requests.cache.review(now);
                discovery.on_timers(local, now);
                // The clock is set: `now` was just put in.
                let clock = self.pending.clock().unwrap_or(now);
                let tables = self.tables();
                let cache = &self.requests.cache;
                let due = self.sweeps.due(cache, &self.discovery, &tables, clock);
                if due.is_some_and(|t| now >= t) {
                    self.requests.cache.sweep(now);
                    self.discovery.sweep(now);
                    self.sweeps.swept(&self.tables(), now);
                }
            }
            Input::Unreachable(dest, payload) => {
                discovery.on_unreachable(local, dest, payload, now);
            }
            Input::Nss(key, answer) => discovery.on_nss(local, key, answer, now),
            Input::Neighbour(job, mac) => discovery.on_neighbour(job, mac, now),
            Input::DiscoveryUp(families) => discovery.set_up(families, now),
            Input::TimersRun => self.requests.cache.set_reviewed(true, now),
            Input::TimersStopped => self.requests.cache.set_reviewed(false, now),
            Input::WorkerFailed(status) => {
                self.requests.cache.set_reviewed(false, now);
                discovery.abandon_all();
                let answered = self.requests.abandon_all(status, &self.daemon);
                log::error!("discovery thread: {answered} waiting requests answered with an error");
            }
        }
    }

    /// One datagram that arrived at the discovery port. `to` is the address
    /// it was sent to, when the socket reports it.
    pub fn on_datagram(
        &mut self,
        from: SocketAddr,
        to: Option<IpAddr>,
        bytes: &[u8],
        now: Instant,
    ) {
        self.pending.input(now);
        self.discovery
            .on_datagram(&self.local, from, to, bytes, now);
    }

    /// The seven `ACM_CNTR_*` counters of an endpoint, host order.
    pub fn counters(&self, ep: EndpointId) -> Option<[u64; COUNTERS]> {
        self.requests.counters.of(ep)
    }

    /// How full its tables are, against their bounds.
    pub fn tables(&self) -> Tables {
        let cache = &self.requests.cache;
        Tables {
            cached: cache.len(),
            max_cached: cache.capacity(),
            cache_evicted: cache.evicted,
            waiting: self.requests.waiting.len(),
            discovery: self.discovery.status(),
        }
    }

    /// The hosts file in force.
    pub fn hosts(&self) -> Arc<Hosts> {
        self.hosts.clone()
    }

    /// Discovery, to read: its counts, what is in flight, whether it is
    /// enabled. What changes it goes through the engine, which owns what
    /// follows from it.
    pub fn discovery(&self) -> &Discovery {
        &self.discovery
    }
}

#[cfg(test)]
mod tests;
