//! The adversary's runs: a segment staged in a state a cluster is in
//! (`states.rs`), the adversary (`sim::adversary`) beside its hosts from
//! the first start, its attacks staged around the starts, the restarts
//! and the job, and lookups for it to spoil: each host's first ones a
//! second after it starts (while a forged welcome would have settled and
//! the holders' welcomes not yet come), then the job (every host asks for
//! its neighbour in a ring and another by name, then by address), and the
//! job again 9 s later. Checked after every step; a seed replays exactly
//! (`urdma-dst adversary --seed N --state S`).

use crate::net::Rng;
use crate::sim::adversary::{self, Adversary, Attack, Due, Step, Tally};
use crate::sim::{Event, Sim, Tuning, Violation, MS};
use crate::states::{State, Timeline};

/// The most datagrams the adversary sends in a run.
pub const BUDGET: u64 = 3_000;

/// One run: a state, a segment's size, a seed, the attacks staged.
#[derive(Clone, Debug)]
pub struct Run {
    pub state: State,
    pub hosts: usize,
    pub seed: u64,
    pub attacks: Vec<Attack>,
}

impl Run {
    /// Every attack staged.
    pub fn new(state: State, hosts: usize, seed: u64) -> Run {
        Run {
            state,
            hosts,
            seed,
            attacks: Attack::ALL.to_vec(),
        }
    }

    /// The command that replays this run.
    pub fn replay(&self) -> String {
        let mut names: Vec<&str> = self.attacks.iter().map(|a| a.name()).collect();
        if names.is_empty() {
            names.push("none");
        }
        format!(
            "urdma-dst adversary --state {} --hosts {} --seed {} --attacks {}",
            self.state.name(),
            self.hosts,
            self.seed,
            names.join(",")
        )
    }
}

/// How a run went.
#[derive(Clone, Debug)]
pub struct Report {
    pub run: Run,
    pub violations: Vec<Violation>,
    pub tally: Tally,
    /// Requests answered, and resolved.
    pub answered: u64,
    pub succeeded: u64,
    pub virtual_ms: u64,
}

impl Report {
    /// The violations, a line each, and the command that replays the run.
    pub fn failure(&self) -> String {
        let lines: Vec<String> = self
            .violations
            .iter()
            .map(|v| format!("  at {} ms: {}", v.at_ns / MS, v.what))
            .collect();
        format!(
            "{} state, seed {}:\n{}\nreplay: {}",
            self.run.state.name(),
            self.run.seed,
            lines.join("\n"),
            self.run.replay()
        )
    }
}

/// When the last host (re)started, in ms.
fn last_start(t: &Timeline) -> u64 {
    let starts = t.starts_ms.iter().copied();
    starts
        .chain(t.restarts.iter().map(|r| r.2))
        .max()
        .unwrap_or(0)
}

/// Runs `r`, checked.
pub fn run(r: &Run) -> Report {
    let mut rng = Rng::new(r.seed ^ 0x5ea7);
    let timeline = Timeline::staged(r.state, r.hosts, &mut rng);
    // Small tables and a small reply allowance, so that a bounded
    // adversary can fill and spend them.
    let tuning = Tuning {
        addr_timeout: timeline.addr_timeout,
        max_learned: 64,
        reply_rate: 10,
        silent_when_down: true,
        ..Tuning::default()
    };
    let mut sim = timeline.sim_with(r.seed, tuning);
    let last = last_start(&timeline);
    let job = timeline.job_at_ms.max(last + 12_000);
    let mut windows = vec![(0, 8_000 * MS)];
    if last > 1_000 {
        windows.push(((last - 1_500) * MS, (last + 8_000) * MS));
    }
    windows.push(((job - 4_000) * MS, (job + 14_000) * MS));
    let quiet = quiet_minutes(&windows);
    let end = windows.last().map_or(0, |w| w.1) + AFTER + adversary::QUIET + MS;
    let mut adv = Adversary::new(r.seed, r.attacks.clone(), windows, BUDGET);
    adv.ledger.job_from = job * MS;
    let cast = cast(&sim, &adv, &mut rng);
    sim.adversary = Some(Box::new(adv));
    sim.schedule(0, Event::Adversary(Due::Tick));
    for at in quiet {
        sim.schedule(at, Event::Adversary(Due::Quiet { sent: None }));
    }
    stage(&mut sim, r, last, job, cast);
    early_requests(&mut sim, &timeline, &mut rng);
    job_requests(&mut sim, job, cast, &mut rng);
    sim.run_until(end);
    adversary::verdict(&mut sim);
    let a = sim.adversary.as_ref().expect("the adversary");
    Report {
        run: r.clone(),
        violations: sim.checker.violations.clone(),
        tally: a.ledger.tally(&sim, a.sent()),
        answered: sim.checker.answered,
        succeeded: sim.checker.succeeded,
        virtual_ms: sim.now / MS,
    }
}

/// How long after one of the adversary's windows the segment is watched
/// for what it left behind: long after every welcome, claim and check it
/// set off.
const AFTER: u64 = 30_000 * MS;

/// When the quiet minutes begin: after each of the adversary's windows
/// (ns) that the next leaves room for, and after the last.
fn quiet_minutes(windows: &[(u64, u64)]) -> Vec<u64> {
    let mut at = Vec::new();
    for (i, &(_, end)) in windows.iter().enumerate() {
        let next = windows.get(i + 1).map(|w| w.0);
        if next.is_none_or(|start| end + AFTER + adversary::QUIET <= start) {
            at.push(end + AFTER);
        }
    }
    at
}

