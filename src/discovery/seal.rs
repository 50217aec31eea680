//! Sealing of discovery datagrams (docs/protocol.md, Authentication):
//! the keys of the key file, the wall clock whose timestamps they carry,
//! and the [`Sealer`] that appends each datagram's trailer (key id,
//! timestamp, HMAC-SHA256 over the message and both). Opening them is
//! `auth.rs`.
//!
//! The engine decides what is sent; the sending side (the worker's
//! sockets, `runtime/net.rs`, and each simulated host, `urdma-dst`) seals
//! every copy through [`Sealing::copy`] as it leaves, so the copies of one
//! group datagram on two interfaces carry two timestamps and neither looks
//! replayed to a host that hears both.

use crate::config::keyfile::KeyFile;
use crate::discovery::wire::{AUTH_TRAILER_LEN, FLAG_AUTH};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

type HmacSha256 = Hmac<Sha256>;

/// How far behind the newest message taken from a source another one from
/// it may be and still be taken (if never taken before): the reordering
/// tolerated. A datagram waiting for the sender's kernel to resolve the
/// receiver's link address (ARP, IPv6 neighbour discovery) is released
/// when a solicitation is answered, and solicitations go once a second: a
/// datagram held through one lost solicitation arrives about a second late,
/// after those sent since. A captured message this much older than what
/// the source has sent since is useless.
pub const REORDER_US: u64 = 1_500_000;

/// Microseconds since the Unix epoch, by the system's clock.
pub fn wall_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The wall clock (microseconds since the Unix epoch) one engine's
/// authentication reads: the system's in the daemon ([`WallClock::system`]),
/// each simulated host's own, skewed, in the simulation. Timestamps are
/// compared across hosts, so this is the one clock of the core that is not
/// the monotonic `now` of its inputs.
#[derive(Clone)]
pub struct WallClock(std::sync::Arc<dyn Fn() -> u64 + Send + Sync>);

impl WallClock {
    pub fn system() -> WallClock {
        WallClock::new(wall_micros)
    }

    pub fn new(read: impl Fn() -> u64 + Send + Sync + 'static) -> WallClock {
        WallClock(std::sync::Arc::new(read))
    }

    #[inline]
    pub fn micros(&self) -> u64 {
        (self.0)()
    }
}

#[derive(Clone)]
pub(super) struct Key {
    pub(super) id: u32,
    /// Keyed once; each message clones the state.
    pub(super) mac: HmacSha256,
}

/// The keys of a key file, keyed for HMAC-SHA256: the first signs, all
/// verify.
pub struct Keyring {
    keys: Vec<Key>,
}

impl fmt::Debug for Keyring {
    // Never key material, even in a debug print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<u32> = self.keys.iter().map(|k| k.id).collect();
        f.debug_struct("Keyring").field("ids", &ids).finish()
    }
}

impl Keyring {
    /// The keys of `file`, each keyed once.
    pub fn new(file: &KeyFile) -> Keyring {
        let keys = file
            .keys()
            .map(|(id, bytes)| Key {
                id,
                // HMAC takes keys of any length (longer ones are hashed).
                mac: <HmacSha256 as hmac::digest::KeyInit>::new_from_slice(bytes)
                    .unwrap_or_else(|_| unreachable!("HMAC keys have no length limit")),
            })
            .collect();
        Keyring { keys }
    }

    /// The id of the key that signs.
    pub fn signing_id(&self) -> u32 {
        self.keys[0].id
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(super) fn signing(&self) -> &Key {
        &self.keys[0]
    }

    pub(super) fn find(&self, id: u32) -> Option<&Key> {
        self.keys.iter().find(|k| k.id == id)
    }
}

/// Seals outgoing datagrams. Shared by whatever sends them; timestamps
/// strictly increase across all of them, so no two messages from this host
/// share a MAC, even a retried QUERY or the copies of one announcement.
/// Threads seal and send independently, so they may send in another order
/// than they sealed: receivers tolerate that within [`REORDER_US`].
pub struct Sealer {
    /// Replaced whole when the key file changes (`Auth::rekey`): a message
    /// is sealed with the old key or the new one, never half of each.
    key: RwLock<Key>,
    clock: WallClock,
    /// The last timestamp sent.
    last_sent: AtomicU64,
}

impl Sealer {
    pub(super) fn new(key: Key, clock: WallClock) -> Sealer {
        Sealer {
            key: RwLock::new(key),
            clock,
            last_sent: AtomicU64::new(0),
        }
    }

    /// Starts this run's timestamps [`REORDER_US`] ahead of the clock;
    /// called once, before the first datagram leaves. Until the
    /// clock catches up, timestamps step by a microsecond.
    ///
    /// Receivers take a message at most [`REORDER_US`] older than the
    /// newest they took from its source. A former run of this host stopped
    /// before this one started, so everything it sent after its own first
    /// [`REORDER_US`] is at least that much older than anything this run
    /// sends; what it sent before is as much older as the time between the
    /// two starts. So a captured message of the former run (an announcement
    /// of a GID the host has left) is refused by any receiver that has taken
    /// a message of this run, however quickly the host restarted, unless the
    /// former run lasted less than [`REORDER_US`]. (As before, this holds
    /// only as long as the clock is not set back across the restart.)
    pub fn start(&self) {
        let ahead = self.clock.micros().saturating_add(REORDER_US);
        self.last_sent.fetch_max(ahead, Ordering::Relaxed);
    }

    /// Signs what is sealed from now on with `key`.
    pub(super) fn rekey(&self, key: Key) {
        *self.key.write().unwrap_or_else(|p| p.into_inner()) = key;
    }

    /// Sets the AUTH flag of an encoded message and appends its trailer.
    pub fn seal(&self, mut bytes: Vec<u8>) -> Vec<u8> {
        let now = self.clock.micros();
        let next = |last: u64| now.max(last + 1);
        let last = self
            .last_sent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| Some(next(l)))
            .unwrap_or_else(|l| l);
        let ts = next(last);
        let (id, mut mac) = {
            let key = self.key.read().unwrap_or_else(|p| p.into_inner());
            (key.id, key.mac.clone())
        };
        bytes[6] |= (FLAG_AUTH >> 8) as u8;
        bytes.reserve(AUTH_TRAILER_LEN);
        bytes.extend_from_slice(&id.to_be_bytes());
        bytes.extend_from_slice(&ts.to_be_bytes());
        mac.update(&bytes);
        bytes.extend_from_slice(&mac.finalize().into_bytes());
        bytes
    }
}

/// How what leaves a host is put on the wire: sealed, one copy at a time,
/// when authentication is on; as encoded when it is off.
#[derive(Clone, Default)]
pub struct Sealing(Option<Arc<Sealer>>);

impl Sealing {
    /// Sealed by `sealer`, whose run starts now ([`Sealer::start`]).
    pub fn with(sealer: Arc<Sealer>) -> Sealing {
        sealer.start();
        Sealing(Some(sealer))
    }

    /// Whether it seals.
    pub fn on(&self) -> bool {
        self.0.is_some()
    }

    /// The bytes of one copy of an encoded message, as sent.
    pub fn copy<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        match &self.0 {
            Some(s) => s.seal(bytes.to_vec()).into(),
            None => bytes.into(),
        }
    }
}
