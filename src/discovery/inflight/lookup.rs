//! A lookup in flight: where it is, what its stage is doing, what the
//! stages over came to.

use crate::discovery::state::Learned;
use crate::handle::EndpointId;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// How a stage ends if nothing binds: told no (ENODATA), or could not
/// find out (ETIMEDOUT).
pub const NO: u8 = acm_prov_sys::ACM_STATUS_ENODATA as u8;
pub const UNKNOWN: u8 = acm_prov_sys::ACM_STATUS_ETIMEDOUT as u8;

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

/// What the stages of a lookup already over came to, none having bound
/// its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoFar {
    /// Each was told no (or none is over yet).
    ToldNo,
    /// One could not find out: the lookup then fails with ETIMEDOUT,
    /// whatever later stages say, and is not remembered.
    Unsure,
}

/// What a lookup's current stage is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doing {
    /// Asking hosts (an IP address of itself, a name of the groups, the
    /// addresses the system's resolver gave), or deriving.
    Asking,
    /// A name asked of the one host its announcements named (`hints/`),
    /// not yet of the groups.
    AskingAnnouncer,
    /// A name two endpoints announced, asked of the groups: its group
    /// query's whole try is heard before it is decided.
    AskingDisputed,
    /// A check of the same destination was in flight when the lookup
    /// started (`Lookups::start`): the check's end ends the
    /// discovery stage.
    AwaitingCheck,
    /// Waiting for the system's resolver.
    Resolving,
}

#[derive(Debug)]
pub struct Lookup {
    pub stage: Stage,
    /// When the stage gives up: for discovery, `urdma_timeout ×
    /// (urdma_retries + 1)` after it began, however many hosts answered.
    /// Set through [`super::InFlight::set_lookup_deadline`], which indexes it.
    pub(super) deadline: Instant,
    /// The endpoint whose record the queries carry.
    pub endpoint: EndpointId,
    /// How the current stage ends if nothing binds: ENODATA while every
    /// probe of it that ended was told no, ETIMEDOUT once one could not
    /// find out (no answer, an ICMP error, a group query's time up).
    pub failure: u8,
    /// What the stages already over came to.
    pub so_far: SoFar,
    /// What its current stage is doing.
    pub doing: Doing,
    /// The probes working for this lookup: its own query, then the hosts
    /// asked to confirm a claim. Kept by [`super::InFlight`] alone.
    pub(super) probes: Vec<NonZeroU64>,
    /// Name lookups: the hosts that confirmed a claim, and what they said.
    pub confirmed: Vec<(SocketAddr, Learned)>,
    /// A host that claimed the name on the groups never confirmed it: the
    /// name is not decided by the others' confirmations (`lookup/decide.rs`).
    pub claim_silent: bool,
    /// The try time (`rto.rs`) the discovery stage's deadline was set
    /// with: a longer one later lengthens the stage by as much per try.
    pub try_time: Duration,
    pub started: Instant,
    /// Why each stage that could not find out could not (the last word
    /// of each): what the warning of a lookup that fails so says.
    pub why: Vec<(Stage, String)>,
}

impl Lookup {
    /// A lookup started at `now` for `endpoint`, at stage `stage`.
    pub fn new(stage: Stage, endpoint: EndpointId, failure: u8, now: Instant) -> Lookup {
        Lookup {
            stage,
            deadline: now,
            endpoint,
            failure,
            so_far: SoFar::ToldNo,
            doing: Doing::Asking,
            probes: Vec::new(),
            confirmed: Vec::new(),
            claim_silent: false,
            try_time: Duration::ZERO,
            started: now,
            why: Vec::new(),
        }
    }

    pub fn probes(&self) -> &[NonZeroU64] {
        &self.probes
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}
