//! What the machine itself went through during the storm: how busy its
//! CPUs were and how many threads waited for one (`/proc/stat`), and the
//! discovery rounds the daemons logged as late. On a cluster every daemon
//! has a machine of its own; here hundreds share the machine's cores, and
//! its one kernel delivers each multicast into every namespace. Printed
//! beside the storm's times so that a slow storm says whether the
//! protocol or the machine took the seconds.

use crate::storm::epoch_ms;
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime};
use urdma_harness::late::LateRounds;
use urdma_harness::Host;

const EVERY: Duration = Duration::from_millis(250);

/// A sample's share of busy CPU at or above which the machine had no
/// CPU to spare.
const FULL: f64 = 0.98;

/// One look at `/proc/stat`: when (Unix ms), the CPU time counted so far
/// (all, idle), and how many threads were runnable.
#[derive(Clone, Copy)]
struct Stat {
    at_ms: u64,
    total: u64,
    idle: u64,
    running: u64,
}

fn stat() -> Option<Stat> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = text
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let running = text
        .lines()
        .find_map(|l| l.strip_prefix("procs_running "))?
        .trim()
        .parse()
        .ok()?;
    Some(Stat {
        at_ms: epoch_ms(SystemTime::now()),
        total: cpu.iter().sum(),
        // idle and iowait
        idle: cpu.get(3)? + cpu.get(4)?,
        running,
    })
}

/// Samples `/proc/stat` every [`EVERY`] until stopped.
pub struct CpuWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Stat>>,
}

impl CpuWatch {
    pub fn start() -> CpuWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let sampling = stop.clone();
        let thread = thread::spawn(move || {
            let mut seen = Vec::new();
            while !sampling.load(Ordering::Relaxed) {
                seen.extend(stat());
                thread::sleep(EVERY);
            }
            seen
        });
        CpuWatch { stop, thread }
    }

    /// Stops sampling; prints how busy the machine was from `from_ms` to
    /// `to_ms` (Unix ms).
    pub fn print(self, from_ms: u64, to_ms: u64) {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self.thread.join().unwrap_or_default();
        let window: Vec<(f64, u64, u64)> = seen
            .windows(2)
            .filter(|w| w[1].at_ms > from_ms && w[0].at_ms < to_ms)
            .map(|w| {
                let total = w[1].total.saturating_sub(w[0].total).max(1);
                let idle = w[1].idle.saturating_sub(w[0].idle);
                let busy = 1.0 - idle as f64 / total as f64;
                (busy, w[1].at_ms - w[0].at_ms, w[1].running)
            })
            .collect();
        let span: u64 = window.iter().map(|w| w.1).sum();
        if span == 0 {
            return;
        }
        let busy = window.iter().map(|w| w.0 * w.1 as f64).sum::<f64>() / span as f64;
        let full: u64 = window.iter().filter(|w| w.0 >= FULL).map(|w| w.1).sum();
        let most = window.iter().map(|w| w.2).max().unwrap_or(0);
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        println!(
            "machine from the first restarted socket to the last survivor following ({:.1} s): \
             CPU {:.0} % busy, all {cores} cores busy for {:.1} s of it, up to {most} threads \
             runnable at once\n",
            span as f64 / 1e3,
            busy * 100.0,
            full as f64 / 1e3
        );
    }
}

/// Where each of `hosts`' logs ends now: what they log from here on is
/// the storm's.
pub fn log_marks(hosts: &[Host]) -> Vec<usize> {
    hosts.iter().map(|h| h.raw_log().len()).collect()
}

/// The late rounds `hosts` logged since `marks` (`log_marks`), or in
/// their whole log where no mark is given (a restarted daemon's is new).
pub fn late_since(hosts: &[Host], marks: Option<&[usize]>) -> LateRounds {
    hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let log = h.raw_log();
            let from = marks.and_then(|m| m.get(i)).copied().unwrap_or(0);
            LateRounds::of(log.get(from..).unwrap_or(""))
        })
        .fold(LateRounds::default(), |a, b| a + b)
}

/// Prints the late rounds of the restarted daemons and of the survivors.
pub fn print_late(restarted: LateRounds, survivors: LateRounds) {
    println!(
        "discovery rounds logged 250 ms or more behind during the storm: restarted daemons {}; \
         survivors {}\n",
        restarted, survivors
    );
}
