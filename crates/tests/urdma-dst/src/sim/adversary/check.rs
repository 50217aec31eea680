//! The adversary's checker. Besides the simulation's own checks (every
//! reply against the truth: no lookup answered with a GID its destination
//! did not hold), it holds, after every datagram delivered:
//! - every table of the host it reached within its bound
//!   (`Discovery::status`), and its try timer at `urdma_timeout`: every
//!   honest reply on the simulated segment comes within milliseconds, so
//!   only the adversary's replies could have stretched it;
//! - what honest hosts send to an address no honest host holds (a V
//!   address, or the adversary's own), by message type: a REPLY is an
//!   answer, at most one per datagram received from there; a QUERY
//!   confirms a claim, at most `urdma_retries` + 1 per FOUND received from
//!   there; the rest (welcomes, further queries), at most one for every
//!   ten datagrams the adversary sent;
//! - once it is quiet, the honest hosts are too: a minute after each of
//!   its windows that leaves room, and after the last, they send the
//!   groups one datagram each at most (renewals are hours apart);
//! - lookups of destinations it never claimed (never listed in a record
//!   it announced or answered FOUND with) succeed, and once the job runs,
//!   names it never named are asked of their holders, not of the groups,
//!   by hosts whose full hint table refused no name: as on the segment
//!   without it.

use super::{answers_for, Due};
use crate::sim::{Event, Pending, Sim, MS, PORT};
use acm_prov_sys::{ACM_STATUS_ENODATA, ACM_STATUS_ETIMEDOUT};
use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::{Answer, Message};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// A request answered once the job ran.
struct Judged {
    host: usize,
    dest: usize,
    by_name: bool,
    issued: u64,
    at: u64,
    status: u8,
}

/// Datagrams an honest host received from an address no honest host
/// holds, and the FOUND replies among them.
#[derive(Default)]
struct Received {
    datagrams: u64,
    found: u64,
}

/// Datagrams an honest host sent to an address no honest host holds, by
/// message type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SentTo {
    pub replies: u64,
    pub queries: u64,
    pub others: u64,
}

/// An honest host asked the groups for a name once the job ran.
struct GroupAsked {
    at: u64,
    host: usize,
    name: Address,
}

/// What the checker counts as the run goes.
#[derive(Default)]
pub struct Ledger {
    /// Names and addresses the adversary put in anything it sent.
    named: BTreeSet<Address>,
    /// Those it listed in a record it announced (not withdrawn) or
    /// answered FOUND with: names and addresses it claimed.
    claimed: BTreeSet<Address>,
    /// Per honest host and unheld address: what the host received from
    /// there.
    received: BTreeMap<(usize, IpAddr), Received>,
    /// Per honest host and unheld address: what the host sent there.
    sent_to: BTreeMap<(usize, IpAddr), SentTo>,
    /// Honest group queries for names once the job ran.
    group_asked: Vec<GroupAsked>,
    requests: Vec<Judged>,
    /// When the job begins (ns).
    pub job_from: u64,
}

impl Ledger {
    /// Whether the adversary claimed `a`.
    fn claims(&self, a: &Address) -> bool {
        self.claimed.contains(a)
    }

    /// The request `p` was answered at `now` (`status`, 0: resolved):
    /// judged if the job issued it.
    fn answered(&mut self, p: &Pending, now: u64, status: u8) {
        if p.issued >= self.job_from {
            self.requests.push(Judged {
                host: p.host,
                dest: p.dest,
                by_name: p.by_name,
                issued: p.issued,
                at: now,
                status,
            });
        }
    }

    /// Honest host `host` received a datagram from `from`, which no honest
    /// host holds; a FOUND reply if `found`.
    fn received(&mut self, host: usize, from: IpAddr, found: bool) {
        let r = self.received.entry((host, from)).or_default();
        r.datagrams += 1;
        r.found += u64::from(found);
    }

