//! The provider's own thread: it receives discovery traffic, runs the
//! engine's timers, sends every datagram and makes the neighbour-table
//! lookups, so that nothing waits on the daemon's event loop.

use super::net::{Net, NetEvent};
use super::round::{round, Neighbour, Wake, Worker};
use super::schedule::Schedule;
use super::{lock, perform, Runtime};
use crate::daemon::Daemon;
use crate::discovery::Datagram;
use crate::discovery::{NeighbourJob, NssJob};
use crate::engine::{Engine, Input, Outgoing};
use crate::threads::Stop;
use acm_prov_sys::ACM_STATUS_ENOMEM;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest sleep without a deadline: bounds how late a new interface is
/// noticed for multicast.
pub const IDLE: Duration = Duration::from_secs(1);

/// Starts the worker thread, supervised: if it panics, the requests
/// waiting on discovery are answered with an error at once and the thread
/// starts again.
pub fn spawn<D: Daemon + Copy + 'static>(
    rt: &'static Runtime<D>,
    net: Arc<Net>,
) -> std::io::Result<()> {
    let threads = &rt.threads;
    let stop = threads.stop_flag();
    let for_recovery = net.clone();
    let resolvers = super::nss::spawn(rt)?;
    // The stop wakes the resolvers through a copy of their channel.
    let wake = std::sync::Mutex::new(resolvers.clone());
    threads.on_stop(Box::new(move || {
        let tx = wake.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..super::nss::THREADS {
            let _ = tx.send(None);
        }
    }));
    threads.spawn(
        "discovery",
        "urdma-discovery",
        move || run(rt, &net, &resolvers, &stop),
        move || recover(rt, &for_recovery),
    )
}

/// After a panic of the worker: what it was doing is abandoned, and every
/// request waiting for it is answered (librdmacm waits for the daemon's
/// reply without a timeout, so an unanswered request hangs its client).
fn recover<D: Daemon + Copy>(rt: &'static Runtime<D>, net: &Net) {
    let fx = {
        let mut e = lock(&rt.engine);
        e.input(Input::WorkerFailed(ACM_STATUS_ENOMEM as u8), Instant::now());
        let own = e.poll().unwrap_or_default();
        rt.schedule().round(own, Instant::now()).0
    };
    perform(rt.daemon(), Some(net), &fx);
}

fn run<D: Daemon + Copy + 'static>(
    rt: &'static Runtime<D>,
    net: &Net,
    resolvers: &Sender<super::nss::Work>,
    stop: &Stop,
) {
    let mut thread = Thread {
        rt,
        net,
        resolvers,
        wake: None,
        times: Times::default(),
    };
    let mut lag = Lag::default();
    lock(&rt.engine).input(Input::TimersRun, Instant::now());
    while !stop.requested() {
        let wake = thread.wake;
        let timeout = wake.map_or(IDLE, |t| t.saturating_duration_since(Instant::now()));
        let events = net.poll(timeout);
        let now = Instant::now();
        let overslept = wake.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        thread.times = Times::default();
        round(&mut thread, now, Wake::Deadline, |e| {
            for ev in events {
                match ev {
                    NetEvent::Datagram { from, to, bytes } => e.on_datagram(from, to, &bytes, now),
                    NetEvent::Unreachable { dest, payload } => {
                        e.input(Input::Unreachable(dest, &payload), now)
                    }
                }
            }
        });
        let Times { neighbours, engine } = thread.times;
        lag.round(
            overslept,
            neighbours,
            engine,
            now.elapsed() - neighbours - engine,
        );
    }
    lock(&rt.engine).input(Input::TimersStopped, Instant::now());
}

/// The worker thread, as a round acts through it: the runtime's locks,
/// sockets, resolver threads and netlink.
struct Thread<'a, D: Daemon + 'static> {
    rt: &'static Runtime<D>,
    net: &'a Net,
    resolvers: &'a Sender<super::nss::Work>,
    /// When the last round said to wake.
    wake: Option<Instant>,
    /// Where the round's time went.
    times: Times,
}

/// How long a round spent in the neighbour table and in the engine.
#[derive(Default)]
struct Times {
    neighbours: Duration,
    engine: Duration,
}

impl<D: Daemon + Copy + 'static> Worker<D> for Thread<'_, D> {
    fn with_schedule<R>(&mut self, f: impl FnOnce(&mut Schedule) -> R) -> R {
        f(&mut self.rt.schedule())
    }

    fn with_engine<R>(&mut self, f: impl FnOnce(&mut Engine<D>, &mut Schedule) -> R) -> Option<R> {
        let start = Instant::now();
        let r = {
            let mut e = lock(&self.rt.engine);
            f(&mut e, &mut self.rt.schedule())
        };
        self.times.engine = start.elapsed();
        Some(r)
    }

    fn neighbours(&mut self, due: Vec<NeighbourJob>) -> Vec<Neighbour> {
        let start = Instant::now();
        let answers = due
            .into_iter()
            .map(|job| {
                let mac = super::neigh::mac_of(job.ip).unwrap_or_else(|e| {
                    log::debug!("neighbour table: {e}");
                    None
                });
                (job, mac)
            })
            .collect();
        self.times.neighbours = start.elapsed();
        answers
    }

    fn resolve(&mut self, job: NssJob) {
        // The resolvers outlive the worker; a failed send means the
        // provider stops.
        let _ = self.resolvers.send(Some(job));
    }

    fn answer(&mut self, replies: &[Outgoing]) {
        super::reply(self.rt.daemon(), replies);
    }

    fn send(&mut self, datagrams: Vec<Datagram>) {
        for d in &datagrams {
            self.net.send(d);
        }
    }

    fn sleep_until(&mut self, at: Option<Instant>) {
        self.wake = at;
    }
}

/// A round this far behind its deadline is said in the log: lookups time
/// out while it lasts, and a lookup that fails so is then explained.
const LAG_LOGGED: Duration = Duration::from_millis(250);

/// The worker's rounds that ran late, said at most every
/// [`crate::summary::EVERY`].
#[derive(Default)]
struct Lag(crate::summary::Throttle);

impl Lag {
    /// A round that woke `overslept` past its deadline, then spent
    /// `neighbours` in the neighbour table, `engine` in the engine and
    /// `sends` sending.
    fn round(
        &mut self,
        overslept: Duration,
        neighbours: Duration,
        engine: Duration,
        sends: Duration,
    ) {
        let behind = overslept + neighbours + engine + sends;
        if behind < LAG_LOGGED {
            return;
        }
        let Some(held) = self.0.pass(Instant::now(), crate::summary::EVERY) else {
            return;
        };
        let ms = |d: Duration| d.as_millis();
        log::warn!(
            "discovery thread {} ms behind: woke {} ms after its deadline, then {} ms in the \
             neighbour table, {} ms deciding, {} ms sending{}",
            ms(behind),
            ms(overslept),
            ms(neighbours),
            ms(engine),
            ms(sends),
            match held {
                0 => String::new(),
                n => format!(" ({n} more such rounds since the last such line)"),
            }
        );
    }
}
