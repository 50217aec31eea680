//! The requests waiting for lookups: each stays here from the miss that
//! started (or joined) a lookup until the lookup's end answers it, or its
//! endpoint closes. Discovery never sees one.

use crate::addr::Address;
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
pub(super) struct Waiters(Map<Address, Vec<Waiter>>);

impl Waiters {
    pub fn add(&mut self, key: Address, w: Waiter) {
        self.0.entry(key).or_default().push(w);
    }

    /// Everything waiting for `key`, which waits no more.
    pub fn take(&mut self, key: &Address) -> Vec<Waiter> {
        self.0.remove(key).unwrap_or_default()
    }

    /// Everything waiting on endpoint `ep`, whatever for.
    pub fn take_endpoint(&mut self, ep: EndpointId) -> Vec<Waiter> {
        let mut theirs = Vec::new();
        self.0.retain(|_, waiters| {
            let (mine, rest): (Vec<Waiter>, Vec<Waiter>) =
                waiters.drain(..).partition(|w| w.endpoint == ep);
            *waiters = rest;
            theirs.extend(mine);
            !waiters.is_empty()
        });
        theirs
    }

    /// The endpoint of the first request still waiting for `key`: whose
    /// record a lookup that lost its own endpoint goes on with.
    pub fn first_endpoint(&self, key: &Address) -> Option<EndpointId> {
        self.0.get(key).and_then(|w| w.first()).map(|w| w.endpoint)
    }

    pub fn keys(&self) -> Vec<Address> {
        self.0.keys().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }
}
