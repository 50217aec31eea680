//! Faults injected on request, to prove in the real daemon that the
//! provider survives its own threads failing. Compiled only with the
//! `fault-injection` feature, which no shipped build enables.

use crate::addr::Address;
use crate::daemon::Daemon;
use crate::engine::Engine;
use std::path::Path;

/// A name whose lookup makes the discovery thread panic.
pub const WORKER_NAME: &str = "urdma-fault-worker";
/// Text whose presence in the hosts file makes its watcher panic.
pub const WATCHER_MARK: &str = "urdma-fault-watcher";

/// Panics if a lookup of [`WORKER_NAME`] is in flight.
pub fn in_worker<D: Daemon>(e: &Engine<D>) {
    if Address::name(WORKER_NAME).is_some_and(|name| e.discovery().looking_up(&name)) {
        panic!("fault injected: a lookup of {WORKER_NAME}");
    }
}

/// Panics if the hosts file holds [`WATCHER_MARK`].
pub fn in_watcher(path: &Path) {
    let marked = std::fs::read(path).is_ok_and(|b| {
        b.windows(WATCHER_MARK.len())
            .any(|w| w == WATCHER_MARK.as_bytes())
    });
    if marked {
        panic!("fault injected: {WATCHER_MARK} in {}", path.display());
    }
}
