//! End-to-end harness: runs the real `/usr/sbin/ibacm` with the provider
//! under test, on simulated urdma devices (`liburdma_sim.so` preloaded),
//! inside a private network namespace and a private mount namespace whose
//! `/run` is a per-host temp directory. Tests talk to it with the real
//! `ib_acme` and with `urdma-rai` (real librdmacm `rdma_getaddrinfo`).
//!
//! Needs root (network namespaces, mounts) and built artifacts:
//! `cargo build --workspace` first. `URDMA_PROVIDER_SO` overrides the
//! provider library; `URDMA_E2E_KEEP=1` keeps the temp directories.
//!
//! `URDMA_TEST_VALGRIND=1` runs every daemon under valgrind memcheck (see
//! `scripts/memcheck.sh`): each daemon writes `memcheck.<pid>.xml` into
//! `URDMA_TEST_VALGRIND_DIR` (default: the system temp dir), and the
//! harness's own timeouts are multiplied by `SLOWDOWN`.
#![allow(dead_code)]
// The harness makes a few syscalls of its own (setns, kill, raw sockets);
// the rule that keeps unsafe code at the boundary is the provider's.
#![allow(unsafe_code)]

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

pub mod forger;
pub mod nodes;
pub mod routed;

pub const IBACM: &str = "/usr/sbin/ibacm";
pub const IB_ACME: &str = "/usr/bin/ib_acme";

/// How long a client command may run before it is killed: a provider that
/// never answers would otherwise hang `ib_acme`/librdmacm forever.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);
const START_TIMEOUT: Duration = Duration::from_secs(10);
const INJECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Suppressions for what memcheck reports in code that is not ours (the
/// daemon, libc), kept in the repository so a run is reproducible.
const VALGRIND_SUPPRESSIONS: &str = "scripts/memcheck.supp";

/// Whether daemons run under valgrind memcheck (`URDMA_TEST_VALGRIND=1`).
pub fn under_valgrind() -> bool {
    std::env::var_os("URDMA_TEST_VALGRIND").is_some_and(|v| v == "1")
}

/// How much slower a daemon is than normal: memcheck makes it 20-50 times
/// slower, which the harness's waits must allow for.
pub fn slowdown() -> u32 {
    if under_valgrind() {
        30
    } else {
        1
    }
}

/// `d`, stretched by `slowdown()`: for waits on the daemon, never for the
/// bounds a test asserts about the provider's timing.
pub fn scaled(d: Duration) -> Duration {
    d * slowdown()
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A name unique across the tests of this process and concurrent processes.
fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Panics with a clear message unless running as root: these tests need
/// namespaces and mounts, and CI runs them as root, so skipping quietly would
/// hide a broken CI setup.
pub fn require_root() {
    let uid = fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    assert_eq!(
        uid, 0,
        "end-to-end ibacm tests need root (network namespaces, bind mounts); run them as root"
    );
}

/// Build outputs the harness runs.
#[derive(Clone, Debug)]
pub struct Artifacts {
    pub provider: PathBuf,
    pub sim: PathBuf,
    pub rai: PathBuf,
    /// `urdma-load`, the load generator.
    pub load: PathBuf,
}

impl Artifacts {
    /// Finds them next to the running test binary (`target/<profile>/deps/`).
    pub fn locate() -> Artifacts {
        let exe = std::env::current_exe().expect("current_exe");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("test binary lives in target/<profile>/deps")
            .to_path_buf();
        let provider = std::env::var_os("URDMA_PROVIDER_SO")
            .map(PathBuf::from)
            .unwrap_or_else(|| profile_dir.join("libibacm_urdma.so"));
        let found = Artifacts {
            provider,
            sim: profile_dir.join("liburdma_sim.so"),
            rai: profile_dir.join("urdma-rai"),
            load: profile_dir.join("urdma-load"),
        };
        for p in [&found.provider, &found.sim, &found.rai, &found.load] {
            assert!(
                p.is_file(),
                "{} is missing: run `cargo build --workspace` first",
                p.display()
            );
        }
        found
    }
}

/// What one simulated host looks like. `Default` gives a host with both
/// default sim devices, 10.0.0.1/24 + fd00::1/64 on a local link, and the
/// addresses plus the name `node1` on urdma0 port 1.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Addresses (with prefix) put on the host's local link `e0`, a veth
    /// whose peer stays in the namespace: the daemon picks a source by
    /// `connect()` + `getsockname()`, which needs a route. (The kernel here
    /// has no `dummy` module, hence the veth.) Empty: no local link.
    pub ip_addrs: Vec<String>,
    /// Lines of `ibacm_addr.cfg`: `NAME DEVICE PORT PKEY`.
    pub addr_lines: Vec<String>,
    /// Contents of the simulator config; `None` = the sim's built-in default.
    pub sim_config: Option<String>,
    /// Extra `ibacm_opts.cfg` lines, e.g. `urdma_...` keys.
    pub extra_opts: Vec<String>,
    /// `provider NAME default` line; `None` leaves it out.
    pub provider_name: Option<String>,
    /// Provider library to copy in; `None` = `Artifacts::provider`.
    pub provider_so: Option<PathBuf>,
    /// Contents of a urdma hosts file: written as `hosts.data` in the
    /// host's temp dir and named by a `urdma_hosts_file` line placed before
    /// `extra_opts`. `None`: neither.
    pub hosts_file: Option<String>,
    /// Bytes appended to `ibacm_opts.cfg` as they are (any bytes, e.g.
    /// Latin-1), after every other line.
    pub raw_opts: Vec<u8>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            ip_addrs: vec!["10.0.0.1/24".into(), "fd00::1/64".into()],
            addr_lines: vec![
                "10.0.0.1 urdma0 1 default".into(),
                "fd00::1 urdma0 1 default".into(),
                "node1 urdma0 1 default".into(),
            ],
            sim_config: None,
            extra_opts: Vec::new(),
            provider_name: Some("urdma".into()),
            provider_so: None,
            hosts_file: None,
            raw_opts: Vec::new(),
        }
    }
}

