//! The provider's own thread: it receives discovery traffic, runs the
//! timers of lookups and announcements, and makes the neighbour-table
//! lookups, so that nothing waits on the daemon's event loop.

use crate::engine::{Effects, Engine};
use crate::host::Host;
use crate::net::{Net, NetEvent};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest sleep without a deadline: bounds how late a new interface is
/// noticed for multicast.
const IDLE: Duration = Duration::from_secs(1);

fn lock<H: Host>(engine: &Mutex<Engine<H>>) -> MutexGuard<'_, Engine<H>> {
    engine.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sends what an engine call produced: replies to the daemon, datagrams to
/// the network. Called with the engine unlocked.
pub fn perform<H: Host>(host: &H, net: Option<&Net>, fx: Effects) {
    if !fx.replies.is_empty() {
        host.answer_late(&mut || {
            for r in &fx.replies {
                if r.query {
                    host.query_response(r.id, &r.msg);
                } else {
                    host.resolve_response(r.id, &r.msg);
                }
            }
        });
    }
    if let Some(net) = net {
        for d in &fx.datagrams {
            net.send(d);
        }
        if fx.wake {
            net.wake();
        }
    }
}

/// Starts the worker thread.
pub fn spawn<H: Host + Clone + 'static>(
    engine: &'static Mutex<Engine<H>>,
    net: Arc<Net>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("urdma-discovery".into())
        .spawn(move || run(engine, &net))
        .map(|_| ())
}

fn run<H: Host + Clone>(engine: &'static Mutex<Engine<H>>, net: &Net) {
    loop {
        let timeout = lock(engine)
            .next_wake()
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or(IDLE)
            .min(IDLE);
        let events = net.poll(timeout);
        let now = Instant::now();
        let (host, fx, jobs) = {
            let mut e = lock(engine);
            for ev in events {
                match ev {
                    NetEvent::Datagram { from, to, bytes } => e.on_datagram(from, to, &bytes, now),
                    NetEvent::Unreachable { dest, payload } => {
                        e.on_unreachable(dest, &payload, now)
                    }
                }
            }
            e.on_timers(now);
            (e.host().clone(), e.take_effects(), e.take_neighbour_jobs())
        };
        perform(&host, Some(net), fx);
        if jobs.is_empty() {
            continue;
        }
        let results: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let mac = crate::neigh::mac_of(job.ip).unwrap_or_else(|e| {
                    log::debug!("neighbour table: {e}");
                    None
                });
                (job, mac)
            })
            .collect();
        let fx = {
            let mut e = lock(engine);
            let now = Instant::now();
            for (job, mac) in results {
                e.on_neighbour(job, mac, now);
            }
            e.take_effects()
        };
        perform(&host, Some(net), fx);
    }
}
