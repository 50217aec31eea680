//! The running provider: the engine behind its lock, the discovery sockets,
//! the provider's own threads and their stop, in one value the boundary
//! keeps for the life of the library.
//!
//! Who runs what: the daemon's event loop calls in through the boundary
//! and only takes the engine's lock, answers from the cache, and hands any
//! other work to the worker ([`Runtime::with_engine`]); it never touches a
//! socket. The discovery worker ([`worker`]) owns the sockets, the timers
//! and the neighbour table, helped by the resolver threads ([`nss`]) for
//! names; the watcher ([`watcher`]) rereads the hosts, options and key
//! files; the metrics writer ([`report`]) writes the metrics file. All
//! start lazily at the first port and stop at unload.

mod neigh;
pub mod net;
pub mod nss;
pub mod report;
pub mod schedule;
pub mod watcher;
pub mod worker;

use crate::config::keyfile::KeyFile;
use crate::config::reload::{self, Stamp};
use crate::config::Config;
use crate::daemon::Daemon;
use crate::discovery::auth::Auth;
use crate::discovery::seal::{Keyring, Sealing, WallClock};
use crate::discovery::Families;
use crate::engine::reconfigure::Change;
use crate::engine::{Effects, Engine, Outgoing};
use crate::threads::Threads;
use net::Net;
use schedule::Schedule;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// The engine, also after a panic poisoned its lock: its state is kept
/// consistent per operation, and refusing every later request would be
/// worse.
pub(crate) fn lock<D: Daemon>(engine: &Mutex<Engine<D>>) -> MutexGuard<'_, Engine<D>> {
    engine.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct Runtime<D: Daemon> {
    engine: Mutex<Engine<D>>,
    /// A copy of the engine's host: what sends a reply after the engine's
    /// lock is released, without copying it out of the engine per request.
    daemon: D,
    /// What the daemon's thread and the resolvers hand over to the
    /// worker, and when the worker wakes (`schedule.rs`). Taken only under
    /// the engine's lock, after it, so datagrams leave in the order they
    /// were made.
    schedule: Mutex<Schedule>,
    /// The discovery sockets, once the first port is up (`None`: disabled
    /// or unavailable).
    net: OnceLock<Option<Arc<Net>>>,
    /// The version of the hosts file read at start, for the watcher.
    hosts_loaded: Option<Stamp>,
    /// The options file the configuration came from and its version then,
    /// for the watcher: a change made before the first port is not missed.
    options: Option<(PathBuf, Option<Stamp>)>,
    /// The key file in force, once discovery is authenticated.
    keys: OnceLock<PathBuf>,
    /// Set once the watcher and the metrics writer run (or could not be
    /// started).
    watching: OnceLock<()>,
    /// The worker, the resolvers, the watcher and the metrics writer.
    /// Stopped when the library is unloaded, not when the last device
    /// closes: the daemon closes a device whose last port went down and
    /// opens it again when the port comes back, and the withdrawal of the
    /// port's addresses still has to go out.
    threads: Threads,
}

