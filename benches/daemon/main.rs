//! Through the real daemon: `/usr/sbin/ibacm` on a simulated urdma device,
//! each daemon in network and mount namespaces of its own (the e2e harness,
//! `urdma_harness`), driven by `urdma-load` over its client socket.
//!
//! 1. Cache hits: resolves/s and p50/p99 latency at 1, 4, 16 and 64
//!    concurrent clients, for the urdma provider (destinations from a
//!    hosts file, warmed once) and the `null` provider (answers at once with
//!    a constant path: the daemon's own limit), and their ratio.
//! 2. The daemon's instructions per cache-hit request under callgrind, for
//!    both providers, urdma at 1k and 1M hosts-file entries.
//! 3. Misses between two hosts on a bridge, with discovery and no hosts
//!    files: cold-resolve latency (each request a name never asked before)
//!    and a burst of distinct misses.
//! 4. Scale: time from daemon start until a 1M-entry hosts file answers,
//!    and the daemon's RSS per hosts-file entry.
//!
//! Numbers are printed as markdown tables, never asserted. Needs root and
//! `cargo build --workspace --release` first (the harness runs the built
//! provider, simulator and load generator next to this binary).
//!
//! `cargo bench --bench daemon [-- --quick]`

mod callgrind;
mod setup;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::{Host, Net};

use callgrind::callgrind;
use setup::*;

/// This host's own address and name (on the sim's urdma0 port 1).
const SELF_IP: &str = "192.168.0.1";
const CONCURRENCY: [usize; 4] = [1, 4, 16, 64];
/// A sim with one device, so every daemon has exactly one endpoint.
const SIM_CONFIG: &str = "device urdma0\n  mac 52:54:00:12:34:56\n  port 1\n";

// 1 -------------------------------------------------------------------------

struct Point {
    rate: f64,
    p50: f64,
    p99: f64,
}

/// Resolves/s and latency at each concurrency; rounds alternate between
/// the daemons so that drift on a noisy machine hits them alike. The
/// absolute columns keep each daemon's best round (by rate); the ratio is
/// the median over rounds of urdma's rate over null's in the same round,
/// which cancels what drifts between rounds.
fn throughput(sc: &Scratch, quick: bool) {
    let (hosts_1m, dests_1m) = files_1m(sc);
    let dests_1k = sc.path("dests-1k.txt");
    let mut daemons: Vec<(&str, Host, &Path)> = Vec::new();
    daemons.push(("null", Host::start(config(Provider::Null)), &dests_1k));
    let urdma = |hosts: &Path| Host::start(config(Provider::Urdma).hosts_file_at(hosts));
    daemons.push(("urdma 1k", urdma(&sc.path("hosts-1k.data")), &dests_1k));
    if !quick {
        daemons.push(("urdma 1M", urdma(&hosts_1m), &dests_1m));
    }
    warm(&daemons);

    // The daemon's event thread is what is being measured: give it a core
    // of its own and the load generator (this process's children inherit
    // its affinity) the other, so the two do not take turns on the same
    // cores and the ratio reflects the daemon's cost.
    let pinned = pin_cores(&daemons.iter().map(|(_, d, _)| pid(d)).collect::<Vec<_>>());
    let (secs, rounds) = if quick { ("1", 1) } else { ("2", 5) };
    println!("## Cache hits through the daemon (urdma-load --poll, --window 1)\n");
    if pinned {
        println!("Daemons pinned to CPU 1 (all threads), the load generator to CPU 0.\n");
    }
    println!(
        "Rates and latencies: best of {rounds} alternating round(s) of {secs} s per cell; ratio: \
         median of the {rounds} same-round ratios (min\u{2013}max). One load-generator thread \
         multiplexes all C connections. urdma 1k: 1,000 hosts-file \
         entries, all 1,000 asked in turn; urdma 1M: 1,000,000 entries, 2,000 of them (spread \
         over the file) asked in turn; every destination warmed once before timing.\n"
    );
    let mut head = "| clients |".to_string();
    let mut rule = "|---|".to_string();
    for (label, _, _) in &daemons {
        head += &format!(" {label} resolves/s | {label} p50 / p99 µs |");
        rule += "---|---|";
        if *label != "null" {
            head += &format!(" {label} / null, median (min\u{2013}max) |");
            rule += "---|";
        }
    }
    println!("{head}\n{rule}");
    for c in CONCURRENCY {
        println!("{}", row_at(&daemons, c, rounds, secs));
    }
    println!();
    if pinned {
        unpin();
    }
}

