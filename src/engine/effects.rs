//! What the engine hands its caller: [`Effects`], the one kind of output
//! of [`super::Engine::poll`].

use crate::discovery::Work;
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
    /// For the runtime: datagrams (in this order), names for the system's
    /// resolver, neighbour-table lookups (each at its `at`).
    pub work: Work,
    /// When the timers must run next ([`super::Input::Timers`]; `None`:
    /// nothing is pending; every later input comes with a new deadline).
    pub deadline: Option<Instant>,
}

impl Effects {
    /// Whether there is nothing to do (whatever the deadline).
    pub fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.work.is_empty()
    }
}
