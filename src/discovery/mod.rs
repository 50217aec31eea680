//! Resolution between hosts (docs/protocol.md): a component with its own
//! state behind a narrow interface to the request path.
//!
//! In: a miss to look up ([`Discovery::start_lookup`]), a datagram
//! ([`Discovery::on_datagram`]), the time ([`Discovery::on_timers`]), and
//! a read-only view of this host's endpoints ([`Local`]). Out: datagrams
//! to send, and [`Outcome`]s for the request path: a lookup resolved or
//! failed, a binding that changed. What it learned is read through
//! [`Discovery::learned`]. The requests waiting for a lookup stay with the
//! request path; discovery never sees one.
//!
//! A miss that only another host can answer becomes a lookup: a QUERY
//! (unicast to an IP destination, to the discovery groups for a name),
//! retried every `urdma_timeout` ms up to `urdma_retries` more times, then
//! the configured derivations in order (`lookup.rs`). Trust (`inbound.rs`):
//! only the reply to a unicast query with a fresh, unpredictable
//! transaction id binds an address, and only the address it was asked
//! about; everything else is at most a hint to ask again.
//!
//! Sans-IO with explicit time: the worker thread owns the sockets
//! (`runtime/net.rs`) and performs what this produces.

mod announce;
pub mod auth;
pub mod counts;
mod decide;
mod derive;
mod hints;
mod inbound;
mod inflight;
mod lookup;
mod names;
pub mod ratelimit;
pub mod seal;
pub mod state;
mod welcome;
pub mod wire;

use crate::addr::{Address, Gid};
use crate::bounded::{earliest, Expiring};
use crate::buggify::{Buggify, Fault};
use crate::config::Config;
use crate::entropy::Seed;
use crate::handle::EndpointId;
use crate::local::Local;
use crate::summary::Summary;
use announce::Announcer;
use auth::Auth;
use counts::{Counts, DropCounts};
use inflight::InFlight;
use state::{Learned, NeighbourJob, NssJob, State};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use wire::{EndpointRecord, WireAddress, MAX_ADDRESSES};

pub use announce::welcome_pace;
pub use derive::eui64_gid;
pub use hints::SETTLE as HINT_SETTLE;
pub use names::NssError;

/// After a check of an address, hints about it are ignored this long: a
/// host sends each announcement three times, and a flood of forged hints
/// must not become a flood of queries to the host they name.
pub const CHECK_HOLDOFF: Duration = Duration::from_secs(1);
/// Hosts remembered as welcomed (`welcome.rs`); more (a flood of forged
/// start queries) are welcomed again, at the welcomes' pace.
const MAX_WELCOMED: usize = 1024;
/// How often a missing neighbour entry is looked for again.
pub const NEIGHBOUR_POLL: Duration = Duration::from_millis(20);

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

/// What the request path must do after a discovery call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The lookup of this address ended with this binding (also in
    /// [`Discovery::learned`], unless the table's bound evicted it since):
    /// answer the requests waiting for it.
    Resolved(Address, Learned),
    /// The lookup failed with this status: answer them with it.
    Failed(Address, u8),
    /// What this address led to changed or is gone: it leaves the
    /// destination cache.
    Changed(Address),
}

/// Everything discovery wants done, in one value ([`Discovery::take_output`]).
#[derive(Debug, Default)]
pub struct Output {
    /// To the network, in this order.
    pub datagrams: Vec<Datagram>,
    /// Names the runtime must ask the system's resolver about.
    pub resolver_jobs: Vec<NssJob>,
    /// Neighbour lookups for the runtime to make, each at its `at`
    /// (netlink is not for the daemon's event loop).
    pub neighbour_jobs: Vec<NeighbourJob>,
    /// What the request path must act on.
    pub outcomes: Vec<Outcome>,
}