impl HostConfig {
    pub fn opt(mut self, line: &str) -> Self {
        self.extra_opts.push(line.into());
        self
    }

    pub fn sim_config(mut self, text: &str) -> Self {
        self.sim_config = Some(text.into());
        self
    }

    pub fn addr_lines(mut self, lines: &[&str]) -> Self {
        self.addr_lines = lines.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn ip_addrs(mut self, addrs: &[&str]) -> Self {
        self.ip_addrs = addrs.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Appends `bytes` to the options file as they are.
    pub fn raw_opts(mut self, bytes: &[u8]) -> Self {
        self.raw_opts.extend_from_slice(bytes);
        self
    }

    /// See `HostConfig::hosts_file`; `Host::hosts_path` is where it goes.
    pub fn hosts_file(mut self, text: &str) -> Self {
        self.hosts_file = Some(text.into());
        self
    }
}

/// One running daemon in its own namespaces. Dropping it kills the daemon
/// and removes the namespace and the temp directory (also on panic).
pub struct Host {
    pub netns: String,
    pub dir: PathBuf,
    pub artifacts: Artifacts,
    daemon: Mutex<Option<Child>>,
    /// Control acknowledgements consumed so far (see `inject`).
    acks_seen: Mutex<usize>,
}

impl Host {
    pub fn start(cfg: HostConfig) -> Host {
        let host = Host::bare();
        host.setup_network(&cfg.ip_addrs);
        host.launch(&cfg);
        host
    }

    /// Like `start`, but `cfg.ip_addrs` go on an interface `ifname` joined
    /// to `net` (no local link), set up before the daemon starts, so the
    /// daemon finds it at once (multicast groups are joined at start-up).
    pub fn start_on(net: &Net, ifname: &str, cfg: HostConfig) -> Host {
        let host = Host::bare();
        let addrs: Vec<&str> = cfg.ip_addrs.iter().map(String::as_str).collect();
        net.attach(&host, ifname, &addrs);
        host.launch(&cfg);
        host
    }

    /// A host without a daemon: its own network namespace (loopback up, no
    /// other interface) and a temp directory. Give it interfaces with
    /// `Net::attach*`; `exec` and `in_netns` run things in it.
    pub fn bare() -> Host {
        require_root();
        let artifacts = Artifacts::locate();
        let netns = unique("urdma-e2e");
        let dir = std::env::temp_dir().join(&netns);
        let _ = fs::remove_dir_all(&dir);
        for sub in ["run", "prov"] {
            fs::create_dir_all(dir.join(sub)).expect("create temp dir");
        }

        // From here on a panic must still clean up: build the value early so
        // its Drop runs.
        run(&["ip", "netns", "add", &netns]);
        let host = Host {
            netns,
            dir,
            artifacts,
            daemon: Mutex::new(None),
            acks_seen: Mutex::new(0),
        };
        host.ip(&["link", "set", "lo", "up"]);
        host
    }

    /// Writes the configuration files and starts the daemon.
    /// Writes `cfg`'s files and starts the daemon on a host made with
    /// [`Host::bare`] (and given its links).
    pub fn launch(&self, cfg: &HostConfig) {
        self.write_files(cfg);
        self.spawn_daemon(cfg);
        self.wait_started();
    }

    /// Kills the daemon (SIGKILL, like a crash: no withdrawal is sent) and
    /// waits for it. Its log and output stay for `diagnostics`.
    pub fn kill_daemon(&self) {
        if let Some(child) = self.daemon.lock().unwrap().take() {
            stop(child);
        }
    }

    /// The daemon's process id. The chain nsenter → unshare → sh → (env →
    /// valgrind) → ibacm only ever execs, so it is the spawned child's.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.lock().unwrap().as_ref().map(Child::id)
    }

    /// `VmRSS` of the daemon in KiB, from `/proc/<pid>/status`.
    pub fn daemon_rss_kb(&self) -> u64 {
        let pid = self.daemon_pid().expect("the daemon is running");
        let status = fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}\n{}", self.diagnostics()));
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status:\n{status}"))
    }

