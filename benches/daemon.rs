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

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::{sigterm, Host, Net, IBACM};

/// This host's own address and name (on the sim's urdma0 port 1).
const SELF_IP: &str = "192.168.0.1";
const CONCURRENCY: [usize; 4] = [1, 4, 16, 64];
/// A sim with one device, so every daemon has exactly one endpoint.
const SIM_CONFIG: &str = "device urdma0\n  mac 52:54:00:12:34:56\n  port 1\n";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Provider {
    Urdma,
    Null,
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            Provider::Urdma => "urdma",
            Provider::Null => "null",
        }
    }
}

/// How to start one daemon.
struct Spec {
    provider: Provider,
    /// `urdma_hosts_file` (absolute path outside the namespaces).
    hosts_file: Option<PathBuf>,
    addr_lines: Vec<String>,
    extra_opts: Vec<String>,
    /// Run it under callgrind, writing this file.
    callgrind_out: Option<PathBuf>,
    /// The simulator's devices: hosts that talk to each other need GIDs
    /// of their own (a host ignores queries that carry one of its GIDs).
    sim_config: String,
}

impl Spec {
    fn new(provider: Provider) -> Spec {
        Spec {
            provider,
            hosts_file: None,
            addr_lines: vec![format!("{SELF_IP} urdma0 1 default")],
            extra_opts: Vec::new(),
            callgrind_out: None,
            sim_config: SIM_CONFIG.to_string(),
        }
    }
}

/// A daemon in a host of the harness. The harness's own `Host::start`
/// cannot put valgrind in front of the daemon, so the launch is reproduced
/// here: the same files, the same `Host::in_namespaces` command.
struct Daemon {
    child: Option<Child>,
    pid: u32,
    started: Instant,
    // Dropped after `child` is stopped (see Drop): removes netns and files.
    host: Host,
}

impl Daemon {
    /// A host with a local link carrying `SELF_IP`, and its daemon.
    fn start(spec: &Spec) -> Daemon {
        let host = Host::bare();
        ip(
            &host.netns,
            &["link", "add", "e0", "type", "veth", "peer", "name", "e0p"],
        );
        ip(
            &host.netns,
            &["addr", "add", &format!("{SELF_IP}/24"), "dev", "e0"],
        );
        ip(&host.netns, &["link", "set", "e0p", "up"]);
        ip(&host.netns, &["link", "set", "e0", "up"]);
        Daemon::launch(host, spec)
    }

    /// Starts the daemon of `host` (whose interfaces are already set up).
    fn launch(host: Host, spec: &Spec) -> Daemon {
        let so = match spec.provider {
            Provider::Urdma => host.artifacts.provider.clone(),
            Provider::Null => host.artifacts.provider.with_file_name("libibacm_null.so"),
        };
        // A copy, not a symlink: the daemon skips symlinks when loading.
        let file = so.file_name().unwrap().to_owned();
        fs::copy(&so, host.path("prov").join(file)).expect("copy provider");
        let mut opts = vec![
            format!("log_file {}", host.path("ibacm.log").display()),
            // Errors only: the core would log every request at level 2.
            "log_level 0".to_string(),
            format!("lock_file {}", host.path("ibacm.pid").display()),
            format!("provider_lib_path {}", host.path("prov").display()),
            "support_ips_in_addr_cfg 1".to_string(),
            format!("provider {} default", spec.provider.name()),
        ];
        if let Some(h) = &spec.hosts_file {
            opts.push(format!("urdma_hosts_file {}", h.display()));
        }
        opts.extend(spec.extra_opts.iter().cloned());
        fs::write(host.path("ibacm_opts.cfg"), opts.join("\n") + "\n").unwrap();
        fs::write(
            host.path("ibacm_addr.cfg"),
            spec.addr_lines.join("\n") + "\n",
        )
        .unwrap();
        fs::write(host.path("sim.cfg"), &spec.sim_config).unwrap();

        let opts_path = host.path("ibacm_opts.cfg");
        let addr_path = host.path("ibacm_addr.cfg");
        let daemon_argv = [
            IBACM,
            "-P",
            "-O",
            opts_path.to_str().unwrap(),
            "-A",
            addr_path.to_str().unwrap(),
        ];
        let cg_arg;
        let mut argv: Vec<&str> = Vec::new();
        if let Some(out) = &spec.callgrind_out {
            cg_arg = format!("--callgrind-out-file={}", out.display());
            argv.extend([
                "valgrind",
                "--tool=callgrind",
                "-q",
                "--compress-strings=no",
                "--compress-pos=no",
                &cg_arg,
            ]);
        }
        argv.extend(daemon_argv);
        let mut cmd = host.in_namespaces(true, &argv);
        cmd.env("URDMA_SIM_CONFIG", host.path("sim.cfg"))
            .env_remove("URDMA_SIM_CONTROL");
        let out = File::create(host.path("daemon.out")).unwrap();
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        let started = Instant::now();
        let child = cmd.spawn().expect("spawn ibacm");
        // nsenter, unshare and the wrapper all exec: this is the daemon's pid
        // (valgrind's, under callgrind).
        let pid = child.id();
        let d = Daemon {
            child: Some(child),
            pid,
            started,
            host,
        };
        let limit = if spec.callgrind_out.is_some() {
            Duration::from_secs(600)
        } else {
            Duration::from_secs(30)
        };
        while !d.host.socket().exists() {
            if !d.alive() {
                panic!("ibacm exited during start-up\n{}", d.diagnostics());
            }
            assert!(
                d.started.elapsed() < limit,
                "ibacm did not start\n{}",
                d.diagnostics()
            );
            sleep(Duration::from_millis(1));
        }
        d
    }

