//! One daemon in namespaces of its own, from start to the end of the test.
//!
//! A `Host` owns everything it creates (the network namespace, the temp
//! directory, the daemon), and its `Drop` removes it all, on panic too:
//! the tests run as root on shared machines, so a failed test must not
//! leave namespaces, interfaces or daemons behind. The daemon is started
//! with files written from a `HostConfig` rather than with the system's,
//! so that every test states the configuration it depends on.
//!
//! The rest of `Host` is split by what a test does with it: run commands
//! inside it (`inside`), watch it (`observe`), and drive its simulated
//! devices (`control`).

mod config;
mod control;
mod inside;
mod observe;

pub use config::{HostConfig, HostsFile};
pub use inside::COMMAND_TIMEOUT;

use crate::env::{require_root, scaled, under_valgrind, unique, valgrind_prefix};
use crate::process::{run, sigterm};
use crate::{Artifacts, Net, IBACM};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// One running daemon in its own namespaces. Dropping it kills the daemon
/// and removes the namespace and the temp directory (also on panic).
pub struct Host {
    pub netns: String,
    pub dir: PathBuf,
    pub artifacts: Artifacts,
    daemon: Mutex<Option<Child>>,
    /// When the daemon was spawned: start-up is timed from there.
    spawned: Mutex<Option<Instant>>,
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
        crate::interrupt::clean_up_on_signals();
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
            spawned: Mutex::new(None),
            acks_seen: Mutex::new(0),
        };
        host.ip(&["link", "set", "lo", "up"]);
        host
    }

    /// Writes `cfg`'s files and starts the daemon on a host made with
    /// [`Host::bare`] (and given its links).
    pub fn launch(&self, cfg: &HostConfig) {
        self.write_files(cfg);
        self.spawn_daemon(cfg);
        self.wait_started(cfg.start_timeout);
    }

    /// Kills the daemon (SIGKILL, like a crash: no withdrawal is sent) and
    /// waits for it. Its log and output stay for `diagnostics`.
    pub fn kill_daemon(&self) {
        if let Some(child) = self.daemon.lock().unwrap().take() {
            stop(child);
        }
    }

    /// Sends SIGTERM, as `systemctl stop` does, and waits up to `timeout`
    /// for the daemon to exit. Returns its exit status, or `None` if it
    /// was still running (it is then killed, so nothing outlives the test).
    pub fn terminate_daemon(&self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let mut guard = self.daemon.lock().unwrap();
        let mut child = guard.take()?;
        sigterm(&child);
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

    pub fn daemon_alive(&self) -> bool {
        match self.daemon.lock().unwrap().as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn write_files(&self, cfg: &HostConfig) {
        let (provider, file) = match &cfg.provider_so {
            Some(so) => (so, so.file_name().expect("a provider file name")),
            None => (&self.artifacts.provider, "libibacm_urdma.so".as_ref()),
        };
        // Not a symlink: the daemon skips symlinks when loading. A hard
        // link where it can be: the release build with its debug info is
        // 16 MB, and a fleet of 256 copying it wrote 4 GB before its
        // daemons could start (0.5 GB more while a restart storm's 32 came
        // back). The link is the build's own file: replace it, never
        // write to it in place.
        let installed = self.path("prov").join(file);
        let _ = fs::remove_file(&installed);
        if fs::hard_link(provider, &installed).is_err() {
            fs::copy(provider, &installed).expect("copy provider");
        }

        let mut opts = vec![
            format!("log_file {}", self.path("ibacm.log").display()),
            format!("log_level {}", cfg.log_level),
            format!("lock_file {}", self.path("ibacm.pid").display()),
            format!("provider_lib_path {}", self.path("prov").display()),
            "support_ips_in_addr_cfg 1".to_string(),
        ];
        if let Some(name) = &cfg.provider_name {
            opts.push(format!("provider {name} default"));
        }
        // Each host's own /run, even where a node exporter's textfile
        // directory (shared by every host here) would be the default.
        opts.push("urdma_metrics_file /run/ibacm-urdma.prom".to_string());
        let hosts = match &cfg.hosts_file {
            Some(HostsFile::Text(text)) => {
                fs::write(self.hosts_path(), text).expect("write hosts.data");
                Some(self.hosts_path())
            }
            Some(HostsFile::At(path)) => Some(path.clone()),
            None => None,
        };
        if let Some(path) = hosts {
            opts.push(format!("urdma_hosts_file {}", path.display()));
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
        let mut argv: Vec<String> = if !cfg.wrapper.is_empty() {
            cfg.wrapper.clone()
        } else if under_valgrind() {
            valgrind_prefix()
        } else {
            Vec::new()
        };
        argv.extend(daemon.iter().map(|a| a.to_string()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut cmd = self.in_namespaces(true, &argv);
        if cfg.sim_control {
            cmd.env("URDMA_SIM_CONTROL", self.control_path());
        } else {
            cmd.env_remove("URDMA_SIM_CONTROL");
        }
        if cfg.sim_config.is_some() {
            cmd.env("URDMA_SIM_CONFIG", self.path("sim.cfg"));
        } else {
            cmd.env_remove("URDMA_SIM_CONFIG");
        }
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup"))
            .stderr(out);
        *self.spawned.lock().unwrap() = Some(Instant::now());
        let child = cmd.spawn().expect("spawn ibacm");
        *self.daemon.lock().unwrap() = Some(child);
    }

    fn wait_started(&self, timeout: Duration) {
        let sock = self.socket();
        let deadline = Instant::now() + scaled(timeout);
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
            // Short: the daemon bench times start-up from `daemon_spawned`.
            sleep(Duration::from_millis(1));
        }
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

/// Ends a daemon. Under valgrind by SIGTERM, which the daemon does not
/// catch either, so it dies as abruptly as by SIGKILL, but valgrind gets to
/// write its leak report first.
fn stop(mut child: Child) {
    if under_valgrind() {
        sigterm(&child);
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

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}
