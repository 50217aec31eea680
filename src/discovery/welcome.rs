//! How a host that joins a running segment learns whom to ask for its
//! names, and why one that has run for a week still knows.
//!
//! Names are asked of the host that announced them (`hints.rs`); a host
//! announces itself when it starts and when its endpoints change, and
//! renews its announcements every two fifths of `urdma_addr_timeout`
//! (`announce.rs`), so what its peers heard never expires while it runs.
//! A host that joins later heard none of it: it sends a *start query* with
//! its first announcements, a group query for one of its own addresses,
//! which no host answers (only the holder would, and the asker is the
//! holder), and every host that hears it, or hears an endpoint it never
//! heard announce itself, announces itself in turn: at a time of its own
//! within a window that grows with the segment, and at most once per a
//! period that grows with it too, so that what each host receives of these
//! answers does not grow with the number of hosts.
//!
//! Whatever this teaches is a hint, heard on a group, where the name's
//! holder hears a forgery too and contradicts it (`hints.rs`); a forged
//! start query costs the segment one announcement per host, paced.

use super::announce::welcome_pace;
use super::wire::{Message, Query, WireAddress};
use super::{record_for, Discovery};
use crate::addr::{Address, Gid};
use crate::local::Local;
use std::time::{Duration, Instant};

/// A host that joined is answered once in this long: it sends its start
/// query twice, a second apart, and also announces itself.
pub(super) const WELCOMED_FOR: Duration = Duration::from_secs(5);

impl Discovery {
    /// The endpoint `gid` joined the segment: this host announces itself
    /// to it, paced by the size of the segment (`announce::welcome_pace`),
    /// once for all it sends.
    pub(super) fn welcome(&mut self, gid: Gid, now: Instant) {
        // While its own announcements are still to come, they are enough.
        if self.announcer.announcing() || self.welcomed.get_live(&gid, now).is_some() {
            return;
        }
        self.welcomed.insert(gid, (), Some(now + WELCOMED_FOR));
        let (within, every) = welcome_pace(self.hints.endpoints_heard());
        let after = self.jitter(within);
        self.announcer.welcome(after, every, now);
    }

    /// A random time in `0..span`, from the transaction id stream.
    fn jitter(&mut self, span: Duration) -> Duration {
        let ms = u64::try_from(span.as_millis()).unwrap_or(u64::MAX).max(1);
        Duration::from_millis(self.inflight.new_txid().get() % ms)
    }

    /// Sends this host's start query: on the groups, for one of its own
    /// addresses (a name, if it has one), carrying that endpoint's record.
    /// A reply can only come from a host that holds the same address (a
    /// misconfiguration); it counts as late, like one to a probe that
    /// ended.
    pub(super) fn send_start_query(&mut self, local: &Local, now: Instant) {
        let pick = |name: bool| {
            local.endpoint_ids().find_map(|ep| {
                local
                    .addresses_of(ep)
                    .find(|a| matches!(a, Address::Name(_)) == name)
                    .map(|a| (ep, a.clone()))
            })
        };
        let Some((ep, target)) = pick(true).or_else(|| pick(false)) else {
            return;
        };
        let (Ok(wire), Some(record)) = (
            WireAddress::new(target.clone()),
            record_for(local, ep, Some(&target)),
        ) else {
            return;
        };
        let txid = self.inflight.new_txid();
        self.inflight.remember_ended(txid, now);
        let bytes = Message::from(Query::new(txid, wire, record)).encode();
        self.traffic.start_queries += 1;
        log::debug!("discovery: start query for {target} on the groups");
        self.datagrams.extend(self.families.multicast(bytes));
    }
}

/// Whether a query that arrived on a group is a start query: its asker
/// asks for an address its own record lists.
pub(super) fn is_start_query(q: &Query) -> bool {
    q.sender().addresses().contains(q.target())
}
