//! How simulated hosts are addressed and how they talk: IPv4, IPv6 or both
//! (each group datagram then goes to each family's group, as the daemon
//! sends it), and discovery authenticated with each host's own skewed
//! clock and a key rotated while the run goes on.

use super::{Direction, Event, GroupBatch, Sim, PORT};
use crate::net::Rng;
use ibacm_urdma::addr::Address;
use ibacm_urdma::buggify::Buggify;
use ibacm_urdma::config::hosts::Hosts;
use ibacm_urdma::daemon::NullDaemon;
use ibacm_urdma::discovery::seal::Sealing;
use ibacm_urdma::discovery::wire::{Message, V4_GROUP, V6_GROUP};
use ibacm_urdma::discovery::{Datagram, Families, Family};
use ibacm_urdma::engine::reconfigure::Change;
use ibacm_urdma::engine::{Engine, Input};
use ibacm_urdma::entropy::Seed;
use ibacm_urdma::local::PortInfo;
use ibacm_urdma::runtime::schedule::Schedule;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;

/// The address families of the segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stack {
    #[default]
    V4,
    V6,
    /// Every host has both, and asks by either.
    Dual,
}

impl Stack {
    /// The address host `n` (IPv4 address `ip`) is asked by: either
    /// family, drawn from `rng`, when it has both.
    pub(crate) fn address(self, n: usize, ip: Ipv4Addr, rng: &mut Rng) -> IpAddr {
        match self {
            Stack::V4 => IpAddr::V4(ip),
            Stack::V6 => IpAddr::V6(ip6(n)),
            Stack::Dual => match rng.chance(0.5) {
                true => IpAddr::V4(ip),
                false => IpAddr::V6(ip6(n)),
            },
        }
    }

    /// What a DNS says host `n`'s (IPv4 address `ip`) name is.
    pub(crate) fn dns_answer(self, n: usize, ip: Ipv4Addr) -> Vec<IpAddr> {
        let (v4, v6) = (IpAddr::V4(ip), IpAddr::V6(ip6(n)));
        match self {
            Stack::V4 => vec![v4],
            Stack::V6 => vec![v6],
            Stack::Dual => vec![v4, v6],
        }
    }

    pub fn families(self) -> Families {
        match self {
            Stack::V4 => Families::V4,
            Stack::V6 => Families::V6,
            Stack::Dual => Families::BOTH,
        }
    }
}

/// Authenticated discovery (`urdma_auth_key_file`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Authenticated {
    /// Each host's wall clock is off by up to this much, either way.
    pub skew_ms: u64,
    /// From this virtual time on, a host that starts signs with the new
    /// key (both verify both all along: the rotation of docs/protocol.md).
    pub rotate_at_ms: Option<u64>,
}

/// Host `n`'s IPv6 address.
pub(crate) fn ip6(n: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, (n >> 16) as u16, n as u16 + 1)
}

impl Sim {
    /// Starts (or restarts) a host's daemon with its current GID.
    pub fn start(&mut self, host: usize) {
        if self.hosts[host].engine.is_some() {
            return;
        }
        let seed = Seed::from_u64(self.seed ^ ((host as u64) << 20) ^ self.now);
        let buggify = match &self.tuning.faults {
            Some(f) => {
                let seed = seed_of_faults(self.seed, host, self.hosts[host].generation);
                Buggify::new(seed, &f.enabled, f.percent)
            }
            None => Buggify::off(),
        };
        let mut e = Engine::seeded(
            NullDaemon,
            self.tuning.config(),
            Hosts::default(),
            seed,
            buggify,
        );
        let g = self.gid_of(host);
        let dev = e.open_device(0x5254_0000_0000_0000 | host as u64);
        let port = e
            .open_port(dev, PortInfo::infiniband(1, g))
            .expect("an InfiniBand port with a GID");
        let ep = e.open_endpoint(port, 0xffff).expect("its port");
        let stack = self.tuning.stack;
        let h = &self.hosts[host];
        let mut source = None;
        if stack != Stack::V6 {
            source = e.add_address(ep, Address::Ip4(h.ip));
        }
        if stack != Stack::V4 {
            let six = e.add_address(ep, Address::Ip6(ip6(host)));
            source = source.or(six);
        }
        e.add_address(ep, Address::name(&h.name).expect("a name"))
            .expect("endpoint");
        self.hosts[host].sealing = match self.tuning.auth {
            Some(a) => {
                let auth = self.clock.auth_for(host, a, self.now, &mut self.rng);
                let sealing = Sealing::with(auth.sealer());
                e.reconfigure(Change::Auth(auth));
                sealing
            }
            None => Sealing::default(),
        };
        e.input(
            Input::DiscoveryUp(stack.families()),
            self.clock.instant(self.now),
        );
        // Every deadline the engine reports gets its Event::Timer.
        e.input(Input::TimersRun, self.clock.instant(self.now));
        self.hosts[host].source = Some(source.expect("an address"));
        self.hosts[host].engine = Some(e);
        self.hosts[host].schedule = Schedule::new(None);
        self.hosts[host].timer_at = None;
        self.checker.holds(host, g, self.now);
        self.handed_over(host);
    }

