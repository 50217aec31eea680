//! What this host tells the segment unasked: its endpoints after a change
//! (announcements) and the addresses it no longer holds (withdrawals).
//! Receivers take neither as truth, only as a hint to check
//! (docs/protocol.md), so both exist to make peers notice changes sooner.

use super::hints::DEFEND_DELAY;
use super::wire::{
    Announce, EndpointRecord, Message, WireAddress, MAX_ADDRESSES, MAX_ANNOUNCE_RECORDS, MAX_PKEYS,
};
use super::{Datagram, Families};
use crate::addr::{Address, Gid};
use crate::bounded::Expiring;
use crate::entropy::Seed;
use crate::fastmap::Set;
use crate::handle::EndpointId;
use crate::local::{ip_of, Local};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Announcements after a change: soon, then twice more in case one is lost.
const DELAYS_MS: [u64; 3] = [50, 1000, 3000];
/// Announcements leave this many at a time, one batch per [`PACE`]: a host
/// with thousands of addresses announces hundreds of datagrams, and sending
/// them in one go would keep the worker from answering queries, and the
/// peers' workers from anything else, for a noticeable time.
pub(super) const BATCH: usize = 16;
pub(super) const PACE: Duration = Duration::from_millis(1);
/// An endpoint that announced one of this host's names is answered with
/// an announcement at most this often, unless a host joined since (it may
/// have heard the other and not this one): two hosts configured with one
/// name must not keep each other announcing.
const DEFEND_AGAIN: Duration = Duration::from_secs(60);
/// Endpoints remembered as answered; more (forged GIDs) share the pace of
/// [`DEFEND_DELAY`].
const MAX_DEFENDED: usize = 1024;
/// Hosts answer a host that joined with an announcement each, at a time of
/// their own within this, at least: spread so that the newcomer, busy
/// starting and answering the hosts that check it, takes them a few at a
/// time (its names settle a second after they are heard anyway).
const WELCOME_WITHIN: Duration = Duration::from_secs(1);
/// At most this often, at least: one announcement of a host answers every
/// host that joined meanwhile, and a forger announcing new endpoints makes
/// each host announce itself at most this often.
const WELCOME_EVERY: Duration = Duration::from_secs(1);
/// What the two grow by per endpoint heard on the segment, so that what a
/// host receives of welcomes stays the same whatever the segment's size:
/// N hosts answering a newcomer send N announcements, spread over N × this
/// (a newcomer receives at most 5,000 a second), and each host answers to
/// the groups at most a few times per N × this.
const WELCOME_WITHIN_PER_HOST: Duration = Duration::from_micros(200);
const WELCOME_EVERY_PER_HOST: Duration = Duration::from_millis(10);
/// The spread of welcomes has this ceiling: a newcomer on a segment of
/// 50,000 hosts hears them all within 10 s.
const WELCOME_WITHIN_MAX: Duration = Duration::from_secs(10);

/// Within how long, and at most how often, a host welcomes a newcomer on
/// a segment where it heard `hosts` endpoints.
pub fn welcome_pace(hosts: usize) -> (Duration, Duration) {
    let n = u32::try_from(hosts).unwrap_or(u32::MAX);
    let within =
        (WELCOME_WITHIN_PER_HOST.saturating_mul(n)).clamp(WELCOME_WITHIN, WELCOME_WITHIN_MAX);
    let every = WELCOME_EVERY_PER_HOST.saturating_mul(n).max(WELCOME_EVERY);
    (within, every)
}

/// A host announces its endpoints again, unchanged, every this share of
/// `urdma_addr_timeout` (how long its peers keep what it announced), give
/// or take a tenth: two renewals may be lost before a peer forgets it.
const RENEW_SHARE: (u32, u32) = (2, 5);
/// Start queries are sent with this many of the announcements that follow
/// a start (the first may be lost).
const START_QUERIES: u8 = 2;

/// How often a host whose peers keep its announcements `lifetime` renews
/// them (`None`: they are kept for ever, and never renewed).
pub(super) fn renew_every(lifetime: Option<Duration>) -> Option<Duration> {
    lifetime.map(|l| l * RENEW_SHARE.0 / RENEW_SHARE.1)
}

/// How long withdrawals wait to be sent together.
const WITHDRAW_DELAY: Duration = Duration::from_millis(20);

/// A welcome period: when it began, how many hosts it answered by unicast
/// since the last welcome to the groups, how many of those it sent, and
/// when the last left.
#[derive(Default)]
struct Period {
    from: Option<Instant>,
    unicast: usize,
    groups: u32,
    last_groups: Option<Instant>,
}

