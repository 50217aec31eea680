//! The hosts file's versions: read at start, and read again when a look
//! at the file (the runtime's watcher thread, every [`POLL`]) finds it
//! changed and settled.

use crate::config::hosts::Hosts;
use crate::config::Diagnostic;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
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
    let (hosts, problems, absent) = match acm_proto::text::read(path) {
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

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn loaded(&mut self, stamp: Option<Stamp>) {
        self.loaded = stamp;
        self.seen = stamp;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A hosts file path in a directory of this test's own.
    pub(crate) fn temp(name: &str) -> PathBuf {
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
}
