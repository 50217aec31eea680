//! The thread that sends to the groups.
//!
//! The kernel hands a group datagram to every listener on the host inside
//! the sender's `sendmsg`, and wakes each of them: with hundreds of network
//! namespaces on one bridge (containers, or the fleet bench's daemons on
//! two cores) one announcement held the worker 0.4 to 0.9 s, and every
//! query that reached the host meanwhile waited for its reply. Sent from a
//! thread of their own, group datagrams cost what they cost without
//! holding up a reply. Unicast datagrams still leave from the worker in
//! the order they were made, and group datagrams among themselves; between
//! the two there is no order to keep (a receiver takes a welcome, a
//! renewal or a query whichever comes first, and a sealed copy that
//! overtakes another is inside the reorder window, `seal.rs`).

use super::net::Net;
use crate::discovery::Datagram;
use crate::threads::Threads;
use std::sync::mpsc::{channel, SendError, Sender};
use std::sync::Arc;

/// Where the worker puts what it sends.
pub struct Outbox(Sender<Datagram>);

/// Starts the group thread. It ends once the returned outbox is dropped
/// (the worker has ended), after sending everything put in it.
pub fn spawn(threads: &Threads, net: Arc<Net>) -> std::io::Result<Outbox> {
    let (tx, rx) = channel::<Datagram>();
    threads.spawn(
        "group sender",
        "urdma-groups",
        move || {
            while let Ok(d) = rx.recv() {
                net.send(&d);
            }
        },
        // A panic loses the datagram being sent, as a lost datagram on
        // the wire would be: announcements are renewed, queries retried.
        || {},
    )?;
    Ok(Outbox(tx))
}

impl Outbox {
    /// Sends `d`: from the group thread if it is for the groups (at once
    /// if that thread has gone), from this thread otherwise.
    pub fn send(&self, net: &Net, d: Datagram) {
        match d {
            Datagram::Multicast { .. } => {
                if let Err(SendError(d)) = self.0.send(d) {
                    net.send(&d);
                }
            }
            unicast => net.send(&unicast),
        }
    }
}
