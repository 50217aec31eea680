//! The files watcher: a thread of the provider's own looks at the hosts
//! file, the options file and the key file every [`POLL`], reads and
//! checks a new version without holding the engine, and then puts it in
//! force in one short step. The daemon's event loop never waits for it.

use super::lock;
use crate::config::hosts::Hosts;
use crate::config::reload::{read, stamp, Stamp, Watcher, POLL};
use crate::config::Config;
use crate::daemon::Daemon;
use crate::engine::reconfigure::{Applied, Change};
use crate::engine::Engine;
use crate::threads::Threads;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Reads the file again and puts it in force. Returns how many
/// destinations changed.
pub fn reload<D: Daemon>(engine: &Mutex<Engine<D>>, path: &Path) -> usize {
    let (new, _) = read(path);
    let old = lock(engine).hosts();
    let changed = Hosts::changes(&old, &new);
    let (addresses, n) = (new.len(), changed.len());
    let hosts = Arc::new(new);
    lock(engine).reconfigure(Change::Hosts { hosts, changed });
    log::info!(
        "hosts file {}: reloaded, {addresses} addresses, {n} destinations changed",
        path.display(),
    );
    n
}

/// Reads the options file again and puts its `urdma_` keys in force, those
/// that can be while running; names the others, which wait for a restart.
pub fn reconfigure<D: Daemon>(engine: &Mutex<Engine<D>>, path: &Path) -> Applied {
    let (new, problems) = Config::load(path);
    for d in &problems {
        log::error!("{d}");
    }
    let old = lock(engine).config().clone();
    let applied = lock(engine).reconfigure(Change::Options(new.clone()));
    let shown = path.display();
    for key in &applied.live {
        let value = new.describe(key).unwrap_or_default();
        log::info!("options file {shown}: {key} {value} in force");
    }
    for key in &applied.restart {
        let (was, value) = (old.describe(key), new.describe(key));
        log::warn!(
            "options file {shown}: {key} {} needs a restart of the daemon; {key} {} stays in force",
            value.unwrap_or_default(),
            was.unwrap_or_default()
        );
    }
    if applied.live.is_empty() && applied.restart.is_empty() {
        log::info!("options file {shown}: reread, no urdma_ key changed");
    }
    applied
}

/// A file the watcher follows, and what puts a new version in force.
pub struct Followed {
    watcher: Watcher,
    apply: Box<dyn FnMut(&Path) + Send>,
}

impl Followed {
    /// `path`, whose version `loaded` is in force (`None`: it was
    /// missing), put in force again by `apply` when it changes.
    pub fn new(
        path: PathBuf,
        loaded: Option<Stamp>,
        apply: impl FnMut(&Path) + Send + 'static,
    ) -> Followed {
        Followed {
            watcher: Watcher::new(path, loaded),
            apply: Box::new(apply),
        }
    }
}

/// Starts the thread that watches the files `followed`.
pub fn spawn(threads: &Threads, followed: Vec<Followed>) -> std::io::Result<()> {
    let stop = threads.stop_flag();
    // Outside the body, so that a restart after a panic goes on from the
    // versions last put in force.
    let mut followed = followed;
    threads.spawn(
        "files watcher",
        "urdma-files",
        move || {
            while !stop.sleep(POLL) {
                for f in &mut followed {
                    if f.watcher.due() {
                        #[cfg(feature = "fault-injection")]
                        crate::fault::in_watcher(f.watcher.path());
                        let stamp = stamp(f.watcher.path());
                        (f.apply)(f.watcher.path());
                        f.watcher.loaded(stamp);
                    }
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
    use crate::config::reload::tests::temp;
    use crate::config::Config;
    use crate::daemon::FakeDaemon;
    use crate::local::PortInfo;
    use crate::request::msg::tests::{addr_entry, request};
    use acm_prov_sys::{ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST, ACM_STATUS_ENODATA};

    #[test]
    fn a_reload_changes_answers_and_empties_the_cache_of_what_changed() {
        let path = temp("engine");
        std::fs::write(&path, "keep fe80::1\nmove fe80::2\ngone fe80::3\n").unwrap();
        let (hosts, _) = read(&path);
        let mut e = Engine::new(FakeDaemon::default(), Config::default(), hosts);
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
            let reply = lock(&engine)
                .resolve_at(src, &req, 1, std::time::Instant::now())
                .unwrap();
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
        let changed = reload(&engine, &path);
        assert_eq!(changed, 7, "move, gone, new and four GIDs");
        assert_eq!(ask("keep").as_deref(), Some("fe80::1"));
        assert_eq!(ask("move").as_deref(), Some("fe80::22"));
        assert_eq!(ask("gone"), None);
        assert_eq!(ask("new").as_deref(), Some("fe80::4"));
        assert_eq!(lock(&engine).tables().cached, 3, "keep, move and new");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
