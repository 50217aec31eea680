//! Sixty-four real daemons: `/usr/sbin/ibacm` with the provider on a
//! simulated urdma device, each in network and mount namespaces of its own
//! on one bridge (`crates/tests/urdma-harness`), all started at once; then
//! every one resolves every other by name and by address with
//! `urdma-load`. Prints how long that took, the datagrams each daemon sent
//! (from the provider's metrics files) and what the deterministic
//! simulation (`crates/tests/urdma-dst`) predicts for the same run. Every
//! answer is checked for the right GID; numbers are printed, never
//! asserted. Needs root and `cargo build --workspace --release`;
//! everything it creates is removed at the end (also on panic, SIGTERM or
//! SIGINT), and the neighbour table limits it raises are put back.
//!
//! `cargo bench --bench fleet [-- --hosts N] [--peers K] [--restart R]`
//! (`--peers`: each daemon asks for the K next ones only; `--restart`: then
//! R daemons restart at once on new hardware, new GIDs, while the others
//! keep resolving them, and the bench measures how long each survivor takes
//! to follow).

use ibacm_urdma::discovery::eui64_gid;
use ibacm_urdma::metrics::parse;
use std::collections::BTreeMap;
use std::fs;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use urdma_harness::load::{try_load_summary, verbose_dgids, verbose_timeline, verbose_us};
use urdma_harness::neigh_limits::NeighbourLimits;
use urdma_harness::{Host, HostConfig, Net};

/// How one daemon's round of lookups went.
#[derive(Default)]
struct Round {
    failed: u64,
    wrong: u64,
    /// Failures by the status the client got (`status_N` of urdma-load).
    by_status: BTreeMap<String, u64>,
    /// Why the round has no result, if it has none.
    broken: Option<String>,
    /// How long each lookup took, in microseconds.
    us: Vec<u64>,
}

/// The `q`-quantile of `sorted`, in seconds.
fn quantile(sorted: &[u64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1)) - 1;
    sorted.get(i).map_or(0.0, |us| *us as f64 / 1e6)
}

/// Host `n`'s NIC; a restart with new hardware is generation 1.
fn mac_of(n: usize, generation: u8) -> [u8; 6] {
    [0x52, 0x54, 0x00, generation, (n >> 8) as u8 | 0x10, n as u8]
}

fn mac(n: usize) -> [u8; 6] {
    mac_of(n, 0)
}

fn config(n: usize) -> HostConfig {
    config_of(n, 0)
}

fn config_of(n: usize, generation: u8) -> HostConfig {
    let m = mac_of(n, generation);
    let mac = m.map(|b| format!("{b:02x}")).join(":");
    let (ip4, ip6) = (
        format!("10.0.{}.{}", n / 250, n % 250 + 1),
        format!("fd00::{:x}", n + 1),
    );
    HostConfig::default()
        .ip_addrs(&[&format!("{ip4}/16"), &format!("{ip6}/64")])
        .addr_lines(&[
            &format!("{ip4} urdma0 1 default"),
            &format!("{ip6} urdma0 1 default"),
            &format!("host{n} urdma0 1 default"),
        ])
        .sim_config(&format!(
            "device urdma0\n  mac {mac}\n  node_desc URDMA Virtual HCA\n  port 1\n"
        ))
}

fn ip4(n: usize) -> String {
    format!("10.0.{}.{}", n / 250, n % 250 + 1)
}

/// The samples of metric `name` in the metrics file of `host`, by their
/// labels.
fn samples(host: &Host, name: &str) -> Vec<(String, u64)> {
    let text = fs::read_to_string(host.path("run/ibacm-urdma.prom")).unwrap_or_default();
    parse(&text)
        .unwrap_or_default()
        .iter()
        .filter(|f| f.name == name)
        .flat_map(|f| &f.samples)
        .map(|s| {
            let labels: Vec<String> = s.labels.iter().map(|(_, v)| v.clone()).collect();
            (labels.join(","), s.value as u64)
        })
        .collect()
}

/// Datagrams the provider of `host` says it sent.
fn sent(host: &Host) -> u64 {
    samples(host, "urdma_datagrams_sent_total")
        .iter()
        .map(|(_, v)| v)
        .sum()
}

/// Datagrams the kernel of `host`'s namespace dropped for a full socket
/// receive buffer, IPv4 and IPv6.
fn rcvbuf_errors(host: &Host) -> u64 {
    let (_, text) = host.exec(&["cat", "/proc/net/snmp", "/proc/net/snmp6"]);
    let udp: Vec<&str> = text.lines().filter(|l| l.starts_with("Udp:")).collect();
    let v4_errors = match udp[..] {
        [names, values, ..] => names
            .split_whitespace()
            .position(|n| n == "RcvbufErrors")
            .and_then(|i| values.split_whitespace().nth(i))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        _ => 0,
    };
    let v6_errors: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Udp6RcvbufErrors"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    v4_errors + v6_errors
}

