//! The requests waiting for lookups: each stays here from the miss that
//! started (or joined) a lookup until the lookup's end answers it, or its
//! endpoint closes, and the replies made to them until the engine's next
//! poll hands them over. Discovery never sees one.

use super::counters::Counters;
use super::effects::Outgoing;
use crate::addr::Address;
use crate::daemon::Daemon;
use crate::fastmap::Map;
use crate::handle::EndpointId;
use crate::request::msg::MsgBuf;

/// A request waiting for a lookup.
#[derive(Clone, Debug)]
pub struct Waiter {
    pub endpoint: EndpointId,
    /// The daemon's request id (0 is the kernel).
    pub id: u64,
    pub request: MsgBuf,
    pub echo_source: Option<usize>,
}

#[derive(Default)]
pub(super) struct Waiters {
    waiting: Map<Address, Vec<Waiter>>,
    /// How many wait, over every key: read at each poll (the tables'
    /// summary), where counting them would cost a walk of every lookup.
    held: usize,
    /// Replies made, for the engine's next poll.
    replies: Vec<Outgoing>,
}

impl Waiters {
    pub fn add(&mut self, key: Address, w: Waiter) {
        self.waiting.entry(key).or_default().push(w);
        self.held += 1;
    }

    /// Answers `w` with `reply`, counted on its endpoint.
    pub fn answer(
        &mut self,
        w: &Waiter,
        reply: MsgBuf,
        counters: &mut Counters,
        daemon: &impl Daemon,
    ) {
        counters.count_status(w.endpoint, reply.status(), daemon);
        self.replies.push(Outgoing {
            id: w.id,
            msg: reply,
            query: false,
        });
    }

    /// Answers everything waiting for `key` with `status`; returns how
    /// many there were.
    pub fn fail(
        &mut self,
        key: &Address,
        status: u8,
        counters: &mut Counters,
        daemon: &impl Daemon,
    ) -> usize {
        let waiters = self.take(key);
        self.abandon(waiters, status, counters, daemon)
    }

    /// Answers each of `waiters`, taken from here, with `status`; returns
    /// how many there were.
    pub fn abandon(
        &mut self,
        waiters: Vec<Waiter>,
        status: u8,
        counters: &mut Counters,
        daemon: &impl Daemon,
    ) -> usize {
        for w in &waiters {
            let reply = crate::request::msg::resolve_error(&w.request, status);
            self.answer(w, reply, counters, daemon);
        }
        waiters.len()
    }

    /// The replies made since the last call.
    pub fn take_replies(&mut self) -> Vec<Outgoing> {
        std::mem::take(&mut self.replies)
    }

    /// Everything waiting for `key`, which waits no more.
    pub fn take(&mut self, key: &Address) -> Vec<Waiter> {
        let waiters = self.waiting.remove(key).unwrap_or_default();
        self.held -= waiters.len();
        waiters
    }

    /// Everything waiting on endpoint `ep`, whatever for.
    pub fn take_endpoint(&mut self, ep: EndpointId) -> Vec<Waiter> {
        let mut theirs = Vec::new();
        self.waiting.retain(|_, waiters| {
            let (mine, rest): (Vec<Waiter>, Vec<Waiter>) =
                waiters.drain(..).partition(|w| w.endpoint == ep);
            *waiters = rest;
            theirs.extend(mine);
            !waiters.is_empty()
        });
        self.held -= theirs.len();
        theirs
    }

    /// The endpoint of the first request still waiting for `key`: whose
    /// record a lookup that lost its own endpoint goes on with.
    pub fn first_endpoint(&self, key: &Address) -> Option<EndpointId> {
        self.waiting
            .get(key)
            .and_then(|w| w.first())
            .map(|w| w.endpoint)
    }

    pub fn keys(&self) -> Vec<Address> {
        self.waiting.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.held
    }
}
