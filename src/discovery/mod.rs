//! Resolution between hosts (docs/protocol.md): a component with its own
//! state behind a narrow interface to the request path.
//!
//! In: a miss ([`Discovery::resolve`]: what a destination resolves to
//! now, a lookup started if nothing knows), a datagram
//! ([`Discovery::on_datagram`]), the time ([`Discovery::on_timers`]), and
//! a read-only view of this host's endpoints ([`Local`]). Out: one
//! [`Output`], its [`Work`] (datagrams, jobs for the resolvers and the
//! neighbour table) and [`Outcome`]s for the request path: a lookup
//! resolved (with its [`Binding`]) or failed, a binding that changed. The
//! requests waiting for a lookup stay with the request path; discovery
//! never sees one.
//!
//! Its parts keep their fields to themselves: the lookups (`lookup/`:
//! what is in flight, `inflight/`, lookups and checks and their
//! `Probes`; how long a try waits; the stages and decisions), the bindings
//! (`state.rs`), this host's presence and what it heard of the others'
//! (`presence/`: announcements, name hints, welcomes), the answers to
//! other hosts' queries (`responder.rs`).
//!
//! A miss that only another host can answer becomes a lookup: a QUERY
//! (unicast to an IP destination, to the discovery groups for a name),
//! retried every `urdma_timeout` ms up to `urdma_retries` more times, then
//! the configured derivations in order (`lookup/`). Trust (`inbound.rs`):
//! only the reply to a unicast query with a fresh, unpredictable
//! transaction id binds an address, and only the address it was asked
//! about; everything else is at most a hint to ask again.
//!
//! Sans-IO with explicit time: the worker thread owns the sockets
//! (`runtime/net.rs`) and performs what this produces.

/// Discovery's parts besides its lookups, lent to them for one call
/// (`lookup::Cx`): a macro, so that the fields are borrowed one by one.
macro_rules! cx {
    ($d:ident, $local:expr) => {
        $crate::discovery::lookup::Cx {
            local: $local,
            cfg: &$d.cfg,
            families: $d.families,
            keyed: $d.auth.is_some(),
            state: &mut $d.state,
            presence: &mut $d.presence,
            counts: &mut $d.counts,
            out: &mut $d.out,
            buggify: &mut $d.buggify,
        }
    };
}

/// What one datagram does to the lookups (`inbound.rs`).
macro_rules! inbound {
    ($d:ident, $local:expr) => {
        $crate::discovery::inbound::Inbound {
            lookups: &mut $d.lookups,
            cx: &mut cx!($d, $local),
        }
    };
}

mod announce;
pub mod auth;
pub mod counts;
mod hints;
mod inbound;
mod inflight;
pub mod inspect;
mod lookup;
mod presence;
pub mod ratelimit;
mod responder;
mod rto;
pub mod seal;
pub mod state;
mod why;
pub mod wire;
mod work;

use crate::addr::Address;
use crate::bounded::earliest;
use crate::buggify::{Buggify, Fault};
use crate::config::Config;
use crate::entropy::Seed;
use crate::handle::EndpointId;
use crate::local::Local;
use crate::summary::Summary;
use auth::Auth;
use counts::{Counts, DropCounts};
#[cfg(test)]
use lookup::decide;
use lookup::Lookups;
use presence::welcome;
use state::{Learned, State};
use std::time::{Duration, Instant};
use wire::{EndpointRecord, WireAddress, MAX_ADDRESSES};

pub use announce::welcome_pace;
pub use hints::SETTLE as HINT_SETTLE;
pub use lookup::eui64_gid;
pub use lookup::NssError;
pub use rto::{stage_time, CEILING as RETRY_CEILING};
pub use work::{Datagram, Families, Family, NeighbourJob, NssJob, Work};

/// After a check of an address, hints about it are ignored this long: a
/// host sends each announcement three times, and a flood of forged hints
/// must not become a flood of queries to the host they name.
pub const CHECK_HOLDOFF: Duration = Duration::from_secs(1);
/// For this long after its sockets open, a host answers a query for an
/// address it does not hold with silence, not a no: the daemon adds its
/// endpoints' addresses after the port is up (50 ms later on an idle host,
/// seconds on a loaded one), and a no is taken for `urdma_negative_timeout`.
/// Peers that asked while it restarted (the fleet bench's storm: eight at
/// once) were told "no such host" for 5 s. The asker's next try, after its
/// first try's time, gets the answer.
pub const STARTING: Duration = Duration::from_secs(2);
/// How often a missing neighbour entry is looked for again.
pub const NEIGHBOUR_POLL: Duration = Duration::from_millis(20);

