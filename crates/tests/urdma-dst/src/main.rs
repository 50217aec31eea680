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

use ibacm_urdma::buggify::Fault;
use ibacm_urdma::config::Derivation;
use std::process::ExitCode;
use urdma_dst::scenario::{mixed, Mixed};
use urdma_dst::sim::Faults;

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
    match args.first().map(String::as_str) {
        Some("run") => {
            let hosts = arg(&args, "--hosts", 1000) as usize;
            let events = arg(&args, "--events", 10_000) as usize;
            let first = arg(&args, "--seed", 1);
            let seeds = arg(&args, "--seeds", 1);
            for seed in first..first + seeds {
                let started = std::time::Instant::now();
                let mut m = Mixed::new(hosts, events, seed);
                m.net.loss = arg(&args, "--loss-percent", 1) as f64 / 100.0;
                m.net.duplication = arg(&args, "--dup-percent", 1) as f64 / 100.0;
                m.net.jitter_us = arg(&args, "--jitter-us", 2_000);
                let faults = arg(&args, "--faults-percent", 0).min(100) as u8;
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
                        arg(&args, "--loss-percent", 1),
                        arg(&args, "--dup-percent", 1),
                        arg(&args, "--jitter-us", 2_000),
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
        Some("fleet") => {
            let hosts = arg(&args, "--hosts", 64) as usize;
            let peers = arg(&args, "--peers", hosts as u64 - 1) as usize;
            let f = urdma_dst::scenario::fleet(hosts, peers, arg(&args, "--seed", 1));
            println!(
                "{hosts} hosts: {:.1} datagrams sent per host, {}/{} resolved, all done at {} ms",
                f.sent_per_host, f.resolved, f.asked, f.done_ms
            );
            ExitCode::SUCCESS
        }
        Some("scale") => {
            let seed = arg(&args, "--seed", 1);
            println!("| hosts | start-up datagrams/host | peak datagrams/host/s | converged | restart datagrams/host | all follow a new GID | name lookup datagrams | address lookup datagrams |");
            println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
            for hosts in [10, 30, 100, 300, 1000] {
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
            }
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "usage: urdma-dst run [--hosts N] [--events N] [--seed S] [--seeds K] \
                 [--loss-percent P] [--dup-percent P] [--jitter-us U] [--faults-percent P] \
                 [--dns] [--derive eui64|ipv4-mapped]"
            );
            ExitCode::from(2)
        }
    }
}
