//! The daemon's process: spawned, watched, ended.
//!
//! Behind a lock because a test may end the daemon from one thread while
//! another watches it, and `Host` is shared by reference. Dropping it ends
//! the process, so no daemon outlives the test that started it.

use crate::env::{scaled, under_valgrind};
use crate::process::sigterm;
use std::process::{Child, Command, ExitStatus};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// The process of one daemon, once spawned.
#[derive(Default)]
pub(super) struct Daemon {
    child: Mutex<Option<Child>>,
    /// When the daemon was spawned: start-up is timed from there.
    spawned: Mutex<Option<Instant>>,
}

impl Daemon {
    pub(super) fn spawn(&self, mut cmd: Command) {
        *self.spawned.lock().unwrap() = Some(Instant::now());
        let child = cmd.spawn().expect("spawn ibacm");
        *self.child.lock().unwrap() = Some(child);
    }

    pub(super) fn alive(&self) -> bool {
        match self.child.lock().unwrap().as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.child.lock().unwrap().as_ref().map(Child::id)
    }

    pub(super) fn spawned(&self) -> Option<Instant> {
        *self.spawned.lock().unwrap()
    }

    /// Kills the process (see `stop`) and waits for it.
    pub(super) fn kill(&self) {
        if let Some(child) = self.child.lock().unwrap().take() {
            stop(child);
        }
    }

    /// SIGTERM, then up to `timeout` for the process to exit: its status,
    /// or `None` if it was still running (it is then killed).
    pub(super) fn terminate(&self, timeout: Duration) -> Option<ExitStatus> {
        let mut guard = self.child.lock().unwrap();
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

    /// Whether the process is still there, and if not how it ended: a
    /// daemon killed by a signal logs nothing about it.
    pub(super) fn state(&self) -> String {
        match self.child.lock().unwrap().as_mut().map(Child::try_wait) {
            Some(Ok(None)) => "running".to_string(),
            Some(Ok(Some(status))) => format!("exited: {status}"),
            Some(Err(e)) => format!("unknown: {e}"),
            None => "stopped by the test".to_string(),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.lock().ok().and_then(|mut d| d.take()) {
            stop(child);
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
