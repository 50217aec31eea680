//! The job: every daemon asks `urdma-load` for each of its peers' names,
//! then their addresses, one lookup at a time, and every answer's DGID is
//! checked against the GID of the destination's device.

use crate::fleet_config::{ip4, mac_of, names};
use ibacm_urdma::discovery::eui64_gid;
use std::collections::BTreeMap;
use std::fs;
use std::time::{Duration, Instant};
use urdma_harness::load::{try_load_summary, verbose_dgids, verbose_failures, verbose_us};
use urdma_harness::Host;

/// How one daemon's round of lookups went.
#[derive(Default)]
struct Round {
    /// Lookups asked.
    asked: u64,
    failed: u64,
    wrong: u64,
    /// Failures by the status the client got (`status_N` of urdma-load).
    by_status: BTreeMap<String, u64>,
    /// Why the round has no result, if it has none.
    broken: Option<String>,
    /// How long each lookup took, in microseconds.
    us: Vec<u64>,
    /// Each lookup that failed: who asked, for what, how, and when.
    failures: Vec<String>,
}

/// How the whole job went.
#[derive(Default)]
pub struct Pairs {
    pub asked: u64,
    pub failed: u64,
    pub wrong: u64,
    pub by_status: BTreeMap<String, u64>,
    pub broken: Vec<String>,
    /// Each failed lookup, one line each (`host{n} -f F DEST: status S
    /// after T ms, at MS since the epoch`), for the daemons' logs.
    pub failures: Vec<String>,
    /// Per kind of lookup, how long each took, in µs, sorted.
    pub took: Vec<(&'static str, Vec<u64>)>,
    pub time: Duration,
}

/// Every daemon asks for `peers` others (the next ones, in a ring), each
/// holding `per_host` names: all the names, then every address. Host
/// `n`'s hardware is `generation[n]` (1: it restarted on new hardware).
pub fn all_pairs(fleet: &[Host], peers: usize, per_host: usize, generation: &[u8]) -> Pairs {
    let hosts = fleet.len();
    let started = Instant::now();
    let mut p = Pairs::default();
    for (flag, name) in [("n", true), ("i", false)] {
        let results: Vec<Round> = std::thread::scope(|s| {
            let handles: Vec<_> = fleet
                .iter()
                .enumerate()
                .map(|(n, host)| {
                    s.spawn(move || {
                        let others: Vec<usize> = (1..=peers).map(|k| (n + k) % hosts).collect();
                        let dests: Vec<(usize, String)> = match name {
                            true => others
                                .iter()
                                .flat_map(|&d| names(d, per_host).into_iter().map(move |h| (d, h)))
                                .collect(),
                            false => others.iter().map(|&d| (d, ip4(d))).collect(),
                        };
                        one_round(host, n, flag, &dests, generation)
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
        p.took
            .push((if name { "by name" } else { "by address" }, us));
        for r in results {
            p.asked += r.asked;
            p.failed += r.failed;
            p.wrong += r.wrong;
            for (k, v) in r.by_status {
                *p.by_status.entry(k).or_default() += v;
            }
            p.broken.extend(r.broken);
            p.failures.extend(r.failures);
        }
    }
    p.time = started.elapsed();
    p
}

/// Daemon `n` asks for each of `dests` (the destination host, what it is
/// asked by) with `-f flag`, one at a time; each answer must name the GID
/// of the destination's current hardware.
fn one_round(
    host: &Host,
    n: usize,
    flag: &str,
    dests: &[(usize, String)],
    generation: &[u8],
) -> Round {
    let file = host.path(&format!("dests-{flag}"));
    let list: Vec<&str> = dests.iter().map(|(_, d)| d.as_str()).collect();
    fs::write(&file, list.join("\n") + "\n").expect("dest file");
    let count = dests.len().to_string();
    // Names need the source named too (the daemon routes addresses
    // itself).
    let source = format!("host{n}");
    let mut args = vec!["-f", flag, "--dest-file", file.to_str().unwrap()];
    args.extend(["-c", "1", "-n", &count, "--timeout", "10", "--verbose"]);
    if flag == "n" {
        args.extend(["-s", source.as_str()]);
    }
    let (code, out) = host.load(&args, Duration::from_secs(600));
    if let Some(dir) = std::env::var_os("FLEET_LOOKUPS_DIR") {
        let kept = std::path::Path::new(&dir).join(format!("host{n}-{flag}"));
        if let Err(e) = fs::write(&kept, &out) {
            eprintln!("{}: {e}", kept.display());
        }
    }
    let Some(summary) = try_load_summary(&out) else {
        let tail: Vec<&str> = out.lines().rev().take(3).collect();
        return Round {
            asked: dests.len() as u64,
            failed: dests.len() as u64,
            broken: Some(format!(
                "host{n} (-f {flag}): urdma-load exited {code} without a summary; its {} \
                 lookups counted as failed; last lines: {tail:?}",
                dests.len()
            )),
            ..Round::default()
        };
    };
    let num = |k: &str| summary.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
    let ok: u64 = num("ok");
    // Each reply's dgid against the destination's GID.
    let mut wrong = 0;
    for (dest, dgids) in verbose_dgids(&out) {
        let Some(&(d, _)) = dests.iter().find(|(_, x)| *x == dest) else {
            continue;
        };
        let want = eui64_gid(mac_of(d, generation[d])).to_string();
        wrong += dgids.iter().filter(|g| *g != "-" && **g != want).count() as u64;
    }
    let failures = verbose_failures(&out)
        .into_iter()
        .map(|f| format!("host{n} -f {flag} {f}"))
        .collect();
    let by_status = summary
        .keys()
        .filter(|k| k.starts_with("status_"))
        .map(|k| (k.clone(), num(k)))
        .collect();
    Round {
        asked: dests.len() as u64,
        failed: dests.len() as u64 - ok,
        wrong,
        by_status,
        broken: None,
        us: verbose_us(&out),
        failures,
    }
}
