//! The states a cluster is in when a job starts: fresh (every host started
//! a moment ago), aged (up longer than `urdma_addr_timeout`), joined (half
//! the hosts came after the others) and rebooted (a quarter came back with
//! new hardware), as timelines the simulation runs: the real fleet's, which
//! `benches/fleet/` records and replays here, and ones staged for a
//! segment of any size.

use crate::net::{Conditions, Rng};
use crate::sim::{Direction, Event, Sim, Tuning, MS};
use ibacm_urdma::config::{Config, Lifetime};

/// A state of the cluster when the job starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Fresh,
    Aged,
    Joined,
    Rebooted,
}

impl State {
    pub const ALL: [State; 4] = [State::Fresh, State::Aged, State::Joined, State::Rebooted];

    pub fn name(self) -> &'static str {
        match self {
            State::Fresh => "fresh",
            State::Aged => "aged",
            State::Joined => "joined",
            State::Rebooted => "rebooted",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        State::ALL.into_iter().find(|st| st.name() == s)
    }
}

/// When each host starts and restarts, and when the job begins.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// When each host's daemon first starts, in ms.
    pub starts_ms: Vec<u64>,
    /// Hosts killed and back with new hardware (a new GID): host, when
    /// killed, when back, in ms.
    pub restarts: Vec<(usize, u64, u64)>,
    /// When the job's lookups begin, in ms.
    pub job_at_ms: u64,
    /// Every host's `urdma_addr_timeout`.
    pub addr_timeout: Lifetime,
}

/// Hosts start within this of each other when they start together.
const TOGETHER_MS: u64 = 100;
/// Late hosts start this long after the first ones: past their three
/// start-up announcements, and past the 30 s in which hosts used to
/// announce themselves to newcomers.
const LATE_MS: u64 = 35_000;
/// The job starts this long after the last host came: time for the hosts
/// to announce themselves to it and for the hints to settle.
const SETTLED_MS: u64 = 5_000;

impl Timeline {
    /// The timeline that stages `state` on a segment of `hosts`, each
    /// host's time drawn from `rng`: hosts start within 100 ms; aged, the
    /// job starts an hour after `urdma_addr_timeout` (a day by default);
    /// joined, half the hosts start 35 s after the others; rebooted, a
    /// quarter are killed at 35 s and come back with new GIDs 100 ms to
    /// 1 s later.
    pub fn staged(state: State, hosts: usize, rng: &mut Rng) -> Timeline {
        let mut starts_ms: Vec<u64> = (0..hosts).map(|_| rng.below(TOGETHER_MS)).collect();
        let addr_timeout = Config::default().addr_timeout;
        let mut t = Timeline {
            job_at_ms: SETTLED_MS,
            starts_ms: Vec::new(),
            restarts: Vec::new(),
            addr_timeout,
        };
        match state {
            State::Fresh => {}
            State::Aged => {
                let life = addr_timeout.duration().map_or(0, |d| d.as_millis() as u64);
                t.job_at_ms = life + 3_600_000;
            }
            State::Joined => {
                for s in starts_ms.iter_mut().skip(hosts / 2) {
                    *s += LATE_MS;
                }
                t.job_at_ms = LATE_MS + TOGETHER_MS + SETTLED_MS;
            }
            State::Rebooted => {
                for h in (0..hosts).filter(|h| h % 4 == 0) {
                    let down = LATE_MS + rng.below(TOGETHER_MS);
                    t.restarts.push((h, down, down + 100 + rng.below(900)));
                }
                t.job_at_ms = LATE_MS + 1_000 + SETTLED_MS;
            }
        }
        t.starts_ms = std::mem::take(&mut starts_ms);
        t
    }

    /// A simulated segment on which this timeline's starts and restarts
    /// are scheduled.
    fn sim(&self, seed: u64) -> Sim {
        let tuning = Tuning {
            addr_timeout: self.addr_timeout,
            ..Tuning::default()
        };
        self.sim_with(seed, tuning)
    }

    /// [`Timeline::sim`] with engines tuned so.
    pub(crate) fn sim_with(&self, seed: u64, tuning: Tuning) -> Sim {
        let net = Conditions {
            loss: 0.0,
            duplication: 0.0,
            ..Conditions::default()
        };
        let mut sim = Sim::new(self.starts_ms.len(), seed, net, tuning);
        for (h, at) in self.starts_ms.iter().enumerate() {
            sim.schedule(at * MS, Event::Start { host: h });
        }
        for &(host, down, up) in &self.restarts {
            let down_ms = up.saturating_sub(down);
            sim.schedule(down * MS, Event::Crash { host, down_ms });
        }
        sim
    }
}

/// What the fleet bench (`benches/fleet/`) measured, simulated
/// (`states::fleet_run`).
#[derive(Clone, Debug, Default)]
pub struct Fleet {
    pub hosts: usize,
    /// Datagrams each host sent, on average, start-up and lookups.
    pub sent_per_host: f64,
    /// From the start until every lookup was answered.
    pub done_ms: u64,
    pub resolved: u64,
    pub asked: u64,
}

/// The fleet bench's fresh state, simulated: every host starts at once,
/// then asks for `peers` others (the next ones, in a ring) by name, then
/// by address, once every host's announcements were heard and the hints
/// settled.
pub fn fleet(hosts: usize, peers: usize, seed: u64) -> Fleet {
    let timeline = Timeline {
        starts_ms: vec![0; hosts],
        restarts: Vec::new(),
        job_at_ms: ibacm_urdma::discovery::HINT_SETTLE.as_millis() as u64 + 200,
        addr_timeout: ibacm_urdma::config::Config::default().addr_timeout,
    };
    fleet_run(&timeline, peers, seed)
}

