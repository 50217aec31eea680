//! The adversary's messages, built from parts of its choosing: whatever
//! decodes, the receivers must take as what it is.

use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::discovery::wire::{
    Announce, Answer, EndpointRecord, Message, Query, Reply, WireAddress, MAX_ADDRESSES,
};
use std::net::IpAddr;
use std::num::NonZeroU64;

/// How its records look: like the first an honest host sent, whose LID,
/// MTU, rate and partitions they copy.
#[derive(Default)]
pub(super) struct Forge {
    template: Option<EndpointRecord>,
}

impl Forge {
    /// An honest host sent `record`: the look of its records, if it has
    /// none yet.
    pub(super) fn learn(&mut self, record: &EndpointRecord) {
        if self.template.is_none() {
            self.template = Some(record.clone());
        }
    }

    /// A record of `gid` listing `addrs` (each once, as many as fit), with
    /// the LID, MTU, rate and partitions of a host it heard.
    pub(super) fn record(&self, gid: Gid, addrs: &[Address]) -> Option<EndpointRecord> {
        let mut wire: Vec<WireAddress> = Vec::new();
        for a in addrs {
            if let Ok(w) = WireAddress::new(a.clone()) {
                if !wire.contains(&w) && wire.len() < MAX_ADDRESSES {
                    wire.push(w);
                }
            }
        }
        let (lid, mtu, rate, pkeys) = match &self.template {
            Some(t) => (t.lid(), t.mtu(), t.rate(), t.pkeys().to_vec()),
            None => (0, 5, 16, vec![0xffff]),
        };
        EndpointRecord::new(gid, lid, mtu, rate, pkeys, wire).ok()
    }

    /// The records of an announcement of `names` by `gid` at `at`: the
    /// address and seven names in the first, eight more in a second (an
    /// address appears once per announcement, and every record of the GID
    /// counts as listing it).
    pub(super) fn records(&self, gid: Gid, at: IpAddr, names: &[Address]) -> Vec<EndpointRecord> {
        let first: Vec<Address> = std::iter::once(Address::from(at))
            .chain(names.iter().take(MAX_ADDRESSES - 1).cloned())
            .collect();
        let rest: Vec<Address> = names
            .iter()
            .skip(MAX_ADDRESSES - 1)
            .take(MAX_ADDRESSES)
            .cloned()
            .collect();
        let mut out: Vec<EndpointRecord> = self.record(gid, &first).into_iter().collect();
        if !rest.is_empty() {
            out.extend(self.record(gid, &rest));
        }
        out
    }
}

/// A query for `target` carrying `sender`.
pub(super) fn query(txid: NonZeroU64, target: &Address, sender: EndpointRecord) -> Option<Message> {
    let target = WireAddress::new(target.clone()).ok()?;
    Some(Message::from(Query::new(txid, target, sender)))
}

/// A reply for `target`: FOUND with `found`, REFUSED without.
pub(super) fn reply(
    txid: NonZeroU64,
    target: &Address,
    found: Option<EndpointRecord>,
) -> Option<Message> {
    let target = WireAddress::new(target.clone()).ok()?;
    let answer = match found {
        Some(r) => Answer::Found(r),
        None => Answer::Refused,
    };
    Reply::new(txid, target, answer).ok().map(Message::from)
}

/// An announcement of `records`, withdrawn or not.
pub(super) fn announce(records: Vec<EndpointRecord>, withdrawn: bool) -> Option<Message> {
    Announce::new(records, withdrawn).ok().map(Message::from)
}
