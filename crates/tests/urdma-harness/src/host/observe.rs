//! What a test sees of a running daemon: its process, its log and its
//! output.
//!
//! Waits poll the log rather than sleep a fixed time, so a test is as fast
//! as the daemon allows and still stands a slow machine. Every failure
//! message carries `diagnostics`, because a daemon failing in a namespace
//! that is gone by the time anyone looks is otherwise a mystery.

use super::Host;
use crate::env::scaled;
use std::fs;
use std::process::Child;
use std::thread::sleep;
use std::time::{Duration, Instant};

impl Host {
    /// The daemon's process id. The chain nsenter → unshare → sh → (env →
    /// valgrind or `HostConfig::wrapper`) → ibacm only ever execs, so it
    /// is the spawned child's.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.lock().unwrap().as_ref().map(Child::id)
    }

    /// When the daemon was last spawned, for timing its start-up.
    pub fn daemon_spawned(&self) -> Option<Instant> {
        *self.spawned.lock().unwrap()
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

    /// The daemon's log file (`log_file`) as it is, each provider line
    /// `urdma: <severity>: <message>`.
    pub fn raw_log(&self) -> String {
        fs::read_to_string(self.path("ibacm.log")).unwrap_or_default()
    }

    /// The daemon's log with the provider's severities left out, so that
    /// tests match `urdma: <message>`: what a message says is one check,
    /// the severity it is written at another (`log_severity`).
    pub fn log(&self) -> String {
        without_severities(&self.raw_log())
    }

    /// The severity of the first provider line whose message begins with
    /// `message`, if one is logged.
    pub fn log_severity(&self, message: &str) -> Option<String> {
        self.raw_log().lines().find_map(|line| {
            let (_, rest) = line.split_once(PREFIX)?;
            let (severity, text) = rest.split_once(": ")?;
            (SEVERITIES.contains(&severity) && text.starts_with(message))
                .then(|| severity.to_string())
        })
    }

    /// The provider's metrics file at its default path (`/run` is the
    /// host's run directory), empty before the first write.
    pub fn metrics_file(&self) -> String {
        fs::read_to_string(self.path("run/ibacm-urdma.prom")).unwrap_or_default()
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
            self.raw_log(),
            self.daemon_output()
        )
    }
}

const PREFIX: &str = "urdma: ";
const SEVERITIES: [&str; 5] = ["error", "warning", "info", "debug", "trace"];

/// `text` with `urdma: <severity>: ` written as `urdma: `.
fn without_severities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let (before, after) = rest.split_at(at + PREFIX.len());
        out.push_str(before);
        rest = SEVERITIES
            .iter()
            .find_map(|s| after.strip_prefix(s)?.strip_prefix(": "))
            .unwrap_or(after);
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::without_severities;

    #[test]
    fn severities_are_left_out_and_nothing_else() {
        let log =
            "t0: urdma: error: a: b\nt1: urdma: info: urdma: x\nt2: acm_x: urdma: errors: 3\n";
        assert_eq!(
            without_severities(log),
            "t0: urdma: a: b\nt1: urdma: urdma: x\nt2: acm_x: urdma: errors: 3\n"
        );
    }
}
