//! The provider's own thread: it receives discovery traffic, runs the
//! timers of lookups and announcements, and makes the neighbour-table
//! lookups, so that nothing waits on the daemon's event loop.

use super::net::{Net, NetEvent};
use super::{lock, perform};
use crate::engine::Engine;
use crate::host::Host;
use crate::threads::{Stop, Threads};
use acm_prov_sys::ACM_STATUS_ENOMEM;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest sleep without a deadline: bounds how late a new interface is
/// noticed for multicast.
const IDLE: Duration = Duration::from_secs(1);

/// Starts the worker thread, supervised: if it panics, the requests
/// waiting on discovery are answered with an error at once and the thread
/// starts again.
pub fn spawn<H: Host + Copy + 'static>(
    threads: &Threads,
    engine: &'static Mutex<Engine<H>>,
    net: Arc<Net>,
) -> std::io::Result<()> {
    let stop = threads.stop_flag();
    let for_recovery = net.clone();
    let resolvers = super::nss::spawn(threads, engine, net.clone())?;
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
        move || run(engine, &net, &resolvers, &stop),
        move || recover(engine, &for_recovery),
    )
}

/// After a panic of the worker: what it was doing is abandoned, and every
/// request waiting for it is answered (librdmacm waits for the daemon's
/// reply without a timeout, so an unanswered request hangs its client).
fn recover<H: Host + Clone>(engine: &'static Mutex<Engine<H>>, net: &Net) {
    let (host, fx) = {
        let mut e = lock(engine);
        let answered = e.abandon_all(ACM_STATUS_ENOMEM as u8);
        log::error!("discovery thread: {answered} waiting requests answered with an error");
        (e.host().clone(), e.take_effects())
    };
    perform(&host, Some(net), fx);
}

fn run<H: Host + Clone>(
    engine: &'static Mutex<Engine<H>>,
    net: &Net,
    resolvers: &Sender<super::nss::Work>,
    stop: &Stop,
) {
    while !stop.requested() {
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
            #[cfg(feature = "fault-injection")]
            crate::fault::in_worker(&e);
            for job in e.take_nss_jobs() {
                // The resolvers outlive the worker; a failed send means the
                // provider stops.
                let _ = resolvers.send(Some(job));
            }
            (e.host().clone(), e.take_effects(), e.take_neighbour_jobs())
        };
        perform(&host, Some(net), fx);
        if jobs.is_empty() {
            continue;
        }
        let results: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let mac = super::neigh::mac_of(job.ip).unwrap_or_else(|e| {
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