/// The hosts the job and the staged attacks need, all but A hosts the
/// adversary spares (so that it never names them).
#[derive(Clone, Copy, Default)]
struct Cast {
    /// A and B of the starving attack.
    starved: Option<(usize, usize)>,
    /// A host whose machine reboots during the job, for two seconds, while
    /// lookups of it wait for its start query to ask it again.
    rebooting: Option<usize>,
}

fn cast(sim: &Sim, adv: &Adversary, rng: &mut Rng) -> Cast {
    let n = sim.hosts.len();
    let first = rng.below(n as u64) as usize;
    let order = (0..n).map(|k| (first + k) % n);
    let spared: Vec<usize> = order
        .clone()
        .filter(|&h| adv.spares(sim.hosts[h].ip))
        .collect();
    let a = order.into_iter().find(|&h| !adv.spares(sim.hosts[h].ip));
    Cast {
        starved: a.zip(spared.first().copied()),
        rebooting: spared.get(1).copied(),
    }
}

/// Queues `step` of a plan at `ms`.
fn plan(sim: &mut Sim, ms: u64, step: Step) {
    sim.schedule(ms * MS, Event::Adversary(Due::Plan(step)));
}

/// Schedules the reboot in the job, and the steps of the attacks `r`
/// stages.
fn stage(sim: &mut Sim, r: &Run, last: u64, job: u64, cast: Cast) {
    if let Some(host) = cast.rebooting {
        let ev = Event::Crash {
            host,
            down_ms: 2_000,
        };
        sim.schedule((job + 1_000) * MS, ev);
    }
    let ips = cast
        .starved
        .map(|(a, b)| (sim.hosts[a].ip, sim.hosts[b].ip));
    for attack in &r.attacks {
        match attack {
            // Reactions to what it hears (`react.rs`).
            Attack::ForgedWelcome => {}
            Attack::WelcomesToV => {
                plan(sim, 2_000, Step::VAnnounce);
                plan(sim, 4_000, Step::VStart);
                plan(sim, 9_500, Step::VStart);
            }
            Attack::AnnounceWithdraw => plan(sim, job - 3_000, Step::AnnounceWithdraw { round: 0 }),
            Attack::NameFlood => plan(sim, job - 2_500, Step::NameFlood),
            Attack::SlowClaims => plan(sim, job - 2_000, Step::Dispute),
            Attack::StartFlood => {
                let around = if last > 1_000 { last + 500 } else { 5_000 };
                plan(
                    sim,
                    around,
                    Step::StartFlood {
                        count: 25,
                        every_ms: 40,
                    },
                );
                // While the rebooting host is down: 100 a second, until
                // it is back and sends its own.
                let flood = Step::StartFlood {
                    count: 210,
                    every_ms: 10,
                };
                plan(sim, job + 1_000, flood);
            }
            Attack::Starve => {
                let Some((a, b)) = ips else {
                    continue;
                };
                let until = (job + 14_000) * MS;
                plan(sim, job + 500, Step::StarveFlood { a, b, until });
                plan(sim, job + 3_000, Step::StarveHint { a, b });
            }
        }
    }
}

/// Every host, 1.2 to 1.8 s after each of its starts, asks for three
/// others by name.
fn early_requests(sim: &mut Sim, t: &Timeline, rng: &mut Rng) {
    let n = t.starts_ms.len();
    let starts = t.starts_ms.iter().copied().enumerate();
    let backs = t.restarts.iter().map(|&(h, _, back)| (h, back));
    for (host, start) in starts.chain(backs).collect::<Vec<_>>() {
        for _ in 0..3 {
            let dest = (host + 1 + rng.below(n as u64 - 1) as usize) % n;
            let at = (start + 1_200 + rng.below(600)) * MS;
            let ev = Event::Request {
                host,
                dest,
                by_name: true,
            };
            sim.schedule(at, ev);
        }
    }
}

/// The job at `job` ms and again 9 s later: every host asks for its
/// neighbour in a ring and for another host, by name, then 10 ms later by
/// address; A of the starving attack asks for B; and while the rebooting
/// host is down, three hosts ask for it by address, their last tries
/// leaving before it is back.
fn job_requests(sim: &mut Sim, job: u64, cast: Cast, rng: &mut Rng) {
    let n = sim.hosts.len();
    let mut pairs: Vec<(usize, usize)> = (0..n)
        .flat_map(|h| {
            [
                (h, (h + 1) % n),
                (h, (h + 1 + rng.below(n as u64 - 1) as usize) % n),
            ]
        })
        .collect();
    pairs.extend(cast.starved);
    for round in [job, job + 9_000] {
        for &(host, dest) in &pairs {
            for (by_name, after) in [(true, 0), (false, 10)] {
                let ev = Event::Request {
                    host,
                    dest,
                    by_name,
                };
                sim.schedule((round + after) * MS, ev);
            }
        }
    }
    if let Some(dest) = cast.rebooting {
        for k in 1..=3 {
            let ev = Event::Request {
                host: (dest + k) % n,
                dest,
                by_name: false,
            };
            sim.schedule((job + 1_000 + 100 * k as u64) * MS, ev);
        }
    }
}