/// What the request path must do after a discovery call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The lookup of this address ended with this binding: answer the
    /// requests waiting for it.
    Resolved(Address, Binding),
    /// The lookup failed with this status: answer them with it.
    Failed(Address, u8),
    /// What this address led to changed or is gone: it leaves the
    /// destination cache.
    Changed(Address),
}

/// A binding as the request path takes it: what the address leads to, and
/// when its holder must confirm it again (`urdma_reconfirm`; `None`: it
/// need not), after which a path built from it is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub learned: Learned,
    pub reconfirm_at: Option<Instant>,
}

/// What a destination resolves to now ([`Discovery::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// A live binding.
    Known(Binding),
    /// Its last lookup failed with this status, and that is remembered.
    Failed(u8),
    /// A lookup is in flight for it (started now or before): it ends with
    /// an [`Outcome`].
    Started,
    /// No lookup can start.
    Refused(Refused),
}

/// Everything discovery wants done, in one value ([`Discovery::take_output`]).
#[derive(Debug, Default)]
pub struct Output {
    /// For the runtime: datagrams, jobs for the resolvers and the
    /// neighbour table.
    pub work: Work,
    /// What the request path must act on.
    pub outcomes: Vec<Outcome>,
}

impl Output {
    /// What these addresses led to changed or is gone.
    fn changed(&mut self, addrs: Vec<Address>) {
        self.outcomes
            .extend(addrs.into_iter().map(Outcome::Changed));
    }
}

/// Why a lookup cannot start ([`Resolution::Refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Nothing could find it: no discovery sockets for a name, nor a
    /// derivation for an address; GIDs and LIDs are never looked up.
    Unknown,
    /// The table of lookups in flight is full.
    Full,
}

/// Whether discovery is up, and how full its tables are
/// ([`Discovery::status`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    /// The discovery sockets are open.
    pub up: bool,
    pub bindings: usize,
    pub failures: usize,
    pub lookups: usize,
    pub probes: usize,
    /// Evicted to make room, so far.
    pub bindings_evicted: u64,
    pub failures_evicted: u64,
    /// Lookups refused because the table of lookups in flight was full.
    pub lookups_refused: u64,
    /// Hints left unchecked because too many checks were in flight.
    pub checks_skipped: u64,
    pub max_bindings: usize,
    pub max_lookups: usize,
    /// How long a try of a query waits now (`rto.rs`).
    pub try_time: Duration,
    /// Name hints kept, places in their order's queue, and the most
    /// hints kept (`hints/`).
    pub hints: usize,
    pub hint_queue: usize,
    pub max_hints: usize,
    /// New names not kept as hints because the table was full.
    pub hints_refused: u64,
}

/// When discovery must run next ([`Discovery::deadlines`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// A retry, a claim window's end or a stage's.
    pub lookups: Option<Instant>,
    /// An announcement, a renewal, a welcome or a defence.
    pub announcements: Option<Instant>,
}

/// What discovery holds ([`Discovery::footprint`]).
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Footprint {
    pub in_flight: inflight::InFlightSizes,
    /// The drops the log said last (`sweep`).
    pub drops_said: DropCounts,
    /// What the engine has not yet taken.
    pub datagrams: usize,
    pub resolver_jobs: usize,
    pub neighbour_jobs: usize,
    pub outcomes: usize,
    pub announcer: announce::AnnouncerSizes,
    /// GIDs the hints keep: holding names, or announced lately.
    pub hint_endpoints: usize,
}

pub struct Discovery {
    cfg: Config,
    /// The sockets are open.
    /// The families the sockets are open for (none: discovery is down).
    families: Families,
    state: State,
    /// The lookups and checks in flight, and how long their tries wait.
    lookups: Lookups,
    /// Its announcements, the names others announced, the hosts that
    /// join (`presence.rs`).
    presence: presence::Presence,
    counts: Counts,
    drops_logged: Summary<DropCounts>,
    /// Opens discovery datagrams when authentication is on.
    auth: Option<Auth>,
    /// Answers the queries of other hosts.
    responder: responder::Responder,
    /// What it wants done, until the engine's next poll takes it.
    out: Output,
    /// Faults to inject into itself (off but in simulations).
    buggify: Buggify,
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
    /// Discovery configured by `cfg`, its transaction ids keyed by `seed`,
    /// injecting the faults of `buggify` into itself.
    pub fn new(cfg: &Config, seed: Seed, buggify: Buggify) -> Discovery {
        Discovery {
            state: State::new(cfg),
            lookups: Lookups::new(cfg, seed.clone()),
            responder: responder::Responder::new(cfg),
            cfg: cfg.clone(),
            families: Families::NONE,
            presence: presence::Presence::new(cfg, seed.clone()),
            counts: Counts::default(),
            drops_logged: Summary::default(),
            auth: None,
            out: Output::default(),
            buggify,
        }
    }