/// Every destination resolved (and cached) once, before timing.
fn warm(daemons: &[(&str, Host, &Path)]) {
    for (label, d, dests) in daemons {
        let s = load(
            d,
            &load_args(dests.to_str().unwrap(), "1", &[]),
            Duration::from_secs(60),
        );
        assert!(
            num(&s, "ok") == num(&s, "requests"),
            "{label} warm-up: {s:?}\n{}",
            d.diagnostics()
        );
    }
}

/// One row of the cache-hit table: `c` clients, `rounds` alternating
/// rounds of `secs` seconds against each daemon.
fn row_at(daemons: &[(&str, Host, &Path)], c: usize, rounds: usize, secs: &str) -> String {
    let cs = c.to_string();
    let mut best: Vec<Option<Point>> = daemons.iter().map(|_| None).collect();
    let mut rates: Vec<Vec<f64>> = daemons.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (i, (label, d, dests)) in daemons.iter().enumerate() {
            let args = load_args(
                dests.to_str().unwrap(),
                &cs,
                &["--duration", secs, "--poll"],
            );
            let s = load(d, &args, Duration::from_secs(60));
            if num(&s, "missing") != 0.0 || num(&s, "ok") != num(&s, "requests") {
                eprintln!("warning: {label} at c={c}: {s:?}");
            }
            let p = Point {
                rate: num(&s, "rate_per_s"),
                p50: num(&s, "p50_us"),
                p99: num(&s, "p99_us"),
            };
            rates[i].push(p.rate);
            if best[i].as_ref().is_none_or(|b| p.rate > b.rate) {
                best[i] = Some(p);
            }
        }
    }
    let mut row = format!("| {c} |");
    for (i, p) in best.iter().enumerate() {
        let p = p.as_ref().expect("measured");
        row += &format!(" {:.0} | {:.0} / {:.0} |", p.rate, p.p50, p.p99);
        if i > 0 {
            let mut ratios: Vec<f64> = rates[i]
                .iter()
                .zip(&rates[0])
                .map(|(u, n)| 100.0 * u / n)
                .collect();
            ratios.sort_by(f64::total_cmp);
            row += &format!(
                " {:.1}% ({:.1}\u{2013}{:.1}) |",
                ratios[ratios.len() / 2],
                ratios[0],
                ratios[ratios.len() - 1]
            );
        }
    }
    row
}

// 3 -------------------------------------------------------------------------

/// Waits (a minute at most) until `host`, asked from its address `src`,
/// answers for `name`.
fn answers_within(host: &Host, src: &str, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out) = host.load(
            &["-s", src, "-f", "n", "-d", name, "--timeout", "2"],
            Duration::from_secs(10),
        );
        if summary(&out).is_some_and(|s| num(&s, "ok") == 1.0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never answered {name}\n{}",
            host.diagnostics()
        );
        sleep(Duration::from_millis(100));
    }
}