    /// How many file descriptors the daemon has open: each client holds
    /// one, so a leaked client slot shows here.
    pub fn daemon_fds(&self) -> usize {
        let pid = self.daemon_pid().expect("the daemon is running");
        fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/fd: {e}"))
            .count()
    }

    /// Sends SIGTERM, as `systemctl stop` does, and waits up to `timeout`
    /// for the daemon to exit. Returns its exit status, or `None` if it
    /// was still running (it is then killed, so nothing outlives the test).
    pub fn terminate_daemon(&self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let mut guard = self.daemon.lock().unwrap();
        let mut child = guard.take()?;
        // SAFETY: plain kill(2) on the pid of a child not yet reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + scaled(timeout);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            sleep(Duration::from_millis(10));
        }
    }

    /// Restarts the daemon with a new configuration (e.g. another sim
    /// config, i.e. new device GIDs), in the same namespaces, with the same
    /// interfaces (`cfg.ip_addrs` is not applied again). The old log and
    /// output are kept as `ibacm.log.N` / `daemon.out.N`.
    pub fn restart(&self, cfg: &HostConfig) {
        self.kill_daemon();
        let n = (1..)
            .find(|n| !self.path(&format!("ibacm.log.{n}")).exists())
            .expect("a free name");
        for f in ["ibacm.log", "daemon.out"] {
            let _ = fs::rename(self.path(f), self.path(&format!("{f}.{n}")));
        }
        // A killed daemon leaves its socket behind; `wait_started` waits for
        // the new one.
        let _ = fs::remove_file(self.socket());
        let _ = fs::remove_file(self.path("sim.cfg"));
        *self.acks_seen.lock().unwrap() = 0;
        self.launch(cfg);
    }

    /// `ip link set IFNAME up|down` in the host's namespace.
    pub fn set_link(&self, ifname: &str, up: bool) {
        self.ip(&["link", "set", ifname, if up { "up" } else { "down" }]);
    }

    /// Runs `f` on a thread that has joined this host's network namespace
    /// (the mount namespace stays the test's): e.g. to send raw datagrams
    /// from the host without external tools.
    pub fn in_netns<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let ns = File::open(format!("/run/netns/{}", self.netns)).expect("open netns");
        std::thread::scope(|s| {
            s.spawn(move || {
                // setns(CLONE_NEWNET) changes only the calling thread.
                // SAFETY: a valid descriptor of a network namespace.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .expect("thread in the host's network namespace panicked")
        })
    }

    fn setup_network(&self, addrs: &[String]) {
        self.ip(&["link", "set", "lo", "up"]);
        if addrs.is_empty() {
            return;
        }
        self.ip(&["link", "add", "e0", "type", "veth", "peer", "name", "e0p"]);
        for a in addrs {
            let mut args = vec!["addr", "add", a.as_str(), "dev", "e0"];
            if a.contains(':') {
                // Without DAD the address is usable at once, not "tentative".
                args.push("nodad");
            }
            self.ip(&args);
        }
        self.ip(&["link", "set", "e0p", "up"]);
        self.ip(&["link", "set", "e0", "up"]);
    }

    fn write_files(&self, cfg: &HostConfig) {
        let provider = cfg
            .provider_so
            .clone()
            .unwrap_or_else(|| self.artifacts.provider.clone());
        // A copy, not a symlink: the daemon skips symlinks when loading.
        fs::copy(&provider, self.dir.join("prov/libibacm_urdma.so")).expect("copy provider");

        let mut opts = vec![
            format!("log_file {}", self.path("ibacm.log").display()),
            "log_level 2".to_string(),
            format!("lock_file {}", self.path("ibacm.pid").display()),
            format!("provider_lib_path {}", self.path("prov").display()),
            "support_ips_in_addr_cfg 1".to_string(),
        ];
        if let Some(name) = &cfg.provider_name {
            opts.push(format!("provider {name} default"));
        }
        if let Some(text) = &cfg.hosts_file {
            fs::write(self.hosts_path(), text).expect("write hosts.data");
            opts.push(format!("urdma_hosts_file {}", self.hosts_path().display()));
        }
        opts.extend(cfg.extra_opts.iter().cloned());
        write_lines(&self.path("ibacm_opts.cfg"), &opts);
        if !cfg.raw_opts.is_empty() {
            let mut f = OpenOptions::new()
                .append(true)
                .open(self.path("ibacm_opts.cfg"))
                .expect("open ibacm_opts.cfg");
            f.write_all(&cfg.raw_opts)
                .expect("append to ibacm_opts.cfg");
        }
        write_lines(&self.path("ibacm_addr.cfg"), &cfg.addr_lines);
        if let Some(text) = &cfg.sim_config {
            fs::write(self.path("sim.cfg"), text).expect("write sim.cfg");
        }
    }

    fn spawn_daemon(&self, cfg: &HostConfig) {
        let out = File::create(self.path("daemon.out")).expect("daemon.out");
        let opts = self.path("ibacm_opts.cfg");
        let addr = self.path("ibacm_addr.cfg");
        let daemon = [
            IBACM,
            "-P",
            "-O",
            opts.to_str().unwrap(),
            "-A",
            addr.to_str().unwrap(),
        ];
        let mut argv: Vec<String> = if under_valgrind() {
            valgrind_prefix()
        } else {
            Vec::new()
        };
        argv.extend(daemon.iter().map(|a| a.to_string()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut cmd = self.in_namespaces(true, &argv);
        cmd.env("URDMA_SIM_CONTROL", self.control_path());
        if cfg.sim_config.is_some() {
            cmd.env("URDMA_SIM_CONFIG", self.path("sim.cfg"));
        } else {
            cmd.env_remove("URDMA_SIM_CONFIG");
        }
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out);
        let child = cmd.spawn().expect("spawn ibacm");
        *self.daemon.lock().unwrap() = Some(child);
    }

    fn wait_started(&self) {
        let sock = self.socket();
        let deadline = Instant::now() + scaled(START_TIMEOUT);
        while !sock.exists() {
            if !self.daemon_alive() {
                panic!("ibacm exited during start-up\n{}", self.diagnostics());
            }
            if Instant::now() > deadline {
                panic!(
                    "ibacm did not create {}\n{}",
                    sock.display(),
                    self.diagnostics()
                );
            }
            sleep(Duration::from_millis(10));
        }
    }

    /// A command that runs `argv` in this host's network namespace and in a
    /// private mount namespace where `/run` is this host's run directory (so
    /// the fixed paths `/run/ibacm*.sock` reach this daemon). With
    /// `preload_sim`, only the final program gets `LD_PRELOAD`, not the
    /// nsenter/unshare/mount helpers.
    pub fn in_namespaces(&self, preload_sim: bool, argv: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.netns))
            .args(["--", "unshare", "-m", "--propagation", "private", "--"])
            .args(["sh", "-c", RUN_WRAPPER, "sh"])
            .args(argv)
            .env("URDMA_E2E_RUN", self.path("run"));
        if preload_sim {
            cmd.env("URDMA_E2E_PRELOAD", &self.artifacts.sim);
        } else {
            cmd.env_remove("URDMA_E2E_PRELOAD");
        }
        cmd.env_remove("LD_PRELOAD");
        cmd
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Where `HostConfig::hosts_file` is written.
    pub fn hosts_path(&self) -> PathBuf {
        self.path("hosts.data")
    }

    /// The daemon's unix socket, as seen from outside its mount namespace.
    pub fn socket(&self) -> PathBuf {
        self.path("run/ibacm-unix.sock")
    }

    pub fn control_path(&self) -> PathBuf {
        self.path("sim.ctl")
    }

    /// `ib_acme ARGS -S <socket>` (the `-S` is added unless given), run in
    /// the host's namespaces. Returns the exit code (-1 if killed or timed
    /// out) and stdout+stderr interleaved.
    pub fn acme(&self, args: &[&str]) -> (i32, String) {
        let sock = self.socket();
        let mut argv = vec![IB_ACME];
        argv.extend_from_slice(args);
        if !args.contains(&"-S") {
            argv.extend_from_slice(&["-S", sock.to_str().unwrap()]);
        }
        self.run_client(self.in_namespaces(false, &argv))
    }

    /// Runs `ib_acme ARGS`, which must succeed and print a path: the path
    /// and the whole output.
    pub fn acme_path(&self, args: &[&str]) -> (PathInfo, String) {
        let (code, out) = self.acme(args);
        assert_eq!(code, 0, "ib_acme {args:?} failed:\n{out}");
        assert!(
            out.contains("return status 0x0"),
            "ib_acme {args:?}:\n{out}"
        );
        let path = PathInfo::parse(&out);
        assert!(
            !path.0.is_empty(),
            "ib_acme {args:?} printed no path:\n{out}"
        );
        (path, out)
    }

    /// `urdma-rai ARGS` (librdmacm `rdma_getaddrinfo`) with the sim
    /// preloaded, so librdmacm sees the same devices as the daemon.
    pub fn rai(&self, args: &[&str]) -> (i32, String) {
        let rai = self.artifacts.rai.to_str().unwrap().to_string();
        let mut argv = vec![rai.as_str()];
        argv.extend_from_slice(args);
        let mut cmd = self.in_namespaces(true, &argv);
        // The sim in the client must not compete for the daemon's FIFO.
        cmd.env_remove("URDMA_SIM_CONTROL");
        if self.path("sim.cfg").exists() {
            cmd.env("URDMA_SIM_CONFIG", self.path("sim.cfg"));
        } else {
            cmd.env_remove("URDMA_SIM_CONFIG");
        }
        self.run_client(cmd)
    }

    /// `urdma-load ARGS -S <socket>` (the `-S` is added unless given) in the
    /// host's namespaces, killed after `timeout`. Returns the exit code and
    /// the output, whose last line is the `key=value` summary.
    pub fn load(&self, args: &[&str], timeout: Duration) -> (i32, String) {
        let sock = self.socket();
        let load = self.artifacts.load.to_str().unwrap().to_string();
        let mut argv = vec![load.as_str()];
        argv.extend_from_slice(args);
        if !args.contains(&"-S") {
            argv.extend_from_slice(&["-S", sock.to_str().unwrap()]);
        }
        run_with_timeout(
            self.in_namespaces(false, &argv),
            &self.path(&unique("load")),
            scaled(timeout),
        )
    }

    /// Any command inside the host's namespaces (e.g. `ip addr`).
    pub fn exec(&self, argv: &[&str]) -> (i32, String) {
        self.run_client(self.in_namespaces(false, argv))
    }

    fn run_client(&self, cmd: Command) -> (i32, String) {
        run_with_timeout(cmd, &self.path(&unique("client")), scaled(COMMAND_TIMEOUT))
    }

    /// Sends one control line to the simulator in the daemon and waits until
    /// the simulator has applied it. Panics if it was rejected.
    pub fn inject(&self, line: &str) {
        if let Err(e) = self.try_inject(line) {
            panic!("inject `{line}`: {e}\n{}", self.diagnostics());
        }
    }

    pub fn try_inject(&self, line: &str) -> Result<(), String> {
        assert!(!line.contains('\n'), "one control line at a time");
        let mut seen = self.acks_seen.lock().unwrap();
        let deadline = Instant::now() + scaled(INJECT_TIMEOUT);
        // Non-blocking open fails (ENXIO) until the simulator has opened
        // its end; retry instead of blocking forever on a dead daemon.
        let mut fifo = loop {
            match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(self.control_path())
            {
                Ok(f) => break f,
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("cannot open control FIFO: {e}"))
                }
                Err(_) => sleep(Duration::from_millis(5)),
            }
        };
        fifo.write_all(format!("{line}\n").as_bytes())
            .map_err(|e| format!("write control FIFO: {e}"))?;
        drop(fifo);
        loop {
            let acks: Vec<String> = self
                .daemon_output()
                .lines()
                .filter_map(|l| l.strip_prefix("urdma-sim: control: ").map(str::to_string))
                .collect();
            if acks.len() > *seen {
                let ack = acks[*seen].clone();
                *seen += 1;
                return match ack.strip_prefix("ok: ") {
                    Some(_) => Ok(()),
                    None => Err(ack),
                };
            }
            if Instant::now() > deadline {
                return Err("the simulator did not acknowledge the command".into());
            }
            sleep(Duration::from_millis(5));
        }
    }

    /// The daemon's log file (`log_file`).
    pub fn log(&self) -> String {
        fs::read_to_string(self.path("ibacm.log")).unwrap_or_default()
    }

    /// The daemon's stdout/stderr: simulator messages and acknowledgements.
    pub fn daemon_output(&self) -> String {
        fs::read_to_string(self.path("daemon.out")).unwrap_or_default()
    }

    pub fn log_count(&self, pattern: &str) -> usize {
        self.log().matches(pattern).count()
    }

    /// Waits until the log contains `pattern`; false on timeout.
    pub fn wait_log(&self, pattern: &str, timeout: Duration) -> bool {
        self.wait_log_count(pattern, 1, timeout)
    }

    /// Waits until `pattern` occurs at least `count` times in the log.
    pub fn wait_log_count(&self, pattern: &str, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + scaled(timeout);
        loop {
            if self.log_count(pattern) >= count {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            sleep(Duration::from_millis(10));
        }
    }

    /// Like `wait_log`, but panics with the log on timeout.
    pub fn expect_log(&self, pattern: &str, timeout: Duration) {
        if !self.wait_log(pattern, timeout) {
            panic!("log never showed `{pattern}`\n{}", self.diagnostics());
        }
    }

    pub fn daemon_alive(&self) -> bool {
        match self.daemon.lock().unwrap().as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Log and output, for panic messages.
    pub fn diagnostics(&self) -> String {
        // Whether the daemon is still there, and if not how it ended: a
        // daemon killed by a signal logs nothing about it.
        let state = match self.daemon.lock().unwrap().as_mut().map(Child::try_wait) {
            Some(Ok(None)) => "running".to_string(),
            Some(Ok(Some(status))) => format!("exited: {status}"),
            Some(Err(e)) => format!("unknown: {e}"),
            None => "stopped by the test".to_string(),
        };
        format!(
            "--- {} ---\n{}\n--- daemon stdout/stderr ---\n{}\n--- daemon: {state} ---",
            self.path("ibacm.log").display(),
            self.log(),
            self.daemon_output()
        )
    }

    fn ip(&self, args: &[&str]) {
        let mut full = vec!["ip", "-n", self.netns.as_str()];
        full.extend_from_slice(args);
        run(&full);
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.diagnostics());
        }
        if let Some(child) = self.daemon.lock().ok().and_then(|mut d| d.take()) {
            stop(child);
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        if std::env::var_os("URDMA_E2E_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("keeping {}", self.dir.display());
        }
    }
}