/// Welcomes to the groups per welcome period: one for a burst of hosts
/// joining, others for those that joined after it, each at least a welcome
/// window after the last; later ones wait for the next period.
const GROUP_WELCOMES: u32 = 3;
/// A welcome to the groups waits for the hosts that keep joining at most
/// this many welcome windows.
pub(super) const WELCOME_WAIT: u32 = 4;

/// Where a datagram to one host goes, and the address it leaves from.
pub(super) type Unicast = (SocketAddr, Option<IpAddr>);

/// What distinguishes one endpoint record from another: GID, LID, MTU,
/// rate and P_Key.
type RecordKey = (Gid, u16, u8, u8, u16);

/// Addresses waiting to be withdrawn together, in order, without repeats.
#[derive(Default)]
struct Pending {
    addrs: Vec<WireAddress>,
    seen: Set<WireAddress>,
}

pub(super) struct Announcer {
    /// An announcement is asked for; its times are set at the next timer.
    asked: bool,
    /// When this host's endpoints are announced next.
    at: Vec<Instant>,
    /// Addresses to withdraw, per endpoint record, and when.
    withdrawals: Vec<(RecordKey, Pending)>,
    withdraw_at: Option<Instant>,
    /// Announcements and withdrawals waiting to leave, paced: to the
    /// groups, or to one host (a welcome).
    queue: VecDeque<(Option<Unicast>, Vec<u8>)>,
    /// When the next batch of them may leave (`None`: at once).
    queue_at: Option<Instant>,
    /// Withdrawals are waiting; their time is set at the next timer.
    withdraw_asked: bool,
    /// When this host announces itself because another endpoint announced
    /// one of its names, or because a host that cannot have heard its
    /// announcements joined.
    defend_at: Option<Instant>,
    welcome_at: Option<Instant>,
    /// When the pending welcome to the groups was first due.
    welcome_first: Option<Instant>,
    /// Hosts that joined, to be answered by an announcement of their own
    /// (by unicast), each at its time.
    welcome_to: Vec<(Instant, Unicast)>,
    /// The welcomes of the current welcome period.
    period: Period,
    /// When it last announced itself for either (one announcement answers
    /// both, so their paces count from it).
    answered_at: Option<Instant>,
    /// Endpoints answered so, lately, each with the count of newcomers
    /// when it was.
    defended: Expiring<Gid, u64>,
    /// Hosts heard joining, so far.
    newcomers: u64,
    /// When an endpoint was last answered so.
    defended_at: Option<Instant>,
    /// How often the endpoints are announced again unchanged, and when
    /// next: what peers heard of them expires, and a peer that forgot
    /// would ask the groups.
    renew_every: Option<Duration>,
    renew_at: Option<Instant>,
    /// Start queries still to send with the announcements that follow a
    /// start, and whether one is due now.
    start_queries: u8,
    start_query_due: bool,
    /// Where the renewals' jitter comes from.
    jitter: Seed,
    jitter_n: u64,
}

impl Announcer {
    /// An announcer whose peers keep what it announces `lifetime`
    /// (`urdma_addr_timeout`), its renewals spread by `seed`.
    pub fn new(lifetime: Option<Duration>, seed: Seed) -> Announcer {
        Announcer {
            asked: false,
            at: Vec::new(),
            withdrawals: Vec::new(),
            withdraw_at: None,
            queue: VecDeque::new(),
            queue_at: None,
            withdraw_asked: false,
            defend_at: None,
            welcome_at: None,
            welcome_first: None,
            welcome_to: Vec::new(),
            period: Period::default(),
            answered_at: None,
            defended: Expiring::new(MAX_DEFENDED),
            newcomers: 0,
            defended_at: None,
            renew_every: renew_every(lifetime),
            renew_at: None,
            start_queries: 0,
            start_query_due: false,
            jitter: seed,
            jitter_n: 0,
        }
    }
}