    pub fn buggify(&self) -> &Buggify {
        &self.buggify
    }

    /// Called when the discovery sockets open (for these families) or
    /// close (none), at `now`.
    pub fn set_up(&mut self, families: Families, now: Instant) {
        let was_up = self.families.any();
        self.families = families;
        match (was_up, families.any()) {
            (false, true) => {
                self.responder.opened(now);
                self.presence.start()
            }
            (true, true) => self.schedule_announce(),
            _ => {}
        }
    }

    /// Authenticates every discovery datagram received from now on (the
    /// sender seals what leaves, each copy on its own).
    pub fn set_auth(&mut self, auth: Option<Auth>) {
        self.auth = auth;
    }

    /// The authentication in force, to change its keys.
    pub fn auth_mut(&mut self) -> Option<&mut Auth> {
        self.auth.as_mut()
    }

    /// What `key` resolves to now, asked on behalf of endpoint `ep`: a
    /// live binding (one confirmed by its holder less than
    /// `urdma_reconfirm` ago, so a host that changed while its
    /// announcements could not reach this one is followed all the same;
    /// none while its holder is being checked: the request waits for the
    /// holder's reply), a failure remembered, or else a lookup, started or
    /// joined, unless it cannot start (counted). The one call a miss makes.
    pub fn resolve(
        &mut self,
        local: &Local,
        ep: EndpointId,
        key: &Address,
        now: Instant,
    ) -> Resolution {
        if self.buggify.fires(Fault::BindingEvicted) {
            self.state.forget(key);
        }
        if !self.lookups.in_flight().checking(key) {
            if let Some(b) = self.state.live(key, now) {
                return Resolution::Known(b);
            }
        }
        if let Some(status) = self.state.failure(key, now) {
            return Resolution::Failed(status);
        }
        let cx = &mut cx!(self, local);
        if let Err(why) = self.lookups.room(cx, key) {
            return Resolution::Refused(why);
        }
        self.lookups.start(cx, ep, key.clone(), now);
        Resolution::Started
    }

    /// Whether a lookup of `key` is in flight.
    pub fn looking_up(&self, key: &Address) -> bool {
        self.lookups.in_flight().has_lookup(key)
    }

    /// Its tables: bindings and remembered failures.
    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    /// Whether it is up, how full its tables are, and what reached their
    /// bounds.
    pub fn status(&self) -> Status {
        let (held, evicted) = (self.state.sizes(), self.state.evicted());
        let in_flight = self.lookups.in_flight().sizes();
        let hints = self.presence.hints().sizes();
        Status {
            up: self.families.any(),
            bindings: held.bindings,
            failures: held.failures,
            lookups: in_flight.lookups,
            probes: in_flight.probes,
            bindings_evicted: evicted.bindings,
            failures_evicted: evicted.failures,
            lookups_refused: self.lookups.in_flight().refused(),
            checks_skipped: self.counts.checks_skipped,
            max_bindings: self.state.capacity(),
            max_lookups: self.lookups.in_flight().max_lookups(),
            try_time: self.lookups.try_timers().current(),
            hints: hints.names,
            hint_queue: hints.queue,
            max_hints: self.presence.hints().capacity(),
            hints_refused: self.presence.hints().refused,
        }
    }

    /// What it counted: drops, traffic, lookups, conflicts.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Announces this host's endpoints soon (they changed): from the next
    /// timer on, which [`Discovery::deadlines`] makes due at once.
    pub fn schedule_announce(&mut self) {
        self.presence.schedule();
    }

    /// Withdraws addresses of endpoint `ep` (`only` one, or all): call
    /// before they leave `local`.
    pub fn withdraw(&mut self, local: &Local, ep: EndpointId, only: Option<&Address>) {
        if self.families.any() {
            self.presence.withdraw(local, ep, only);
        }
    }

    /// When discovery must run next: its lookups' deadlines, then its
    /// announcements'. `asap` is the time of the caller's latest input,
    /// given for what is due at once.
    pub fn deadlines(&mut self, asap: Option<Instant>) -> Deadlines {
        let lookups = match asap {
            Some(now) if self.buggify.fires(Fault::EarlyWake) => Some(now),
            _ => self.lookups.in_flight().next_deadline(),
        };
        Deadlines {
            lookups,
            announcements: self.presence.next_wake(asap),
        }
    }