    fn alive(&self) -> bool {
        // A zombie still has /proc/PID; its State line says so.
        fs::read_to_string(format!("/proc/{}/status", self.pid))
            .map(|s| !s.contains("State:\tZ"))
            .unwrap_or(false)
    }

    fn diagnostics(&self) -> String {
        format!(
            "--- log ---\n{}\n--- output ---\n{}",
            fs::read_to_string(self.host.path("ibacm.log")).unwrap_or_default(),
            fs::read_to_string(self.host.path("daemon.out")).unwrap_or_default()
        )
    }

    /// `urdma-load ARGS` against this daemon: the summary as a map.
    fn load(&self, args: &[&str], timeout: Duration) -> BTreeMap<String, String> {
        let (_, out) = self.host.load(args, timeout);
        summary(&out).unwrap_or_else(|| {
            panic!(
                "urdma-load {args:?}: no summary\n{out}\n{}",
                self.diagnostics()
            )
        })
    }

    /// One request straight at the socket (no namespace set-up, so polling
    /// is cheap): true when it was answered with a path.
    fn answers(&self, dest: &str) -> bool {
        let out = Command::new(&self.host.artifacts.load)
            .args(["-S", self.host.socket().to_str().unwrap()])
            .args(["-s", SELF_IP, "-f", "i", "-d", dest, "--timeout", "5"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .expect("run urdma-load");
        summary(&String::from_utf8_lossy(&out.stdout))
            .is_some_and(|s| s.get("ok").map(String::as_str) == Some("1"))
    }

    fn rss_bytes(&self) -> u64 {
        fs::read_to_string(format!("/proc/{}/status", self.pid))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    }

    /// `callgrind_control ARG PID` (e.g. `-d`: dump and zero the counters).
    fn callgrind_control(&self, arg: &str) {
        let out = Command::new("callgrind_control")
            .args([arg, &self.pid.to_string()])
            .output()
            .expect("callgrind_control");
        assert!(
            out.status.success(),
            "callgrind_control {arg}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// SIGTERM, then waits (callgrind writes its last part at exit).
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            sigterm(&child);
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn ip(netns: &str, args: &[&str]) {
    let st = Command::new("ip")
        .args(["-n", netns])
        .args(args)
        .status()
        .expect("ip");
    assert!(st.success(), "ip -n {netns} {args:?} failed");
}

/// The `key=value` line `urdma-load` ends with.
fn summary(out: &str) -> Option<BTreeMap<String, String>> {
    let line = out.lines().rev().find(|l| l.starts_with("requests="))?;
    Some(
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn num(s: &BTreeMap<String, String>, key: &str) -> f64 {
    s.get(key).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// Hosts-file destination `i`: an IPv4 address in 10/8.
fn dest_ip(i: u32) -> String {
    let [a, b, c, d] = (0x0a00_0000 | i).to_be_bytes();
    format!("{a}.{b}.{c}.{d}")
}

/// `n` distinct `ADDRESS GID` lines.
fn write_hosts(path: &Path, n: u32) {
    let mut s = String::with_capacity(n as usize * 40);
    for i in 0..n {
        s.push_str(&format!(
            "{} fe80::1:{:x}:{:x}\n",
            dest_ip(i),
            i >> 16,
            i & 0xffff
        ));
    }
    fs::write(path, s).expect("write hosts file");
}

/// `k` destinations spread over the first `n` hosts-file entries.
fn write_dests(path: &Path, n: u32, k: u32) {
    let k = k.min(n);
    let step = n / k;
    let lines: Vec<String> = (0..k).map(|j| dest_ip(j * step)).collect();
    fs::write(path, lines.join("\n") + "\n").expect("write destinations");
}

/// A scratch directory for files shared by several hosts; removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let p = std::env::temp_dir().join(format!("urdma-bench-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Pins `daemons` (every thread) to CPU 1 and this process, whose children
/// are the load generators, to CPU 0. False, with nothing changed, on a
/// machine with fewer than two CPUs or without `taskset`.
fn pin_cores(daemons: &[u32]) -> bool {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return false;
    }
    let pin = |cpu: &str, pid: u32| {
        Command::new("taskset")
            .args(["-a", "-p", "-c", cpu, &pid.to_string()])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    daemons.iter().all(|&pid| pin("1", pid)) && pin("0", std::process::id())
}

/// Undoes `pin_cores` for this process.
fn unpin() {
    let cpus = format!(
        "0-{}",
        std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
    );
    let _ = Command::new("taskset")
        .args(["-a", "-p", "-c", &cpus, &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status();
}

fn load_args<'a>(dests: &'a str, c: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "-s",
        SELF_IP,
        "-f",
        "i",
        "--dest-file",
        dests,
        "-c",
        c,
        "--window",
        "1",
    ];
    v.extend_from_slice(rest);
    v
}

// 1 -------------------------------------------------------------------------

struct Point {
    rate: f64,
    p50: f64,
    p99: f64,
}

/// The 1M-entry hosts file and 2,000 destinations spread over it, made once.
fn files_1m(sc: &Scratch) -> (PathBuf, PathBuf) {
    let (hosts, dests) = (sc.path("hosts-1m.data"), sc.path("dests-1m.txt"));
    if !hosts.exists() {
        write_hosts(&hosts, 1_000_000);
        write_dests(&dests, 1_000_000, 2_000);
    }
    (hosts, dests)
}

/// Resolves/s and latency at each concurrency; rounds alternate between
/// the daemons so that drift on a noisy machine hits them alike. The
/// absolute columns keep each daemon's best round (by rate); the ratio is
/// the median over rounds of urdma's rate over null's in the same round,
/// which cancels what drifts between rounds.
fn throughput(sc: &Scratch, quick: bool) {
    let (hosts_1m, dests_1m) = files_1m(sc);
    let dests_1k = sc.path("dests-1k.txt");
    let mut daemons: Vec<(&str, Daemon, &Path)> = Vec::new();
    daemons.push(("null", Daemon::start(&Spec::new(Provider::Null)), &dests_1k));
    let mut spec = Spec::new(Provider::Urdma);
    spec.hosts_file = Some(sc.path("hosts-1k.data"));
    daemons.push(("urdma 1k", Daemon::start(&spec), &dests_1k));
    if !quick {
        spec.hosts_file = Some(hosts_1m);
        daemons.push(("urdma 1M", Daemon::start(&spec), &dests_1m));
    }
    for (label, d, dests) in &daemons {
        // Warm once: every destination resolved (and cached) before timing.
        let s = d.load(
            &load_args(dests.to_str().unwrap(), "1", &[]),
            Duration::from_secs(60),
        );
        assert!(
            num(&s, "ok") == num(&s, "requests"),
            "{label} warm-up: {s:?}\n{}",
            d.diagnostics()
        );
    }

    // The daemon's event thread is what is being measured: give it a core
    // of its own and the load generator (this process's children inherit
    // its affinity) the other, so the two do not take turns on the same
    // cores and the ratio reflects the daemon's cost.
    let pinned = pin_cores(&daemons.iter().map(|(_, d, _)| d.pid).collect::<Vec<_>>());
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
        let cs = c.to_string();
        let mut best: Vec<Option<Point>> = daemons.iter().map(|_| None).collect();
        let mut rates: Vec<Vec<f64>> = daemons.iter().map(|_| Vec::new()).collect();
        for _ in 0..rounds {
            for (i, (label, d, dests)) in daemons.iter().enumerate() {
                let s = d.load(
                    &load_args(
                        dests.to_str().unwrap(),
                        &cs,
                        &["--duration", secs, "--poll"],
                    ),
                    Duration::from_secs(60),
                );
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
        println!("{row}");
    }
    println!();
    if pinned {
        unpin();
    }
}

// 2 -------------------------------------------------------------------------

/// `totals:` (or `summary:`) of a callgrind output file.
fn callgrind_total(path: &Path) -> Option<u64> {
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
fn provider_self(path: &Path) -> Option<BTreeMap<String, u64>> {
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
fn instructions(
    sc: &Scratch,
    label: &str,
    spec: Spec,
    dests: &Path,
    warm: u32,
) -> Option<(f64, f64)> {
    let out = spec.callgrind_out.clone()?;
    let d = Daemon::start(&spec);
    let dests = dests.to_str().unwrap();
    let batch = |n: u32| {
        let n = n.to_string();
        let s = d.load(
            &load_args(dests, "1", &["-n", &n]),
            Duration::from_secs(600),
        );
        assert_eq!(num(&s, "ok").to_string(), n, "{label}: {s:?}");
    };
    batch(warm);
    d.callgrind_control("-d");
    let (n1, n2) = (2_000u32, 6_000u32);
    batch(n1);
    d.callgrind_control("-d");
    batch(n2);
    d.callgrind_control("-d");
    let mut d = d;
    d.stop();
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

fn callgrind(sc: &Scratch, quick: bool) -> BTreeMap<String, f64> {
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
        let mut spec = Spec::new(prov);
        spec.hosts_file = hosts;
        if label.ends_with("no metrics file") {
            spec.extra_opts.push("urdma_metrics_file none".into());
        }
        spec.callgrind_out = Some(sc.path(&format!("cg-{file}.out")));
        let t = Instant::now();
        match instructions(sc, &file, spec, dests, warm) {
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
    results
}

// 3 -------------------------------------------------------------------------

fn misses(quick: bool) {
    let (cold, burst) = if quick {
        (200u32, 2_000u32)
    } else {
        (1_000, 10_000)
    };
    let net = Net::new();
    let node = |n: u8, lines: Vec<String>| -> Daemon {
        let host = Host::bare();
        let ip4 = format!("10.0.0.{n}/24");
        net.attach(&host, "eth0", &[&ip4]);
        let mut spec = Spec::new(Provider::Urdma);
        spec.addr_lines = lines;
        spec.sim_config = format!("device urdma0\n  mac 52:54:00:00:00:{n:02x}\n  port 1\n");
        let mut s = Daemon::launch(host, &spec);
        s.started = Instant::now();
        s
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
    // Names: node-b-1 .. node-b-BURST for the burst, then COLD more.
    b_lines.extend((1..=burst + cold).map(|i| format!("node-b-{i} urdma0 1 default")));
    let b = node(2, b_lines);
    // B is ready once it answers its own last name.
    let last = format!("node-b-{}", burst + cold);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, out) = b.host.load(
            &["-s", "node-b-1", "-f", "n", "-d", &last, "--timeout", "2"],
            Duration::from_secs(10),
        );
        if summary(&out).is_some_and(|s| num(&s, "ok") == 1.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "B never answered {last}\n{}",
            b.diagnostics()
        );
        sleep(Duration::from_millis(100));
    }
    // B announces its 11,000 names 50 ms, 1 s and 3 s after its port came
    // up (688 datagrams each time, paced): measured here is the lookup, not
    // A and B digesting that start-up burst at the same time.
    sleep(Duration::from_secs(4));
    // One exchange first, so A's first measured request does not also pay
    // for anything once-only (the neighbour entry, the multicast route).
    let warm = a.load(
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

    let cold_file = a.host.path("cold.txt");
    let names: Vec<String> = (burst + 1..=burst + cold)
        .map(|i| format!("node-b-{i}"))
        .collect();
    fs::write(&cold_file, names.join("\n") + "\n").unwrap();
    let s = a.load(
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
    let s = a.load(
        &[
            "-s", "node-a", "-f", "n", "--range", "node-b-", &n, "-c", "64", "-n", &n, "--window",
            "1",
        ],
        Duration::from_secs(300),
    );
    row(&format!("burst of {burst} distinct misses, 64 clients"), &s);
    let s = a.load(
        &[
            "-s", "node-a", "-f", "n", "--range", "node-b-", &n, "-c", "64", "-n", &n, "--window",
            "1",
        ],
        Duration::from_secs(300),
    );
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
        let mut spec = Spec::new(Provider::Urdma);
        spec.hosts_file = Some(file.clone());
        let d = Daemon::start(&spec);
        let socket_ms = d.started.elapsed().as_secs_f64() * 1e3;
        while !d.answers(&dest) {
            assert!(
                d.started.elapsed() < Duration::from_secs(60),
                "{}",
                d.diagnostics()
            );
            sleep(Duration::from_millis(1));
        }
        let answer_ms = d.started.elapsed().as_secs_f64() * 1e3;
        // Settle: anything the provider does after its first answer.
        sleep(Duration::from_millis(300));
        let r = d.rss_bytes();
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
