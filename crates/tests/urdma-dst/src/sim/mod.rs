//! Many hosts, each running the provider's engine (the daemon's code, not a
//! model of it), on one simulated segment in virtual time. Every datagram
//! an engine sends goes through [`crate::net`]; every reply it gives is
//! checked against what was true on the network when it was given.

use crate::net::{Conditions, Queue, Rng};
pub mod adversary;
mod checker;
mod clock;
mod derive;
mod gone;
pub(crate) mod impostor;
mod stack;
mod traffic;
mod tuning;
mod worker;

use acm_prov_sys::{ACM_ADDRESS_IP, ACM_ADDRESS_IP6, ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST};
use checker::Checker;
use clock::Clock;
use gone::Gone;
use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::daemon::NullDaemon;
use ibacm_urdma::discovery::seal::Sealing;
use ibacm_urdma::discovery::NeighbourJob;
use ibacm_urdma::discovery::NssError;
use ibacm_urdma::engine::{Engine, Input};
use ibacm_urdma::handle::AddressId;
use ibacm_urdma::request::msg::{addr_entry, request};
use ibacm_urdma::runtime::schedule::Schedule;
use impostor::Impostor;
pub use stack::{Authenticated, Stack};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::rc::Rc;
pub use traffic::{Counts, Direction, GroupBatch, Traffic};
pub use tuning::{Faults, Tuning};

pub const PORT: u16 = 6126;
/// Where the impostor (`hostile.rs`) receives unicast: an address of the
/// segment that no simulated host holds.
pub const IMPOSTOR_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 255, 66);
pub(crate) const MS: u64 = 1_000_000;
/// How long the system's resolver takes to say it knows no such name.
pub(crate) const NSS_DELAY: u64 = MS;

/// A check that failed, with what is needed to understand it.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub at_ns: u64,
    pub what: String,
}

pub enum Event {
    Deliver {
        to: usize,
        from: SocketAddr,
        to_ip: IpAddr,
        bytes: Vec<u8>,
    },
    /// One group datagram reaches `batch.to[next]`, then is queued for the
    /// next host: one event in the queue per group datagram in flight,
    /// not one per host it reaches.
    GroupDeliver {
        batch: Rc<GroupBatch>,
        next: usize,
    },
    Unreachable {
        to: usize,
        dest: SocketAddr,
        payload: Vec<u8>,
    },
    Timer {
        host: usize,
    },
    /// The system's resolver answers host `host`'s lookup of `key`: no
    /// such name.
    Nss {
        host: usize,
        key: Address,
        name: String,
    },
    /// Host `host`'s kernel answers a neighbour lookup.
    Neighbour {
        host: usize,
        job: NeighbourJob,
    },
    Start {
        host: usize,
    },
    Crash {
        host: usize,
        down_ms: u64,
    },
    Request {
        host: usize,
        dest: usize,
        by_name: bool,
    },
    Forge {
        victim: usize,
        claimed: usize,
    },
    /// An impostor answers for host `claimed`'s name, and announces it
    /// too if `announces`.
    Impostor {
        claimed: usize,
        announces: bool,
    },
    /// Something the adversary (`adversary`) hears or does.
    Adversary(adversary::Due),
    /// The segment splits in two halves for `heal_ms`.
    Partition {
        heal_ms: u64,
    },
    Heal,
}

pub(crate) struct SimHost {
    pub(crate) ip: Ipv4Addr,
    pub(crate) name: String,
    pub(crate) generation: u16,
    pub(crate) engine: Option<Engine<NullDaemon>>,
    /// The address context requests are made from.
    pub(crate) source: Option<AddressId>,
    /// When its worker wakes and what it carries out: the runtime's own
    /// scheduling, without the idle wakes (a simulated host has no new
    /// interfaces to notice).
    pub(crate) schedule: Schedule,
    /// The worker's wake queued, if any.
    pub(crate) timer_at: Option<u64>,
    /// Seals what it sends, when discovery is authenticated.
    pub(crate) sealing: Sealing,
}

