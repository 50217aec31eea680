//! Mixed load for a set time through A's daemon, with B answering, a
//! dead host and names nobody holds, and A's port going down and up,
//! while A's RSS is sampled. The other tests each prove one fault once;
//! this one proves that all of them together, repeated for as long as it
//! runs, leave every request answered once and memory flat. Discovery is
//! authenticated, and neither host may count a single datagram of this
//! normal operation as replayed.
//! `scripts/soak.sh` runs it for ten minutes. Needs root and
//! `cargo build --workspace`.

use ibacm_urdma::metrics::parse;
use std::collections::BTreeMap;
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::load::load_summary;
use urdma_harness::nodes::{add_silent_neighbour, b_with_addresses, Node};
use urdma_harness::{Host, KeyFile, Net};

/// Mixed load through one daemon for `SOAK_SECONDS` (default 20): see
/// `run`. `scripts/soak.sh` runs it for ten minutes.
#[test]
fn soak_mixed_load_is_all_answered_with_flat_memory() {
    let seconds = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let report = run(Duration::from_secs(seconds));
    report.print();
    report.check();
}

/// One kind of traffic: the `urdma-load` arguments of one round.
struct Kind {
    name: &'static str,
    args: Vec<String>,
}

#[derive(Default)]
struct Totals {
    requests: u64,
    replies: u64,
    ok: u64,
    missing: u64,
    duplicates: u64,
    failed: BTreeMap<String, u64>,
    rounds: u64,
}

