//! Section 2: the daemon's instructions per cache-hit request under
//! callgrind.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use urdma_harness::{Host, HostConfig};

use super::setup::*;

/// `totals:` (or `summary:`) of a callgrind output file.
pub fn callgrind_total(path: &Path) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    let line = text
        .lines()
        .find(|l| l.starts_with("totals:"))
        .or_else(|| text.lines().find(|l| l.starts_with("summary:")))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Instructions executed in the provider's own object (its functions and
/// what was inlined into them; not the libc calls it makes), per function,
/// from a callgrind file written with `--compress-strings=no`: the
/// self-cost lines of functions whose object is a provider library,
/// skipping the inclusive cost line that follows each `calls=`.
pub fn provider_self(path: &Path) -> Option<BTreeMap<String, u64>> {
    let text = fs::read_to_string(path).ok()?;
    let (mut in_provider, mut after_call) = (false, false);
    let mut func = String::new();
    let mut costs: BTreeMap<String, u64> = BTreeMap::new();
    for l in text.lines() {
        if let Some(ob) = l.strip_prefix("ob=") {
            in_provider = ob.contains("/prov/libibacm_");
        } else if let Some(f) = l.strip_prefix("fn=") {
            func = f.to_string();
        } else if l.starts_with("calls=") {
            after_call = true;
        } else if l.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-') {
            if !after_call && in_provider {
                let n: u64 = l.split_whitespace().nth(1)?.parse().ok()?;
                *costs.entry(func.clone()).or_default() += n;
            }
            after_call = false;
        }
    }
    Some(costs)
}

/// The daemon's instructions per cache-hit request: one daemon under
/// callgrind, warmed, then two measured batches of N1 and N2 requests, each
/// ended by a dump (which also zeroes the counters); start-up, warm-up,
/// connection set-up and idle wake-ups cancel in the difference.
pub fn instructions(
    sc: &Scratch,
    label: &str,
    cfg: HostConfig,
    out: &Path,
    dests: &Path,
    warm: u32,
) -> Option<(f64, f64)> {
    let d = Host::start(under_callgrind(cfg, out));
    let dests = dests.to_str().unwrap();
    let batch = |n: u32| {
        let n = n.to_string();
        let s = load(
            &d,
            &load_args(dests, "1", &["-n", &n]),
            Duration::from_secs(600),
        );
        assert_eq!(num(&s, "ok").to_string(), n, "{label}: {s:?}");
    };
    batch(warm);
    callgrind_control(&d, "-d");
    let (n1, n2) = (2_000u32, 6_000u32);
    batch(n1);
    callgrind_control(&d, "-d");
    batch(n2);
    callgrind_control(&d, "-d");
    stop(&d);
    // Dumps go to OUT.1, OUT.2, ... in dump order.
    let part = |k: u32| callgrind_total(&PathBuf::from(format!("{}.{k}", out.display())));
    let (a, b) = (part(2)?, part(3)?);
    let prov = |k: u32| provider_self(&PathBuf::from(format!("{}.{k}", out.display())));
    let (p2, p3) = (prov(2)?, prov(3)?);
    let per = f64::from(n2 - n1);
    let in_provider = (p3.values().sum::<u64>() as f64 - p2.values().sum::<u64>() as f64) / per;
    // The provider's functions by their cost per request.
    let mut top: Vec<(f64, String)> = p3
        .iter()
        .map(|(f, c)| {
            (
                (*c as f64 - *p2.get(f).unwrap_or(&0) as f64) / per,
                f.clone(),
            )
        })
        .filter(|(c, _)| *c >= 1.0)
        .collect();
    top.sort_by(|a, b| b.0.total_cmp(&a.0));
    let lines: Vec<String> = top
        .iter()
        .take(15)
        .map(|(c, f)| format!("{c:>7.0}  {f}"))
        .collect();
    let _ = fs::write(sc.path(&format!("{label}.top")), lines.join("\n") + "\n");
    // Kept for callgrind_annotate: the N2 batch.
    let _ = fs::copy(
        format!("{}.3", out.display()),
        sc.path(&format!("{label}.callgrind")),
    );
    // URDMA_BENCH_KEEP=DIR keeps the profiles for callgrind_annotate.
    if let Some(keep) = std::env::var_os("URDMA_BENCH_KEEP") {
        let _ = fs::copy(
            sc.path(&format!("{label}.callgrind")),
            Path::new(&keep).join(format!("{label}.callgrind")),
        );
    }
    Some(((b as f64 - a as f64) / f64::from(n2 - n1), in_provider))
}

/// How long an idle daemon is measured.
const IDLE: Duration = Duration::from_secs(20);