    /// Retries, stage changes and announcements that are due.
    pub fn on_timers(&mut self, local: &Local, now: Instant) {
        self.lookups.on_timers(&mut cx!(self, local), now);
        let around = (self.families, self.lookups.in_flight_mut().probes_mut());
        let out = &mut self.out.work.datagrams;
        let sent = self.presence.on_timers(local, around, now, out);
        self.counts.traffic.announcements += sent.announcements as u64;
        self.counts.traffic.start_queries += u64::from(sent.start_query);
    }

    /// Forgets what expired from the tables, and says in the log what was
    /// dropped, now and then.
    pub fn sweep(&mut self, now: Instant) {
        self.state.sweep(now);
        self.responder.sweep(now);
        self.presence.sweep(now);
        self.lookups.try_timers_mut().refresh(now);
        self.lookups.in_flight_mut().probes_mut().sweep(now);
        if self.drops_logged.due(&self.counts.drops, now) {
            log::info!("discovery: datagrams dropped so far: {}", self.counts.drops);
        }
    }

    /// When [`Discovery::sweep`] may have something to do: the first time
    /// an entry of one of its tables may expire, or its summary of drops
    /// is due. `None`: nothing, until something changes.
    pub fn sweep_due(&self, now: Instant) -> Option<Instant> {
        [
            self.state.sweep_due(),
            self.responder.sweep_due(),
            self.presence.sweep_due(),
            self.lookups.in_flight().probes().sweep_due(),
            self.lookups.try_timers().refresh_due(),
            self.drops_logged.due_at(&self.counts.drops, now),
        ]
        .into_iter()
        .fold(None, earliest)
    }

    /// What it holds, table by table, for the tests of their bounds.
    #[cfg(test)]
    pub(crate) fn footprint(&self) -> Footprint {
        let o = &self.out;
        Footprint {
            in_flight: self.lookups.in_flight().sizes(),
            drops_said: self.drops_logged.said.clone(),
            datagrams: o.work.datagrams.len(),
            resolver_jobs: o.work.resolver_jobs.len(),
            neighbour_jobs: o.work.neighbour_jobs.len(),
            outcomes: o.outcomes.len(),
            announcer: self.presence.announcer_sizes(),
            hint_endpoints: self.presence.hints().sizes().endpoints,
        }
    }

    /// What the system's resolver said about the name of lookup `key`
    /// (`lookup/names.rs`).
    pub fn on_nss(
        &mut self,
        local: &Local,
        key: &Address,
        answer: Result<Vec<std::net::IpAddr>, NssError>,
        now: Instant,
    ) {
        self.lookups.on_nss(&mut cx!(self, local), key, answer, now);
    }

    /// The result of a neighbour lookup for an `eui64` derivation
    /// (`lookup/derive.rs`).
    pub fn on_neighbour(&mut self, job: NeighbourJob, mac: Option<[u8; 6]>, now: Instant) {
        let found = lookup::Found {
            cfg: &self.cfg,
            state: &mut self.state,
            out: &mut self.out,
            counts: &mut self.counts,
        };
        self.lookups.on_neighbour(found, job, mac, now);
    }

    /// Ends every lookup and check at once, with no outcome: the request
    /// path answers what waits for them. For after the discovery thread
    /// failed: the state of what was in flight cannot be trusted (no
    /// failure is remembered: the next request asks again).
    pub fn abandon_all(&mut self) {
        self.lookups.in_flight_mut().clear();
        self.out.work.neighbour_jobs.clear();
        self.out.work.resolver_jobs.clear();
    }

    /// Endpoint `ep` is closing. A lookup whose queries carry its record
    /// goes on with the record of `carrier(key)` (an endpoint still
    /// waiting for it) or ends; a check sent from it goes on from another
    /// endpoint, or ends.
    pub fn endpoint_closed(
        &mut self,
        local: &Local,
        ep: EndpointId,
        carrier: impl Fn(&Address) -> Option<EndpointId>,
    ) {
        let other = local.endpoint_ids().find(|&e| e != ep);
        (self.lookups.in_flight_mut()).endpoint_closed(ep, carrier, other);
    }

    /// What discovery wants done since the last call: the engine takes it
    /// once per poll.
    pub fn take_output(&mut self) -> Output {
        let mut out = std::mem::take(&mut self.out);
        out.work
            .datagrams
            .retain(|_| !self.buggify.fires(Fault::DatagramLost));
        out
    }
}

#[cfg(test)]
mod tests;
