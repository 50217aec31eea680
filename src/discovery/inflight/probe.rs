//! A query in flight and why it is out.

use crate::addr::Address;
use crate::handle::EndpointId;
use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::time::Instant;

/// Hosts that may claim one name in answer to a group query and be asked
/// to confirm it; more claimants than this are dropped.
pub const MAX_CLAIMS: usize = 4;
/// Checks of learned bindings in flight at once; hints beyond it wait for
/// a later hint.
pub const MAX_CHECKS: usize = 1024;

/// Why a query is out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A lookup's own query: by unicast to an IP address, or to the
    /// discovery groups for a name. Only a reply from the queried address
    /// binds it; an answer to a group query is a claim to confirm.
    Lookup,
    /// Asks a host that answered a group query, by unicast, whether it
    /// holds the name: its reply, which nobody else can see to forge,
    /// binds the name.
    Claim,
    /// Asks the holder of a learned binding again, because a query or an
    /// announcement said something else about it. Only the holder's
    /// reply changes the binding; no answer removes it.
    Check,
    /// Asks an address the system's resolver gave for a name whether its
    /// host is there: the reply binds the address, and confirms the name
    /// as a claim does.
    Address,
}

/// A query in flight, by its transaction id.
#[derive(Clone, Debug)]
pub struct Probe {
    /// The address asked about.
    pub target: Address,
    /// The lookup it works for (for a check: the target).
    pub key: Address,
    /// Where the query went; `None`: the discovery groups. A reply must
    /// come from there.
    pub to: Option<SocketAddr>,
    pub purpose: Purpose,
    /// Sends so far, and when the first and the last one left.
    pub tries: u32,
    pub first_sent_at: Option<Instant>,
    pub sent_at: Option<Instant>,
    /// The transaction ids of the tries after the first (the first is the
    /// probe's own): each try has its own, so that a reply says which try
    /// it answers and how long it took (`rto.rs`).
    pub retry_txids: Vec<NonZeroU64>,
    /// The endpoint whose record the query carries.
    pub endpoint: EndpointId,
    /// A group query that some host answered: it is not sent again.
    pub answered: bool,
    /// Sent once more, at once, because the host it asks said it had just
    /// started (`Probes::asked_of_restarted`).
    pub asked_again: bool,
    /// A claimant's confirmation: the host answered the lookup's group
    /// query. Its silence leaves the name undecided (`lookup/decide.rs`).
    pub claimed: bool,
}

impl Probe {
    /// A query for `target`, on behalf of `key`'s lookup, about to be sent
    /// the first time, to `to` (`None`: the groups) with `ep`'s record.
    pub fn unsent(
        key: Address,
        target: Address,
        to: Option<SocketAddr>,
        purpose: Purpose,
        endpoint: EndpointId,
    ) -> Probe {
        Probe {
            target,
            key,
            to,
            purpose,
            tries: 0,
            first_sent_at: None,
            sent_at: None,
            retry_txids: Vec::new(),
            endpoint,
            answered: false,
            asked_again: false,
            claimed: false,
        }
    }
}
