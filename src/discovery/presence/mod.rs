//! This host's presence on the segment and what it knows of the others'
//! (docs/protocol.md, *Name hints*): its announcements, renewals and
//! defences (`announce.rs`), the names the others announced, whom to ask
//! for them (`hints/`), and the hosts that join, welcomed
//! (`welcome.rs`). Announcements and start queries are its to act on;
//! what they say about bindings is checked by the lookups, never taken.

pub(super) mod welcome;

use super::announce::Announcer;
use super::counts::Counts;
use super::hints::Hints;
use super::inflight::Probes;
use super::state::State;
use super::wire::{Announce, EndpointRecord};
use super::{Datagram, Families};
use crate::addr::{Address, Gid};
use crate::bounded::earliest;
use crate::config::Config;
use crate::entropy::Seed;
use crate::handle::EndpointId;
use crate::local::Local;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;
use welcome::Welcomes;

pub(super) struct Presence {
    announcer: Announcer,
    /// Whom to ask for a name, from the announcements heard.
    hints: Hints,
    /// Hosts that joined and were welcomed.
    welcomes: Welcomes,
}

/// What a welcome takes from the rest of discovery: whether datagrams are
/// authenticated, the discovery port, the bindings (a host bound at an
/// address may be welcomed there) and the probes' random stream.
pub(super) struct Around<'a> {
    pub keyed: bool,
    pub port: u16,
    pub state: &'a State,
    pub probes: &'a mut Probes,
}

/// What [`Presence::on_timers`] sent.
pub(super) struct Sent {
    /// Announcements (each once per family).
    pub announcements: usize,
    /// A start query.
    pub start_query: bool,
}

impl Presence {
    pub(super) fn new(cfg: &Config, seed: Seed) -> Presence {
        Presence {
            announcer: Announcer::new(cfg.addr_timeout.duration(), seed),
            hints: Hints::new(cfg.max_learned, cfg.addr_timeout.duration()),
            welcomes: Welcomes::new(),
        }
    }

    /// Announcements and the start queries that go with them, due at
    /// `now`: into `out`.
    pub(super) fn on_timers(
        &mut self,
        local: &Local,
        (families, probes): (Families, &mut Probes),
        now: Instant,
        out: &mut Vec<Datagram>,
    ) -> Sent {
        let announcements = self.announcer.on_timers(local, families, now, out);
        let mut start_query = false;
        if self.announcer.take_start_query() {
            match self.start_query(local, (families, probes), now) {
                Some(sent) => {
                    out.extend(sent);
                    start_query = true;
                }
                None => self.announcer.start_query_unsent(),
            }
        }
        Sent {
            announcements,
            start_query,
        }
    }

    /// The sockets opened: this host announces itself, with start
    /// queries.
    pub(super) fn start(&mut self) {
        self.announcer.start();
    }

    /// Announces this host's endpoints soon (they changed).
    pub(super) fn schedule(&mut self) {
        self.announcer.schedule();
    }

    /// When an announcement is due next; `asap` is the time of the
    /// caller's latest input, for what is due at once.
    pub(super) fn next_wake(&self, asap: Option<Instant>) -> Option<Instant> {
        self.announcer.next_wake(asap)
    }

    /// The names heard, for the lookups to ask by and to read.
    pub(super) fn hints(&self) -> &Hints {
        &self.hints
    }

    pub(super) fn hints_mut(&mut self) -> &mut Hints {
        &mut self.hints
    }

    /// Whether announcements sent to this host alone are welcomes it asked
    /// for with its start query.
    pub(super) fn listening(&self, now: Instant) -> bool {
        self.welcomes.listening(now)
    }

