//! One daemon in namespaces of its own, from start to the end of the test.
//!
//! A `Host` owns everything it creates, each part cleaning up after
//! itself when dropped, on panic too: the daemon's process (`daemon`),
//! then the namespaces and temp directory it ran in (`namespaces`). The
//! tests run as root on shared machines, so a failed test must not leave
//! namespaces, interfaces or daemons behind. The daemon is started with
//! files written from a `HostConfig` (`launch`) rather than with the
//! system's, so that every test states the configuration it depends on.
//!
//! What runs or is read in the namespaces (`inside`, `logs`) is theirs,
//! whether a daemon runs there or not; a `Host` adds the daemon: watching
//! it (`observe`) and driving its simulated devices (`control`).

mod config;
mod control;
mod daemon;
mod inside;
mod launch;
mod logs;
mod namespaces;
mod observe;

pub use config::{HostConfig, HostsFile};
pub use inside::COMMAND_TIMEOUT;
pub use namespaces::Namespaces;

use crate::env::scaled;
use crate::Net;
use control::SimControl;
use daemon::Daemon;
use std::fs;
use std::ops::Deref;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// One running daemon in its own namespaces. Dropping it kills the daemon
/// and removes the namespace and the temp directory (also on panic).
pub struct Host {
    // Dropped in this order: the daemon ends before its namespaces go.
    daemon: Daemon,
    /// The simulator's control FIFO in the daemon (see `inject`).
    control: SimControl,
    namespaces: Namespaces,
}

/// A host is its namespaces with a daemon in them: what a test runs or
/// reads there (`host.acme(..)`, `host.log()`, `host.netns`) is the
/// namespaces', reached through the host.
impl Deref for Host {
    type Target = Namespaces;

    fn deref(&self) -> &Namespaces {
        &self.namespaces
    }
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
        let namespaces = Namespaces::create();
        Host {
            daemon: Daemon::default(),
            control: SimControl::new(namespaces.control_path()),
            namespaces,
        }
    }

    /// Writes `cfg`'s files and starts the daemon on a host made with
    /// [`Host::bare`] (and given its links).
    pub fn launch(&self, cfg: &HostConfig) {
        cfg.write_files(self);
        self.daemon.spawn(cfg.daemon_command(self));
        self.wait_started(cfg.start_timeout);
    }

    /// Kills the daemon (SIGKILL, like a crash: no withdrawal is sent) and
    /// waits for it. Its log and output stay for `diagnostics`.
    pub fn kill_daemon(&self) {
        self.daemon.kill();
    }

    /// Sends SIGTERM, as `systemctl stop` does, and waits up to `timeout`
    /// for the daemon to exit. Returns its exit status, or `None` if it
    /// was still running (it is then killed, so nothing outlives the test).
    pub fn terminate_daemon(&self, timeout: Duration) -> Option<std::process::ExitStatus> {
        self.daemon.terminate(timeout)
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
        self.control.forget_acks();
        self.launch(cfg);
    }

    pub fn daemon_alive(&self) -> bool {
        self.daemon.alive()
    }

    /// Sends one control line to the simulator in the daemon and waits until
    /// the simulator has applied it. Panics if it was rejected.
    pub fn inject(&self, line: &str) {
        if let Err(e) = self.try_inject(line) {
            panic!("inject `{line}`: {e}\n{}", self.diagnostics());
        }
    }

    pub fn try_inject(&self, line: &str) -> Result<(), String> {
        self.control.send(line, || self.daemon_output())
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
}

impl Drop for Host {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.diagnostics());
        }
    }
}
