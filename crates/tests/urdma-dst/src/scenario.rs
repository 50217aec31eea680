//! What the simulation runs: a mixed run of every kind of event, checked
//! as it goes, and the measurements behind BENCHMARKS.md.

use crate::net::Conditions;
use crate::plot::{self, Axis, Chart, Join, Series};
use crate::sim::{Direction, Event, Sim, Traffic, Tuning, Violation};
use ibacm_urdma::buggify::Injected;
use std::time::Duration;

const MS: u64 = 1_000_000;

/// A mixed run.
#[derive(Clone, Debug)]
pub struct Mixed {
    pub hosts: usize,
    pub events: usize,
    pub seed: u64,
    pub net: Conditions,
    pub tuning: Tuning,
    /// Virtual time between events.
    pub spacing_ms: u64,
    /// The staleness bound to hold answers to, if not the one the tuning
    /// implies.
    pub staleness_ms: Option<u64>,
}

impl Mixed {
    pub fn new(hosts: usize, events: usize, seed: u64) -> Mixed {
        Mixed {
            hosts,
            events,
            seed,
            net: Conditions::default(),
            // Reconfirmed often, so a run sees many of them.
            tuning: Tuning {
                reconfirm: Some(std::time::Duration::from_secs(5)),
                ..Tuning::default()
            },
            spacing_ms: 5,
            staleness_ms: None,
        }
    }
}

/// How a run went.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub seed: u64,
    pub violations: Vec<Violation>,
    pub answered: u64,
    pub succeeded: u64,
    /// Answered ETIMEDOUT.
    pub timed_out: u64,
    pub traffic: Traffic,
    pub virtual_ms: u64,
    /// Datagrams refused as replays (authentication on).
    pub replays_refused: u64,
    /// Faults the engines injected into themselves, by kind.
    pub faults_injected: Injected,
    /// Requests resolved while their destination's daemon was down.
    pub resolved_while_down: u64,
}

impl Outcome {
    /// How the run of `sim`, seeded with `seed`, went.
    fn of(sim: &Sim, seed: u64) -> Outcome {
        Outcome {
            seed,
            violations: sim.checker.violations.clone(),
            answered: sim.checker.answered,
            succeeded: sim.checker.succeeded,
            timed_out: sim.checker.timed_out,
            traffic: sim.traffic.clone(),
            virtual_ms: sim.now / MS,
            replays_refused: sim.gone.replays_refused(&sim.hosts),
            faults_injected: sim.gone.faults_injected(&sim.hosts),
            resolved_while_down: sim.checker.resolved_while_down,
        }
    }