/// Instructions per second of an idle daemon, whole process: warmed with
/// a few requests (the provider starts its threads lazily) and left to
/// settle, then a dump that zeroes the counters, `IDLE` of nothing, and a
/// dump. Wall-clock seconds, since idle threads wake on real timers.
fn idle_rate(cfg: HostConfig, out: &Path, dests: &Path) -> Option<f64> {
    let d = Host::start(under_callgrind(cfg, out));
    let s = load(
        &d,
        &load_args(dests.to_str().unwrap(), "1", &["-n", "100"]),
        Duration::from_secs(600),
    );
    assert_eq!(num(&s, "ok"), 100.0, "{s:?}");
    std::thread::sleep(Duration::from_secs(3));
    callgrind_control(&d, "-d");
    let t = Instant::now();
    std::thread::sleep(IDLE);
    callgrind_control(&d, "-d");
    let secs = t.elapsed().as_secs_f64();
    stop(&d);
    let part = PathBuf::from(format!("{}.2", out.display()));
    if let Some(keep) = std::env::var_os("URDMA_BENCH_KEEP") {
        let _ = fs::copy(&part, Path::new(&keep).join(out.file_name()?));
    }
    Some(callgrind_total(&part)? as f64 / secs)
}

/// What an idle daemon spends, with either provider: the difference is
/// what the provider's threads (discovery, metrics writer, hosts-file
/// watcher) cost while nothing is asked.
fn idle(sc: &Scratch) {
    println!(
        "## An idle daemon's instructions per second (callgrind, whole process)
"
    );
    println!(
        "Warmed with 100 requests, then {} s with nothing asked.
",
        IDLE.as_secs()
    );
    println!(
        "| provider | daemon instructions/s, idle | vs null |
|---|---|---|"
    );
    let mut null = None;
    for prov in [Provider::Null, Provider::Urdma] {
        let cfg = config(prov).hosts_file_at(&sc.path("hosts-1k.data"));
        let out = sc.path(&format!("idle-{}.out", prov.name()));
        match idle_rate(cfg, &out, &sc.path("dests-1k.txt")) {
            Some(rate) => {
                let vs = null.map_or("—".to_string(), |n: f64| format!("{:+.0}", rate - n));
                println!("| {} | {rate:.0} | {vs} |", prov.name());
                null = null.or(Some(rate));
            }
            None => println!("| {} | (no callgrind output) | |", prov.name()),
        }
    }
    println!();
}

pub fn callgrind(sc: &Scratch, quick: bool) -> BTreeMap<String, f64> {
    let mut results = BTreeMap::new();
    if Command::new("callgrind_control")
        .arg("-h")
        .output()
        .is_err()
    {
        println!("(valgrind not installed: no instruction counts)\n");
        return results;
    }
    let dests_1k = sc.path("dests-1k.txt");
    // 1M entries: 2,000 destinations spread over the whole table.
    let (hosts_1m, dests_1m) = files_1m(sc);

    let mut cases: Vec<(&str, Provider, Option<PathBuf>, &Path, u32)> = vec![
        ("null", Provider::Null, None, &dests_1k, 1_000),
        (
            "urdma, 1k hosts",
            Provider::Urdma,
            Some(sc.path("hosts-1k.data")),
            &dests_1k,
            1_000,
        ),
    ];
    // The same without the metrics file, whose writer wakes every second:
    // under callgrind the daemon is some fifty times slower, so that one
    // write a second lands on a few hundred requests instead of thousands.
    cases.push((
        "urdma, 1k hosts, no metrics file",
        Provider::Urdma,
        Some(sc.path("hosts-1k.data")),
        &dests_1k,
        1_000,
    ));
    if !quick {
        cases.push((
            "urdma, 1M hosts",
            Provider::Urdma,
            Some(hosts_1m.clone()),
            &dests_1m,
            2_000,
        ));
    }
    println!("## Daemon instructions per cache-hit request (callgrind, whole process)\n");
    println!("(N2 − N1) / 4,000 requests on one connection, the daemon warmed first.\n");
    println!("| provider | daemon instructions/request | vs null | of which in the provider's object |\n|---|---|---|---|");
    for (label, prov, hosts, dests, warm) in cases {
        let file = label.replace([',', ' '], "");
        let mut cfg = config(prov);
        if let Some(hosts) = &hosts {
            cfg = cfg.hosts_file_at(hosts);
        }
        if label.ends_with("no metrics file") {
            cfg = cfg.opt("urdma_metrics_file none");
        }
        let out = sc.path(&format!("cg-{file}.out"));
        let t = Instant::now();
        match instructions(sc, &file, cfg, &out, dests, warm) {
            Some((i, own)) => {
                let base = results.get("null").copied();
                let vs = base.map_or("—".to_string(), |b| {
                    format!("{:+.0} ({:+.1}%)", i - b, 100.0 * (i - b) / b)
                });
                println!("| {label} | {i:.0} | {vs} | {own:.0} |");
                results.insert(label.to_string(), i);
            }
            None => println!("| {label} | (no callgrind output) | | |"),
        }
        eprintln!("callgrind {label}: {:.0} s", t.elapsed().as_secs_f64());
    }
    println!();
    // Where the urdma provider's instructions go, per function.
    if let Ok(top) = fs::read_to_string(sc.path("urdma1khosts.top")) {
        println!("The urdma provider's own functions (self cost in its object, per request, urdma 1k):\n");
        println!("```\n{}```\n", top);
    }
    idle(sc);
    results
}