/// A request waiting for its reply.
pub(crate) struct Pending {
    pub(crate) host: usize,
    pub(crate) dest: usize,
    pub(crate) issued: u64,
    pub(crate) by_name: bool,
}

/// The segment: its hosts, the network between them and virtual time,
/// with what checks every answer (its `Checker`) and what attacks it.
pub struct Sim {
    pub now: u64,
    /// Every draw of the run, in one sequence: a seed replays it.
    pub rng: Rng,
    pub(crate) seed: u64,
    pub net: Conditions,
    pub(crate) tuning: Tuning,
    pub(crate) hosts: Vec<SimHost>,
    pub(crate) by_ip: HashMap<IpAddr, usize>,
    pub(crate) queue: Queue<Event>,
    pub(crate) clock: Clock,
    pub(crate) partition: Partition,
    /// The truth, the requests in flight and the verdicts.
    pub checker: Checker,
    pub traffic: Traffic,
    /// Datagrams per host, sent and received.
    pub counts: Counts,
    pub(crate) impostor: Impostor,
    /// The adversary beside the honest hosts, and its checker, if any.
    pub adversary: Option<Box<adversary::Adversary>>,
    /// Hosts whose events are printed (`URDMA_DST_TRACE`).
    pub(crate) trace: Option<Vec<usize>>,
    /// What engines since gone (crashed) counted.
    pub(crate) gone: Gone,
}

/// Whether the segment is split in two halves, and each host's half.
pub(crate) struct Partition {
    split: bool,
    sides: Vec<bool>,
}

impl Partition {
    /// Whether hosts `a` and `b` can reach each other.
    pub(crate) fn meet(&self, a: usize, b: usize) -> bool {
        !self.split || self.sides[a] == self.sides[b]
    }
}

pub(crate) fn gid(n: usize, generation: u16) -> Gid {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[10..12].copy_from_slice(&generation.to_be_bytes());
    g[12..16].copy_from_slice(&(n as u32 + 1).to_be_bytes());
    Gid(g)
}

impl Sim {
    /// `n` hosts on one segment, none started yet.
    pub fn new(n: usize, seed: u64, net: Conditions, tuning: Tuning) -> Sim {
        // Every table of every engine iterates alike, run after run.
        ibacm_urdma::fastmap::seed_thread(seed);
        let hosts: Vec<SimHost> = (0..n)
            .map(|i| SimHost {
                ip: Ipv4Addr::new(10, 0, (i / 250) as u8, (i % 250 + 1) as u8),
                name: format!("h{i}"),
                generation: 0,
                engine: None,
                source: None,
                schedule: Schedule::new(None),
                timer_at: None,
                sealing: Sealing::default(),
            })
            .collect();
        let by_ip = hosts
            .iter()
            .enumerate()
            .flat_map(|(i, h)| [(IpAddr::V4(h.ip), i), (IpAddr::V6(stack::ip6(i)), i)])
            .collect();
        // docs/protocol.md: a binding is good for `urdma_reconfirm` after
        // its holder confirmed it, and the confirmation was on its way for
        // at most one delay of the network. A derived GID is the NIC's and
        // good as long as the host is there (`derive.rs`).
        let staleness_ns = match (tuning.derive, tuning.reconfirm) {
            (None, Some(r)) => r.as_nanos() as u64 + (net.base_us + net.jitter_us) * 1000,
            _ => u64::MAX / 4,
        };
        Sim {
            now: 0,
            rng: Rng::new(seed),
            seed,
            net,
            tuning,
            hosts,
            by_ip,
            queue: Queue::default(),
            clock: Clock::new(),
            partition: Partition {
                split: false,
                sides: (0..n).map(|i| i % 2 == 1).collect(),
            },
            checker: Checker::new(n, staleness_ns),
            traffic: Traffic::default(),
            counts: Counts::new(n),
            impostor: Impostor::default(),
            adversary: None,
            gone: Gone::default(),
            trace: std::env::var("URDMA_DST_TRACE")
                .ok()
                .map(|t| t.split(',').filter_map(|h| h.parse().ok()).collect()),
        }
    }

