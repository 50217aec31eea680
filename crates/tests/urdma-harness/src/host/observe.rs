//! What a test sees of a running daemon: its process, and what it logs
//! as it goes (the files themselves are read in `logs`).
//!
//! Waits poll the log rather than sleep a fixed time, so a test is as fast
//! as the daemon allows and still stands a slow machine. Every failure
//! message carries `diagnostics`, because a daemon failing in a namespace
//! that is gone by the time anyone looks is otherwise a mystery.

use super::Host;
use crate::env::scaled;
use std::fs;
use std::thread::sleep;
use std::time::{Duration, Instant};

impl Host {
    /// The daemon's process id. The chain nsenter → unshare → sh → (env →
    /// valgrind or `HostConfig::wrapper`) → ibacm only ever execs, so it
    /// is the spawned child's.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.pid()
    }

    /// When the daemon was last spawned, for timing its start-up.
    pub fn daemon_spawned(&self) -> Option<Instant> {
        self.daemon.spawned()
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

    /// Log and output, for panic messages.
    pub fn diagnostics(&self) -> String {
        let state = self.daemon.state();
        format!(
            "--- {} ---\n{}\n--- daemon stdout/stderr ---\n{}\n--- daemon: {state} ---",
            self.path("ibacm.log").display(),
            self.raw_log(),
            self.daemon_output()
        )
    }
}