fn sent(sim: &Sim) -> u64 {
    sim.traffic.unicast + sim.traffic.multicast
}

/// What the fleet bench does, simulated on `timeline`: from its job's
/// start, every host asks for `peers` others (the next ones, in a ring) by
/// name, then, 2 s later (the real bench's rounds are about that apart),
/// by address.
pub fn fleet_run(timeline: &Timeline, peers: usize, seed: u64) -> Fleet {
    let mut sim = timeline.sim(seed);
    let hosts = sim.hosts.len();
    sim.checker.record = true;
    let job = timeline.job_at_ms;
    // Like one load generator per host: its requests a little apart.
    for (phase, by_name) in [(job, true), (job + 2_000, false)] {
        for h in 0..hosts {
            for (k, dest) in (1..=peers).map(|k| (h + k) % hosts).enumerate() {
                let at = phase * MS + k as u64 * 100_000;
                let ev = Event::Request {
                    host: h,
                    dest,
                    by_name,
                };
                sim.schedule(at, ev);
            }
        }
    }
    sim.run_until((job + 10_000) * MS);
    assert!(
        sim.checker.violations.is_empty(),
        "{:?}",
        sim.checker.violations
    );
    Fleet {
        hosts,
        sent_per_host: sent(&sim) as f64 / hosts as f64,
        done_ms: sim.checker.answers.iter().map(|a| a.2).max().unwrap_or(0) / MS,
        resolved: sim.checker.answers.iter().filter(|a| a.3.is_some()).count() as u64,
        asked: sim.checker.answers.len() as u64,
    }
}

/// One row of the states table (BENCHMARKS.md section 5): a segment in a
/// state, whose every host then asks for one other host by name and by
/// address.
#[derive(Clone, Debug, Default)]
pub struct Segment {
    pub hosts: usize,
    /// Datagrams each host sent and received, on average, from the first
    /// start until the job's last answer.
    pub sent_per_host: f64,
    pub received_per_host: f64,
    /// The most one host sent, and received, in any 100 ms, per second.
    pub peak_sent_per_s: u64,
    pub peak_received_per_s: u64,
    /// What each host received per second, on average, on the running
    /// segment with no job: from [`QUIET_FROM_MS`] after the job's start,
    /// for a whole `urdma_addr_timeout`, in which every host renews.
    pub quiet_received_per_s: f64,
    /// From the job's start until its last lookup was answered.
    pub last_answer_ms: u64,
    pub asked: u64,
    pub resolved: u64,
    /// Names the job asked of the groups, not of their holders.
    pub group_queries: u64,
}

/// The quiet window: the segment runs on with no job from this long after
/// the job's start, when every start-up, welcome and lookup is over (a
/// window before the job caught, at 10,000 hosts, the tail of the late
/// hosts' welcomes), for one hint lifetime (`urdma_addr_timeout`, a day
/// by default; an hour if hints never expire): renewals, which hosts
/// started together send together, and nothing else.
pub const QUIET_FROM_MS: u64 = 60_000;

/// A segment of `hosts` staged in `state` ([`Timeline::staged`]), then
/// the job: at its start every host asks for one other host, drawn at
/// random, by name, and 10 ms later by address.
pub fn segment(state: State, hosts: usize, seed: u64) -> Segment {
    let mut rng = Rng::new(seed ^ 0x5ea7);
    let timeline = Timeline::staged(state, hosts, &mut rng);
    let mut sim = timeline.sim(seed);
    let job = timeline.job_at_ms;
    sim.run_until(job * MS);
    sim.checker.record = true;
    let groups_before = sim.traffic.group_queries;
    for h in 0..hosts {
        let dest = (h + 1 + rng.below(hosts as u64 - 1) as usize) % hosts;
        for (by_name, after) in [(true, 0), (false, 10)] {
            let ev = Event::Request {
                host: h,
                dest,
                by_name,
            };
            sim.schedule((job + after) * MS, ev);
        }
    }
    sim.run_until((job + 10_000) * MS);
    assert!(
        sim.checker.violations.is_empty(),
        "{:?}",
        sim.checker.violations
    );
    let last = sim.checker.answers.iter().map(|a| a.2).max().unwrap_or(0) / MS;
    let (sent, received) = (
        sim.counts.mean(Direction::Sent),
        sim.counts.mean(Direction::Received),
    );
    let peaks = sim.counts.peak;
    sim.checker.record = false;
    let quiet_for = timeline
        .addr_timeout
        .duration()
        .map_or(3_600_000, |d| d.as_millis() as u64);
    sim.run_until((job + QUIET_FROM_MS) * MS);
    let before = sim.counts.mean(Direction::Received);
    sim.run_until((job + QUIET_FROM_MS + quiet_for) * MS);
    assert!(
        sim.checker.violations.is_empty(),
        "{:?}",
        sim.checker.violations
    );
    let quiet = (sim.counts.mean(Direction::Received) - before) / (quiet_for as f64 / 1000.0);
    Segment {
        hosts,
        sent_per_host: sent,
        received_per_host: received,
        peak_sent_per_s: peaks[Direction::Sent as usize] * 10,
        peak_received_per_s: peaks[Direction::Received as usize] * 10,
        quiet_received_per_s: quiet,
        last_answer_ms: last.saturating_sub(job),
        asked: sim.checker.answers.len() as u64,
        resolved: sim.checker.answers.iter().filter(|a| a.3.is_some()).count() as u64,
        group_queries: sim.traffic.group_queries - groups_before,
    }
}