/// Host A (`node-a`) and host B, which holds `node-b-warm` and
/// `node-b-1` to `node-b-{names}`, on one bridge, ready: B answers its
/// last name, its start-up announcements are over, and one exchange
/// between the two is behind them.
fn two_hosts(net: &Net, names: u32) -> (Host, Host) {
    let node = |n: u8, lines: Vec<String>| -> Host {
        let mut cfg = config(Provider::Urdma)
            .ip_addrs(&[&format!("10.0.0.{n}/24")])
            .sim_config(&format!(
                "device urdma0\n  mac 52:54:00:00:00:{n:02x}\n  port 1\n"
            ));
        cfg.addr_lines = lines;
        Host::start_on(net, "eth0", cfg)
    };
    let a = node(
        1,
        vec![
            "10.0.0.1 urdma0 1 default".into(),
            "node-a urdma0 1 default".into(),
        ],
    );
    let mut b_lines = vec![
        "10.0.0.2 urdma0 1 default".to_string(),
        "node-b-warm urdma0 1 default".to_string(),
    ];
    b_lines.extend((1..=names).map(|i| format!("node-b-{i} urdma0 1 default")));
    let b = node(2, b_lines);
    // B is ready once it answers its own last name.
    answers_within(&b, "node-b-1", &format!("node-b-{names}"));
    // B announces its 11,000 names 50 ms, 1 s and 3 s after its port came
    // up (688 datagrams each time, paced): measured here is the lookup, not
    // A and B digesting that start-up burst at the same time.
    sleep(Duration::from_secs(4));
    // One exchange first, so A's first measured request does not also pay
    // for anything once-only (the neighbour entry, the multicast route).
    let warm = load(
        &a,
        &[
            "-s",
            "node-a",
            "-f",
            "n",
            "-d",
            "node-b-warm",
            "--timeout",
            "5",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(num(&warm, "ok"), 1.0, "{warm:?}\n{}", a.diagnostics());
    (a, b)
}

fn misses(quick: bool) {
    let (cold, burst) = if quick {
        (200u32, 2_000u32)
    } else {
        (1_000, 10_000)
    };
    let net = Net::new();
    // Names: node-b-1 .. node-b-BURST for the burst, then COLD more.
    let (a, b) = two_hosts(&net, burst + cold);

    let cold_file = a.path("cold.txt");
    let names: Vec<String> = (burst + 1..=burst + cold)
        .map(|i| format!("node-b-{i}"))
        .collect();
    fs::write(&cold_file, names.join("\n") + "\n").unwrap();
    let s = load(
        &a,
        &[
            "-s",
            "node-a",
            "-f",
            "n",
            "--dest-file",
            cold_file.to_str().unwrap(),
            "-c",
            "1",
            "--window",
            "1",
        ],
        Duration::from_secs(60),
    );
    println!("## Misses between two hosts (discovery by multicast name query, bridge between namespaces)\n");
    println!("| case | requests | replies | ok | missing | total ms | resolves/s | p50 µs | p99 µs | max µs |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let row = |label: &str, s: &BTreeMap<String, String>| {
        println!(
            "| {label} | {} | {} | {} | {} | {:.0} | {:.0} | {} | {} | {} |",
            s["requests"],
            s["replies"],
            s["ok"],
            s["missing"],
            num(s, "elapsed_s") * 1e3,
            num(s, "rate_per_s"),
            s["p50_us"],
            s["p99_us"],
            s["max_us"]
        );
    };
    row("cold resolves, one client, each a name never asked", &s);
    let n = burst.to_string();
    let burst_args = [
        "-s", "node-a", "-f", "n", "--range", "node-b-", &n, "-c", "64", "-n", &n, "--window", "1",
    ];
    let s = load(&a, &burst_args, Duration::from_secs(300));
    row(&format!("burst of {burst} distinct misses, 64 clients"), &s);
    let s = load(&a, &burst_args, Duration::from_secs(300));
    row(&format!("the same {burst} again (now cache hits)"), &s);
    println!();
    drop(a);
    drop(b);
}

// 4 -------------------------------------------------------------------------

fn scale(sc: &Scratch) {
    let (hosts_1m, _) = files_1m(sc);
    let empty = sc.path("hosts-0.data");
    fs::write(&empty, "").unwrap();
    println!("## Scale: a 1,000,000-entry hosts file\n");
    println!("| hosts file | socket after ms | first answer after ms | daemon VmRSS MiB |");
    println!("|---|---|---|---|");
    let mut rss = Vec::new();
    for (label, file, dest) in [
        ("0 entries", &empty, SELF_IP.to_string()),
        ("1,000,000 entries", &hosts_1m, dest_ip(999_999)),
    ] {
        let d = Host::start(config(Provider::Urdma).hosts_file_at(file));
        let started = d.daemon_spawned().expect("spawned");
        let socket_ms = started.elapsed().as_secs_f64() * 1e3;
        while !answers(&d, &dest) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{}",
                d.diagnostics()
            );
            sleep(Duration::from_millis(1));
        }
        let answer_ms = started.elapsed().as_secs_f64() * 1e3;
        // Settle: anything the provider does after its first answer.
        sleep(Duration::from_millis(300));
        let r = d.daemon_rss_kb() * 1024;
        rss.push(r);
        println!(
            "| {label} | {socket_ms:.0} | {answer_ms:.0} | {:.1} |",
            r as f64 / 1048576.0
        );
    }
    println!(
        "\nRSS per hosts-file entry: ({} − {}) B / 1,000,000 = **{:.0} B**\n",
        rss[1],
        rss[0],
        (rss[1] as f64 - rss[0] as f64) / 1e6
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = |what: &str| {
        !args.iter().any(|a| a.starts_with("--only="))
            || args.iter().any(|a| a == &format!("--only={what}"))
    };
    urdma_harness::require_root();
    let sc = Scratch::new();
    write_hosts(&sc.path("hosts-1k.data"), 1_000);
    write_dests(&sc.path("dests-1k.txt"), 1_000, 1_000);
    let t = Instant::now();
    if only("throughput") {
        throughput(&sc, quick);
    }
    if only("callgrind") {
        callgrind(&sc, quick);
    }
    if only("misses") {
        misses(quick);
    }
    if only("scale") {
        scale(&sc);
    }
    eprintln!("daemon bench: {:.0} s", t.elapsed().as_secs_f64());
}
