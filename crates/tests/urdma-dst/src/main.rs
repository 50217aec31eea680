//! `urdma-dst`: runs the simulation longer or larger than the test command
//! does, or replays one seed.
//!
//! ```text
//! urdma-dst run [--hosts N] [--events N] [--seed S] [--seeds K]
//!               [--loss-percent P] [--dup-percent P] [--jitter-us U]
//!               [--faults-percent P] [--dns] [--derive eui64|ipv4-mapped]
//! ```
//!
//! `--faults-percent` turns on every fault the core can inject into itself
//! (`ibacm_urdma::buggify`), each firing with that chance where it can;
//! `--dns` asks names of a simulated DNS instead of the segment; `--derive`
//! gives every host the GID that derivation computes for it and derives
//! what discovery cannot find.
//!
//! ```text
//! urdma-dst adversary [--state S] [--hosts N] [--seed S] [--seeds K]
//!                     [--attacks a,b,...|none]
//! ```
//!
//! runs the adversary beside the hosts of a segment in each state (or in
//! `--state`'s), with every attack staged (or `--attacks`'), and replays
//! a failing seed.

use ibacm_urdma::buggify::Fault;
use ibacm_urdma::config::Derivation;
use std::process::ExitCode;
use urdma_dst::attack::{self, Run};
use urdma_dst::scenario::{mixed, Mixed};
use urdma_dst::sim::adversary::Attack;
use urdma_dst::sim::Faults;
use urdma_dst::states::State;

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
        })
        .unwrap_or(default)
}
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        return usage();
    }
    match args.first().map(String::as_str) {
        Some("run") => run(&args),
        Some("fleet") => fleet(&args),
        Some("scale") => scale(&args),
        Some("states") => states(&args),
        Some("claim-window") => claim_window(&args),
        Some("adversary") => adversary(&args),
        _ => usage(),
    }
}