    /// The violations, a line each, for a failing run's message.
    pub fn violation_lines(&self) -> String {
        self.violations
            .iter()
            .map(|v| format!("  at {} ms: {}", v.at_ns / 1_000_000, v.what))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// All hosts start within 100 ms; then `events` events, one every
/// `spacing_ms`: requests by address and by name (most of them), hosts
/// crashing and coming back with a new GID, forged traffic, partitions of
/// the segment in two, all on a lossy, duplicating, reordering network.
/// Stops at the first violation.
pub fn mixed(m: &Mixed) -> Outcome {
    let mut sim = Sim::new(m.hosts, m.seed, m.net.clone(), m.tuning.clone());
    if let Some(ms) = m.staleness_ms {
        sim.checker.staleness_ns = ms * MS;
    }
    let n = m.hosts as u64;
    for h in 0..m.hosts {
        let at = sim.rng.below(100 * MS);
        sim.schedule(at, Event::Start { host: h });
    }
    let mut t = 200 * MS;
    for _ in 0..m.events {
        t += m.spacing_ms * MS;
        let r = sim.rng.below(100);
        let a = sim.rng.below(n) as usize;
        let b = sim.rng.below(n) as usize;
        let ev = match r {
            0..=79 if a != b => Event::Request {
                host: a,
                dest: b,
                by_name: r.is_multiple_of(3),
            },
            80..=84 => Event::Crash {
                host: a,
                down_ms: 500 + sim.rng.below(2_500),
            },
            85..=91 if a != b => Event::Forge {
                victim: a,
                claimed: b,
            },
            92 => Event::Partition {
                heal_ms: 500 + sim.rng.below(1_500),
            },
            _ => continue,
        };
        sim.schedule(t, ev);
    }
    sim.settle(t + 10_000 * MS);
    Outcome::of(&sim, m.seed)
}

/// An overloaded segment: `hosts` hosts start at once, then each asks for
/// every other one by name, a millisecond apart, while each group datagram
/// is lost on its way to each host with probability `group_loss`. Names
/// are asked of the segment, then of a system resolver that knows none of
/// them (they are only in the hosts' ibacm_addr.cfg, as on many clusters).
/// Two rounds, the second within `urdma_negative_timeout` of the first, so
/// what the first remembered answers it.
pub fn overload(hosts: usize, group_loss: f64, seed: u64) -> Outcome {
    let net = Conditions {
        group_loss,
        ..Conditions::default()
    };
    let tuning = Tuning {
        nss: true,
        ..Tuning::default()
    };
    let mut sim = Sim::new(hosts, seed, net, tuning);
    for h in 0..hosts {
        sim.schedule(0, Event::Start { host: h });
    }
    for round in [200, 4_000] {
        for h in 0..hosts {
            for k in 1..hosts {
                let ev = Event::Request {
                    host: h,
                    dest: (h + k) % hosts,
                    by_name: true,
                };
                sim.schedule((round + k as u64) * MS, ev);
            }
        }
    }
    sim.settle(10_000 * MS);
    Outcome::of(&sim, seed)
}

/// One row of the scaling table (BENCHMARKS.md).
#[derive(Clone, Debug, Default)]
pub struct Scale {
    pub hosts: usize,
    /// Mass start: datagrams each host sent, on average, until quiet.
    pub start_per_host: f64,
    /// Mass start: datagrams each host received, on average (the
    /// announcements of all the others).
    pub start_received_per_host: f64,
    /// The most one host sent in any 100 ms of the mass start, per second.
    pub start_peak_per_host_s: u64,
    /// From the first start until every host's first lookup (by name, of a
    /// random other host) was answered with the right GID.
    pub converged_ms: u64,
    /// One host restarts with a new GID while every other one has it
    /// bound: datagrams per host until quiet.
    pub restart_per_host: f64,
    /// From that restart until every other host has bound its new GID.
    pub followed_ms: u64,
    /// One lookup by name: datagrams in all.
    pub name_lookup: u64,
    /// One lookup by address: datagrams in all.
    pub address_lookup: u64,
}

/// The scaling rows as a picture: what each host sends (flat in the
/// number of hosts) against what it receives (multicast: every other
/// host's announcements).
pub fn scale_chart(rows: &[Scale], seed: u64) -> Chart {
    let line = |name: &str, y: fn(&Scale) -> f64| {
        let points = rows.iter().map(|r| (r.hosts as f64, y(r))).collect();
        Series::new(name, Join::Points, points)
    };
    Chart {
        title: "Datagrams per host against hosts on the segment (simulation)".into(),
        note: format!(
            "urdma-dst scale, seed {seed}: all hosts start at once and each looks one up; \
             then one restarts"
        ),
        x: Axis::new("hosts on the segment", plot::Scale::Log10),
        y: Axis::new("datagrams per host", plot::Scale::Log10),
        series: vec![
            line("received, start-up", |r| r.start_received_per_host),
            line("sent, start-up", |r| r.start_per_host),
            line("sent, a host restarts", |r| r.restart_per_host),
            line("one lookup (in all)", |r| r.name_lookup as f64),
        ],
    }
}

fn sent(sim: &Sim) -> u64 {
    sim.traffic.unicast + sim.traffic.multicast
}

/// The scaling measurements for `hosts` hosts, on a network without loss
/// (delays of 50 µs to 2 ms).
pub fn scale(hosts: usize, seed: u64) -> Scale {
    let net = Conditions {
        loss: 0.0,
        duplication: 0.0,
        ..Conditions::default()
    };
    let mut sim = Sim::new(hosts, seed, net, Tuning::default());
    let mut row = mass_start(&mut sim, hosts);
    (row.restart_per_host, row.followed_ms) = restart_first(&mut sim, hosts);
    (row.name_lookup, row.address_lookup) = (
        lone_lookup(&mut sim, hosts, true),
        lone_lookup(&mut sim, hosts, false),
    );
    assert!(
        sim.checker.violations.is_empty(),
        "{:?}",
        sim.checker.violations
    );
    row
}

/// All hosts start within 100 ms; at 150 ms each asks for a random other
/// host by name. What that cost until the network was quiet.
fn mass_start(sim: &mut Sim, hosts: usize) -> Scale {
    let n = hosts as u64;
    for h in 0..hosts {
        let at = sim.rng.below(100 * MS);
        sim.schedule(at, Event::Start { host: h });
    }
    sim.checker.record = true;
    for h in 0..hosts {
        let dest = (h + 1 + sim.rng.below(n - 1) as usize) % hosts;
        sim.schedule(
            150 * MS,
            Event::Request {
                host: h,
                dest,
                by_name: true,
            },
        );
    }
    sim.run_until(10_000 * MS);
    assert!(
        sim.checker.violations.is_empty(),
        "{:?}",
        sim.checker.violations
    );
    let answers = std::mem::take(&mut sim.checker.answers);
    assert!(
        answers.iter().all(|a| a.3.is_some()),
        "every first lookup resolves"
    );
    sim.checker.record = false;
    Scale {
        hosts,
        start_per_host: sent(sim) as f64 / hosts as f64,
        start_received_per_host: sim.traffic.delivered as f64 / hosts as f64,
        start_peak_per_host_s: sim.counts.peak[Direction::Sent as usize] * 10,
        converged_ms: answers.iter().map(|a| a.2).max().unwrap_or(0) / MS,
        ..Scale::default()
    }
}

/// Every host binds host 0's address; then host 0 restarts with a new GID.
/// Datagrams per host until quiet, and when every other host had the new
/// GID bound (`u64::MAX`: not within 10 s).
fn restart_first(sim: &mut Sim, hosts: usize) -> (f64, u64) {
    let t = sim.now;
    for h in 1..hosts {
        let ev = Event::Request {
            host: h,
            dest: 0,
            by_name: false,
        };
        sim.schedule(t + MS, ev);
    }
    sim.run_until(t + 5_000 * MS);
    let (before, t) = (sent(sim), sim.now);
    let crash = Event::Crash {
        host: 0,
        down_ms: 100,
    };
    sim.schedule(t, crash);
    let restarted = t + 100 * MS;
    let mut followed = None;
    let mut at = restarted;
    while at < restarted + 10_000 * MS {
        at += 10 * MS;
        sim.run_until(at);
        let gid = sim.gid_of(0);
        if followed.is_none() && (1..hosts).all(|h| sim.binding(h, 0) == Some(gid)) {
            followed = Some(at - restarted);
        }
    }
    assert!(
        sim.checker.violations.is_empty(),
        "{:?}",
        sim.checker.violations
    );
    let per_host = (sent(sim) - before) as f64 / hosts as f64;
    (per_host, followed.map_or(u64::MAX, |d| d / MS))
}

/// One lookup, alone on a quiet network: the datagrams it cost in all.
fn lone_lookup(sim: &mut Sim, hosts: usize, by_name: bool) -> u64 {
    let (before, t) = (sent(sim), sim.now);
    let ev = Event::Request {
        host: 1 % hosts,
        dest: hosts - 1,
        by_name,
    };
    sim.schedule(t, ev);
    sim.run_until(t + 3_000 * MS);
    sent(sim) - before
}

/// What an impostor achieved ([`impostor`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Impostor {
    /// Answers that named the attacker's GID: wrong answers.
    pub wrong: u64,
    /// Requests for the stolen name, and those answered at all.
    pub stolen_asked: u64,
    pub stolen_answered: u64,
    /// Requests for another name, and those resolved to its host's GID.
    pub others_asked: u64,
    pub others_right: u64,
}

/// Eight hosts on a segment without loss start at once, at 4 s; a ninth
/// starts 1.5 s later, while their announcements are still going out (so
/// none announces itself to it apart from them: the next is 3 s after
/// their start). 100 ms after that an impostor, with an address of its
/// own, announces host 3's name on the group as its own and from then on
/// answers every query for it: the ninth host hears it a second before
/// host 3's next announcement, enough for the impostor's hint to settle
/// there but for host 3's answer to it. Every host then asks for host 3
/// and host 5 by name, twice, 2 s apart.
pub fn impostor(seed: u64) -> Impostor {
    let mut sim = quiet_segment(9, seed, Tuning::default());
    for h in 0..8 {
        sim.schedule(4_000 * MS, Event::Start { host: h });
    }
    sim.schedule(5_500 * MS, Event::Start { host: 8 });
    let ev = Event::Impostor {
        claimed: 3,
        announces: true,
    };
    sim.schedule(5_600 * MS, ev);
    sim.checker.record = true;
    for round in [6_800, 8_800] {
        for host in 0..9 {
            ask_for_3_and_5(&mut sim, host, (round + host as u64) * MS);
        }
    }
    sim.run_until(12_000 * MS);
    Impostor::of(&sim)
}

/// Eight hosts on a segment without loss start at once; from 4 s an
/// impostor with an address of its own answers every query for host 3's
/// name, announcing nothing; at 5 s eight more hosts start, and each asks
/// at once for host 3 and host 5 by name (too soon for any hint: the
/// groups are asked), then again 4 s later (by then from the hosts that
/// announced the names). Claims are heard for `window` after a group query
/// left (`None`: the provider's own window); one-way delays are 50 µs plus
/// up to `jitter_us`.
pub fn impostor_silent(seed: u64, window: Option<Duration>, jitter_us: u64) -> Impostor {
    let tuning = Tuning {
        claim_window: window,
        ..Tuning::default()
    };
    let mut sim = quiet_segment(16, seed, tuning);
    sim.net.jitter_us = jitter_us;
    for h in 0..8 {
        sim.schedule(0, Event::Start { host: h });
    }
    let ev = Event::Impostor {
        claimed: 3,
        announces: false,
    };
    sim.schedule(4_000 * MS, ev);
    sim.checker.record = true;
    for host in 8..16 {
        let start = (5_000 + host as u64) * MS;
        sim.schedule(start, Event::Start { host });
        for round in [5, 4_005] {
            ask_for_3_and_5(&mut sim, host, start + round * MS);
        }
    }
    sim.run_until(12_000 * MS);
    Impostor::of(&sim)
}

/// A segment of `hosts` without loss or duplication.
fn quiet_segment(hosts: usize, seed: u64, tuning: Tuning) -> Sim {
    let net = Conditions {
        loss: 0.0,
        duplication: 0.0,
        ..Conditions::default()
    };
    Sim::new(hosts, seed, net, tuning)
}

/// Host `host` asks for host 3 and host 5 by name (each unless itself) at
/// `at`.
fn ask_for_3_and_5(sim: &mut Sim, host: usize, at: u64) {
    for dest in [3, 5].into_iter().filter(|d| *d != host) {
        let ev = Event::Request {
            host,
            dest,
            by_name: true,
        };
        sim.schedule(at, ev);
    }
}

impl Impostor {
    /// What the impostor of `sim` achieved, by its answers and the
    /// requests still pending.
    fn of(sim: &Sim) -> Impostor {
        let attacker = Some(crate::hostile::attacker_gid());
        let mut o = Impostor {
            wrong: sim
                .checker
                .answers
                .iter()
                .filter(|a| a.3 == attacker)
                .count() as u64,
            ..Impostor::default()
        };
        for &(_, dest, _, gid) in &sim.checker.answers {
            if dest == 3 {
                o.stolen_answered += 1;
            } else if gid == Some(sim.gid_of(dest)) {
                o.others_right += 1;
            }
        }
        let pending = |dest| sim.checker.pending_for(dest);
        o.stolen_asked = o.stolen_answered + pending(3);
        o.others_asked =
            sim.checker.answers.iter().filter(|a| a.1 == 5).count() as u64 + pending(5);
        o
    }
}