    /// Honest host `host` sent `bytes` to `to`, which no honest host holds:
    /// what is wrong with that, if anything (a reply to no question).
    fn sent_to(&mut self, host: usize, to: IpAddr, bytes: &[u8]) -> Option<String> {
        let sent = self.sent_to.entry((host, to)).or_default();
        match Message::decode(bytes) {
            Ok(Message::Reply(_)) => sent.replies += 1,
            Ok(Message::Query(_)) => {
                sent.queries += 1;
                return None;
            }
            _ => {
                sent.others += 1;
                return None;
            }
        }
        let replies = sent.replies;
        let got = self.received.get(&(host, to)).map_or(0, |r| r.datagrams);
        (replies > got).then(|| {
            format!("host {host} sent {replies} replies to {to}, which sent it {got} datagrams")
        })
    }

    /// Honest host `host` sent `bytes` to the groups at `now`, its hint
    /// table having refused no name: a lookup of a name, once the job runs,
    /// is noted.
    fn group_sent(&mut self, now: u64, host: usize, bytes: &[u8]) {
        if now < self.job_from {
            return;
        }
        if let Ok(Message::Query(q)) = Message::decode(bytes) {
            let start = q.sender().addresses().contains(q.target());
            if !start && matches!(q.target().address(), Address::Name(_)) {
                let name = q.target().address().clone();
                self.group_asked.push(GroupAsked {
                    at: now,
                    host,
                    name,
                });
            }
        }
    }

    /// The adversary sent `msg` from `from`.
    pub(super) fn touch(&mut self, from: IpAddr, msg: &Message) {
        self.named.insert(Address::from(from));
        let (records, claims) = match msg {
            Message::Query(q) => {
                self.named.insert(q.target().address().clone());
                (vec![q.sender()], false)
            }
            Message::Reply(r) => {
                self.named.insert(r.target().address().clone());
                match r.answer() {
                    Answer::Found(rec) => (vec![rec], true),
                    Answer::Refused => (vec![], false),
                }
            }
            Message::Announce(a) => (a.records().iter().collect(), !a.withdrawn()),
        };
        for w in records.iter().flat_map(|r| r.addresses()) {
            self.named.insert(w.address().clone());
            if claims {
                self.claimed.insert(w.address().clone());
            }
        }
    }

    /// Datagrams the adversary made honest hosts send to its addresses
    /// beyond answers and claim confirmations: announcements, and
    /// queries past `tries` per FOUND.
    fn beyond(&self, tries: u64) -> (u64, u64) {
        let (mut others, mut queries) = (0, 0);
        for (pair, s) in &self.sent_to {
            let found = self.received.get(pair).map_or(0, |r| r.found);
            others += s.others;
            queries += s.queries.saturating_sub(tries * found);
        }
        (others, queries)
    }
}

/// The key a request for `dest` asked by.
fn key(sim: &Sim, dest: usize, by_name: bool) -> Address {
    match by_name {
        true => Address::name(&sim.hosts[dest].name).expect("a name"),
        false => Address::Ip4(sim.hosts[dest].ip),
    }
}

/// Whether the adversary claimed what a request for `dest` asks by.
pub(crate) fn claimed(sim: &Sim, dest: usize, by_name: bool) -> bool {
    sim.adversary
        .as_ref()
        .is_some_and(|a| a.ledger.claims(&key(sim, dest, by_name)))
}

/// A request was answered (`status`, 0: resolved).
pub(crate) fn answered(sim: &mut Sim, p: &Pending, status: u8) {
    let now = sim.now;
    let Some(a) = sim.adversary.as_mut() else {
        return;
    };
    a.ledger.answered(p, now, status);
}