/// Joins hosts with veth pairs on a bridge that lives in a namespace of its
/// own, so several daemons can reach each other over IP (for providers that
/// talk over IP) without touching the root namespace.
pub struct Net {
    pub netns: String,
    ports: AtomicUsize,
}

impl Net {
    pub fn new() -> Net {
        require_root();
        let net = Net {
            netns: unique("urdma-e2e-net"),
            ports: AtomicUsize::new(0),
        };
        run(&["ip", "netns", "add", &net.netns]);
        net.ip(&["link", "add", "br0", "type", "bridge"]);
        net.ip(&["link", "set", "br0", "up"]);
        net
    }

    /// Gives `host` an interface `ifname` on the bridge with `addrs`.
    pub fn attach(&self, host: &Host, ifname: &str, addrs: &[&str]) {
        self.attach_with_mac(host, ifname, None, addrs);
    }

    /// `attach`, with the host's end of the link given MAC address `mac`
    /// (`None`: a random one).
    pub fn attach_with_mac(&self, host: &Host, ifname: &str, mac: Option<&str>, addrs: &[&str]) {
        let peer = format!("p{}", self.ports.fetch_add(1, Ordering::Relaxed));
        // Created inside the host namespace, the peer is moved straight into
        // the bridge namespace; names only need to be unique per namespace.
        host.ip(&[
            "link",
            "add",
            ifname,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "netns",
            &self.netns,
        ]);
        if let Some(mac) = mac {
            host.ip(&["link", "set", ifname, "address", mac]);
        }
        self.ip(&["link", "set", &peer, "master", "br0"]);
        self.ip(&["link", "set", &peer, "up"]);
        for a in addrs {
            let mut args = vec!["addr", "add", *a, "dev", ifname];
            if a.contains(':') {
                args.push("nodad");
            }
            host.ip(&args);
        }
        host.ip(&["link", "set", ifname, "up"]);
    }

