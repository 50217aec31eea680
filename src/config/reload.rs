//! The hosts file, read at start and again whenever it changes: a thread
//! of the provider's own looks at the file every [`POLL`], reads and
//! compares a new version without holding the engine, and then puts it in
//! force in one short step. The daemon's event loop never waits for it.

use crate::config::hosts::Hosts;
use crate::config::Diagnostic;
use crate::engine::Engine;
use crate::host::Host;
use crate::threads::Threads;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the file is looked at. A change is read once it has stayed
/// the same for one look, so an edit is in force within two looks plus
/// the time to read the file.
pub const POLL: Duration = Duration::from_millis(250);

/// Which version of the file is on disk: a new inode (an editor's or
/// `mv`'s replacement), a new size or a new modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The file's stamp; `None` when it does not exist (or cannot be seen).
pub fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

/// A hosts file as read: what it binds, its version, and its problems at
/// `file:line` (line 0: the whole file). Shared with `urdma-acm
/// check-config`, so the tool reports exactly what the provider logs.
pub struct Read {
    pub hosts: Hosts,
    pub stamp: Option<Stamp>,
    pub problems: Vec<Diagnostic>,
    /// The file does not exist: no static hosts, and no problem.
    pub absent: bool,
}

/// Reads and parses the hosts file. The stamp is taken first, so a change
/// made while reading is noticed at the next look.
pub fn read_hosts(path: &Path) -> Read {
    let stamp = stamp(path);
    let shown = path.display().to_string();
    let (hosts, problems, absent) = match crate::config::text::read(path) {
        Ok(Some(bytes)) => {
            let (hosts, diags) = Hosts::parse(bytes, &shown);
            (hosts, diags, false)
        }
        Ok(None) => (Hosts::default(), Vec::new(), true),
        Err(e) => {
            let d = Diagnostic::new(&shown, 0, format!("cannot read: {e}"));
            (Hosts::default(), vec![d], false)
        }
    };
    Read {
        hosts,
        stamp,
        problems,
        absent,
    }
}

/// [`read_hosts`], with every problem in the daemon's log.
pub fn read(path: &Path) -> (Hosts, Option<Stamp>) {
    let r = read_hosts(path);
    for d in &r.problems {
        log::error!("{d}");
    }
    if r.absent {
        log::info!(
            "no hosts file {}; only local and discovered addresses resolve",
            path.display()
        );
    }
    (r.hosts, r.stamp)
}

/// Decides when the file is due to be read again.
#[derive(Debug)]
pub struct Watcher {
    path: PathBuf,
    /// The version in force.
    loaded: Option<Stamp>,
    /// What the previous look saw.
    seen: Option<Stamp>,
}

impl Watcher {
    pub fn new(path: PathBuf, loaded: Option<Stamp>) -> Watcher {
        Watcher {
            path,
            loaded,
            seen: loaded,
        }
    }

    /// One look: true when the file differs from the version in force and
    /// did not change since the previous look (a file being written is
    /// left until its writer is done).
    pub fn due(&mut self) -> bool {
        let now = stamp(&self.path);
        let due = now != self.loaded && now == self.seen;
        self.seen = now;
        due
    }

    pub fn loaded(&mut self, stamp: Option<Stamp>) {
        self.loaded = stamp;
        self.seen = stamp;
    }
}

/// Reads the file again and puts it in force. Returns how many
/// destinations changed.
pub fn reload<H: Host>(engine: &Mutex<Engine<H>>, path: &Path) -> (usize, Option<Stamp>) {
    let (new, stamp) = read(path);
    let old = lock(engine).hosts();
    let changed = Hosts::changes(&old, &new);
    let addresses = new.len();
    lock(engine).replace_hosts(Arc::new(new), &changed);
    log::info!(
        "hosts file {}: reloaded, {addresses} addresses, {} destinations changed",
        path.display(),
        changed.len()
    );
    (changed.len(), stamp)
}

fn lock<H: Host>(engine: &Mutex<Engine<H>>) -> std::sync::MutexGuard<'_, Engine<H>> {
    engine.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts the thread that watches `path`, whose version `loaded` is in