    /// An announcement from `from`, sent to `to` (when the socket says).
    /// Never believed, whatever its source says: returns the addresses
    /// it says something new about that this host has a binding for, for
    /// the lookups to check with their holders. Addresses never asked
    /// about are ignored. Names heard on a group, from an address of the
    /// record, become hints of whom to ask (`hints/`); one announced to a
    /// single host is not heard by the name's holder, who could not
    /// contradict it.
    pub(super) fn on_announce(
        &mut self,
        local: &Local,
        a: &Announce,
        (from, to): (SocketAddr, Option<IpAddr>),
        around: &mut Around<'_>,
        counts: &mut Counts,
        now: Instant,
    ) -> Vec<Address> {
        let group = to.is_some_and(|ip| ip.is_multicast());
        // Sent to this host alone, in the seconds after its start query: a
        // welcome it asked for (`welcome.rs`), taken only from key holders.
        // Without a key anyone could send one naming any name, and nothing
        // would contradict it (docs/protocol.md, trust table: announcement
        // to this host alone).
        let welcome = !group && around.keyed && self.listening(now);
        let source = Address::from(from.ip());
        // An endpoint whose addresses fill several records lists them in
        // the first (an address appears once per announcement): the
        // source is the endpoint's if any record of its GID lists it.
        let listed: Vec<_> = a
            .records()
            .iter()
            .filter(|r| r.addresses().iter().any(|w| *w.address() == source))
            .map(|r| r.gid())
            .collect();
        let mut hints: Vec<Address> = Vec::new();
        for record in a.records() {
            if local.is_own_gid(record.gid()) {
                // This host's GID at an address it does not hold, which
                // the record lists: whoever hears it would ask that
                // address for the record's names (`hints/`).
                let forged = group
                    && !a.withdrawn()
                    && listed.contains(&record.gid())
                    && local.holder(&source).is_none();
                self.own_heard(record.gid(), forged, from, now);
                counts
                    .drops
                    .count(|d| &mut d.own, from, "our own announcement");
                continue;
            }
            let from_record = (group || welcome) && listed.contains(&record.gid());
            let names = record
                .addresses()
                .iter()
                .any(|w| matches!(w.address(), Address::Name(_)));
            if group
                && from_record
                && names
                && !a.withdrawn()
                && self.hints.endpoint_heard(record.gid(), now)
            {
                self.welcome(local, record, from.ip(), around, now);
            }
            hints.extend(around.state.contradicted_by(record, a.withdrawn()));
            if from_record {
                let withdrawn = a.withdrawn();
                counts.disputed_names += self.names_heard(local, record, withdrawn, from, now);
            }
        }
        hints
    }

    /// When the endpoint `gid`, welcomed lately, was first heard.
    pub(super) fn arrived_at(&mut self, gid: Gid, now: Instant) -> Option<Instant> {
        self.welcomes.arrived_at(gid, now)
    }

    /// Withdraws addresses of endpoint `ep` (`only` one, or all).
    pub(super) fn withdraw(&mut self, local: &Local, ep: EndpointId, only: Option<&Address>) {
        self.announcer.withdraw(local, ep, only);
    }

    /// The names of `record`, announced (or withdrawn) on a group from an
    /// address of its endpoint: whom to ask for them (`hints/`); one of
    /// this host's, announced by another endpoint, is defended. Returns
    /// how many names that made disputed.
    pub(super) fn names_heard(
        &mut self,
        local: &Local,
        record: &EndpointRecord,
        withdrawn: bool,
        from: SocketAddr,
        now: Instant,
    ) -> u64 {
        let mut disputed = 0;
        let names = record.addresses().iter().map(|w| w.address());
        for key in names.filter(|a| matches!(a, Address::Name(_))) {
            if withdrawn {
                self.hints.withdrawn(key, record.gid());
                continue;
            }
            if self.hints.heard(key, record.gid(), from.ip(), now) {
                disputed += 1;
            }
            if local.holder(key).is_some() && self.announcer.defend(record.gid(), now) {
                log::info!(
                    "discovery: {key} is ours, but {} at {from} announced it; announcing ours",
                    record.gid()
                );
            }
        }
        disputed
    }

    /// An announcement of this host's GID `gid` arrived from `from`;
    /// `forged` if from an address this host does not hold, on a group:
    /// answered as another endpoint announcing one of its names is.
    pub(super) fn own_heard(&mut self, gid: Gid, forged: bool, from: SocketAddr, now: Instant) {
        if forged && self.announcer.defend(gid, now) {
            log::info!("discovery: our GID {gid} announced from {from}; announcing ours");
        }
    }

    pub(super) fn sweep(&mut self, now: Instant) {
        self.hints.sweep(now);
        self.welcomes.sweep(now);
    }

    pub(super) fn sweep_due(&self) -> Option<Instant> {
        earliest(self.hints.sweep_due(), self.welcomes.sweep_due())
    }

    #[cfg(test)]
    pub(super) fn announcer_sizes(&self) -> super::announce::AnnouncerSizes {
        self.announcer.sizes()
    }
}
