//! In-process cost of the provider's request path, without the daemon:
//! a cache-hit `resolve` (request parse, lookup, path build, reply) at 1k,
//! 100k and 1M cached destinations, and the cost of handing a miss to the
//! worker thread (queueing the lookup and its datagram).
//!
//! Prints nanoseconds per request, and, when valgrind is installed,
//! instructions per request: callgrind runs this program twice with
//! different request counts and the difference is divided, so start-up and
//! set-up cancel out. Numbers are printed, never asserted.
//!
//! `cargo bench --bench engine [-- --quick]`

use ibacm_urdma::addr::Address;
use ibacm_urdma::config::hosts::Hosts;
use ibacm_urdma::config::Config;
use ibacm_urdma::daemon::NullDaemon;
use ibacm_urdma::discovery::Families;
use ibacm_urdma::engine::{Engine, Input};
use ibacm_urdma::handle::AddressId;
use ibacm_urdma::local::PortInfo;
use ibacm_urdma::request::msg::{addr_entry, request};
use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

/// Destination `i` of the benchmark: an IPv4 address.
fn ip(i: u32) -> [u8; 4] {
    (0x0a00_0000 | i).to_be_bytes()
}

fn hosts_text(n: u32) -> String {
    let mut s = String::with_capacity(n as usize * 40);
    for i in 0..n {
        let [a, b, c, d] = ip(i);
        s.push_str(&format!(
            "{a}.{b}.{c}.{d} fe80::1:{:x}:{:x}\n",
            i >> 16,
            i & 0xffff
        ));
    }
    s
}

/// An engine with one port and endpoint, `n` hosts-file entries, all of
/// them already resolved once (so cached: the cache holds them all), its
/// timers run as the worker runs them.
fn engine(n: u32, discovery: bool) -> (Engine<NullDaemon>, AddressId) {
    let (hosts, diags) = Hosts::parse(hosts_text(n), "bench");
    assert!(diags.is_empty());
    let cfg = Config {
        max_cached: Config::default().max_cached.max(n as usize),
        ..Config::default()
    };
    let mut e = Engine::new(NullDaemon, cfg, hosts);
    e.input(Input::TimersRun, Instant::now());
    let dev = e.open_device(1);
    let info = PortInfo {
        active_mtu: 5,
        active_width: 2,
        active_speed: 32,
        ..PortInfo::infiniband(1, "fe80::a".parse().unwrap())
    };
    let port = e.open_port(dev, info).unwrap();
    let ep = e.open_endpoint(port, 0xffff).unwrap();
    let addr = e
        .add_address(ep, Address::Ip4([192, 168, 0, 1].into()))
        .unwrap();
    let families = if discovery {
        Families::V4
    } else {
        Families::NONE
    };
    e.input(Input::DiscoveryUp(families), Instant::now());
    let mut req = request(&[addr_entry(2, 2, &ip(0))], false, 1);
    for i in 0..n {
        req.0[24..28].copy_from_slice(&ip(i));
        assert_eq!(
            e.resolve_at(addr, &req, 1, Instant::now())
                .unwrap()
                .status(),
            0
        );
    }
    e.poll();
    (e, addr)
}

/// `iters` cache hits over `n` destinations, in a scattered order, answered
/// in the request's own buffer as the daemon's callback does.
fn hits(e: &mut Engine<NullDaemon>, addr: AddressId, n: u32, iters: u64) {
    let template = request(&[addr_entry(2, 2, &ip(0))], false, 1);
    let mut msg = template.clone();
    let mut i: u32 = 0;
    for tid in 0..iters {
        // What the daemon's recv() writes: the header and one entry.
        msg.0[..88].copy_from_slice(&template.0[..88]);
        // A full-period step through 0..n visits every entry, not in order.
        i = (i + 40_503) % n;
        msg.0[24..28].copy_from_slice(&ip(i));
        msg.0[8..16].copy_from_slice(&tid.to_ne_bytes());
        let answered = e.resolve_in_place(addr, black_box(&mut msg), tid, Instant::now);
        black_box(answered);
    }
}

/// `iters` misses handed to the worker: distinct unknown destinations.
fn misses(e: &mut Engine<NullDaemon>, addr: AddressId, iters: u64) {
    let mut req = request(&[addr_entry(2, 2, &ip(0))], false, 1);
    for k in 0..iters {
        req.0[24..28].copy_from_slice(&(0x0b00_0000u32 + k as u32).to_be_bytes());
        let reply = e.resolve_at(addr, black_box(&req), k, Instant::now());
        black_box(reply);
        black_box(e.poll());
    }
}