    /// Seals (authentication on) and sends one datagram of host `h`.
    pub(crate) fn send(&mut self, h: usize, d: Datagram) {
        self.counts.count(h, Direction::Sent, self.now);
        match d {
            Datagram::Unicast { to, from, bytes } => {
                self.traffic.unicast += 1;
                let own = match to {
                    SocketAddr::V4(_) => IpAddr::V4(self.hosts[h].ip),
                    SocketAddr::V6(_) => IpAddr::V6(ip6(h)),
                };
                let from = SocketAddr::new(from.unwrap_or(own), PORT);
                let bytes = self.hosts[h].sealing.copy(&bytes).into_owned();
                self.route(Some(h), from, to, bytes);
            }
            Datagram::Multicast { family, bytes } => {
                self.traffic.multicast += 1;
                if let Ok(Message::Query(q)) = Message::decode(&bytes) {
                    let start = q.sender().addresses().contains(q.target());
                    self.traffic.group_queries += u64::from(!start);
                }
                let (from, group) = match family {
                    Family::V4 => (IpAddr::V4(self.hosts[h].ip), IpAddr::V4(V4_GROUP)),
                    Family::V6 => (IpAddr::V6(ip6(h)), IpAddr::V6(V6_GROUP)),
                };
                let from = SocketAddr::new(from, PORT);
                let bytes = self.hosts[h].sealing.copy(&bytes).into_owned();
                self.impostor_hears(from, &bytes);
                self.send_to_group(Some(h), from, group, &bytes);
            }
        }
    }

    /// Delivers a datagram sent to `group` from `from` to every host that
    /// is up, but its sender (if a host, only those it can reach), each
    /// copy to its own fate.
    pub(crate) fn send_to_group(
        &mut self,
        sender: Option<usize>,
        from: SocketAddr,
        group: IpAddr,
        bytes: &[u8],
    ) {
        if sender.is_some() && self.adversary.is_some() {
            super::adversary::overheard(self, from, bytes);
        }
        let mut to = Vec::new();
        for h in 0..self.hosts.len() {
            let reaches = sender.is_none_or(|s| h != s && self.partition.meet(s, h));
            if !reaches || self.hosts[h].engine.is_none() {
                continue;
            }
            // (No draw without group loss: every other run replays as it
            // did.)
            let loss = self.net.group_loss;
            if loss > 0.0 && self.rng.chance(loss) {
                continue;
            }
            for delay in self.net.fate(&mut self.rng) {
                to.push((self.now + delay, h));
            }
        }
        // Hosts reached at one time in the order drawn.
        to.sort_by_key(|&(at, _)| at);
        let Some(&(first, _)) = to.first() else {
            return;
        };
        let batch = GroupBatch {
            from,
            group,
            bytes: bytes.to_vec(),
            to,
        };
        let ev = Event::GroupDeliver {
            batch: Rc::new(batch),
            next: 0,
        };
        self.queue.push(first, ev);
    }
}

/// Where an engine's faults fall: its own sequence per run, host and
/// life.
fn seed_of_faults(run: u64, host: usize, generation: u16) -> u64 {
    run.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((host as u64) << 16) ^ u64::from(generation)
}
