//! The metrics file (`urdma_metrics_file`): rewritten every [`EVERY`] by a
//! thread of its own (discovery may be off, the request counters still
//! count), atomically (a new file renamed over the old), so a reader
//! (`urdma-acm stats`, node_exporter's textfile collector) never sees half
//! of one. A channel of the provider's own: the daemon needs no change.

use super::lock;
use crate::daemon::Daemon;
use crate::engine::Engine;
use crate::metrics::{Exposition, Kind};
use crate::threads::Threads;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const EVERY: Duration = Duration::from_secs(1);

pub struct MetricsFile {
    path: PathBuf,
    next: Instant,
    /// The last failure, logged once until it changes.
    failing: Option<String>,
}

impl MetricsFile {
    pub fn new(path: PathBuf) -> MetricsFile {
        MetricsFile {
            path,
            next: Instant::now(),
            failing: None,
        }
    }

    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Writes `metrics`, stamped with the time, in place of the last.
    pub fn write(&mut self, mut metrics: Exposition, now: Instant) {
        self.next = now + EVERY;
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        metrics.single(
            "urdma_metrics_written_timestamp_seconds",
            "When this file was written (Unix time): a stale file means a provider that stopped.",
            Kind::Gauge,
            unix,
        );
        match self.replace(metrics.render().as_bytes()) {
            Ok(()) => self.failing = None,
            Err(e) => {
                let e = format!("cannot write the metrics file {}: {e}", self.path.display());
                if self.failing.as_ref() != Some(&e) {
                    log::error!("{e}");
                    self.failing = Some(e);
                }
            }
        }
    }

    fn replace(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        drop(f);
        std::fs::rename(&tmp, &self.path)
    }
}

/// Starts the thread that writes the engine's metrics to `path`.
pub fn spawn<D: Daemon + 'static>(
    threads: &Threads,
    engine: &'static Mutex<Engine<D>>,
    path: PathBuf,
) -> std::io::Result<()> {
    let stop = threads.stop_flag();
    // Outside the body: a restart goes on with the same file.
    let mut file = MetricsFile::new(path);
    threads.spawn(
        "metrics",
        "urdma-metrics",
        move || loop {
            let now = Instant::now();
            if file.due(now) {
                let snapshot = lock(engine).metrics();
                file.write(snapshot, now);
            }
            if stop.sleep(file.next.saturating_duration_since(Instant::now())) {
                return;
            }
        },
        // It holds no request: nothing to answer.
        || {},
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_replaced_whole_and_a_failure_is_logged_once() {
        let dir = std::env::temp_dir().join(format!("urdma-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.prom");
        let mut f = MetricsFile::new(path.clone());
        let now = Instant::now();
        assert!(f.due(now));
        let mut e = Exposition::default();
        e.single("urdma_a", "A.", Kind::Gauge, 1);
        f.write(e, now);
        assert!(!f.due(now) && f.due(now + EVERY));
        let text = std::fs::read_to_string(&path).unwrap();
        let families = crate::metrics::parse(&text).unwrap();
        assert_eq!(families.len(), 2, "{text}");
        assert!(!dir.join("m.prom.tmp").exists());
        std::fs::remove_dir_all(&dir).unwrap();
        let mut gone = MetricsFile::new(dir.join("m.prom"));
        gone.write(Exposition::default(), now);
        assert!(gone.failing.as_ref().unwrap().contains("No such file"));
    }
}
