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

pub mod control;
mod neigh;
pub mod net;
pub mod nss;
pub mod report;
pub mod round;
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
use crate::engine::{Effects, Engine, Input, Outgoing};
use crate::threads::Threads;
use net::Net;
use schedule::Schedule;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;
use watcher::Followed;

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
    /// Set once discovery was started (or found off or unusable).
    begun: OnceLock<()>,
    /// Set once the watcher runs (or could not be started).
    watching: OnceLock<()>,
    /// Set once the metrics writer and the control socket run.
    serving: OnceLock<()>,
    /// Why the key file could not be used, while it cannot.
    key_problem: Mutex<Option<String>>,
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
            begun: OnceLock::new(),
            watching: OnceLock::new(),
            serving: OnceLock::new(),
            key_problem: Mutex::new(None),
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

    /// Starts what serves the operator, once, at the first device the
    /// daemon opens: the metrics file (so it exists before any port is
    /// up, with `urdma_up` and the ports served) and the control socket.
    pub fn serve(&'static self) {
        self.serving.get_or_init(|| {
            if let Err(e) = report::spawn(&self.threads, &self.engine) {
                log::error!("cannot start the metrics writer: {e}; no metrics file");
            }
            control::spawn(self);
        });
    }

    /// Starts what a port needs, once: the discovery sockets and worker,
    /// and the hosts-file watcher. Lazily, at the first port, never when
    /// the library is loaded.
    pub fn start(&'static self) {
        self.serve();
        let families = match self.begun.set(()) {
            Ok(()) => self.start_discovery(),
            Err(()) => self.families(),
        };
        self.with_engine(|e| e.input(Input::DiscoveryUp(families), Instant::now()));
        self.watch_files();
    }

    /// Opens the discovery sockets and starts the worker, once; the
    /// families discovery is on for (none: off). A key file that cannot be
    /// used keeps discovery off until it can ([`Runtime::take_key`]): an
    /// unusable key must not mean unauthenticated discovery.
    fn start_discovery(&'static self) -> Families {
        let cfg = lock(&self.engine).config().clone();
        match (cfg.discovery, &cfg.auth_key_file) {
            (false, _) => log::info!("discovery disabled; only local and static data resolve"),
            (true, None) => return self.open_net(Sealing::default()),
            (true, Some(path)) => {
                if let Some(families) = self.load_key(path) {
                    return families;
                }
            }
        }
        // Derivations poke their addresses through the sockets.
        if !cfg.derive.is_empty() {
            self.open_net(Sealing::default());
        }
        Families::NONE
    }

    /// The families discovery is on for now: its sockets', once they are
    /// open and any key file configured is in force.
    fn families(&self) -> Families {
        let on = {
            let e = lock(&self.engine);
            let cfg = e.config();
            cfg.discovery && (cfg.auth_key_file.is_none() || self.keys.get().is_some())
        };
        match (self.net(), on) {
            (Some(net), true) => net.families(),
            _ => Families::NONE,
        }
    }

    /// Logs why the key file cannot be used, and keeps it for `health`.
    fn refuse_key(&self, why: &str) {
        log::error!(
            "{why}; discovery off until the key file is mended (it is watched: no restart needed)"
        );
        *self.key_problem.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.to_string());
    }

    /// Loads the key file at `path` and puts its keys in force: the first
    /// time, authentication comes on with them and the families discovery
    /// is on for are returned; later, they replace the keys in force
    /// (`None`). A file the provider refuses changes nothing (`None`): the
    /// keys in force stay, or discovery stays off and `health` says why.
    fn load_key(&'static self, path: &Path) -> Option<Families> {
        let in_force = self.keys.get().is_some();
        let file = match KeyFile::load(path) {
            Ok(file) => file,
            Err(err) if in_force => {
                log::error!("{err}; the keys in force stay");
                return None;
            }
            Err(err) => {
                self.refuse_key(&err.to_string());
                return None;
            }
        };
        let ring = Keyring::new(&file);
        let (signing, keys) = (ring.signing_id(), ring.len());
        if in_force {
            lock(&self.engine).reconfigure(Change::Keys(ring));
            log::info!(
                "key file {}: reloaded, signing with key {signing} of {keys}",
                path.display()
            );
            return None;
        }
        log::info!("discovery: authenticated, signing with key {signing} of {keys}");
        Some(self.authenticate(path, ring))
    }

    /// Signs and checks with `ring` from now on, and opens the sockets
    /// sealed by it (or seals those opened for derivations); the families
    /// discovery is on for.
    fn authenticate(&'static self, path: &Path, ring: Keyring) -> Families {
        let auth = Auth::new(ring, WallClock::system());
        // A new run: ahead of all that a former run of this host sent.
        let sealing = Sealing::with(auth.sealer());
        lock(&self.engine).reconfigure(Change::Auth(auth));
        let _ = self.keys.set(path.to_path_buf());
        *self.key_problem.lock().unwrap_or_else(|p| p.into_inner()) = None;
        match self.net() {
            Some(net) => {
                net.seal_with(sealing);
                net.families()
            }
            None => self.open_net(sealing),
        }
    }

    /// The key file at `path` changed: put its keys in force (the first
    /// time, discovery comes on), or say why they cannot be.
    fn take_key(&'static self, path: &Path) {
        let Some(families) = self.load_key(path) else {
            return;
        };
        self.with_engine(|e| e.input(Input::DiscoveryUp(families), Instant::now()));
        log::info!(
            "key file {}: accepted; discovery on{}",
            path.display(),
            if families.any() {
                ""
            } else {
                " (no socket could be opened)"
            }
        );
    }

    /// Opens the discovery sockets with `sealing` and starts the worker,
    /// once; the families they serve (none: they could not be opened).
    fn open_net(&'static self, sealing: Sealing) -> Families {
        let port = lock(&self.engine).config().discovery_port;
        let net = self.net.get_or_init(|| {
            let net = match Net::open(port, sealing) {
                Ok(n) => Arc::new(n),
                Err(e) => {
                    log::error!("discovery: cannot open UDP port {port}: {e}; discovery disabled");
                    return None;
                }
            };
            if let Err(e) = worker::spawn(self, net.clone()) {
                log::error!("discovery: cannot start its thread: {e}; discovery disabled");
                return None;
            }
            log::info!("discovery on UDP port {port}");
            Some(net)
        });
        match (net, lock(&self.engine).config().discovery) {
            (Some(net), true) => net.families(),
            _ => Families::NONE,
        }
    }

    /// Why discovery is not running as configured, for `health`.
    pub fn problems(&self) -> Vec<String> {
        let key = self.key_problem.lock().unwrap_or_else(|p| p.into_inner());
        key.iter().cloned().collect()
    }

    /// Starts watching the hosts, options and key files for changes, once.
    fn watch_files(&'static self) {
        self.watching.get_or_init(|| {
            let cfg = lock(&self.engine).config().clone();
            let engine = &self.engine;
            let mut followed = vec![Followed::new(cfg.hosts_file, self.hosts_loaded, |p| {
                watcher::reload(engine, p);
            })];
            if let Some((path, loaded)) = self.options.clone() {
                followed.push(Followed::new(path, loaded, |p| {
                    watcher::reconfigure(engine, p);
                }));
            }
            // Followed whether or not it could be used at start: mending
            // it is what turns discovery on.
            if let (true, Some(path)) = (cfg.discovery, cfg.auth_key_file) {
                let loaded = reload::stamp(&path);
                followed.push(Followed::new(path, loaded, |p| self.take_key(p)));
            }
            if let Err(e) = watcher::spawn(&self.threads, followed) {
                log::error!("cannot start the files watcher: {e}; changes need a restart");
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
        for d in &fx.work.datagrams {
            net.send(d);
        }
    }
}