struct Report {
    /// The daemon's own counters at the end (`ib_acme -P col`).
    counters: Vec<(String, u64)>,
    seconds: u64,
    kinds: Vec<(&'static str, Totals)>,
    port_events: u64,
    rss: Vec<(u64, u64)>,
    alive: bool,
    /// Datagrams each host refused as replayed (`None`: not readable).
    replayed: Vec<(&'static str, Result<u64, String>)>,
    diagnostics: String,
}

/// Seconds of the run after which memory must have settled.
const WARM_UP_SHARE: f64 = 0.2;
/// What RSS may grow by after the warm-up.
const RSS_BOUND_KB: u64 = 2048;
const ROUND: Duration = Duration::from_secs(5);

fn run(duration: Duration) -> Report {
    let key = KeyFile::new("soak", "1 00112233445566778899aabbccddeeff\n", 0o600);
    let key = key.opt();
    let net = Net::new();
    let a = Node::A.start(
        &net,
        &[
            &key,
            "urdma_timeout 200",
            "urdma_retries 1",
            "urdma_negative_timeout 500",
            // Learned bindings expire every minute: misses recur.
            "urdma_addr_timeout 1",
            // Level 2 logs every request: gigabytes in ten minutes.
            "log_level 0",
        ],
    );
    let (b, ips) = b_with_addresses(&net, 30, &[&key]);
    // A host that never answers.
    add_silent_neighbour(&a, "10.0.0.99");
    let dests = a.path("live.txt");
    std::fs::write(&dests, ips.join("\n")).unwrap();
    let kinds = kinds(dests.to_str().unwrap());
    let started = Instant::now();
    let mut totals: Vec<(&'static str, Totals)> =
        kinds.iter().map(|k| (k.name, Totals::default())).collect();
    let mut rss = vec![(0, a.daemon_rss_kb())];
    let mut port_events = 0;
    let mut rounds = 0u64;
    while started.elapsed() < duration && a.daemon_alive() {
        // A's port goes down and comes back (requests in flight get
        // ENOTCONN, its caches are flushed), or B's does (it withdraws
        // its addresses, so A's next requests for them miss again).
        let bounced = match rounds % 4 {
            0 => Some(&a),
            2 => Some(&b),
            _ => None,
        };
        port_events += round(&a, &kinds, bounced, &mut totals);
        rounds += 1;
        rss.push((started.elapsed().as_secs(), a.daemon_rss_kb()));
    }
    let alive = a.daemon_alive() && b.daemon_alive();
    let counters = if alive {
        daemon_counters(&a)
    } else {
        Vec::new()
    };
    Report {
        counters,
        seconds: started.elapsed().as_secs(),
        kinds: totals,
        port_events,
        rss,
        alive,
        replayed: vec![("a", replayed(&a)), ("b", replayed(&b))],
        diagnostics: a.diagnostics(),
    }
}

/// The kinds of traffic through A: hits, misses (B's addresses listed in
/// `dests`, which expire), NODELAY requests, and names nobody holds at a
/// host that never answers.
fn kinds(dests: &str) -> [Kind; 4] {
    let d = dests;
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    [
        Kind {
            name: "hit",
            args: v(&[
                "-s", "10.0.0.1", "-d", "10.0.0.2", "-d", "10.0.0.1", "-c", "2",
            ]),
        },
        Kind {
            name: "miss",
            args: v(&["-s", "10.0.0.1", "-f", "i", "--dest-file", d, "-c", "2"]),
        },
        Kind {
            name: "nodelay",
            args: v(&["-s", "10.0.0.1", "-f", "i", "--dest-file", d, "--nodelay"]),
        },
        Kind {
            name: "dead",
            args: v(&[
                "-s",
                "node-a",
                "-f",
                "n",
                "--range",
                "ghost-",
                "50",
                "-d",
                "10.0.0.99",
                "-c",
                "4",
            ]),
        },
    ]
}

/// One `ROUND` of every kind of traffic through `a` at once, added to
/// `totals`, while the port of `bounced` (if any) goes down and comes
/// back. Returns the port events injected.
fn round(
    a: &Host,
    kinds: &[Kind],
    bounced: Option<&Host>,
    totals: &mut [(&'static str, Totals)],
) -> u64 {
    let round = ROUND.as_secs_f64().to_string();
    std::thread::scope(|s| {
        let loads: Vec<_> = kinds
            .iter()
            .map(|k| {
                let round = &round;
                s.spawn(move || {
                    let mut args: Vec<&str> = k.args.iter().map(String::as_str).collect();
                    args.extend(["--duration", round, "--timeout", "10"]);
                    a.load(&args, Duration::from_secs(60))
                })
            })
            .collect();
        let mut port_events = 0;
        if let Some(host) = bounced {
            sleep(Duration::from_secs(2));
            host.inject("event urdma0 1 port_err");
            sleep(Duration::from_millis(500));
            host.inject("event urdma0 1 port_active");
            port_events += 2;
        }
        for (load, (_, t)) in loads.into_iter().zip(totals.iter_mut()) {
            let (_, out) = load.join().unwrap();
            t.add(&load_summary(&out));
        }
        port_events
    })
}

/// What `host`'s provider refused as old (replayed, stale or unchecked for
/// replay), from its metrics file as an operator reads it, or why that
/// could not be read.
fn replayed(host: &Host) -> Result<u64, String> {
    let samples: Vec<_> = parse(&host.metrics_file())?
        .into_iter()
        .filter(|f| f.name == "urdma_datagrams_dropped_total")
        .flat_map(|f| f.samples)
        .filter(|s| {
            s.labels.iter().any(|(k, v)| {
                k == "reason"
                    && ["replayed", "stale_timestamp", "replay_memory_full"].contains(&v.as_str())
            })
        })
        .collect();
    match samples.len() {
        3 => Ok(samples.iter().map(|s| s.value as u64).sum()),
        n => Err(format!("{n} of the 3 replay counts in the metrics file")),
    }
}

/// `ib_acme -P col`: `Name : value` lines.
fn daemon_counters(host: &Host) -> Vec<(String, u64)> {
    let (code, out) = host.acme(&["-P", "col"]);
    assert_eq!(code, 0, "{out}");
    out.lines()
        .filter_map(|l| l.split_once(" : "))
        .filter_map(|(k, v)| Some((k.trim().to_string(), v.trim().parse().ok()?)))
        .collect()
}

impl Totals {
    fn add(&mut self, sum: &BTreeMap<String, String>) {
        let get = |k: &str| sum.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        self.requests += get("requests");
        self.replies += get("replies");
        self.ok += get("ok");
        self.missing += get("missing");
        self.duplicates += get("duplicates") + get("unknown_tid") + get("bad_replies");
        for (k, _) in sum.iter().filter(|(k, _)| k.starts_with("status_")) {
            *self.failed.entry(k.clone()).or_default() += get(k);
        }
        self.rounds += 1;
    }
}

impl Report {
    /// RSS at the end of the warm-up and at the end.
    fn rss_warm_and_end(&self) -> (u64, u64) {
        let warm_at = (self.seconds as f64 * WARM_UP_SHARE) as u64;
        let warm = self
            .rss
            .iter()
            .find(|(t, _)| *t >= warm_at)
            .map_or(0, |(_, r)| *r);
        (warm, self.rss.last().map_or(0, |(_, r)| *r))
    }

    fn print(&self) {
        println!(
            "soak: {} s of mixed load, {} port events",
            self.seconds, self.port_events
        );
        println!(
            "{:<8} {:>9} {:>9} {:>9} {:>8} {:>6}  failures by status",
            "kind", "requests", "replies", "ok", "missing", "dupes"
        );
        for (name, t) in &self.kinds {
            let failed: Vec<String> = t
                .failed
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{}={n}", k.trim_start_matches("status_")))
                .collect();
            println!(
                "{name:<8} {:>9} {:>9} {:>9} {:>8} {:>6}  {}",
                t.requests,
                t.replies,
                t.ok,
                t.missing,
                t.duplicates,
                failed.join(" ")
            );
        }
        let counters: Vec<String> = self
            .counters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!("daemon counters: {}", counters.join(", "));
        let replayed: Vec<String> = self
            .replayed
            .iter()
            .map(|(h, n)| match n {
                Ok(n) => format!("{h} {n}"),
                Err(e) => format!("{h} unreadable ({e})"),
            })
            .collect();
        println!("replayed: {}", replayed.join(", "));
        println!(
            "rss (s: kB): {}",
            self.rss
                .iter()
                .map(|(t, r)| format!("{t}:{r}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let (warm, end) = self.rss_warm_and_end();
        let max = self.rss.iter().map(|(_, r)| *r).max().unwrap_or(0);
        println!(
            "rss after warm-up {warm} kB, at the end {end} kB, peak {max} kB (bound +{RSS_BOUND_KB} kB)"
        );
        println!(
            "verdict: {}",
            if self.problems().is_empty() {
                "all answered, RSS flat".to_string()
            } else {
                self.problems().join("; ")
            }
        );
    }

    fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if !self.alive {
            p.push("a daemon died".into());
        }
        for (name, t) in &self.kinds {
            if t.requests == 0 || t.replies != t.requests || t.missing > 0 || t.duplicates > 0 {
                p.push(format!(
                    "{name}: {} requests, {} replies, {} missing, {} duplicates",
                    t.requests, t.replies, t.missing, t.duplicates
                ));
            }
        }
        let ok = |n: &str| {
            self.kinds
                .iter()
                .find(|(k, _)| *k == n)
                .map_or(0, |(_, t)| t.ok)
        };
        if ok("hit") == 0 || ok("miss") == 0 || ok("nodelay") == 0 {
            p.push("hits, misses or NODELAY requests never succeeded".into());
        }
        for (h, n) in &self.replayed {
            if *n != Ok(0) {
                p.push(format!("host {h} counted {n:?} datagrams as replayed"));
            }
        }
        let (warm, end) = self.rss_warm_and_end();
        let max_after_warm = self
            .rss
            .iter()
            .filter(|(t, _)| *t as f64 >= self.seconds as f64 * WARM_UP_SHARE)
            .map(|(_, r)| *r)
            .max()
            .unwrap_or(end);
        if max_after_warm > warm + RSS_BOUND_KB {
            p.push(format!("RSS grew from {warm} kB to {max_after_warm} kB"));
        }
        p
    }

    fn check(&self) {
        let p = self.problems();
        assert!(p.is_empty(), "{}\n{}", p.join("\n"), self.diagnostics);
    }
}
