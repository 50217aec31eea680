//! What every measurement starts from: the daemons' configuration (the
//! harness starts them), the files they are asked about, and the helpers
//! around a running daemon.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use urdma_harness::{Artifacts, Host, HostConfig};

use super::{SELF_IP, SIM_CONFIG};

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Provider {
    Urdma,
    Null,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Provider::Urdma => "urdma",
            Provider::Null => "null",
        }
    }
}

/// A host with `SELF_IP` on a local link and one sim device, its daemon
/// logging errors only (the core would log every request at level 2)
/// with `provider` as its default.
pub fn config(provider: Provider) -> HostConfig {
    let cfg = HostConfig::default()
        .ip_addrs(&[&format!("{SELF_IP}/24")])
        .addr_lines(&[&format!("{SELF_IP} urdma0 1 default")])
        .sim_config(SIM_CONFIG)
        .log_level(0)
        // Nothing is injected: no FIFO reader in the measured daemon.
        .sim_control(false)
        // Files far larger than a test's (1M hosts, 11,000 names): more
        // than the harness's usual wait.
        .start_timeout(Duration::from_secs(30));
    match provider {
        Provider::Urdma => cfg,
        Provider::Null => cfg.provider("null", &Artifacts::profile_dir().join("libibacm_null.so")),
    }
}

/// `cfg` with its daemon under callgrind, writing `out` (and `out.N` for
/// each dump). Uncompressed names, so that `provider_self` can read them.
pub fn under_callgrind(cfg: HostConfig, out: &Path) -> HostConfig {
    cfg.wrapper(&[
        "valgrind",
        "--tool=callgrind",
        "-q",
        "--compress-strings=no",
        "--compress-pos=no",
        &format!("--callgrind-out-file={}", out.display()),
    ])
    // Some fifty times slower than without.
    .start_timeout(Duration::from_secs(600))
}

/// `urdma-load ARGS` against `host`'s daemon: the summary as a map.
pub fn load(host: &Host, args: &[&str], timeout: Duration) -> BTreeMap<String, String> {
    let (_, out) = host.load(args, timeout);
    summary(&out).unwrap_or_else(|| {
        panic!(
            "urdma-load {args:?}: no summary\n{out}\n{}",
            host.diagnostics()
        )
    })
}

/// One request straight at the socket (no namespace set-up, so polling
/// is cheap): true when it was answered with a path.
pub fn answers(host: &Host, dest: &str) -> bool {
    let out = Command::new(&host.artifacts.load)
        .args(["-S", host.socket().to_str().unwrap()])
        .args(["-s", SELF_IP, "-f", "i", "-d", dest, "--timeout", "5"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .expect("run urdma-load");
    summary(&String::from_utf8_lossy(&out.stdout))
        .is_some_and(|s| s.get("ok").map(String::as_str) == Some("1"))
}

pub fn pid(host: &Host) -> u32 {
    host.daemon_pid().expect("the daemon is running")
}

/// `callgrind_control ARG PID` (e.g. `-d`: dump and zero the counters).
pub fn callgrind_control(host: &Host, arg: &str) {
    let out = Command::new("callgrind_control")
        .args([arg, &pid(host).to_string()])
        .output()
        .expect("callgrind_control");
    assert!(
        out.status.success(),
        "callgrind_control {arg}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// SIGTERM, then waits: callgrind writes its last part at exit.
pub fn stop(host: &Host) {
    let _ = host.terminate_daemon(Duration::from_secs(60));
}

/// The `key=value` line `urdma-load` ends with.
pub use urdma_harness::load::try_load_summary as summary;

pub fn num(s: &BTreeMap<String, String>, key: &str) -> f64 {
    s.get(key).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// Hosts-file destination `i`: an IPv4 address in 10/8.
pub fn dest_ip(i: u32) -> String {
    let [a, b, c, d] = (0x0a00_0000 | i).to_be_bytes();
    format!("{a}.{b}.{c}.{d}")
}

/// `n` distinct `ADDRESS GID` lines.
pub fn write_hosts(path: &Path, n: u32) {
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
pub fn write_dests(path: &Path, n: u32, k: u32) {
    let k = k.min(n);
    let step = n / k;
    let lines: Vec<String> = (0..k).map(|j| dest_ip(j * step)).collect();
    fs::write(path, lines.join("\n") + "\n").expect("write destinations");
}

/// A scratch directory for files shared by several hosts; removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new() -> Scratch {
        let p = std::env::temp_dir().join(format!("urdma-bench-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    pub fn path(&self, rel: &str) -> PathBuf {
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
pub fn pin_cores(daemons: &[u32]) -> bool {
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
pub fn unpin() {
    let cpus = format!(
        "0-{}",
        std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
    );
    let _ = Command::new("taskset")
        .args(["-a", "-p", "-c", &cpus, &std::process::id().to_string()])
        .stdout(Stdio::null())
        .status();
}

pub fn load_args<'a>(dests: &'a str, c: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
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

/// The 1M-entry hosts file and 2,000 destinations spread over it, made once.
pub fn files_1m(sc: &Scratch) -> (PathBuf, PathBuf) {
    let (hosts, dests) = (sc.path("hosts-1m.data"), sc.path("dests-1m.txt"));
    if !hosts.exists() {
        write_hosts(&hosts, 1_000_000);
        write_dests(&dests, 1_000_000, 2_000);
    }
    (hosts, dests)
}