/// How a port's addresses travel: per datagram, the address lists of its
/// records. Every datagram leads with the port's IP addresses (up to half
/// a record of them) and the names fill the rest, so a receiver sees in
/// each one an address it can ask to confirm the rest; an address appears
/// once per datagram.
fn chunks(addrs: Vec<WireAddress>) -> Vec<Vec<Vec<WireAddress>>> {
    let per_datagram = MAX_ADDRESSES * MAX_ANNOUNCE_RECORDS;
    let (ips, names): (Vec<_>, Vec<_>) = addrs
        .into_iter()
        .partition(|w| ip_of(w.address()).is_some());
    let (lead, more_ips) = ips.split_at(ips.len().min(MAX_ADDRESSES / 2));
    let mut lists: Vec<Vec<WireAddress>> = Vec::new();
    if names.is_empty() || lead.is_empty() {
        lists.extend(
            ips.iter()
                .chain(&names)
                .cloned()
                .collect::<Vec<_>>()
                .chunks(per_datagram)
                .map(<[_]>::to_vec),
        );
    } else {
        lists.extend(
            names
                .chunks(per_datagram - lead.len())
                .map(|c| lead.iter().chain(c).cloned().collect()),
        );
        lists.extend(more_ips.chunks(per_datagram).map(<[_]>::to_vec));
    }
    lists
        .into_iter()
        .map(|l| l.chunks(MAX_ADDRESSES).map(<[_]>::to_vec).collect())
        .collect()
}

impl Announcer {
    /// Announces every endpoint soon, and twice more later, counted from
    /// the next timer.
    pub fn schedule(&mut self) {
        self.asked = true;
    }

    /// This host (its discovery) starts: it knows nothing of the segment.
    /// Besides its announcements, it sends a start query with the first
    /// ones, which asks the hosts that hear it to announce themselves.
    pub fn start(&mut self) {
        self.schedule();
        self.start_queries = START_QUERIES;
    }

    /// Whether this host's own announcements after a change are still to
    /// come: asked for (their times are set at the next timer), or due.
    pub fn announcing(&self) -> bool {
        self.asked || !self.at.is_empty()
    }

    /// Whether a start query is due (once per announcement that carries
    /// one).
    pub fn take_start_query(&mut self) -> bool {
        std::mem::take(&mut self.start_query_due)
    }

    /// The start query due could not be sent (nothing to ask for yet):
    /// the next announcement carries it.
    pub fn start_query_unsent(&mut self) {
        self.start_queries += 1;
    }