/// Metric `name` summed over the fleet, per label set, where not 0.
fn fleet_totals(fleet: &[Host], name: &str) -> String {
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    for (k, v) in fleet.iter().flat_map(|h| samples(h, name)) {
        *sum.entry(k).or_default() += v;
    }
    let parts: Vec<String> = sum
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    parts.join(", ")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let hosts: usize = args
        .iter()
        .position(|a| a == "--hosts")
        .and_then(|i| args.get(i + 1))
        .map_or(64, |v| v.parse().expect("--hosts N"));
    // Each daemon asks for this many others (the next ones, in a ring):
    // all of them by default.
    let peers: usize = args
        .iter()
        .position(|a| a == "--peers")
        .and_then(|i| args.get(i + 1))
        .map_or(hosts - 1, |v| v.parse().expect("--peers K"))
        .min(hosts - 1);
    // Each daemon's namespace holds the neighbours it asks and those that
    // ask it, per address family; the kernel's table holds them all.
    let per_host = (2 * peers).min(hosts - 1) as u64 + 1;
    let _limits = NeighbourLimits::at_least(hosts as u64 * per_host);
    let net = Net::new();
    let started = Instant::now();
    // Each daemon, and when it was up (for the simulation to replay).
    let (fleet, up_at): (Vec<Host>, Vec<u64>) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..hosts)
            .map(|n| {
                let net = &net;
                s.spawn(move || {
                    let host = Host::start_on(net, "eth0", config(n));
                    (host, started.elapsed().as_millis() as u64)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("start"))
            .unzip()
    });
    let up = started.elapsed();
    let rss_kb: u64 = fleet.iter().map(|h| h.daemon_rss_kb()).sum();
    // A job starts on daemons that run: the last one's announcement heard,
    // the others' answering ones too (at most a second apart, in 200 ms),
    // and settled; then every name is asked of its host alone
    // (docs/protocol.md, Name hints).
    let settle = ibacm_urdma::discovery::HINT_SETTLE + Duration::from_millis(1_500);
    eprintln!(
        "daemons up in {:.1} s; lookups start {:.1} s later",
        up.as_secs_f64(),
        settle.as_secs_f64()
    );
    std::thread::sleep(settle);

    // Every host asks for every other: names first, then addresses, each
    // checked against the GID the other's device has.
    let resolving = Instant::now();
    let mut wrong = 0;
    let mut failed = 0;
    let mut by_status: BTreeMap<String, u64> = BTreeMap::new();
    let mut broken = Vec::new();
    let mut took: Vec<(&str, Vec<u64>)> = Vec::new();
    for (flag, name) in [("n", true), ("i", false)] {
        let results: Vec<Round> = std::thread::scope(|s| {
            let handles: Vec<_> = fleet
                .iter()
                .enumerate()
                .map(|(n, host)| {
                    s.spawn(move || {
                        let others: Vec<usize> = (1..=peers).map(|k| (n + k) % hosts).collect();
                        let dests: Vec<String> = others
                            .iter()
                            .map(|&d| if name { format!("host{d}") } else { ip4(d) })
                            .collect();
                        let file = host.path(&format!("dests-{flag}"));
                        fs::write(&file, dests.join("\n") + "\n").expect("dest file");
                        let count = others.len().to_string();
                        // Names need the source named too (the daemon
                        // routes addresses itself).
                        let source = format!("host{n}");
                        let mut load_args = vec!["-f", flag, "--dest-file"];
                        load_args.push(file.to_str().unwrap());
                        load_args.extend(["-c", "1", "-n", &count, "--timeout", "10"]);
                        load_args.push("--verbose");
                        if name {
                            load_args.extend(["-s", source.as_str()]);
                        }
                        let (code, out) = host.load(&load_args, Duration::from_secs(600));
                        let Some(summary) = try_load_summary(&out) else {
                            let tail: Vec<&str> = out.lines().rev().take(3).collect();
                            return Round {
                                failed: others.len() as u64,
                                broken: Some(format!(
                                    "host{n} (-f {flag}): urdma-load exited {code} without a \
                                     summary; its {} lookups counted as failed; last lines: {:?}",
                                    others.len(),
                                    tail
                                )),
                                ..Round::default()
                            };
                        };
                        let num =
                            |k: &str| summary.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
                        let ok: u64 = num("ok");
                        // Each reply's dgid against the destination's GID.
                        let mut bad = 0;
                        for (dest, dgids) in verbose_dgids(&out) {
                            let Some(d) = dests.iter().position(|x| *x == dest) else {
                                continue;
                            };
                            let want = eui64_gid(mac(others[d])).to_string();
                            bad += dgids.iter().filter(|g| *g != "-" && **g != want).count() as u64;
                        }
                        let statuses = summary
                            .keys()
                            .filter(|k| k.starts_with("status_"))
                            .map(|k| (k.clone(), num(k)))
                            .collect();
                        Round {
                            failed: others.len() as u64 - ok,
                            wrong: bad,
                            by_status: statuses,
                            broken: None,
                            us: verbose_us(&out),
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("load"))
                .collect()
        });
        let mut us: Vec<u64> = results.iter().flat_map(|r| r.us.iter().copied()).collect();
        us.sort_unstable();
        took.push((if name { "by name" } else { "by address" }, us));
        for r in results {
            failed += r.failed;
            wrong += r.wrong;
            for (k, v) in r.by_status {
                *by_status.entry(k).or_default() += v;
            }
            broken.extend(r.broken);
        }
    }
    let resolved_in = resolving.elapsed();
    // Until the last of the three announcements is out and counted (the
    // metrics files are rewritten every second).
    std::thread::sleep(Duration::from_millis(3500));
    let sent: Vec<u64> = fleet.iter().map(sent).collect();
    let per_host = sent.iter().sum::<u64>() as f64 / hosts as f64;
    // What the daemons did, before the simulation (a minute at 256 hosts)
    // runs: an interrupted run still leaves the measurement.
    println!(
        "measured: {} of {} right ({failed} failed, {wrong} wrong) in {:.1} s; {per_host:.1} \
         datagrams per daemon; daemons up in {:.1} s, {} MiB\n",
        2 * (hosts * peers) as u64 - failed - wrong,
        2 * hosts * peers,
        resolved_in.as_secs_f64(),
        up.as_secs_f64(),
        rss_kb / 1024
    );
    let restart: usize = args
        .iter()
        .position(|a| a == "--restart")
        .and_then(|i| args.get(i + 1))
        .map_or(0, |v| v.parse().expect("--restart R"))
        .min(hosts - 1);
    if restart > 0 {
        storm(&fleet, restart);
    }
    let simulated = Instant::now();
    let names_at = (up + settle).as_millis() as u64;
    let predicted = urdma_dst::scenario::fleet_timed(&up_at, peers, names_at, 1);
    eprintln!("simulation: {:.0} s", simulated.elapsed().as_secs_f64());

    let pairs = hosts * peers;
    println!("## {hosts} daemons on one bridge, each asking for {peers} others\n");
    println!("| | real daemons | simulation |");
    println!("|---|---:|---:|");
    println!(
        "| daemons started (all at once) | {:.1} s | - |",
        up.as_secs_f64()
    );
    println!(
        "| lookups by name and address ({pairs} each), all daemons at once | {:.1} s | - |",
        resolved_in.as_secs_f64()
    );
    println!(
        "| answered with the right GID | {} of {} ({} failed, {} wrong) | {} of {} |",
        2 * pairs as u64 - failed - wrong,
        2 * pairs,
        failed,
        wrong,
        predicted.resolved,
        predicted.asked
    );
    println!(
        "| datagrams sent per daemon | {per_host:.1} (min {}, max {}) | {:.1} |",
        sent.iter().min().unwrap_or(&0),
        sent.iter().max().unwrap_or(&0),
        predicted.sent_per_host
    );
    for (how, us) in &took {
        println!(
            "| one lookup {how}: p50 / p99 / slowest | {:.3} / {:.3} / {:.3} s | - |",
            quantile(us, 0.5),
            quantile(us, 0.99),
            quantile(us, 1.0)
        );
    }
    println!("| daemons' RSS, all together | {} MiB | - |", rss_kb / 1024);
    for (what, metric) in [
        ("sent", "urdma_datagrams_sent_total"),
        ("dropped", "urdma_datagrams_dropped_total"),
    ] {
        println!(
            "\ndatagrams {what}, all daemons: {}",
            fleet_totals(&fleet, metric)
        );
    }
    let full: u64 = fleet.iter().map(rcvbuf_errors).sum();
    println!("\ndatagrams the kernel dropped for a full receive buffer, all daemons: {full}");
    let statuses: Vec<String> = by_status
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{} {v}", status_name(k)))
        .collect();
    if !statuses.is_empty() {
        println!("\nfailures by status: {}", statuses.join(", "));
    }
    for b in &broken {
        println!("\n{b}");
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

/// How long a survivor may take to follow a host that came back with a new
/// GID: "within a second or so" (docs/protocol.md), with room for the
/// load of all the others asking at once.
const FOLLOW_BOUND: Duration = Duration::from_secs(3);

/// The first `restart` daemons restart at once with new GIDs; every other
/// daemon asks for them by address, over and over, until all its answers
/// name the new GIDs. Prints how long the survivors took.
fn storm(fleet: &[Host], restart: usize) {
    let hosts = fleet.len();
    let gone: Vec<usize> = (0..restart).collect();
    let dests: Vec<String> = gone.iter().map(|&d| ip4(d)).collect();
    let new_gids: Vec<String> = gone
        .iter()
        .map(|&d| eui64_gid(mac_of(d, 1)).to_string())
        .collect();
    let epoch_ms = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    };
    // Every survivor asks for the restarted ones in a steady trickle, on
    // four connections one every 160 ms each (every one of them about every
    // 1.3 s; a connection waiting for a lookup holds up a quarter of them),
    // from before the restart until well after, and notes when each answer
    // came: one load generator each, so that starting processes does not
    // count. (A connection per restarted daemon, 7,168 at 256 daemons, was
    // more than the machine could start; one request every 40 ms each,
    // 22,400 a second from 224 survivors, left the restarted daemons' own
    // replies seconds late on two cores.)
    let follow: Vec<Option<Duration>> = std::thread::scope(|s| {
        let asking: Vec<_> = fleet[restart..]
            .iter()
            .map(|host| {
                let dests = &dests;
                s.spawn(move || {
                    let file = host.path("dests-restarted");
                    fs::write(&file, dests.join("\n") + "\n").expect("dest file");
                    let args = [
                        "-f",
                        "i",
                        "--dest-file",
                        file.to_str().unwrap(),
                        "-c",
                        "4",
                        "--duration",
                        "25",
                        "--interval-ms",
                        "160",
                        "--timeout",
                        "10",
                        "--verbose",
                    ];
                    host.load(&args, Duration::from_secs(120)).1
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(2));
        // When each restarted daemon was back (they come back over
        // seconds: a restart waits for the old daemon to die).
        let back_ms: Vec<u64> = std::thread::scope(|r| {
            let restarting: Vec<_> = gone
                .iter()
                .map(|&d| {
                    let host = &fleet[d];
                    r.spawn(move || {
                        host.restart(&config_of(d, 1));
                        epoch_ms()
                    })
                })
                .collect();
            restarting
                .into_iter()
                .map(|h| h.join().expect("restart"))
                .collect()
        });
        asking
            .into_iter()
            .map(|h| {
                let out = h.join().expect("survivor");
                followed_after(&verbose_timeline(&out), &dests, &new_gids, &back_ms)
            })
            .collect()
    });
    let mut took: Vec<u64> = follow
        .iter()
        .flatten()
        .map(|d| d.as_micros() as u64)
        .collect();
    took.sort_unstable();
    println!(
        "## restart storm: {restart} daemons back at once with new GIDs, {} survivors asking\n",
        hosts - restart
    );
    println!("| | |\n|---|---:|");
    println!(
        "| survivors whose answers all name the new GIDs | {} of {} |",
        took.len(),
        hosts - restart
    );
    if !took.is_empty() {
        for (what, q) in [("p50", 0.5), ("p99", 0.99), ("last", 1.0)] {
            println!("| followed, {what} | {:.2} s |", quantile(&took, q));
        }
    }
    println!(
        "| within the bound ({:.0} s) | {} |\n",
        FOLLOW_BOUND.as_secs_f64(),
        took.len() == hosts - restart
            && took
                .last()
                .is_none_or(|us| *us <= FOLLOW_BOUND.as_micros() as u64)
    );
}

/// How long after each of `dests` was back (`back_ms`) a survivor's
/// answers (`timeline`) named its new GID for good: the first answer after
/// the last one that did not (an old GID or a failure); the longest of
/// those. `None` if some destination never had its new GID in the end.
fn followed_after(
    timeline: &[(String, String, u64)],
    dests: &[String],
    new: &[String],
    back_ms: &[u64],
) -> Option<Duration> {
    let mut longest = Duration::ZERO;
    for ((d, g), back) in dests.iter().zip(new).zip(back_ms) {
        let answers: Vec<&(String, String, u64)> =
            timeline.iter().filter(|(dest, _, _)| dest == d).collect();
        let last_other = answers.iter().rposition(|(_, gid, _)| gid != g);
        let first_new = match last_other {
            Some(i) => answers.get(i + 1)?,
            None => answers.first()?,
        };
        longest = longest.max(Duration::from_millis(first_new.2.saturating_sub(*back)));
    }
    Some(longest)
}