    pub fn schedule(&mut self, at: u64, event: Event) {
        self.queue.push(at, event);
    }

    pub fn gid_of(&self, host: usize) -> Gid {
        let h = &self.hosts[host];
        self.tuning
            .derived_gid(host, h.ip)
            .unwrap_or_else(|| gid(host, h.generation))
    }

    /// What host `asker` has bound `dest`'s address to.
    pub fn binding(&self, asker: usize, dest: usize) -> Option<Gid> {
        let e = self.hosts[asker].engine.as_ref()?;
        e.discovery()
            .state()
            .binding(&Address::Ip4(self.hosts[dest].ip))
            .map(|l| l.gid)
    }

    /// Runs events until the queue is empty or virtual time passes `until`.
    pub fn run_until(&mut self, until: u64) {
        while let Some((at, ev)) = self.queue.pop() {
            if at > until {
                self.queue.push(at, ev);
                break;
            }
            self.now = at;
            self.clock.set(at);
            self.step(ev);
            self.checker.check_deadlines(at, self.tuning.bound());
            if !self.checker.violations.is_empty() {
                return;
            }
        }
        self.now = self.now.max(until);
    }

    /// Runs until nothing is left to do (or `limit` of virtual time).
    pub fn settle(&mut self, limit: u64) {
        let end = self.now + limit;
        self.run_until(end);
        self.checker.check_deadlines(self.now, self.tuning.bound());
        if self.queue.is_empty() {
            self.checker.stuck(self.now);
        }
    }

    fn step(&mut self, ev: Event) {
        if let Some(hosts) = &self.trace {
            self.trace_event(hosts, &ev);
        }
        match ev {
            Event::Deliver {
                to,
                from,
                to_ip,
                bytes,
            } => self.deliver(to, from, to_ip, &bytes),
            Event::GroupDeliver { batch, next } => {
                let (_, to) = batch.to[next];
                if let Some(&(at, _)) = batch.to.get(next + 1) {
                    let ev = Event::GroupDeliver {
                        batch: batch.clone(),
                        next: next + 1,
                    };
                    self.queue.push(at, ev);
                }
                self.deliver(to, batch.from, batch.group, &batch.bytes);
            }
            Event::Unreachable { to, dest, payload } => {
                let now = self.clock.instant(self.now);
                if let Some(e) = self.hosts[to].engine.as_mut() {
                    e.input(Input::Unreachable(dest, &payload), now);
                    self.after(to);
                }
            }
            Event::Timer { host } => {
                if self.hosts[host].timer_at != Some(self.now) {
                    return;
                }
                self.hosts[host].timer_at = None;
                self.wake(host);
            }
            Event::Nss { host, key, name } => {
                let now = self.clock.instant(self.now);
                let known = self.hosts.iter().position(|h| h.name == name);
                let answer = match (self.tuning.dns, known) {
                    (true, Some(d)) => Ok(self.tuning.stack.dns_answer(d, self.hosts[d].ip)),
                    _ => Err(NssError::NoSuchName("Name or service not known".into())),
                };
                if let Some(e) = self.hosts[host].engine.as_mut() {
                    e.input(Input::Nss(&key, answer), now);
                    self.handed_over(host);
                }
            }
            Event::Neighbour { host, job } => self.neighbour(host, job),
            Event::Start { host } => self.start(host),
            Event::Crash { host, down_ms } => {
                if let Some(e) = self.hosts[host].engine.take() {
                    self.gone.keep(&e);
                    self.checker.gone(host, self.now);
                    self.hosts[host].generation += 1;
                    self.schedule(self.now + down_ms * MS, Event::Start { host });
                }
            }
            Event::Request {
                host,
                dest,
                by_name,
            } => self.request(host, dest, by_name),
            Event::Forge { victim, claimed } => self.forge(victim, claimed),
            Event::Impostor { claimed, announces } => {
                let bytes = self.impostor.steal(&self.hosts[claimed].name, announces);
                let from = SocketAddr::new(IpAddr::V4(IMPOSTOR_IP), PORT);
                let group = IpAddr::V4(ibacm_urdma::discovery::wire::V4_GROUP);
                if let Some(bytes) = bytes {
                    self.send_to_group(None, from, group, &bytes);
                }
            }
            Event::Adversary(due) => adversary::step(self, due),
            Event::Partition { heal_ms } => {
                self.partition.split = true;
                self.schedule(self.now + heal_ms * MS, Event::Heal);
            }
            Event::Heal => self.partition.split = false,
        }
    }