    /// When the announcer must run next; `asap` (the time of the latest
    /// input) once announcements or withdrawals were asked for.
    pub fn next_wake(&self, asap: Option<Instant>) -> Option<Instant> {
        let paced = self.queue_at.filter(|_| !self.queue.is_empty());
        let asked = asap.filter(|_| self.asked || self.withdraw_asked);
        [
            asked,
            self.at.first().copied(),
            paced,
            self.withdraw_at,
            self.defend_at,
            self.welcome_at,
            self.renew_at,
            self.welcome_to.iter().map(|w| w.0).min(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Announcements, withdrawals and paced batches that are due; returns
    /// how many messages left (each once per family).
    pub fn on_timers(
        &mut self,
        local: &Local,
        families: Families,
        now: Instant,
        out: &mut Vec<Datagram>,
    ) -> usize {
        if std::mem::take(&mut self.asked) {
            self.at = DELAYS_MS
                .iter()
                .map(|ms| now + Duration::from_millis(*ms))
                .collect();
        }
        if std::mem::take(&mut self.withdraw_asked) {
            self.withdraw_at = Some(now + WITHDRAW_DELAY);
        }
        if self.withdraw_at.is_some_and(|t| t <= now) {
            self.send_withdrawals();
        }
        // One announcement of ours answers every reason for one.
        let scheduled = self.at.first().is_some_and(|&t| t <= now);
        let soon = [self.defend_at, self.welcome_at]
            .iter()
            .any(|t| t.is_some_and(|t| t <= now));
        let renewal = self.renew_at.is_some_and(|t| t <= now);
        if scheduled {
            self.at.remove(0);
            if self.start_queries > 0 {
                self.start_queries -= 1;
                self.start_query_due = families.any();
            }
        }
        if scheduled || soon || renewal {
            if soon {
                self.answered_at = Some(now);
            }
            if self.welcome_at.is_some_and(|t| t <= now) {
                // Hosts that join after it are answered by unicast again.
                self.period.unicast = 0;
                self.period.groups += 1;
                self.period.last_groups = Some(now);
            }
            self.defend_at = None;
            self.welcome_at = None;
            self.welcome_first = None;
            self.renew_at = self.next_renewal(now);
            if families.any() {
                // It reaches the hosts waiting for a welcome too.
                self.welcome_to.clear();
                self.announce(local, None);
            }
        }
        let due: Vec<Unicast> = self
            .welcome_to
            .extract_if(.., |w| w.0 <= now)
            .map(|w| w.1)
            .collect();
        for to in due {
            self.announce(local, Some(to));
        }
        if !self.queue.is_empty() && self.queue_at.is_none_or(|t| t <= now) {
            let n = self.queue.len().min(BATCH);
            for (to, bytes) in self.queue.drain(..n) {
                match to {
                    Some((to, from)) => out.push(Datagram::Unicast { to, from, bytes }),
                    None => out.extend(families.multicast(bytes)),
                }
            }
            self.queue_at = Some(now + PACE);
            return n;
        }
        0
    }

    /// Endpoint `gid` announced a name this host holds (a forgery, or two
    /// hosts configured with one name): announces this host's endpoints
    /// within [`DEFEND_DELAY`], so that whoever heard the other also hears
    /// this one and asks the groups. Once per endpoint in
    /// [`DEFEND_AGAIN`], and again once a host joined since (it would hear
    /// the other alone, and take its word within a second: `hints/`);
    /// true if this one is answered.
    pub fn defend(&mut self, gid: Gid, now: Instant) -> bool {
        let newcomers = self.newcomers;
        if self.defended.get_live(&gid, now) == Some(&newcomers) {
            return false;
        }
        self.defended
            .insert(gid, newcomers, Some(now + DEFEND_AGAIN));
        self.defended_at = Some(now);
        self.defend_soon(now);
        true
    }

    fn defend_soon(&mut self, now: Instant) {
        if self.defend_at.is_none() {
            let paced = self.answered_at.map(|t| t + DEFEND_DELAY);
            self.defend_at = Some(paced.map_or(now, |t| t.max(now)));
        }
    }

    /// A host joined the segment. If this host answered an endpoint that
    /// announced one of its names lately, it answers again now: the
    /// newcomer may have heard that endpoint just before it said it
    /// joined, and would take its word alone.
    pub fn newcomer(&mut self, now: Instant) {
        self.newcomers += 1;
        if self.defended_at.is_some_and(|t| now < t + DEFEND_AGAIN) {
            self.defend_soon(now);
        }
    }

    /// A host joined the segment (an endpoint not heard before announced
    /// itself, or a host sent a start query): it heard none of this host's
    /// announcements if they are all out. This host announces itself to
    /// the groups `after` from now (a time of its own, so that the
    /// segment's answers do not arrive at once), one announcement for every
    /// host that joins meanwhile: each that joins before it leaves puts it
    /// off by as long, up to [`WELCOME_WAIT`] welcome windows after the
    /// first, so that a burst of hosts joining is answered once; at most
    /// [`GROUP_WELCOMES`] times per welcome period `every`.
    pub fn welcome(
        &mut self,
        after: Duration,
        (within, every): (Duration, Duration),
        now: Instant,
    ) {
        if self.announcing() {
            return;
        }
        if let (Some(at), Some(first)) = (self.welcome_at, self.welcome_first) {
            let latest = first + within * WELCOME_WAIT;
            self.welcome_at = Some(at.max(now + after).min(latest.max(at)));
            return;
        }
        self.roll_period(every, now);
        let p = &self.period;
        let at = match p.groups < GROUP_WELCOMES {
            true => p.last_groups.map_or(now, |t| t + within).max(now) + after,
            false => p.from.map_or(now, |t| t + every).max(now + after),
        };
        self.welcome_at = Some(at);
        self.welcome_first = Some(at - after);
    }

    /// A new welcome period if the current one is over.
    fn roll_period(&mut self, every: Duration, now: Instant) {
        if self.period.from.is_none_or(|t| now >= t + every) {
            self.period = Period {
                from: Some(now),
                ..Period::default()
            };
        }
    }

    /// A host that joined, at `to`, is answered by unicast, `after` from
    /// now, if fewer than `most` were answered so since the period began
    /// or the last welcome to the groups: false if not (the groups are
    /// answered then, which answers those still waiting too).
    pub fn welcome_to(
        &mut self,
        to: Unicast,
        after: Duration,
        (every, most): (Duration, usize),
        now: Instant,
    ) -> bool {
        self.roll_period(every, now);
        if self.period.unicast >= most || self.welcome_at.is_some() {
            // The groups hear one announcement for all of them.
            self.welcome_to.clear();
            return false;
        }
        self.period.unicast += 1;
        self.welcome_to.push((now + after, to));
        true
    }

    /// When to renew after an announcement at `now`: a renewal period
    /// from it, give or take a tenth, so that hosts started together do
    /// not renew together.
    fn next_renewal(&mut self, now: Instant) -> Option<Instant> {
        let every = self.renew_every?;
        self.jitter_n += 1;
        let thousandths = 900 + (self.jitter.value(b"renew", self.jitter_n) % 201) as u32;
        Some(now + every / 1000 * thousandths)
    }

    /// Queues an announcement of every port's endpoints, to the groups or
    /// to one host.
    fn announce(&mut self, local: &Local, to: Option<Unicast>) {
        for p in local.ports() {
            let mut pkeys: Vec<u16> = Vec::new();
            let mut addrs: Vec<WireAddress> = Vec::new();
            // A set, not a scan of `addrs`: ports can hold thousands of
            // names, and a quadratic dedup of 11,000 took 150 ms of the
            // worker's time (seen as one slow cold resolve in the benchmark).
            let mut seen: Set<&Address> = Set::default();
            for &ep in &p.endpoints {
                let Some(e) = local.endpoint(ep) else {
                    continue;
                };
                if pkeys.len() < MAX_PKEYS && !pkeys.iter().any(|k| k & 0x7fff == e.pkey & 0x7fff) {
                    pkeys.push(e.pkey);
                }
                for a in local.addresses_of(ep) {
                    if seen.insert(a) {
                        addrs.extend(WireAddress::new(a.clone()));
                    }
                }
            }
            let (mtu, rate) = local.mtu_rate(&p.info);
            for datagram in chunks(addrs) {
                let records = datagram.into_iter().filter_map(|chunk| {
                    EndpointRecord::new(p.info.gids[0], p.info.lid, mtu, rate, pkeys.clone(), chunk)
                        .ok()
                });
                if let Ok(a) = Announce::new(records.collect(), false) {
                    self.queue.push_back((to, Message::from(a).encode()));
                }
            }
        }
    }

    /// Queues the withdrawal of addresses of endpoint `ep` (`only` one, or
    /// all of them). The daemon removes an endpoint's addresses one call at
    /// a time; they leave together a moment later, in one record per
    /// endpoint.
    pub fn withdraw(&mut self, local: &Local, ep: EndpointId, only: Option<&Address>) {
        let Some(port) = local.port_of(ep) else {
            return;
        };
        let Some(e) = local.endpoint(ep) else {
            return;
        };
        let gone: Vec<WireAddress> = match only {
            Some(a) => WireAddress::new(a.clone()).into_iter().collect(),
            None => local
                .addresses_of(ep)
                .filter_map(|a| WireAddress::new(a.clone()).ok())
                .collect(),
        };
        let (mtu, rate) = local.mtu_rate(port);
        let key = (port.gids[0], port.lid, mtu, rate, e.pkey);
        let i = match self.withdrawals.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.withdrawals.push((key, Pending::default()));
                self.withdrawals.len() - 1
            }
        };
        let pending = &mut self.withdrawals[i].1;
        for w in gone {
            // A set beside the list: the daemon removes an endpoint's
            // addresses one call at a time, thousands of them on a big port.
            if pending.seen.insert(w.clone()) {
                pending.addrs.push(w);
            }
        }
        if self.withdraw_at.is_none() {
            self.withdraw_asked = true;
        }
    }

    fn send_withdrawals(&mut self) {
        self.withdraw_at = None;
        let mut records = Vec::new();
        for ((gid, lid, mtu, rate, pkey), Pending { addrs, .. }) in
            std::mem::take(&mut self.withdrawals)
        {
            for chunk in addrs.chunks(MAX_ADDRESSES) {
                if let Ok(r) = EndpointRecord::new(gid, lid, mtu, rate, vec![pkey], chunk.to_vec())
                {
                    records.push(r);
                }
            }
        }
        for chunk in records.chunks(MAX_ANNOUNCE_RECORDS) {
            if let Ok(a) = Announce::new(chunk.to_vec(), true) {
                self.queue.push_back((None, Message::from(a).encode()));
            }
        }
    }

    /// Sizes, for tests.
    #[cfg(test)]
    pub fn sizes(&self) -> AnnouncerSizes {
        AnnouncerSizes {
            scheduled: self.at.len(),
            withdrawals: self.withdrawals.len(),
            queued: self.queue.len(),
        }
    }
}

/// What an [`Announcer`] holds: announcements scheduled, endpoint records
/// with withdrawals pending, datagrams queued.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnnouncerSizes {
    pub scheduled: usize,
    pub withdrawals: usize,
    pub queued: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_that_starts_welcomes_nobody_before_its_own_announcements() {
        // Its announcements are asked for until its first timer sets their
        // times; a host heard meanwhile hears them like everyone else.
        let mut a = Announcer::new(None, Seed::from_u64(1));
        a.start();
        assert!(a.announcing());
        let now = Instant::now();
        a.welcome(Duration::ZERO, welcome_pace(2), now);
        assert_eq!(a.next_wake(None), None, "a welcome pending beside them");
    }
}