pub struct Discovery {
    cfg: Config,
    /// The sockets are open.
    /// The families the sockets are open for (none: discovery is down).
    families: Families,
    state: State,
    /// Lookups, their probes and checks, linked (`inflight.rs`).
    inflight: InFlight,
    announcer: Announcer,
    /// Whom to ask for a name, from the announcements heard.
    hints: hints::Hints,
    counts: Counts,
    drops_logged: Summary<DropCounts>,
    /// Opens discovery datagrams when authentication is on.
    auth: Option<Auth>,
    reply_limit: ratelimit::RateLimiter,
    /// What it wants done, until the engine's next poll takes it.
    out: Output,
    /// Faults to inject into itself (off but in simulations).
    buggify: Buggify,
    /// Hosts that joined and were answered with an announcement, lately,
    /// and the addresses welcomed by unicast.
    welcomed: Expiring<Gid, ()>,
    welcomed_at: Expiring<IpAddr, ()>,
    /// Until when announcements sent to this host alone are the welcomes
    /// its start query asked for.
    listen_until: Option<Instant>,
    /// How long claims to an undisputed name are heard, if not
    /// [`decide::CLAIM_WINDOW_SHARE`] of `urdma_timeout` (simulations).
    claim_window: Option<Duration>,
}

/// The record of endpoint `ep`: its port's GID, LID, MTU and rate, its
/// partition and up to eight of its addresses (`first` among them).
pub fn record_for(
    local: &Local,
    ep: EndpointId,
    first: Option<&Address>,
) -> Option<EndpointRecord> {
    let e = local.endpoint(ep)?;
    let port = &local.port(e.port)?.info;
    let mut addresses: Vec<WireAddress> = first
        .and_then(|a| WireAddress::new(a.clone()).ok())
        .into_iter()
        .collect();
    for a in local.addresses_of(ep) {
        if addresses.len() == MAX_ADDRESSES {
            break;
        }
        if let Ok(w) = WireAddress::new(a.clone()) {
            if !addresses.contains(&w) {
                addresses.push(w);
            }
        }
    }
    let (mtu, rate) = local.mtu_rate(port);
    EndpointRecord::new(port.gids[0], port.lid, mtu, rate, vec![e.pkey], addresses).ok()
}

impl Discovery {
    /// Discovery configured by `cfg`, its transaction ids keyed by `seed`.
    pub fn new(cfg: &Config, seed: Seed) -> Discovery {
        Discovery {
            state: State::new(cfg),
            inflight: InFlight::new(cfg, seed.clone()),
            reply_limit: ratelimit::RateLimiter::new(cfg.reply_rate),
            cfg: cfg.clone(),
            families: Families::NONE,
            announcer: Announcer::new(cfg.addr_timeout.duration(), seed.clone()),
            hints: hints::Hints::new(cfg.max_learned, cfg.addr_timeout.duration()),
            counts: Counts::default(),
            drops_logged: Summary::default(),
            auth: None,
            out: Output::default(),
            buggify: Buggify::off(),
            claim_window: None,
            welcomed: Expiring::new(MAX_WELCOMED),
            welcomed_at: Expiring::new(MAX_WELCOMED),
            listen_until: None,
        }
    }

    /// Hears the claims to an undisputed name, without authentication, for
    /// `window` after its group query left instead of a share of
    /// `urdma_timeout` (docs/protocol.md, *Trust*): for simulations
    /// that measure what the window buys (`urdma-dst claim-window`).
    pub fn set_claim_window(&mut self, window: Duration) {
        self.claim_window = Some(window);
    }

    /// Injects these faults into itself from now on.
    pub fn set_buggify(&mut self, buggify: Buggify) {
        self.buggify = buggify;
    }

    pub fn buggify(&self) -> &Buggify {
        &self.buggify
    }

    /// Called when the discovery sockets open (for these families) or
    /// close (none).
    pub fn set_up(&mut self, families: Families) {
        let was_up = self.is_up();
        self.families = families;
        match (was_up, self.is_up()) {
            (false, true) => self.announcer.start(),
            (true, true) => self.schedule_announce(),
            _ => {}
        }
    }