    /// A datagram reaches host `to`, if its daemon is up.
    fn deliver(&mut self, to: usize, from: SocketAddr, to_ip: IpAddr, bytes: &[u8]) {
        let now = self.clock.instant(self.now);
        let watched = self.adversary.is_some() && self.hosts[to].engine.is_some();
        if watched {
            adversary::delivered(self, to, from, bytes);
        }
        if let Some(e) = self.hosts[to].engine.as_mut() {
            self.traffic.delivered += 1;
            e.on_datagram(from, Some(to_ip), bytes, now);
            self.counts.count(to, Direction::Received, self.now);
            self.after(to);
        }
        if watched {
            adversary::bounds(self, to);
        }
    }

    fn request(&mut self, host: usize, dest: usize, by_name: bool) {
        if self.hosts[host].engine.is_none() {
            return;
        }
        let id = self.checker.ask(host, dest, by_name, self.now);
        let asked = self
            .tuning
            .stack
            .address(dest, self.hosts[dest].ip, &mut self.rng);
        let entry = match (by_name, asked) {
            (true, _) => {
                let name = self.hosts[dest].name.as_bytes();
                addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, name)
            }
            (false, IpAddr::V4(ip)) => addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_IP, &ip.octets()),
            (false, IpAddr::V6(ip)) => addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_IP6, &ip.octets()),
        };
        let req = request(&[entry], false, id);
        let now = self.clock.instant(self.now);
        let source = self.hosts[host]
            .source
            .expect("a started host has an address");
        let e = self.hosts[host].engine.as_mut().expect("up");
        if let Some(reply) = e.resolve_at(source, &req, id, now) {
            self.answer(id, &reply);
        }
        self.handed_over(host);
    }

    /// Carries a unicast datagram from `sender` (`None`: the forger, which
    /// no partition stops) to `to`.
    pub(crate) fn route(
        &mut self,
        sender: Option<usize>,
        from: SocketAddr,
        to: SocketAddr,
        bytes: Vec<u8>,
    ) {
        if to.ip() == IpAddr::V4(IMPOSTOR_IP) {
            if to.port() == PORT && !self.net.fate(&mut self.rng).is_empty() {
                self.impostor_hears(from, &bytes);
            }
            return;
        }
        let Some(&dest) = self.by_ip.get(&to.ip()) else {
            // No host holds it: the adversary's, if anyone's.
            return adversary::unheld(self, sender, from, to, bytes);
        };
        if to.port() != PORT || sender.is_some_and(|s| !self.partition.meet(s, dest)) {
            return;
        }
        for delay in self.net.fate(&mut self.rng) {
            let at = self.now + delay;
            match (self.hosts[dest].engine.is_some(), sender) {
                (true, _) => self.queue.push(
                    at,
                    Event::Deliver {
                        to: dest,
                        from,
                        to_ip: to.ip(),
                        bytes: bytes.clone(),
                    },
                ),
                // The host is there, its daemon is not: port unreachable
                // (unless the whole machine is down, rebooting).
                (false, Some(s)) if !self.tuning.silent_when_down => self.queue.push(
                    at + delay,
                    Event::Unreachable {
                        to: s,
                        dest: to,
                        payload: bytes.clone(),
                    },
                ),
                (false, _) => {}
            }
        }
    }
}
