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
//! as calls (`on_datagram`, `on_timers`, `on_nss`, `on_neighbour`, the
//! daemon's requests and its port and address changes), each with the time
//! when it has one; everything the engine wants done comes out of one door,
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
pub mod inspect;
pub mod metrics;
mod pending;
pub mod reconfigure;
mod resolve;
mod sweeps;
mod tables;
pub mod timers;
mod waiters;

use counters::Counters;
pub use effects::{Effects, Outgoing, Response};
use pending::Pending;
use sweeps::Sweeps;
pub use tables::{Bounded, Tables};
pub use waiters::Waiter;
use waiters::Waiters;

use crate::addr::Address;
use crate::buggify::Buggify;
use crate::config::hosts::Hosts;
use crate::config::Config;
use crate::daemon::{Daemon, COUNTERS};
use crate::discovery::NeighbourJob;
use crate::discovery::{Discovery, Families, NssError, Outcome};
use crate::engine::cache::Cache;
use crate::entropy::Seed;
use crate::handle::{AddressId, DeviceId, EndpointId, PortId};
use crate::local::{Local, Offer, PortInfo, Refused};
use acm_prov_sys::ACM_STATUS_ENOTCONN;
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
    cache: Cache,
    discovery: Discovery,
    /// The requests waiting for each lookup in flight.
    waiting: Waiters,
    /// The daemon's counters per endpoint.
    counters: Counters,
    /// What the next [`Engine::poll`] has to look at, and the time.
    pending: Pending,
    /// When the tables are swept, and the summary of their bounds.
    sweeps: Sweeps,
    /// Malformed requests logged, one line per interval.
    malformed_logged: crate::summary::Throttle,
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
            cache: Cache::new(cfg.max_cached),
            discovery: Discovery::new(&cfg, seed, buggify),
            daemon,
            cfg,
            hosts: Arc::new(hosts),
            waiting: Waiters::default(),
            counters: Counters::default(),
            pending: Pending::default(),
            sweeps: Sweeps::default(),
            malformed_logged: Default::default(),
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
    /// discovery decided is acted on first: a changed binding leaves the
    /// cache, a lookup's end answers the requests waiting for it.
    #[inline(never)]
    fn effects(&mut self) -> Effects {
        let out = self.discovery.take_output();
        let clock = self.pending.clock();
        // Outcomes follow inputs, and every input sets the clock.
        debug_assert!(out.outcomes.is_empty() || clock.is_some());
        if let Some(now) = clock {
            for outcome in out.outcomes {
                match outcome {
                    Outcome::Changed(a) => {
                        self.cache.evict(&a);
                    }
                    Outcome::Resolved(a, bound) => self.answer_resolved(&a, bound, now),
                    Outcome::Failed(a, status) => {
                        self.waiting
                            .fail(&a, status, &mut self.counters, &self.daemon);
                    }
                }
            }
        }
        let due = self.discovery.deadlines(clock);
        let deadlines = Deadlines {
            lookup: due.lookups,
            announce: due.announcements,
            review: self.cache.next_review(),
            sweep: clock.and_then(|now| self.sweep_due(now)),
        };
        Effects {
            replies: self.waiting.take_replies(),
            work: out.work,
            deadline: deadlines.next(),
        }
    }

    pub fn open_device(&mut self, guid: u64) -> DeviceId {
        self.local.open_device(guid)
    }

    pub fn close_device(&mut self, dev: DeviceId) {
        self.pending.change();
        for p in self.local.ports_of_device(dev) {
            self.close_port(p);
        }
        self.local.remove_device(dev);
    }

    pub fn open_port(&mut self, dev: DeviceId, info: PortInfo) -> Result<PortId, Refused> {
        let id = self.local.add_port(dev, info)?;
        self.pending.change();
        // Paths to this host's own addresses may now lead elsewhere.
        self.cache.flush_all();
        self.discovery.schedule_announce();
        Ok(id)
    }

    pub fn close_port(&mut self, port: PortId) {
        self.pending.change();
        let Some(p) = self.local.port(port) else {
            return;
        };
        for ep in p.endpoints.clone() {
            self.close_endpoint(ep);
        }
        self.local.remove_port(port);
        self.cache.flush_all();
    }

    pub fn open_endpoint(&mut self, port: PortId, pkey: u16) -> Option<EndpointId> {
        let id = self.local.add_endpoint(port, pkey)?;
        self.counters.open(id);
        Some(id)
    }

    /// Closing an endpoint answers every request still waiting on it: its
    /// port is going down.
    pub fn close_endpoint(&mut self, ep: EndpointId) {
        self.pending.change();
        let Some(e) = self.local.endpoint(ep) else {
            return;
        };
        let addresses = e.addresses.clone();
        self.discovery.withdraw(&self.local, ep, None);
        self.counters.forget_source();
        let mut removed = false;
        for a in addresses {
            removed |= self.local.remove_address(a).is_some();
        }
        if removed {
            self.cache.flush_all();
        }
        // The requests waiting on it are answered; the lookups they waited
        // for go on for others or end.
        let orphaned = self.waiting.take_endpoint(ep);
        let waiting = &self.waiting;
        self.discovery
            .endpoint_closed(&self.local, ep, |key| waiting.first_endpoint(key));
        let status = ACM_STATUS_ENOTCONN as u8;
        self.waiting
            .abandon(orphaned, status, &mut self.counters, &self.daemon);
        self.local.remove_endpoint(ep);
        self.counters.close(ep);
        self.cache.flush_endpoint(ep);
    }

    /// Adds one of this host's addresses. The daemon may add an address it
    /// already has (after a netlink overrun); that returns a fresh handle.
    pub fn add_address(&mut self, ep: EndpointId, address: Address) -> Option<AddressId> {
        let id = self.local.add_address(ep, address)?;
        self.pending.change();
        self.cache.flush_all();
        self.discovery.schedule_announce();
        Some(id)
    }

    pub fn remove_address(&mut self, addr: AddressId) {
        self.pending.change();
        if let Some(a) = self.local.address(addr) {
            let (ep, address) = (a.endpoint, a.address.clone());
            self.discovery.withdraw(&self.local, ep, Some(&address));
        }
        self.counters.forget_source();
        if self.local.remove_address(addr).is_some() {
            self.cache.flush_all();
        }
    }

    pub fn handle_event(&mut self, port: PortId, event: u32) {
        let Some(p) = self.local.port(port) else {
            return;
        };
        if event == EVENT_CLIENT_REREGISTER {
            let n: usize = p
                .endpoints
                .iter()
                .map(|&ep| self.cache.flush_endpoint(ep))
                .sum();
            log::debug!(
                "port {}: client reregister, {n} cached destinations flushed",
                p.info.port_num
            );
        } else {
            log::trace!("port {}: event {event} ignored", p.info.port_num);
        }
    }

    /// The seven `ACM_CNTR_*` counters of an endpoint, host order.
    pub fn counters(&self, ep: EndpointId) -> Option<[u64; COUNTERS]> {
        self.counters.of(ep)
    }

    /// How full its tables are, against their bounds.
    pub fn tables(&self) -> Tables {
        Tables {
            cached: self.cache.len(),
            max_cached: self.cache.capacity(),
            cache_evicted: self.cache.evicted,
            discovery: self.discovery.status(),
        }
    }

    /// The hosts file in force.
    pub fn hosts(&self) -> Arc<Hosts> {
        self.hosts.clone()
    }

    /// Puts a new version of the hosts file in force. `changed` (from
    /// [`Hosts::changes`]) leave the destination cache and the memory of
    /// failed lookups, so they resolve by the new file at the next request.
    pub fn replace_hosts(&mut self, hosts: Arc<Hosts>, changed: &[Address]) {
        self.hosts = hosts;
        // A whole new file changes more than is cached: then forgetting
        // everything is cheaper than a removal per address, and only costs
        // rebuilding paths (failed lookups are asked again).
        let failures = self.discovery.state_mut();
        if changed.len() > self.cache.len() + failures.failures() {
            self.cache.flush_all();
            failures.forget_failures(None);
            return;
        }
        for a in changed {
            self.cache.evict(a);
        }
        failures.forget_failures(Some(changed));
    }

    // Discovery, driven by the worker thread: each call is followed by the
    // outcomes it produced.

    /// The discovery sockets opened at `now` for `families` (none: they
    /// did not).
    pub fn set_discovery_up(&mut self, families: Families, now: Instant) {
        self.pending.input(now);
        self.discovery.set_up(families, now);
    }

    /// Says whether whatever runs the engine calls [`Engine::on_timers`]
    /// by each deadline it reports. Until it says so, every cache hit
    /// reads the clock; from then on, a hit on a path far from the end of
    /// its lifetimes does not (the timers take it off that way in time).
    pub fn set_timers_run(&mut self, run: bool, now: Instant) {
        self.pending.input(now);
        self.cache.set_reviewed(run, now);
    }

    /// Retries, stage changes, announcements and sweeps that are due.
    pub fn on_timers(&mut self, now: Instant) {
        self.pending.input(now);
        // Not gated on the deadlines: an entry cached since the last
        // poll may be due before the deadline last handed out, and
        // a review with nothing due is a look at the heap's top.
        self.cache.review(now);
        self.discovery.on_timers(&self.local, now);
        // The clock is set: `now` was just put in.
        let clock = self.pending.clock().unwrap_or(now);
        if self.sweep_due(clock).is_some_and(|t| now >= t) {
            self.cache.sweep(now);
            self.discovery.sweep(now);
            self.sweeps.swept(&self.tables(), now);
        }
    }

    /// When the tables are next swept, as of the engine's clock `now`.
    fn sweep_due(&self, now: Instant) -> Option<Instant> {
        let (cache, discovery) = (self.cache.sweep_due(), self.discovery.sweep_due(now));
        self.sweeps.due(cache, discovery, &self.tables(), now)
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

    /// An ICMP error for a datagram sent to `dest`.
    pub fn on_unreachable(&mut self, dest: SocketAddr, payload: &[u8], now: Instant) {
        self.pending.input(now);
        self.discovery
            .on_unreachable(&self.local, dest, payload, now);
    }

    /// What the system's resolver said about the name of lookup `key`.
    pub fn on_nss(&mut self, key: &Address, answer: Result<Vec<IpAddr>, NssError>, now: Instant) {
        self.pending.input(now);
        self.discovery.on_nss(&self.local, key, answer, now);
    }

    /// The result of a neighbour lookup for an `eui64` derivation.
    pub fn on_neighbour(&mut self, job: NeighbourJob, mac: Option<[u8; 6]>, now: Instant) {
        self.pending.input(now);
        self.discovery.on_neighbour(job, mac, now);
    }

    /// Ends every lookup at once and answers each waiting request with
    /// `status`; returns how many were answered. For after the discovery
    /// thread failed: a request never answered would hang its client.
    pub fn abandon_all(&mut self, status: u8) -> usize {
        self.pending.change();
        self.discovery.abandon_all();
        let keys = self.waiting.keys();
        let (counters, daemon) = (&mut self.counters, &self.daemon);
        keys.iter()
            .map(|k| self.waiting.fail(k, status, counters, daemon))
            .sum()
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