/// A datagram reaches host `to` from `from`.
pub(crate) fn delivered(sim: &mut Sim, to: usize, from: SocketAddr, bytes: &[u8]) {
    if !sim.by_ip.contains_key(&from.ip()) {
        let found = matches!(
            Message::decode(bytes),
            Ok(Message::Reply(r)) if matches!(r.answer(), Answer::Found(_))
        );
        if let Some(a) = sim.adversary.as_mut() {
            a.ledger.received(to, from.ip(), found);
        }
    }
}

/// Host `h`'s tables within their bounds, and its try timer at
/// `urdma_timeout`.
pub(crate) fn bounds(sim: &mut Sim, h: usize) {
    let Some(e) = sim.hosts[h].engine.as_ref() else {
        return;
    };
    let s = e.discovery().status();
    let floor = Duration::from_millis(u64::from(sim.tuning.timeout_ms));
    let mut over = Vec::new();
    if s.hints > s.max_hints {
        over.push(format!(
            "{} hints, over their bound {}",
            s.hints, s.max_hints
        ));
    }
    if s.hint_queue > 2 * s.hints + 64 + 1 {
        over.push(format!(
            "{} places in the hints' order queue for {} hints, over 2 × {} + 65",
            s.hint_queue, s.hints, s.hints
        ));
    }
    if s.bindings > s.max_bindings {
        over.push(format!("{} bindings, over {}", s.bindings, s.max_bindings));
    }
    if s.lookups > s.max_lookups {
        over.push(format!("{} lookups, over {}", s.lookups, s.max_lookups));
    }
    if s.try_time > floor {
        over.push(format!(
            "a try waits {} ms, over urdma_timeout's {} ms: only the adversary's replies \
             are slow",
            s.try_time.as_millis(),
            floor.as_millis()
        ));
    }
    for o in over {
        sim.violation(format!("host {h}: {o}"));
    }
}

/// Host `sender` (`None`: the adversary) sent `bytes` to `to`, which no
/// honest host holds: counted, and heard by the adversary if its own.
pub(crate) fn unheld(
    sim: &mut Sim,
    sender: Option<usize>,
    from: SocketAddr,
    to: SocketAddr,
    bytes: Vec<u8>,
) {
    let Some(h) = sender else {
        return;
    };
    let Some(a) = sim.adversary.as_mut() else {
        return;
    };
    let x = to.ip();
    if let Some(what) = a.ledger.sent_to(h, x, &bytes) {
        sim.violation(what);
    }
    if to.port() != PORT || !answers_for(x) {
        return;
    }
    for delay in sim.net.fate(&mut sim.rng) {
        let due = Due::Hear {
            from,
            to: Some(x),
            bytes: bytes.clone(),
        };
        sim.schedule(sim.now + delay, Event::Adversary(due));
    }
}

/// An honest host sent `bytes` from `from` to `group`: the adversary hears
/// it, and the checker notes lookups asked of the groups.
pub(crate) fn overheard(sim: &mut Sim, from: SocketAddr, bytes: &[u8]) {
    let now = sim.now;
    let host = sim.by_ip.get(&from.ip()).copied();
    // A host whose full table refused names asks the groups for them, as
    // it must (docs/protocol.md, name hints): only one that refused none
    // must have kept every name it heard.
    let refused = host
        .and_then(|h| sim.hosts[h].engine.as_ref())
        .is_some_and(|e| e.discovery().status().hints_refused > 0);
    let Some(a) = sim.adversary.as_mut() else {
        return;
    };
    if let (Some(h), false) = (host, refused) {
        a.ledger.group_sent(now, h, bytes);
    }
    if let Some(delay) = sim.net.fate(&mut sim.rng).first() {
        let due = Due::Hear {
            from,
            to: None,
            bytes: bytes.to_vec(),
        };
        sim.schedule(now + delay, Event::Adversary(due));
    }
}

/// How long the segment is watched once the adversary is quiet.
pub(crate) const QUIET: u64 = 60_000 * MS;