    fn ip(&self, args: &[&str]) {
        let mut full = vec!["ip", "-n", self.netns.as_str()];
        full.extend_from_slice(args);
        run(&full);
    }
}

impl Default for Net {
    fn default() -> Self {
        Net::new()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting the namespace destroys the bridge and the peer ends,
        // which takes the hosts' veth ends with them.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
    }
}

/// Ends a daemon. Under valgrind by SIGTERM, which the daemon does not
/// catch either, so it dies as abruptly as by SIGKILL, but valgrind gets to
/// write its leak report first.
fn stop(mut child: Child) {
    if under_valgrind() {
        // SAFETY: plain kill(2) on the pid of a child not yet reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            sleep(Duration::from_millis(20));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `valgrind` and its options, to go before the daemon's argv. Only
/// definite leaks count as errors: the daemon exits without freeing what
/// it still reaches, which is not a leak. `%p` keeps the logs of restarted
/// daemons apart.
fn valgrind_prefix() -> Vec<String> {
    let dir = std::env::var_os("URDMA_TEST_VALGRIND_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    fs::create_dir_all(&dir).expect("create the valgrind log dir");
    let supp = Path::new(env!("CARGO_MANIFEST_DIR")).join(VALGRIND_SUPPRESSIONS);
    let mut v: Vec<String> = [
        "valgrind",
        "--tool=memcheck",
        "--leak-check=full",
        "--show-leak-kinds=definite",
        "--errors-for-leak-kinds=definite",
        "--track-origins=yes",
        "--num-callers=40",
        "--xml=yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!(
        "--xml-file={}",
        dir.join(format!("memcheck.{}.%p.xml", std::process::id()))
            .display()
    ));
    v.push(format!(
        "--log-file={}",
        dir.join(format!("memcheck.{}.%p.log", std::process::id()))
            .display()
    ));
    if supp.is_file() {
        v.push(format!("--suppressions={}", supp.display()));
    }
    v
}

/// `sh -c` body for `in_namespaces`: bind the host's run dir over /run (and
/// a `resolv.conf` in it, if the test wrote one, over /etc/resolv.conf, as
/// `ip netns exec` does), then exec the program, preloading the sim only
/// if asked.
const RUN_WRAPPER: &str = r#"mount --bind "$URDMA_E2E_RUN" /run || exit 125
if [ -f /run/resolv.conf ]; then mount --bind /run/resolv.conf /etc/resolv.conf || exit 125; fi
if [ -n "$URDMA_E2E_PRELOAD" ]; then exec env LD_PRELOAD="$URDMA_E2E_PRELOAD" "$@"; fi
exec "$@""#;

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Runs a setup command, panicking with its output if it fails.
fn run(argv: &[&str]) {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", argv[0]));
    assert!(
        out.status.success(),
        "`{}` failed: {}{}",
        argv.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cmd` with stdout and stderr into one file (keeps their order and
/// cannot fill a pipe), killing it after `timeout`.
fn run_with_timeout(mut cmd: Command, out_path: &Path, timeout: Duration) -> (i32, String) {
    let out = File::create(out_path).expect("client output file");
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out);
    let mut child = cmd.spawn().expect("spawn client");
    let deadline = Instant::now() + timeout;
    let code = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code().unwrap_or(-1),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let mut text = fs::read_to_string(out_path).unwrap_or_default();
                text.push_str(&format!("\n[killed after {timeout:?}]\n"));
                return (-1, text);
            }
            Ok(None) => sleep(Duration::from_millis(5)),
            Err(e) => panic!("wait: {e}"),
        }
    };
    let text = fs::read_to_string(out_path).unwrap_or_default();
    let _ = fs::remove_file(out_path);
    (code, text)
}

/// The `Path information` block `ib_acme` prints: `field -> value`.
pub struct PathInfo(pub std::collections::BTreeMap<String, String>);

impl PathInfo {
    pub fn parse(out: &str) -> PathInfo {
        let fields = out
            .lines()
            .skip_while(|l| *l != "Path information")
            .skip(1)
            .map_while(|l| l.strip_prefix("  "))
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PathInfo(fields)
    }

    pub fn get(&self, field: &str) -> &str {
        self.0
            .get(field)
            .unwrap_or_else(|| panic!("no `{field}:` line in the path {:?}", self.0))
    }
}

/// A key file with `keys`, mode `mode`, in a directory of its own that is
/// removed on drop. It lives outside the hosts' temp directories because
/// it must exist before the daemons start.
pub struct KeyFile(pub std::path::PathBuf);

impl KeyFile {
    pub fn new(name: &str, keys: &str, mode: u32) -> KeyFile {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("urdma-key-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("urdma.key");
        std::fs::write(&path, keys).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        KeyFile(path)
    }

    pub fn opt(&self) -> String {
        format!("urdma_auth_key_file {}", self.0.display())
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}