impl<D: Daemon + Copy + 'static> Runtime<D> {
    /// The provider with the configuration `cfg` (its problems already
    /// logged) and the hosts file it names.
    pub fn new(daemon: D, cfg: Config, options: Option<PathBuf>) -> Runtime<D> {
        for key in crate::config::KEYS {
            log::debug!("{key} {}", cfg.describe(key).unwrap_or_default());
        }
        let (hosts, stamp) = reload::read(&cfg.hosts_file);
        if stamp.is_some() {
            log::info!(
                "hosts file {}: {} addresses",
                cfg.hosts_file.display(),
                hosts.len()
            );
        }
        Runtime {
            engine: Mutex::new(Engine::new(daemon, cfg, hosts)),
            daemon,
            schedule: Mutex::new(Schedule::new(Some(worker::IDLE))),
            net: OnceLock::new(),
            hosts_loaded: stamp,
            options: options.map(|p| {
                let s = reload::stamp(&p);
                (p, s)
            }),
            keys: OnceLock::new(),
            watching: OnceLock::new(),
            threads: Threads::default(),
        }
    }

    /// The daemon's helpers, for replies sent outside the engine's lock.
    #[inline]
    pub fn daemon(&self) -> &D {
        &self.daemon
    }

    fn net(&self) -> Option<&Net> {
        self.net.get().and_then(Option::as_deref)
    }

    /// Runs `f` on the engine, then, with the engine unlocked, sends the
    /// replies it produced: the daemon's own locks are never taken while
    /// the engine is held. The rest goes to the worker (`hand_over`).
    #[inline]
    pub fn with_engine<R>(&self, f: impl FnOnce(&mut Engine<D>) -> R) -> R {
        let (r, replies) = {
            let mut e = lock(&self.engine);
            let r = f(&mut e);
            // Most calls (every cache hit) produce nothing.
            let replies = e.poll().map(|fx| self.hand_over(fx));
            (r, replies)
        };
        if let Some(replies) = replies {
            reply(&self.daemon, &replies);
        }
        r
    }

    /// Keeps for the worker what only it does (send, ask the resolvers and
    /// the neighbour table), and wakes it when it has to act before it
    /// meant to; returns the replies. Called under the engine's lock: the
    /// daemon's thread never touches a socket, and what is sent leaves from
    /// one thread in the order it was made.
    fn hand_over(&self, fx: Effects) -> Vec<Outgoing> {
        let (replies, wake) = self.schedule().hand_over(fx);
        if wake {
            if let Some(net) = self.net() {
                net.wake();
            }
        }
        replies
    }

    /// The worker's schedule; under the engine's lock, or alone.
    fn schedule(&self) -> MutexGuard<'_, Schedule> {
        self.schedule.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts what a port needs, once: the discovery sockets and worker,
    /// and the hosts-file watcher. Lazily, at the first port, never when
    /// the library is loaded.
    pub fn start(&'static self) {
        let families = self.start_discovery();
        self.with_engine(|e| e.set_discovery_up(families, Instant::now()));
        self.watch_files();
    }

    /// Opens the discovery sockets and starts the worker, once; the
    /// families discovery is on for (none: off).
    fn start_discovery(&'static self) -> Families {
        let cfg = lock(&self.engine).config().clone();
        let mut discovery = cfg.discovery;
        self.net.get_or_init(|| {
            let mut sealing = Sealing::default();
            if let (true, Some(path)) = (discovery, &cfg.auth_key_file) {
                match KeyFile::load(path) {
                    Ok(file) => {
                        let ring = Keyring::new(&file);
                        log::info!(
                            "discovery: authenticated, signing with key {} of {}",
                            ring.signing_id(),
                            ring.len()
                        );
                        let auth = Auth::new(ring, WallClock::system());
                        // A new run: ahead of all that a former run of
                        // this host sent.
                        sealing = Sealing::with(auth.sealer());
                        lock(&self.engine).reconfigure(Change::Auth(auth));
                        let _ = self.keys.set(path.clone());
                    }
                    Err(err) => {
                        log::error!("{err}; discovery disabled");
                        lock(&self.engine).disable_discovery();
                        discovery = false;
                    }
                }
            }
            if !discovery && cfg.derive.is_empty() {
                log::info!("discovery disabled; only local and static data resolve");
                return None;
            }
            let net = match Net::open(cfg.discovery_port, sealing) {
                Ok(n) => Arc::new(n),
                Err(e) => {
                    log::error!(
                        "discovery: cannot open UDP port {}: {e}; discovery disabled",
                        cfg.discovery_port
                    );
                    return None;
                }
            };
            if let Err(e) = worker::spawn(self, net.clone()) {
                log::error!("discovery: cannot start its thread: {e}; discovery disabled");
                return None;
            }
            if discovery {
                log::info!("discovery on UDP port {}", cfg.discovery_port);
            }
            Some(net)
        });
        match (self.net(), lock(&self.engine).config().discovery) {
            (Some(net), true) => net.families(),
            _ => Families::NONE,
        }
    }

    /// Starts watching the hosts, options and key files for changes and
    /// writing the metrics, once.
    fn watch_files(&'static self) {
        self.watching.get_or_init(|| {
            let cfg = lock(&self.engine).config().clone();
            let hosts = (cfg.hosts_file, self.hosts_loaded);
            let (options, keys) = (self.options.clone(), self.keys.get().cloned());
            if let Err(e) = watcher::spawn(&self.threads, &self.engine, hosts, options, keys) {
                log::error!("cannot start the files watcher: {e}; changes need a restart");
            }
            if let Some(path) = cfg.metrics_file {
                if let Err(e) = report::spawn(&self.threads, &self.engine, path) {
                    log::error!("cannot start the metrics writer: {e}; no metrics file");
                }
            }
        });
    }

    /// Stops the provider's threads and waits for them to end: a thread
    /// must not run on in code that is about to be unmapped.
    pub fn stop(&self) {
        self.threads.stop(|| {
            if let Some(net) = self.net() {
                net.wake();
            }
        });
    }
}

/// Answers the daemon's clients; called with the engine unlocked.
fn reply<D: Daemon>(host: &D, replies: &[Outgoing]) {
    if replies.is_empty() {
        return;
    }
    host.answer_late(&mut || {
        for r in replies {
            if r.query {
                host.query_response(r.id, &r.msg);
            } else {
                host.resolve_response(r.id, &r.msg);
            }
        }
    });
}

/// Sends what the engine produced: replies to the daemon, datagrams to the
/// network (the jobs are the caller's). Called with the engine unlocked.
pub fn perform<D: Daemon>(host: &D, net: Option<&Net>, fx: &Effects) {
    reply(host, &fx.replies);
    if let Some(net) = net {
        for d in &fx.datagrams {
            net.send(d);
        }
    }
}