/// A quiet minute begins, or ends: the honest hosts, left alone, send to
/// the groups little more than their renewals (hours apart). What the
/// adversary set off must have died down; a storm it left behind (hosts
/// answering each other's announcements on and on) is a violation.
pub(crate) fn quiet(sim: &mut Sim, sent: Option<u64>) {
    let now = sim.traffic.multicast;
    let Some(before) = sent else {
        let due = Due::Quiet { sent: Some(now) };
        return sim.schedule(sim.now + QUIET, Event::Adversary(due));
    };
    let n = sim.hosts.len() as u64;
    if now - before > n {
        let full = sim
            .hosts
            .iter()
            .filter_map(|h| h.engine.as_ref())
            .map(|e| e.discovery().status())
            .filter(|s| s.hints >= s.max_hints)
            .count();
        sim.violation(format!(
            "the hosts sent the groups {} datagrams in the {} s after the adversary went \
             quiet, over one per host: a storm it left behind ({full} hosts' hint tables \
             full)",
            now - before,
            QUIET / 1_000 / MS
        ));
    }
}

/// The checks made once the run is over: what the honest hosts sent the
/// adversary's addresses beyond answers, and the lookups it must not have
/// changed.
pub(crate) fn verdict(sim: &mut Sim) {
    let Some(a) = sim.adversary.take() else {
        return;
    };
    let mut found = Vec::new();
    let tries = u64::from(sim.tuning.retries) + 1;
    let (others, queries) = a.ledger.beyond(tries);
    if (others + queries) * 10 > a.sent() {
        found.push(format!(
            "honest hosts sent addresses no honest host holds {others} announcements and {queries} \
             queries beyond claim confirmations, for {} datagrams the adversary sent: over one \
             in ten",
            a.sent()
        ));
    }
    for r in &a.ledger.requests {
        let k = key(sim, r.dest, r.by_name);
        if r.status == 0 || a.ledger.claimed.contains(&k) {
            continue;
        }
        let status = match u32::from(r.status) {
            ACM_STATUS_ETIMEDOUT => "ETIMEDOUT".to_string(),
            ACM_STATUS_ENODATA => "ENODATA".to_string(),
            s => format!("status {s}"),
        };
        found.push(format!(
            "host {} asked for host {} by {k}, which the adversary never claimed: {status} \
             after {} ms",
            r.host,
            r.dest,
            (r.at - r.issued) / MS
        ));
    }
    for GroupAsked { at, host, name } in &a.ledger.group_asked {
        let honest = sim
            .hosts
            .iter()
            .any(|x| Address::name(&x.name).as_ref() == Some(name));
        if honest && !a.ledger.named.contains(name) {
            found.push(format!(
                "host {host} asked the groups for {name} at {} ms, which the adversary never \
                 named: asked of its holder without it",
                at / MS
            ));
        }
    }
    sim.adversary = Some(a);
    for f in found {
        sim.violation(f);
    }
}

/// What the run's adversary did and made the honest hosts do.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    /// Datagrams it sent.
    pub sent: u64,
    /// What the honest hosts sent its addresses.
    pub to_it: SentTo,
    /// Requests of the job, those for destinations it never claimed, and
    /// those of them resolved.
    pub judged: u64,
    pub unclaimed: u64,
    pub unclaimed_resolved: u64,
}

impl Ledger {
    /// The run's numbers, for its report.
    pub fn tally(&self, sim: &Sim, sent: u64) -> Tally {
        let mut t = Tally {
            sent,
            judged: self.requests.len() as u64,
            ..Tally::default()
        };
        for s in self.sent_to.values() {
            t.to_it.replies += s.replies;
            t.to_it.queries += s.queries;
            t.to_it.others += s.others;
        }
        for r in &self.requests {
            if !self.claimed.contains(&key(sim, r.dest, r.by_name)) {
                t.unclaimed += 1;
                t.unclaimed_resolved += u64::from(r.status == 0);
            }
        }
        t
    }
}
