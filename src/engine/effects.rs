//! What the engine hands its caller: [`Effects`], the one kind of output
//! of [`super::Engine::poll`].

use crate::discovery::state::{NeighbourJob, NssJob};
use crate::discovery::Datagram;
use crate::request::msg::MsgBuf;
use std::time::Instant;

/// The reply a request gets; the boundary sends it exactly once.
#[derive(Debug, PartialEq)]
pub struct Response(pub MsgBuf);

/// A reply to send to the daemon.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub id: u64,
    pub msg: MsgBuf,
    /// Answers a `query` (acm_query_response) rather than a `resolve`.
    pub query: bool,
}

/// Everything the engine wants done, from [`super::Engine::poll`]: the caller
/// performs it once it has released the engine.
#[derive(Debug, Default, PartialEq)]
pub struct Effects {
    /// To the daemon, each exactly once.
    pub replies: Vec<Outgoing>,
    /// To the network, in this order.
    pub datagrams: Vec<Datagram>,
    /// Names for the system's resolver.
    pub resolver_jobs: Vec<NssJob>,
    /// Neighbour-table lookups, each at its `at`.
    pub neighbour_jobs: Vec<NeighbourJob>,
    /// When [`super::Engine::on_timers`] must run next (`None`: nothing is
    /// pending; every later input comes with a new deadline).
    pub deadline: Option<Instant>,
}

impl Effects {
    /// Adds `later`'s work after this one's; its deadline is the current one.
    pub fn extend(&mut self, later: Effects) {
        self.replies.extend(later.replies);
        self.datagrams.extend(later.datagrams);
        self.resolver_jobs.extend(later.resolver_jobs);
        self.neighbour_jobs.extend(later.neighbour_jobs);
        self.deadline = later.deadline;
    }

    /// Whether there is nothing to do (whatever the deadline).
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty() && !self.has_work()
    }

    /// Whether there is work besides replies and the deadline.
    pub fn has_work(&self) -> bool {
        !(self.datagrams.is_empty()
            && self.resolver_jobs.is_empty()
            && self.neighbour_jobs.is_empty())
    }
}