    /// Authenticates every discovery datagram received from now on (the
    /// sender seals what leaves, each copy on its own).
    pub fn set_auth(&mut self, auth: Option<Auth>) {
        self.auth = auth;
    }

    /// Whether discovery is configured and not turned off.
    pub fn enabled(&self) -> bool {
        self.cfg.discovery
    }

    /// Turns discovery off for good: its configuration cannot be honoured
    /// (an unusable key file must not mean unauthenticated discovery).
    pub fn disable(&mut self) {
        self.cfg.discovery = false;
        self.families = Families::NONE;
    }

    /// Whether a lookup of `key` can be started at all.
    pub fn can_look_up(&self, key: &Address) -> bool {
        match key {
            Address::Name(_) => self.is_up(),
            Address::Ip4(_) | Address::Ip6(_) => self.is_up() || !self.cfg.derive.is_empty(),
            Address::Gid(_) | Address::Lid(_) => false,
        }
    }

    /// A live binding learned for `a`: one confirmed by its holder less
    /// than `urdma_reconfirm` ago (after that it expires, and the next
    /// request asks again), so a host that changed while its announcements
    /// could not reach this one (lost, or a partition) is followed all the
    /// same.
    pub fn learned(&mut self, a: &Address, now: Instant) -> Option<&Learned> {
        if self.buggify.fires(Fault::BindingEvicted) {
            self.state.learned.remove(a);
        }
        self.state.learned(a, now)
    }

    /// How long a destination learned by discovery may be served from the
    /// cache before its binding is looked at again.
    pub fn reconfirm(&self) -> Option<Duration> {
        self.cfg.reconfirm
    }

    /// The status of a failed lookup of `a` still remembered.
    pub fn failure(&mut self, a: &Address, now: Instant) -> Option<u8> {
        self.state.failure(a, now)
    }

    /// How many failures are remembered.
    pub fn failures(&self) -> usize {
        self.state.failed.len()
    }

    /// Forgets remembered failures (`None`: all of them): what they were
    /// about changed elsewhere, so they are asked again.
    pub fn forget_failures(&mut self, which: Option<&[Address]>) {
        match which {
            None => self.state.failed.clear(),
            Some(addrs) => {
                for a in addrs {
                    self.state.failed.remove(a);
                }
            }
        }
    }

    /// Whether a lookup of `key` is in flight.
    pub fn looking_up(&self, key: &Address) -> bool {
        self.inflight.has_lookup(key)
    }

    /// Lookups in flight.
    pub fn lookups_in_flight(&self) -> usize {
        self.inflight.sizes()[0]
    }

    /// What it counted: drops, traffic, lookups, conflicts.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Sizes of its tables: bindings, remembered failures, lookups in
    /// flight, probes in flight.
    pub fn sizes(&self) -> [usize; 4] {
        let [lookups, probes, _] = self.inflight.sizes();
        [
            self.state.learned.len(),
            self.state.failed.len(),
            lookups,
            probes,
        ]
    }

    /// Whether the sockets are open.
    pub fn is_up(&self) -> bool {
        self.families.any()
    }

    /// What reached a table's bound so far: bindings and failures evicted
    /// to make room, lookups refused, hints left unchecked.
    pub fn limits(&self) -> [u64; 4] {
        [
            self.state.learned.evicted,
            self.state.failed.evicted,
            self.inflight.refused(),
            self.counts.checks_skipped,
        ]
    }

    /// The bounds of the tables [`Discovery::limits`] is about: bindings,
    /// lookups in flight.
    pub fn bounds(&self) -> (usize, usize) {
        (self.state.learned.capacity(), self.inflight.max_lookups())
    }

    /// Announces this host's endpoints soon (they changed): from the next
    /// timer on, which [`Discovery::deadlines`] makes due at once.
    pub fn schedule_announce(&mut self) {
        self.announcer.schedule();
    }

