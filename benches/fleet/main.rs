//! Real daemons: `/usr/sbin/ibacm` with the provider on a simulated urdma
//! device, each in network and mount namespaces of its own on one bridge
//! (`crates/tests/urdma-harness`), set up in the state a job meets
//! (`stage.rs`); then every one resolves every other by name and by address
//! with `urdma-load` (`pairs.rs`), and optionally a restart storm follows
//! (`storm.rs`). Prints how long that took, the datagrams each daemon sent
//! (from the provider's metrics files), the time lookups took inside the
//! provider, and what the deterministic simulation (`crates/tests/urdma-dst`)
//! predicts for the same timeline. Every answer is checked for the right
//! GID; numbers are printed, never asserted. Needs root and `cargo build
//! --workspace --release`; everything it creates is removed at the end
//! (also on panic, SIGTERM or SIGINT), and the neighbour table limits it
//! raises are put back.
//!
//! ```text
//! cargo bench --bench fleet -- [--hosts N] [--state fresh|aged|joined|rebooted]
//!     [--peers K] [--names M] [--key] [--restart R] [--storm-interval-ms T]
//!     [--log-level L] [--trace-hosts a,b] [--flood-arp] [--aged-minutes M]
//!     [--svg DIR]
//! ```
//!
//! `--peers`: each daemon asks for the K next ones only; `--names`: each
//! daemon holds M names; `--key`: discovery authenticated with one shared
//! key; `--restart`: after the job, R daemons restart at once on new
//! hardware while the others keep asking for them, each of their four
//! connections one request every T ms (160 by default); `--log-level`: the
//! daemons' (0 by default, as on a cluster: 2 traces every lookup, which
//! costs the job a sixth of its time on two cores); `--trace-hosts`: these
//! daemons at log level 2 whatever the others' (with `URDMA_E2E_KEEP=1`,
//! their logs stay); `--flood-arp`: the bridge floods ARP requests to
//! every daemon's namespace, as a plain switch does, instead of answering
//! them itself (`Net::answering_arp`: flooded, each request is received
//! by every namespace of the fleet on the same two cores, a cost a
//! cluster's hosts pay each on a CPU of its own; BENCHMARKS.md section 6);
//! `--aged-minutes`: the aged state's `urdma_addr_timeout` (1 by
//! default; the job starts 10 s past it; a host renews its announcements
//! every two fifths of it, so a short one stages renewals far more often
//! than a day's would: BENCHMARKS.md section 6). With `FLEET_LOOKUPS_DIR`
//! set to a directory, each daemon's lookups are kept there, one line each
//! (`host{n}-n` by name, `host{n}-i` by address: `urdma-load --verbose`),
//! to see which were slow and when. `--svg DIR`: the run's pictures are
//! drawn there (`pictures.rs`; BENCHMARKS.md shows those in docs/bench).

mod fleet_config;
mod machine;
mod pairs;
mod pictures;
mod stage;
mod storm;

use fleet_config::{fleet_totals, lookup_time, rcvbuf_errors, sent};
use stage::{stage, Options, Staged};
use std::time::{Duration, Instant};
use urdma_dst::states::State;
use urdma_harness::neigh_limits::NeighbourLimits;
use urdma_harness::KeyFile;
use urdma_harness::Net;

/// The `q`-quantile of `sorted`, in seconds.
pub fn quantile(sorted: &[u64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(i).map_or(0.0, |us| *us as f64 / 1e6)
}

fn arg(args: &[String], name: &str) -> Option<String> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).cloned()
}

