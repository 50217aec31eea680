//! The metrics file (`urdma_metrics_file`), kept by a thread of its own
//! (discovery may be off, the request counters still count) from the
//! first device the daemon opens. Every [`EVERY`] it compares what the
//! engine's numbers ([`Numbers`]) with the last time; when they
//! changed it builds the numbers and writes them atomically (a new file
//! renamed over the old), so a reader (`urdma-acm stats`, node_exporter's
//! textfile collector) never sees half of one; when they did not, it only
//! renews the file's modification time, which is what says the provider
//! runs (node_exporter's `node_textfile_mtime_seconds`): an idle provider
//! builds and formats nothing. The path is read from the configuration each time, so
//! a change of `urdma_metrics_file` takes effect at once and the old file
//! goes. A channel of the provider's own: the daemon needs no change.

use super::lock;
use crate::daemon::Daemon;
use crate::engine::metrics::Numbers;
use crate::engine::Engine;
use crate::metrics::Exposition;
use crate::threads::Threads;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

pub const EVERY: Duration = Duration::from_secs(1);
/// The metrics are built again at least this often, whatever their
/// inputs say: a number the inputs miss is late by this much at most.
pub const REBUILD: Duration = Duration::from_secs(60);

pub struct MetricsFile {
    /// Where the last file went, what it said, what it was made of, and
    /// when it was last built.
    path: Option<PathBuf>,
    written: Option<Exposition>,
    numbers: Option<Numbers>,
    built: Option<Instant>,
    next: Instant,
    /// The last failure, logged once until it changes.
    failing: Option<String>,
}

impl Default for MetricsFile {
    fn default() -> Self {
        MetricsFile {
            path: None,
            written: None,
            numbers: None,
            built: None,
            next: Instant::now(),
            failing: None,
        }
    }
}

impl MetricsFile {
    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Whether the metrics must be built for `path` at `now`: they, their
    /// numbers or the path changed, or [`REBUILD`] passed.
    pub fn wants(&self, path: Option<&Path>, numbers: &Numbers, now: Instant) -> bool {
        path.is_some()
            && (self.path.as_deref() != path
                || self.written.is_none()
                || self.numbers.as_ref() != Some(numbers)
                || self.built.is_none_or(|b| now >= b + REBUILD))
    }

    /// Puts the metrics at `path` (none: no file): `built`, the metrics
    /// and their numbers when [`MetricsFile::wants`] them, written when they
    /// changed; otherwise the file's time is renewed.
    pub fn keep(
        &mut self,
        path: Option<&Path>,
        built: Option<(Numbers, Exposition)>,
        now: Instant,
    ) {
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
        let result = match built {
            Some((numbers, metrics)) => {
                self.built = Some(now);
                self.numbers = Some(numbers);
                if self.written.as_ref() == Some(&metrics) && renew(&path).is_ok() {
                    Ok(())
                } else {
                    let r = replace(&path, metrics.render().as_bytes());
                    self.written = r.is_ok().then_some(metrics);
                    r
                }
            }
            None => renew(&path),
        };
        match result {
            Ok(()) => self.failing = None,
            Err(e) => {
                // Written again, whole, at the next look.
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

/// Marks the file as current without rewriting it.
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
                // The numbers are read under the engine's lock; the
                // metrics, when needed, are built and written after it is
                // released.
                let (path, numbers) = {
                    let e = lock(engine);
                    (e.config().metrics_file.clone(), Numbers::of(&e))
                };
                let wanted = file.wants(path.as_deref(), &numbers, now);
                let built = wanted.then(|| {
                    let metrics = numbers.exposition();
                    (numbers, metrics)
                });
                file.keep(path.as_deref(), built, now);
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
    use crate::config::Config;
    use crate::daemon::FakeDaemon;
    use crate::local::PortInfo;

    fn mtime(p: &Path) -> SystemTime {
        std::fs::metadata(p).unwrap().modified().unwrap()
    }

    fn inode(p: &Path) -> u64 {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap())
    }

    /// What the writer's thread does at `now`; whether it built.
    fn look(
        f: &mut MetricsFile,
        path: Option<&Path>,
        e: &Engine<FakeDaemon>,
        now: Instant,
    ) -> bool {
        let numbers = Numbers::of(e);
        let built = f.wants(path, &numbers, now).then(|| {
            let metrics = numbers.exposition();
            (numbers, metrics)
        });
        let did = built.is_some();
        f.keep(path, built, now);
        did
    }

    #[test]
    fn the_file_is_built_when_its_inputs_change_and_only_renewed_otherwise() {
        let dir = std::env::temp_dir().join(format!("urdma-metrics-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.prom");
        let mut e = Engine::new(FakeDaemon::default(), Config::default(), Default::default());
        let mut f = MetricsFile::default();
        let now = Instant::now();
        assert!(f.due(now));
        assert!(look(&mut f, Some(&path), &e, now));
        assert!(!f.due(now) && f.due(now + EVERY));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("urdma_ports 0\n"), "{text}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644, "the node exporter's user reads it");
        assert!(!dir.join("m.prom.tmp").exists());

        // Unchanged: nothing built, the same file (inode), its time renewed.
        let old = SystemTime::now() - Duration::from_secs(600);
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(old).unwrap();
        let before = inode(&path);
        assert!(!look(&mut f, Some(&path), &e, now + EVERY));
        assert_eq!(inode(&path), before, "rewritten though nothing changed");
        assert!(mtime(&path) > old + Duration::from_secs(500));
        // Built again after REBUILD, and not rewritten when the same.
        assert!(look(&mut f, Some(&path), &e, now + REBUILD));
        assert_eq!(inode(&path), before);
        // An input changed: built and written anew.
        let dev = e.open_device(1);
        e.open_port(dev, PortInfo::infiniband(1, "fe80::1".parse().unwrap()))
            .unwrap();
        assert!(look(&mut f, Some(&path), &e, now + REBUILD + EVERY));
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("urdma_ports 1\n"));
        // Removed by someone: the renewal fails, the next look writes it.
        std::fs::remove_file(&path).unwrap();
        assert!(!look(&mut f, Some(&path), &e, now + REBUILD + EVERY * 2));
        assert!(f.failing.is_some());
        assert!(look(&mut f, Some(&path), &e, now + REBUILD + EVERY * 3));
        assert!(path.exists() && f.failing.is_none());

        // Moved: the old file goes, the new one comes; none: no file.
        let moved = dir.join("n.prom");
        assert!(look(&mut f, Some(&moved), &e, now + REBUILD + EVERY * 4));
        assert!(!path.exists() && moved.exists());
        assert!(!look(&mut f, None, &e, now + REBUILD + EVERY * 5));
        assert!(!moved.exists());
        std::fs::remove_dir_all(&dir).unwrap();

        let mut gone = MetricsFile::default();
        look(&mut gone, Some(&dir.join("m.prom")), &e, now);
        assert!(gone.failing.as_ref().unwrap().contains("No such file"));
    }
}