const SIZES: [u32; 3] = [1_000, 100_000, 1_000_000];

/// Runs one measurement in this process (the child of a callgrind run).
fn child(args: &[String]) {
    let kind = args[0].as_str();
    let n: u32 = args[1].parse().unwrap();
    let iters: u64 = args[2].parse().unwrap();
    match kind {
        "hit" => {
            let (mut e, addr) = engine(n, false);
            hits(&mut e, addr, n, iters);
        }
        "parse" => {
            let text = hosts_text(n);
            for _ in 0..iters {
                let t = Instant::now();
                black_box(Hosts::parse(&text, "bench"));
                eprintln!("parse {n}: {:?}", t.elapsed());
            }
        }
        _ => {
            let (mut e, addr) = engine(n, true);
            misses(&mut e, addr, iters);
        }
    }
}

/// Instructions per request, or None without valgrind.
fn instructions(kind: &str, n: u32, iters: u64) -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let run = |k: u64| -> Option<u64> {
        let out = Command::new("valgrind")
            .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
            .arg(&exe)
            .args(["--child", kind, &n.to_string(), &k.to_string()])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stderr);
        let line = text.lines().find(|l| l.contains("Collected :"))?;
        line.rsplit(':').next()?.trim().parse().ok()
    };
    let (a, b) = (run(iters)?, run(3 * iters)?);
    Some((b.saturating_sub(a)) as f64 / (2 * iters) as f64)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(pos) = args.iter().position(|a| a == "--child") {
        return child(&args[pos + 1..]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    println!("## In-process request cost (release build)\n");
    println!("| case | cached destinations | ns/request | instructions/request |");
    println!("|---|---|---|---|");
    for n in SIZES {
        let (mut e, addr) = engine(n, false);
        let iters = if quick { 200_000 } else { 2_000_000 };
        hits(&mut e, addr, n, iters / 10);
        let t = Instant::now();
        hits(&mut e, addr, n, iters);
        let ns = t.elapsed().as_nanos() as f64 / iters as f64;
        let ins = instructions("hit", n, 20_000).map_or("-".into(), |i| format!("{i:.0}"));
        println!("| cache hit | {n} | {ns:.0} | {ins} |");
    }
    let (mut e, addr) = engine(1_000, true);
    let iters = if quick { 20_000 } else { 200_000 };
    let t = Instant::now();
    misses(&mut e, addr, iters);
    let ns = t.elapsed().as_nanos() as f64 / iters as f64;
    let ins = instructions("miss", 1_000, 5_000).map_or("-".into(), |i| format!("{i:.0}"));
    println!("| miss handed to the worker | 1000 | {ns:.0} | {ins} |");

    // The static hosts file at scale: parse time and memory per entry.
    let rss = || -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    println!("\n| hosts file | entries | parse ms | RSS bytes/entry |\n|---|---|---|---|");
    for n in [100_000u32, 1_000_000] {
        let text = hosts_text(n);
        let before = rss();
        let t = Instant::now();
        let (hosts, _) = Hosts::parse(&text, "bench");
        let ms = t.elapsed().as_secs_f64() * 1e3;
        drop(text);
        let per = (rss().saturating_sub(before)) as f64 / f64::from(n);
        println!("| IPv4 address, distinct GIDs | {n} | {ms:.0} | {per:.0} |");
        black_box(&hosts);
        drop(hosts);
    }

    // A message the daemon's log_level filters out: its cost is one level
    // check. Compared with the same loop and logging off entirely.
    let n = 1_000;
    let iters = if quick { 200_000 } else { 2_000_000 };
    let mut best = [f64::MAX; 2];
    for round in 0..6 {
        let level = round % 2;
        ibacm_urdma::log::install(|| Box::new(|_, _| {}), 0);
        if level == 1 {
            log::set_max_level(log::LevelFilter::Off);
        }
        let (mut e, addr) = engine(n, false);
        let t = Instant::now();
        hits(&mut e, addr, n, iters);
        best[level] = best[level].min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    println!("\n| logging | ns/cache hit (best of 3) |\n|---|---|");
    println!(
        "| bridge installed, daemon log_level 0 (operation messages filtered) | {:.1} |",
        best[0]
    );
    println!("| no logging at all | {:.1} |", best[1]);
}