fn number(args: &[String], name: &str, default: usize) -> usize {
    arg(args, name).map_or(default, |v| {
        v.parse().unwrap_or_else(|_| panic!("{name} N"))
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let hosts = number(&args, "--hosts", 64);
    let peers = number(&args, "--peers", hosts - 1).min(hosts - 1);
    let state = arg(&args, "--state").map_or(State::Fresh, |s| {
        State::parse(&s).unwrap_or_else(|| panic!("--state fresh|aged|joined|rebooted"))
    });
    let key = args
        .iter()
        .any(|a| a == "--key")
        .then(|| KeyFile::new("fleet", "1 000102030405060708090a0b0c0d0e0f\n", 0o600));
    let o = Options {
        names: number(&args, "--names", 1),
        opts: key.iter().map(KeyFile::opt).collect(),
        log_level: number(&args, "--log-level", 0) as u8,
        traced: arg(&args, "--trace-hosts").map_or_else(Vec::new, |v| {
            v.split(',')
                .map(|n| n.parse().expect("--trace-hosts a,b"))
                .collect()
        }),
        aged_minutes: number(&args, "--aged-minutes", 1).max(1) as u32,
        pictures: arg(&args, "--svg").map(std::path::PathBuf::from),
    };
    // Each daemon's namespace holds the neighbours it asks and those that
    // ask it, per address family; the kernel's table holds them all.
    let per_host = (2 * peers).min(hosts - 1) as u64 + 1;
    let _limits = NeighbourLimits::at_least(hosts as u64 * per_host);
    let net = if args.iter().any(|a| a == "--flood-arp") {
        Net::new()
    } else {
        Net::answering_arp()
    };
    let _metrics = fleet_config::MetricsDir::new();
    let staged = stage(&net, state, hosts, &o);
    let rss_kb: u64 = staged.fleet.iter().map(|h| h.daemon_rss_kb()).sum();
    let generation: Vec<u8> = (0..hosts)
        .map(|n| u8::from(staged.timeline.restarts.iter().any(|r| r.0 == n)))
        .collect();
    let job = pairs::all_pairs(&staged.fleet, peers, o.names, &generation);
    // Until the last of the three announcements is out and counted (the
    // metrics files are rewritten every second).
    std::thread::sleep(Duration::from_millis(3500));
    report(&staged, state, peers, &o, &job, rss_kb);
    if let (Some(dir), Some((_, us))) = (&o.pictures, job.took.first()) {
        pictures::name_lookups(dir, state, hosts, us);
    }
    let restart = number(&args, "--restart", 0).min(hosts - 1);
    if restart > 0 {
        let interval = number(&args, "--storm-interval-ms", 160) as u64;
        storm::storm(&staged.fleet, restart, interval, &o);
    }
}

/// Prints the job's table, beside the simulation's prediction for the same
/// timeline, then where the datagrams went and what failed.
fn report(s: &Staged, state: State, peers: usize, o: &Options, job: &pairs::Pairs, rss_kb: u64) {
    let hosts = s.fleet.len();
    let sent: Vec<u64> = (0..hosts).map(|n| sent(n) + s.sent_before[n]).collect();
    let per_host = sent.iter().sum::<u64>() as f64 / hosts as f64;
    let right = job.asked - job.failed - job.wrong;
    // What the daemons did, before the simulation (a minute at 256 hosts)
    // runs: an interrupted run still leaves the measurement.
    println!(
        "measured ({}): {right} of {} right ({} failed, {} wrong) in {:.1} s; {per_host:.1} \
         datagrams per daemon; daemons up in {:.1} s, {} MiB\n",
        state.name(),
        job.asked,
        job.failed,
        job.wrong,
        job.time.as_secs_f64(),
        s.up.as_secs_f64(),
        rss_kb / 1024
    );
    let simulated = Instant::now();
    let predicted = (o.names == 1 && o.opts.is_empty())
        .then(|| urdma_dst::states::fleet_run(&s.timeline, peers, 1));
    eprintln!("simulation: {:.0} s", simulated.elapsed().as_secs_f64());
    println!(
        "## {hosts} daemons on one bridge, {} state, each asking for {peers} others\n",
        state.name()
    );
    print_table(s, job, &sent, predicted.as_ref(), rss_kb);
    print_where_it_went(&s.fleet, job);
}

/// The job's table: real daemons beside the simulation's prediction
/// (`predicted`, when the run is one it can replay).
fn print_table(
    s: &Staged,
    job: &pairs::Pairs,
    sent: &[u64],
    predicted: Option<&urdma_dst::states::Fleet>,
    rss_kb: u64,
) {
    let hosts = s.fleet.len();
    let per_host = sent.iter().sum::<u64>() as f64 / hosts as f64;
    let (lookups, seconds) = (0..hosts)
        .map(lookup_time)
        .fold((0, 0.0), |(n, t), (m, u)| (n + m, t + u));
    let sim =
        |f: &dyn Fn(&urdma_dst::states::Fleet) -> String| predicted.map_or("-".to_string(), f);
    println!("| | real daemons | simulation |\n|---|---:|---:|");
    println!(
        "| daemons started (all at once) | {:.1} s | - |",
        s.up.as_secs_f64()
    );
    println!(
        "| lookups by name and address ({} in all), all daemons at once | {:.1} s | - |",
        job.asked,
        job.time.as_secs_f64()
    );
    println!(
        "| answered with the right GID | {} of {} ({} failed, {} wrong) | {} |",
        job.asked - job.failed - job.wrong,
        job.asked,
        job.failed,
        job.wrong,
        sim(&|p| format!("{} of {}", p.resolved, p.asked))
    );
    println!(
        "| datagrams sent per daemon | {per_host:.1} (min {}, max {}) | {} |",
        sent.iter().min().unwrap_or(&0),
        sent.iter().max().unwrap_or(&0),
        sim(&|p| format!(
            "{:.1} ({:+.1} %)",
            p.sent_per_host,
            (per_host / p.sent_per_host - 1.0) * 100.0
        ))
    );
    for (how, us) in &job.took {
        println!(
            "| one lookup {how}: p50 / p99 / slowest | {:.3} / {:.3} / {:.3} s | - |",
            quantile(us, 0.5),
            quantile(us, 0.99),
            quantile(us, 1.0)
        );
    }
    println!(
        "| a lookup inside the provider, mean (urdma_lookup_duration_seconds) | {:.1} ms over {lookups} | - |",
        seconds * 1000.0 / lookups.max(1) as f64
    );
    println!("| daemons' RSS, all together | {} MiB | - |", rss_kb / 1024);
}

/// The datagrams sent and dropped, summed over the fleet, the kernel's
/// drops, and what failed.
fn print_where_it_went(fleet: &[urdma_harness::Host], job: &pairs::Pairs) {
    let hosts = fleet.len();
    for (what, metric) in [
        ("sent", "urdma_datagrams_sent_total"),
        ("dropped", "urdma_datagrams_dropped_total"),
    ] {
        println!(
            "\ndatagrams {what}, all daemons: {}",
            fleet_totals(hosts, metric)
        );
    }
    let full: u64 = fleet.iter().map(rcvbuf_errors).sum();
    println!("\ndatagrams the kernel dropped for a full receive buffer, all daemons: {full}");
    let statuses: Vec<String> = job
        .by_status
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{} {v}", status_name(k)))
        .collect();
    if !statuses.is_empty() {
        println!("\nfailures by status: {}", statuses.join(", "));
    }
    for b in &job.broken {
        println!("\n{b}");
    }
    const SHOWN: usize = 20;
    for f in job.failures.iter().take(SHOWN) {
        println!("failed: {f}");
    }
    if job.failures.len() > SHOWN {
        println!("failed: ... and {} more", job.failures.len() - SHOWN);
    }
}

/// `status_3` as the client sees it (`enum acm_status`).
fn status_name(key: &str) -> String {
    let names = [
        "SUCCESS",
        "ENOMEM",
        "EINVAL",
        "ENODATA",
        "4",
        "ENOTCONN",
        "ETIMEDOUT",
        "ESRCADDR",
        "ESRCTYPE",
        "EDESTADDR",
        "EDESTTYPE",
    ];
    let n: usize = key
        .trim_start_matches("status_")
        .parse()
        .unwrap_or(usize::MAX);
    names
        .get(n)
        .map_or_else(|| key.to_string(), |s| s.to_string())
}