/// Mixed events on a segment, seed after seed; a violation stops with the
/// command that replays it.
fn run(args: &[String]) -> ExitCode {
    let hosts = arg(args, "--hosts", 1000) as usize;
    let events = arg(args, "--events", 10_000) as usize;
    let first = arg(args, "--seed", 1);
    let seeds = arg(args, "--seeds", 1);
    for seed in first..first + seeds {
        let started = std::time::Instant::now();
        let mut m = Mixed::new(hosts, events, seed);
        m.net.loss = arg(args, "--loss-percent", 1) as f64 / 100.0;
        m.net.duplication = arg(args, "--dup-percent", 1) as f64 / 100.0;
        m.net.jitter_us = arg(args, "--jitter-us", 2_000);
        let faults = arg(args, "--faults-percent", 0).min(100) as u8;
        if faults > 0 {
            m.tuning.faults = Some(Faults {
                enabled: Fault::ALL.to_vec(),
                percent: faults,
            });
        }
        let derive = args.iter().position(|a| a == "--derive").map(|i| {
            match args.get(i + 1).map(String::as_str) {
                Some("eui64") => Derivation::Eui64,
                Some("ipv4-mapped") => Derivation::Ipv4Mapped,
                other => panic!("--derive: eui64 or ipv4-mapped, not {other:?}"),
            }
        });
        m.tuning.derive = derive;
        let dns = args.iter().any(|a| a == "--dns");
        if dns {
            m.tuning.nss = true;
            m.tuning.dns = true;
            m.tuning.no_segment = true;
        }
        let o = mixed(&m);
        println!(
            "seed {seed}: {hosts} hosts, {events} events, {} ms virtual in {:.1} s: \
             {} requests answered ({} resolved), {} datagrams sent, {} delivered",
            o.virtual_ms,
            started.elapsed().as_secs_f64(),
            o.answered,
            o.succeeded,
            o.traffic.unicast + o.traffic.multicast,
            o.traffic.delivered
        );
        if !o.violations.is_empty() {
            println!("{}", o.violation_lines());
            println!(
                "replay: urdma-dst run --hosts {hosts} --events {events} --seed {seed} \
                 --loss-percent {} --dup-percent {} --jitter-us {} --faults-percent \
                 {faults}{}{}",
                arg(args, "--loss-percent", 1),
                arg(args, "--dup-percent", 1),
                arg(args, "--jitter-us", 2_000),
                if dns { " --dns" } else { "" },
                match derive {
                    Some(Derivation::Eui64) => " --derive eui64",
                    Some(Derivation::Ipv4Mapped) => " --derive ipv4-mapped",
                    None => "",
                }
            );
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// The fleet bench's workload, simulated.
fn fleet(args: &[String]) -> ExitCode {
    let hosts = arg(args, "--hosts", 64) as usize;
    let peers = arg(args, "--peers", hosts as u64 - 1) as usize;
    let f = urdma_dst::states::fleet(hosts, peers, arg(args, "--seed", 1));
    println!(
        "{hosts} hosts: {:.1} datagrams sent per host, {}/{} resolved, all done at {} ms",
        f.sent_per_host, f.resolved, f.asked, f.done_ms
    );
    ExitCode::SUCCESS
}

/// Start-up, restart and one lookup, at 10 to 1,000 hosts (BENCHMARKS.md
/// section 5), or at `--hosts a,b,...` (`--only N`: that size alone);
/// with `--svg FILE`, the picture of those rows too.
fn scale(args: &[String]) -> ExitCode {
    let seed = arg(args, "--seed", 1);
    let sizes: Vec<usize> = match (text_arg(args, "--hosts"), arg(args, "--only", 0)) {
        (Some(list), _) => list
            .split(',')
            .map(|n| {
                n.parse()
                    .unwrap_or_else(|_| panic!("--hosts a,b,...: {n}?"))
            })
            .collect(),
        (None, 0) => vec![10, 30, 100, 300, 1000],
        (None, only) => vec![only as usize],
    };
    println!("| hosts | start-up datagrams/host | peak datagrams/host/s | converged | restart datagrams/host | all follow a new GID | name lookup datagrams | address lookup datagrams |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    for hosts in sizes {
        let r = urdma_dst::scenario::scale(hosts, seed);
        println!(
            "| {} | {:.1} | {} | {} ms | {:.2} | {} ms | {} | {} |",
            r.hosts,
            r.start_per_host,
            r.start_peak_per_host_s,
            r.converged_ms,
            r.restart_per_host,
            r.followed_ms,
            r.name_lookup,
            r.address_lookup
        );
        rows.push(r);
    }
    if let Some(file) = text_arg(args, "--svg") {
        let svg = urdma_dst::scenario::scale_chart(&rows, seed).svg();
        if let Err(e) = std::fs::write(&file, svg) {
            eprintln!("{file}: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn text_arg(args: &[String], name: &str) -> Option<String> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

/// A segment in each state a cluster is in when a job starts
/// (BENCHMARKS.md section 5).
fn states(args: &[String]) -> ExitCode {
    let seed = arg(args, "--seed", 1);
    let only = args
        .iter()
        .position(|a| a == "--state")
        .and_then(|i| args.get(i + 1))
        .map(|s| State::parse(s).unwrap_or_else(|| panic!("--state: {s}?")));
    let sizes: Vec<usize> = match arg(args, "--hosts", 0) {
        0 => vec![1_000, 10_000],
        n => vec![n as usize],
    };
    println!("| state | hosts | sent/host | received/host | peak sent/host/s | peak received/host/s | received/host/s, no job | last lookup answered | right | run |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for state in State::ALL
        .into_iter()
        .filter(|s| only.is_none_or(|o| o == *s))
    {
        for &hosts in &sizes {
            let started = std::time::Instant::now();
            let r = urdma_dst::states::segment(state, hosts, seed);
            println!(
                "| {} | {hosts} | {:.1} | {:.1} | {} | {} | {:.3} | {} ms | {} of {} | {:.0} s |",
                state.name(),
                r.sent_per_host,
                r.received_per_host,
                r.peak_sent_per_s,
                r.peak_received_per_s,
                r.quiet_received_per_s,
                r.last_answer_ms,
                r.resolved,
                r.asked,
                started.elapsed().as_secs_f64()
            );
        }
    }
    ExitCode::SUCCESS
}

/// What the claim window buys against an impostor that answers for a name
/// it does not hold (docs/protocol.md, *Trust*); a run stops at its first
/// wrong answer.
fn claim_window(args: &[String]) -> ExitCode {
    let seeds = arg(args, "--seeds", 20);
    let jitter_us = arg(args, "--jitter-us", 2_000);
    println!("| claims heard for | runs with a wrong answer | requests for the stolen name answered, in the others |");
    println!("|---:|---:|---:|");
    let spread = 2 * (50 + jitter_us);
    let windows = [
        0,
        spread / 4,
        spread / 2,
        spread * 3 / 4,
        spread - 100,
        spread + 100,
        5 * spread,
        12 * spread,
    ];
    for us in windows {
        let window = std::time::Duration::from_micros(us);
        let (mut runs, mut answered, mut asked) = (0, 0, 0);
        for seed in 1..=seeds {
            let o = urdma_dst::scenario::impostor_silent(seed, Some(window), jitter_us);
            if o.wrong > 0 {
                runs += 1;
            } else {
                answered += o.stolen_answered;
                asked += o.stolen_asked;
            }
        }
        println!(
            "| {:.2} ms | {runs} of {seeds} | {answered} of {asked} |",
            us as f64 / 1000.0
        );
    }
    ExitCode::SUCCESS
}

/// The value of option `name`, if given.
fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).map(String::as_str)
}

/// The adversary beside the hosts of a segment, state after state and seed
/// after seed; a violation is printed with the command that replays it.
fn adversary(args: &[String]) -> ExitCode {
    let hosts = arg(args, "--hosts", 20) as usize;
    let first = arg(args, "--seed", 1);
    let seeds = arg(args, "--seeds", 1);
    let states: Vec<State> = match value(args, "--state") {
        Some(s) => vec![State::parse(s).unwrap_or_else(|| panic!("--state: {s}?"))],
        None => State::ALL.to_vec(),
    };
    let attacks: Option<Vec<Attack>> = value(args, "--attacks").map(|list| {
        list.split(',')
            .filter(|a| !a.is_empty() && *a != "none")
            .map(|a| Attack::parse(a).unwrap_or_else(|| panic!("--attacks: {a}?")))
            .collect()
    });
    let mut failed = false;
    for state in states {
        for seed in first..first + seeds {
            let mut run = Run::new(state, hosts, seed);
            if let Some(a) = &attacks {
                run.attacks = a.clone();
            }
            let started = std::time::Instant::now();
            let r = attack::run(&run);
            let t = &r.tally;
            println!(
                "{} seed {seed}: {hosts} hosts; the adversary sent {}, the hosts sent it {} \
                 replies, {} queries, {} others; {} of {} requests resolved, {} of {} it never \
                 claimed in the job; {} ms virtual in {:.1} s",
                state.name(),
                t.sent,
                t.to_it.replies,
                t.to_it.queries,
                t.to_it.others,
                r.succeeded,
                r.answered,
                t.unclaimed_resolved,
                t.unclaimed,
                r.virtual_ms,
                started.elapsed().as_secs_f64()
            );
            if !r.violations.is_empty() {
                println!("{}", r.failure());
                failed = true;
            }
        }
    }
    match failed {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    }
}

/// The commands and their options.
fn usage() -> ExitCode {
    eprintln!(
        "usage: urdma-dst run [--hosts N] [--events N] [--seed S] [--seeds K] \
         [--loss-percent P] [--dup-percent P] [--jitter-us U] [--faults-percent P] \
         [--dns] [--derive eui64|ipv4-mapped]
       urdma-dst fleet [--hosts N] [--peers P] [--seed S]
       urdma-dst scale [--hosts a,b,...|--only N] [--seed S] [--svg FILE]
       urdma-dst states [--hosts N] [--state fresh|aged|joined|rebooted] [--seed S]
       urdma-dst claim-window [--seeds K] [--jitter-us U]
       urdma-dst adversary [--state fresh|aged|joined|rebooted] [--hosts N] [--seed S] \
         [--seeds K] [--attacks a,b,...|none]"
    );
    ExitCode::from(2)
}