/// force.
pub fn spawn<H: Host + 'static>(
    threads: &Threads,
    engine: &'static Mutex<Engine<H>>,
    path: PathBuf,
    loaded: Option<Stamp>,
) -> std::io::Result<()> {
    let stop = threads.stop_flag();
    // Outside the body, so that a restart after a panic goes on from the
    // version last put in force.
    let mut w = Watcher::new(path, loaded);
    threads.spawn(
        "hosts file watcher",
        "urdma-hosts",
        move || {
            while !stop.sleep(POLL) {
                if w.due() {
                    #[cfg(feature = "fault-injection")]
                    crate::fault::in_watcher(&w.path);
                    let (_, stamp) = reload(engine, &w.path);
                    w.loaded(stamp);
                }
            }
        },
        // It holds no request: nothing to answer.
        || {},
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Address;
    use crate::config::Config;
    use crate::host::FakeHost;
    use crate::local::PortInfo;
    use crate::request::msg::tests::{addr_entry, request};
    use acm_prov_sys::{ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST, ACM_STATUS_ENODATA};

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("urdma-reload-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("hosts")
    }

    #[test]
    fn a_change_is_due_once_the_file_has_settled() {
        let path = temp("watch");
        std::fs::write(&path, "a fe80::1\n").unwrap();
        let mut w = Watcher::new(path.clone(), stamp(&path));
        assert!(!w.due(), "nothing changed");
        std::fs::write(&path, "a fe80::1\nb fe80::2\n").unwrap();
        assert!(!w.due(), "just written: maybe not finished");
        assert!(w.due(), "unchanged since the last look");
        w.loaded(stamp(&path));
        assert!(!w.due());
        // Replaced by rename, as editors and config tools do.
        let next = path.with_extension("new");
        std::fs::write(&next, "c fe80::3\n").unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert!(!w.due() && w.due());
        w.loaded(stamp(&path));
        std::fs::remove_file(&path).unwrap();
        assert!(!w.due() && w.due(), "a removed file is a change too");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn absent_and_unreadable_files_are_told_apart() {
        let path = temp("read");
        let r = read_hosts(&path);
        assert!(r.absent && r.problems.is_empty() && r.stamp.is_none());
        let dir = path.parent().unwrap();
        let r = read_hosts(dir);
        assert!(!r.absent && r.hosts.is_empty());
        assert_eq!(
            r.problems[0].to_string(),
            format!(
                "{}:0: cannot read: Is a directory (os error 21)",
                dir.display()
            )
        );
        std::fs::write(&path, "a fe80::1\nb nope\n").unwrap();
        let r = read_hosts(&path);
        assert_eq!((r.hosts.len(), r.problems.len()), (1, 1));
        assert_eq!(r.problems[0].line, 2);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_reload_changes_answers_and_empties_the_cache_of_what_changed() {
        let path = temp("engine");
        std::fs::write(&path, "keep fe80::1\nmove fe80::2\ngone fe80::3\n").unwrap();
        let (hosts, _) = read(&path);
        let mut e = Engine::new(FakeHost::default(), Config::default(), hosts);
        let dev = e.open_device(1);
        let info = PortInfo::infiniband(1, "fe80::a".parse().unwrap());
        let port = e.open_port(dev, info).unwrap();
        let ep = e.open_endpoint(port, 0xffff).unwrap();
        let src = e.add_address(ep, Address::name("self").unwrap()).unwrap();
        let engine = Mutex::new(e);
        let ask = |name: &str| {
            let req = request(
                &[addr_entry(
                    ACM_EP_FLAG_DEST,
                    ACM_ADDRESS_NAME,
                    name.as_bytes(),
                )],
                false,
                1,
            );
            let reply = lock(&engine).resolve(src, &req, 1).unwrap();
            match reply.status() {
                0 => Some(
                    crate::request::path::PathRecord::decode(
                        reply.entry(0).info.first_chunk().unwrap(),
                    )
                    .dgid
                    .to_string(),
                ),
                s => {
                    assert_eq!(s, ACM_STATUS_ENODATA as u8);
                    None
                }
            }
        };
        for name in ["keep", "move", "gone"] {
            assert!(ask(name).is_some(), "{name} is cached now");
        }
        assert_eq!(ask("new"), None);
        std::fs::write(&path, "keep fe80::1\nmove fe80::22\nnew fe80::4\n").unwrap();
        let (changed, _) = reload(&engine, &path);
        assert_eq!(changed, 7, "move, gone, new and four GIDs");
        assert_eq!(ask("keep").as_deref(), Some("fe80::1"));
        assert_eq!(ask("move").as_deref(), Some("fe80::22"));
        assert_eq!(ask("gone"), None);
        assert_eq!(ask("new").as_deref(), Some("fe80::4"));
        assert_eq!(lock(&engine).cached(), 3, "keep, move and new");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
