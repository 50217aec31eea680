//! The metrics file (`urdma_metrics_file`), kept by a thread of its own
//! (discovery may be off, the request counters still count) from the
//! first device the daemon opens. Every [`EVERY`] it takes the engine's
//! numbers; when they changed it writes them atomically (a new file renamed
//! over the old), so a reader (`urdma-acm stats`, node_exporter's textfile
//! collector) never sees half of one; when they did not, it only renews
//! the file's modification time, which is what says the provider runs
//! (node_exporter's `node_textfile_mtime_seconds`): an idle provider
//! formats nothing. The path is read from the configuration each time, so
//! a change of `urdma_metrics_file` takes effect at once and the old file
//! goes. A channel of the provider's own: the daemon needs no change.

use super::lock;
use crate::daemon::Daemon;
use crate::engine::Engine;
use crate::metrics::Exposition;
use crate::threads::Threads;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

pub const EVERY: Duration = Duration::from_secs(1);

pub struct MetricsFile {
    /// Where the last file went, and what it said.
    path: Option<PathBuf>,
    written: Option<Exposition>,
    next: Instant,
    /// The last failure, logged once until it changes.
    failing: Option<String>,
}

impl Default for MetricsFile {
    fn default() -> Self {
        MetricsFile {
            path: None,
            written: None,
            next: Instant::now(),
            failing: None,
        }
    }
}

impl MetricsFile {
    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Puts `metrics` at `path` (none: no file): written when they or the
    /// path changed, else the file's time renewed.
    pub fn keep(&mut self, path: Option<&Path>, metrics: Exposition, now: Instant) {
        self.next = now + EVERY;
        if self.path.as_deref() != path {
            if let Some(old) = self.path.take() {
                // A file nobody renews any more would read as a provider
                // that stopped.
                let _ = std::fs::remove_file(&old);
                log::info!("metrics file {} removed", old.display());
            }
            self.written = None;
            self.path = path.map(Path::to_path_buf);
        }
        let Some(path) = self.path.clone() else {
            return;
        };
        let result = if self.written.as_ref() == Some(&metrics) && renew(&path).is_ok() {
            Ok(())
        } else {
            let r = replace(&path, metrics.render().as_bytes());
            self.written = r.is_ok().then_some(metrics);
            r
        };
        match result {
            Ok(()) => self.failing = None,
            Err(e) => {
                self.written = None;
                let e = format!("cannot write the metrics file {}: {e}", path.display());
                if self.failing.as_ref() != Some(&e) {
                    log::error!("{e}");
                    self.failing = Some(e);
                }
            }
        }
    }
}

/// Marks the file as current without rewriting it; a file that went (an
/// operator removed it) is written again instead.
fn renew(path: &Path) -> std::io::Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.set_modified(SystemTime::now())
}

fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    // Readable by the node exporter's own user, whatever the daemon's
    // umask: a file it cannot read is a scrape error, not metrics.
    f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Starts the thread that keeps the engine's metrics file.
pub fn spawn<D: Daemon + 'static>(
    threads: &Threads,
    engine: &'static Mutex<Engine<D>>,
) -> std::io::Result<()> {
    let stop = threads.stop_flag();
    // Outside the body: a restart goes on with the same file.
    let mut file = MetricsFile::default();
    threads.spawn(
        "metrics",
        "urdma-metrics",
        move || loop {
            let now = Instant::now();
            if file.due(now) {
                let (path, snapshot) = {
                    let e = lock(engine);
                    (e.config().metrics_file.clone(), e.metrics())
                };
                file.keep(path.as_deref(), snapshot, now);
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
    use crate::metrics::Kind;

    fn numbers(v: u64) -> Exposition {
        let mut e = Exposition::default();
        e.single("urdma_a", "A.", Kind::Gauge, v);
        e
    }

    fn mtime(p: &Path) -> SystemTime {
        std::fs::metadata(p).unwrap().modified().unwrap()
    }

    #[test]
    fn the_file_is_rewritten_when_its_numbers_change_and_only_renewed_otherwise() {
        let dir = std::env::temp_dir().join(format!("urdma-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.prom");
        let mut f = MetricsFile::default();
        let now = Instant::now();
        assert!(f.due(now));
        f.keep(Some(&path), numbers(1), now);
        assert!(!f.due(now) && f.due(now + EVERY));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(crate::metrics::parse(&text).unwrap().len(), 1, "{text}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "the node exporter's user reads it");
        assert!(!dir.join("m.prom.tmp").exists());

        // Unchanged: the same file (same inode), its time renewed.
        let old = SystemTime::now() - Duration::from_secs(600);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let before = inode(&path);
        f.keep(Some(&path), numbers(1), now + EVERY);
        assert_eq!(inode(&path), before, "rewritten though nothing changed");
        assert!(mtime(&path) > old + Duration::from_secs(500));
        // Changed: written anew.
        f.keep(Some(&path), numbers(2), now + EVERY * 2);
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("urdma_a 2"));
        // Removed by someone: back at the next second.
        std::fs::remove_file(&path).unwrap();
        f.keep(Some(&path), numbers(2), now + EVERY * 3);
        assert!(path.exists() && f.failing.is_none());

        // Moved: the old file goes, the new one comes; none: no file.
        let moved = dir.join("n.prom");
        f.keep(Some(&moved), numbers(2), now + EVERY * 5);
        assert!(!path.exists() && moved.exists());
        f.keep(None, numbers(2), now + EVERY * 6);
        assert!(!moved.exists());
        std::fs::remove_dir_all(&dir).unwrap();

        let mut gone = MetricsFile::default();
        gone.keep(Some(&dir.join("m.prom")), Exposition::default(), now);
        assert!(gone.failing.as_ref().unwrap().contains("No such file"));
    }
}
