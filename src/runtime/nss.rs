//! The system's resolver (`getaddrinfo`: /etc/hosts, DNS, as nsswitch.conf
//! says) for names discovery cannot find on the segment. An answer can
//! take seconds, and getaddrinfo cannot be interrupted, so it runs on a few
//! threads of its own: a DNS server that never answers holds up only the
//! names waiting for it, never the worker, the daemon's event loop or any
//! other lookup, and each of those names still fails at its stage's
//! deadline.

use super::{lock, Runtime};
use crate::daemon::Daemon;
use crate::discovery::NssError;
use crate::discovery::NssJob;
use crate::engine::Input;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Names asked at once. More would only add threads waiting on the same
/// unanswering server; a name queued behind them fails at its deadline.
pub const THREADS: usize = 4;

/// What a resolver thread is handed: a name, or the end (`None`: the
/// provider stops). Idle threads sleep in the channel, costing nothing.
pub type Work = Option<NssJob>;

/// What `gai_strerror` says for `EAI_NONAME` and `EAI_NODATA` (glibc;
/// musl's `EAI_NONAME`): the errors that mean the name does not exist.
/// The standard library hands getaddrinfo's error over only as this text;
/// one not recognised (another language) counts as not finding out, the
/// side that is never remembered.
const NO_SUCH_NAME: [&str; 3] = [
    "Name or service not known",
    "No address associated with hostname",
    "Name does not resolve",
];

/// The addresses the system's resolver gives for `name`, or why none:
/// that there is no such name, or that it could not find out (a DNS
/// server that did not answer in time: `EAI_AGAIN`).
pub fn resolve(name: &str) -> Result<Vec<IpAddr>, NssError> {
    let addrs = (name, 0u16)
        .to_socket_addrs()
        .map_err(|e| classify(e.to_string()))?;
    let mut ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
    ips.sort();
    ips.dedup();
    Ok(ips)
}

/// Whether the resolver's error says no or could not find out.
fn classify(why: String) -> NssError {
    match NO_SUCH_NAME.iter().any(|t| why.ends_with(t)) {
        true => NssError::NoSuchName(why),
        false => NssError::Failed(why),
    }
}

/// Starts the resolver threads; the worker hands them names through the
/// returned sender.
pub fn spawn<D: Daemon + Copy + 'static>(rt: &'static Runtime<D>) -> std::io::Result<Sender<Work>> {
    let threads = &rt.threads;
    let (tx, rx) = channel::<Work>();
    let rx = Arc::new(Mutex::new(rx));
    for i in 0..THREADS {
        let (rx, stop) = (rx.clone(), threads.stop_flag());
        threads.spawn(
            "resolver",
            &format!("urdma-nss{i}"),
            move || {
                while let Some(job) = next(&rx) {
                    if stop.requested() {
                        return;
                    }
                    answer(rt, job);
                }
            },
            // A name it held fails at its lookup's deadline.
            || {},
        )?;
    }
    Ok(tx)
}

/// The next name to ask; `None` when the provider stops.
fn next(rx: &Mutex<Receiver<Work>>) -> Work {
    let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
    rx.recv().ok().flatten()
}

/// Asks the system's resolver and hands the answer to discovery; a name
/// whose lookup gave up meanwhile is not asked at all.
fn answer<D: Daemon + Copy + 'static>(rt: &Runtime<D>, job: NssJob) {
    if Instant::now() >= job.deadline {
        return;
    }
    let answer = resolve(&job.name);
    let replies = {
        let mut e = lock(&rt.engine);
        e.input(Input::Nss(&job.key, answer), Instant::now());
        e.poll().map(|fx| rt.hand_over(fx))
    };
    if let Some(replies) = replies {
        super::reply(rt.daemon(), &replies);
    }
    // The worker sends what the answer led to: it was woken for it.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_through_the_system_and_unknown_ones_fail() {
        let ips = resolve("localhost").expect("localhost resolves");
        assert!(ips.iter().all(|ip| ip.is_loopback()), "{ips:?}");
        assert!(resolve("no-such-host.invalid").is_err());
    }

    #[test]
    fn only_no_such_name_is_a_no() {
        let std = |t: &str| classify(format!("failed to lookup address information: {t}"));
        for no in NO_SUCH_NAME {
            assert!(matches!(std(no), NssError::NoSuchName(_)), "{no}");
        }
        for unknown in [
            "Temporary failure in name resolution",
            "Non-recoverable failure in name resolution",
            "Connection refused (os error 111)",
        ] {
            assert!(matches!(std(unknown), NssError::Failed(_)), "{unknown}");
        }
    }
}