    /// Withdraws addresses of endpoint `ep` (`only` one, or all): call
    /// before they leave `local`.
    pub fn withdraw(&mut self, local: &Local, ep: EndpointId, only: Option<&Address>) {
        if self.is_up() {
            self.announcer.withdraw(local, ep, only);
        }
    }

    /// When discovery must run next: its lookups' deadlines, then its
    /// announcements'. `asap` is the time of the caller's latest input,
    /// given for what is due at once.
    pub fn deadlines(&mut self, asap: Option<Instant>) -> [Option<Instant>; 2] {
        let lookup = match asap {
            Some(now) if self.buggify.fires(Fault::EarlyWake) => Some(now),
            _ => self.inflight.next_deadline(),
        };
        [lookup, self.announcer.next_wake(asap)]
    }

    /// Retries, stage changes and announcements that are due.
    pub fn on_timers(&mut self, local: &Local, now: Instant) {
        self.lookup_timers(local, now);
        let sent = self
            .announcer
            .on_timers(local, self.families, now, &mut self.out.datagrams);
        self.counts.traffic.announcements += sent as u64;
        if self.announcer.take_start_query() {
            self.send_start_query(local, now);
        }
    }

    /// Forgets what expired from the tables, and says in the log what was
    /// dropped, now and then.
    pub fn sweep(&mut self, now: Instant) {
        self.state.learned.sweep(now, |_, _| {});
        self.state.failed.sweep(now, |_, _| {});
        self.state.checked.sweep(now, |_, _| {});
        self.state.answered_groups.sweep(now, |_, _| {});
        self.hints.sweep(now);
        self.welcomed.sweep(now, |_, _| {});
        self.welcomed_at.sweep(now, |_, _| {});
        self.inflight.sweep(now);
        if self.drops_logged.due(&self.counts.drops, now) {
            log::info!("discovery: datagrams dropped so far: {}", self.counts.drops);
        }
    }

    /// When [`Discovery::sweep`] may have something to do: the first time
    /// an entry of one of its tables may expire, or its summary of drops
    /// is due. `None`: nothing, until something changes.
    pub fn sweep_due(&self, now: Instant) -> Option<Instant> {
        [
            self.state.learned.sweep_due(),
            self.state.failed.sweep_due(),
            self.state.checked.sweep_due(),
            self.state.answered_groups.sweep_due(),
            self.hints.sweep_due(),
            self.welcomed.sweep_due(),
            self.welcomed_at.sweep_due(),
            self.inflight.sweep_due(),
            self.drops_logged.due_at(&self.counts.drops, now),
        ]
        .into_iter()
        .fold(None, earliest)
    }

    /// What discovery wants done since the last call: the engine takes it
    /// once per poll.
    pub fn take_output(&mut self) -> Output {
        let mut out = std::mem::take(&mut self.out);
        out.datagrams
            .retain(|_| !self.buggify.fires(Fault::DatagramLost));
        out
    }

    /// Where a learned destination leads, for tests and statistics.
    pub fn learned_binding(&self, a: &Address) -> Option<&Learned> {
        self.state.learned.get(a)
    }

    #[cfg(test)]
    pub(crate) fn state(&self) -> &State {
        &self.state
    }

    #[cfg(test)]
    pub(crate) fn inflight(&self) -> &InFlight {
        &self.inflight
    }

    #[cfg(test)]
    pub(crate) fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    /// What waits for the engine's next poll, part by part.
    #[cfg(test)]
    pub(crate) fn output_sizes(&self) -> [usize; 4] {
        let o = &self.out;
        [
            o.datagrams.len(),
            o.resolver_jobs.len(),
            o.neighbour_jobs.len(),
            o.outcomes.len(),
        ]
    }

    #[cfg(test)]
    pub(crate) fn announcer_sizes(&self) -> [usize; 3] {
        self.announcer.sizes()
    }

    #[cfg(test)]
    pub(crate) fn drops_said(&self) -> &DropCounts {
        &self.drops_logged.said
    }
}

#[cfg(test)]
mod tests;
