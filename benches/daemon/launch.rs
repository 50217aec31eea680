//! Starting a daemon for a measurement: a host of the harness with its
//! files, optionally under callgrind, and the helpers around it.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::{sigterm, Host, IBACM};

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

/// How to start one daemon.
pub struct Spec {
    pub provider: Provider,
    /// `urdma_hosts_file` (absolute path outside the namespaces).
    pub hosts_file: Option<PathBuf>,
    pub addr_lines: Vec<String>,
    pub extra_opts: Vec<String>,
    /// Run it under callgrind, writing this file.
    pub callgrind_out: Option<PathBuf>,
    /// The simulator's devices: hosts that talk to each other need GIDs
    /// of their own (a host ignores queries that carry one of its GIDs).
    pub sim_config: String,
}

impl Spec {
    pub fn new(provider: Provider) -> Spec {
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
pub struct Daemon {
    pub child: Option<Child>,
    pub pid: u32,
    pub started: Instant,
    // Dropped after `child` is stopped (see Drop): removes netns and files.
    pub host: Host,
}

impl Daemon {
    /// A host with a local link carrying `SELF_IP`, and its daemon.
    pub fn start(spec: &Spec) -> Daemon {
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
    pub fn launch(host: Host, spec: &Spec) -> Daemon {
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

    pub fn alive(&self) -> bool {
        // A zombie still has /proc/PID; its State line says so.
        fs::read_to_string(format!("/proc/{}/status", self.pid))
            .map(|s| !s.contains("State:\tZ"))
            .unwrap_or(false)
    }

    pub fn diagnostics(&self) -> String {
        format!(
            "--- log ---\n{}\n--- output ---\n{}",
            fs::read_to_string(self.host.path("ibacm.log")).unwrap_or_default(),
            fs::read_to_string(self.host.path("daemon.out")).unwrap_or_default()
        )
    }

    /// `urdma-load ARGS` against this daemon: the summary as a map.
    pub fn load(&self, args: &[&str], timeout: Duration) -> BTreeMap<String, String> {
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
    pub fn answers(&self, dest: &str) -> bool {
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

    pub fn rss_bytes(&self) -> u64 {
        fs::read_to_string(format!("/proc/{}/status", self.pid))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    }

    /// `callgrind_control ARG PID` (e.g. `-d`: dump and zero the counters).
    pub fn callgrind_control(&self, arg: &str) {
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
    pub fn stop(&mut self) {
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

pub fn ip(netns: &str, args: &[&str]) {
    let st = Command::new("ip")
        .args(["-n", netns])
        .args(args)
        .status()
        .expect("ip");
    assert!(st.success(), "ip -n {netns} {args:?} failed");
}

/// The `key=value` line `urdma-load` ends with.
pub fn summary(out: &str) -> Option<BTreeMap<String, String>> {
    let line = out.lines().rev().find(|l| l.starts_with("requests="))?;
    Some(
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

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
