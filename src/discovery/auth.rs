//! Opening authenticated discovery datagrams (docs/protocol.md,
//! Authentication; `seal.rs` seals them). With `urdma_auth_key_file` set,
//! every datagram carries a trailer: key id, timestamp, and an HMAC-SHA256
//! over the message and both. A receiver drops what it cannot verify, what
//! is too old or too far ahead, and what it has seen before.
//!
//! Against replay, each source has an anti-replay window, as IPsec's
//! (RFC 4303, 3.4.3) over sequence numbers, here over the sender's
//! timestamps: whatever is newer than the newest message taken from the
//! source moves the window on; what is behind it by less than
//! [`REORDER_US`] and was never taken (its MAC is not remembered) is taken
//! too, so messages that overtake each other on the way (the tries of a
//! query held while the sender resolves the receiver's link address, a
//! reply and an announcement from different threads) all count; what is
//! further behind, or taken before, is refused. A sender starts each run
//! [`REORDER_US`] ahead of its clock ([`Sealer::start`]), so whatever it
//! sent in a former run (an announcement of a GID it has since left) is
//! behind the window of anything it sends now.

pub use super::seal::REORDER_US;
use super::seal::{Keyring, Sealer, WallClock};
use crate::discovery::wire::{AUTH_TRAILER_LEN, FLAG_AUTH, HEADER_LEN};
use crate::fastmap::Map;
use hmac::Mac;
use std::fmt;

/// How far a timestamp may be from the receiver's clock, either way: the
/// clock skew tolerated between hosts, and how long a message is replayable
/// (so how long its MAC is remembered).
pub const WINDOW_US: u64 = 30_000_000;
/// MACs remembered against replays. Only verified messages are
/// remembered, so only a key holder can fill this; when it is full of
/// messages still inside the window, new ones are refused rather than old
/// ones forgotten (forgetting would reopen them to replay).
const MAX_REMEMBERED: usize = 1 << 16;
const MAC_LEN: usize = 32;

/// Why an incoming datagram was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// No AUTH flag, or too short to hold the trailer.
    Unauthenticated,
    UnknownKey(u32),
    BadMac,
    /// Timestamp this many seconds away from the receiver's clock.
    Stale(i64),
    Replayed,
    /// Older, by this many milliseconds, than the newest message accepted
    /// from the same source address, and either behind it by
    /// [`REORDER_US`] or more or taken before.
    Older(u64),
    /// Too many recent messages remembered to check for replay.
    Busy,
}

impl Rejection {
    /// Whether the datagram is an old one (replayed or out of its time
    /// window) rather than one not made with a known key.
    pub fn is_replay(self) -> bool {
        matches!(
            self,
            Rejection::Stale(_) | Rejection::Replayed | Rejection::Older(_) | Rejection::Busy
        )
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Unauthenticated => f.write_str("not authenticated"),
            Rejection::UnknownKey(id) => write!(f, "unknown key id {id}"),
            Rejection::BadMac => f.write_str("bad MAC"),
            Rejection::Stale(s) => write!(f, "timestamp {s:+} s from this host's clock"),
            Rejection::Replayed => f.write_str("replayed"),
            Rejection::Older(ms) => write!(
                f,
                "{ms} ms older than the newest message from its source (replayed)"
            ),
            Rejection::Busy => f.write_str("too many recent messages to check for replay"),
        }
    }
}

/// Sources whose newest timestamp is remembered. Only verified messages
/// count, so only a key holder can fill it; beyond it, messages from new
/// sources are refused until old entries leave the window.
const MAX_SOURCES: usize = 1 << 16;

/// Opens incoming datagrams (and seals outgoing ones, through its
/// [`Sealer`]).
pub struct Auth {
    ring: Keyring,
    clock: WallClock,
    sealer: std::sync::Arc<Sealer>,
    /// MAC → timestamp of recently accepted messages.
    seen: Map<[u8; MAC_LEN], u64>,
    /// When `seen` was last cleared of what left the window.
    pruned_at: u64,
    /// Source address → the newest timestamp accepted from it: the front
    /// of its anti-replay window. A host's timestamps strictly increase, so
    /// one more than [`REORDER_US`] behind it is a replay, even inside
    /// [`WINDOW_US`]: a captured announcement of a GID the host has since
    /// left must not be taken again. Inside the window, `seen` tells what
    /// was taken already.
    newest: Map<std::net::IpAddr, u64>,
    newest_pruned_at: u64,
}

/// Whether a table of timestamps bounded at `max` has room for one more
/// entry. A full one first forgets, at most once a second (`pruned_at`),
/// what left the window: a message that old is refused as stale anyway.
/// What is still inside the window is never forgotten early.
fn make_room<K: std::hash::Hash + Eq>(
    table: &mut Map<K, u64>,
    max: usize,
    pruned_at: &mut u64,
    now: u64,
) -> bool {
    if table.len() >= max && now.saturating_sub(*pruned_at) >= 1_000_000 {
        table.retain(|_, t| t.abs_diff(now) <= WINDOW_US);
        *pruned_at = now;
    }
    table.len() < max
}

impl Auth {
    pub fn new(ring: Keyring, clock: WallClock) -> Auth {
        let sealer = std::sync::Arc::new(Sealer::new(ring.signing().clone(), clock.clone()));
        Auth {
            ring,
            clock,
            sealer,
            seen: Map::default(),
            pruned_at: 0,
            newest: Map::default(),
            newest_pruned_at: 0,
        }
    }

    pub fn keyring(&self) -> &Keyring {
        &self.ring
    }

    /// Puts the keys of a changed key file in force: from now on messages
    /// are signed with its first key and taken under any of its keys. What
    /// was taken before is still remembered against replay.
    pub fn rekey(&mut self, ring: Keyring) {
        self.sealer.rekey(ring.signing().clone());
        self.ring = ring;
    }

    /// The sealer, for the thread that sends.
    pub fn sealer(&self) -> std::sync::Arc<Sealer> {
        self.sealer.clone()
    }

    /// [`Sealer::seal`].
    pub fn seal(&self, bytes: Vec<u8>) -> Vec<u8> {
        self.sealer.seal(bytes)
    }

    /// Verifies a datagram that came from `from` and returns its message
    /// part (AUTH flag still set) for `Message::decode_authenticated`.
    pub fn open<'a>(
        &mut self,
        datagram: &'a [u8],
        from: std::net::IpAddr,
    ) -> Result<&'a [u8], Rejection> {
        let flagged = datagram
            .get(6)
            .is_some_and(|f| f & (FLAG_AUTH >> 8) as u8 != 0);
        if !flagged || datagram.len() < HEADER_LEN + AUTH_TRAILER_LEN {
            return Err(Rejection::Unauthenticated);
        }
        let (signed, tag) = datagram.split_at(datagram.len() - MAC_LEN);
        let (body, meta) = signed.split_at(signed.len() - (AUTH_TRAILER_LEN - MAC_LEN));
        let id = u32::from_be_bytes([meta[0], meta[1], meta[2], meta[3]]);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&meta[4..12]);
        let ts = u64::from_be_bytes(ts);
        let key = self.ring.find(id).ok_or(Rejection::UnknownKey(id))?;
        let mut mac = key.mac.clone();
        mac.update(signed);
        // Constant-time comparison.
        mac.verify_slice(tag).map_err(|_| Rejection::BadMac)?;
        let now = self.clock.micros();
        if ts.abs_diff(now) > WINDOW_US {
            let skew = (ts as i128 - now as i128) / 1_000_000;
            return Err(Rejection::Stale(skew as i64));
        }
        let mut tag_bytes = [0u8; MAC_LEN];
        tag_bytes.copy_from_slice(tag);
        let seen = self.seen.contains_key(&tag_bytes);
        let newest = self.newest.get(&from).copied();
        if let Some(newest) = newest.filter(|&n| ts <= n) {
            // Behind the front of the source's window: taken only if
            // inside it and never taken before (reordered on the way).
            if seen || newest - ts >= REORDER_US {
                return Err(Rejection::Older((newest - ts) / 1000));
            }
        }
        if seen {
            // From another source (forged source address).
            return Err(Rejection::Replayed);
        }
        let newest_room = self.newest.contains_key(&from)
            || make_room(
                &mut self.newest,
                MAX_SOURCES,
                &mut self.newest_pruned_at,
                now,
            );
        if !newest_room || !make_room(&mut self.seen, MAX_REMEMBERED, &mut self.pruned_at, now) {
            return Err(Rejection::Busy);
        }
        self.seen.insert(tag_bytes, ts);
        self.newest.insert(from, newest.map_or(ts, |n| n.max(ts)));
        Ok(body)
    }

    /// MACs remembered against replay right now.
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::keyfile::KeyFile;
    use std::sync::atomic::{AtomicU64, Ordering};

    const KEYS: &str = "# rotated 2026-11\n7 000102030405060708090a0b0c0d0e0f\n\
                        0x10 ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n";

    const SRC: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));
    const OTHER: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 3));

    fn ring(text: &str) -> Keyring {
        Keyring::new(&KeyFile::parse(text, "k").unwrap())
    }

    // Each test has its own clock so tests can run in parallel.
    macro_rules! clock {
        ($name:ident) => {
            static $name: AtomicU64 = AtomicU64::new(1_800_000_000_000_000);
        };
    }

    fn message() -> Vec<u8> {
        let mut m = b"URDD\x01\x03\x00\x00".to_vec();
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(b"body");
        m
    }

    #[test]
    fn a_rotation_in_three_steps_loses_no_message_and_ends_the_old_key() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        let tick = || NOW.fetch_add(1_000, Ordering::Relaxed);
        const OLD: &str = "1 000102030405060708090a0b0c0d0e0f\n";
        const NEW: &str = "2 ffeeddccbbaa99887766554433221100\n";
        let mut a = Auth::new(ring(OLD), WallClock::new(now));
        let mut b = Auth::new(ring(OLD), WallClock::new(now));
        let old_sender = Auth::new(ring(OLD), WallClock::new(now));
        // Hosts change their files one after the other: at every moment
        // of each step, what either sends the other takes.
        let steps = [
            format!("{OLD}{NEW}"),
            format!("{NEW}{OLD}"),
            NEW.to_string(),
        ];
        for keys in &steps {
            a.rekey(ring(keys));
            tick();
            assert!(b.open(&a.seal(message()), SRC).is_ok(), "{keys}: a to b");
            assert!(a.open(&b.seal(message()), OTHER).is_ok(), "{keys}: b to a");
            b.rekey(ring(keys));
            tick();
            assert!(b.open(&a.seal(message()), SRC).is_ok(), "{keys}: a to b");
            assert!(a.open(&b.seal(message()), OTHER).is_ok(), "{keys}: b to a");
        }
        // The new key signs; the dropped one no longer opens anything.
        let sealed = a.seal(message());
        let id = &sealed[sealed.len() - AUTH_TRAILER_LEN..][..4];
        assert_eq!(id, 2u32.to_be_bytes());
        tick();
        assert_eq!(
            b.open(&old_sender.seal(message()), OTHER),
            Err(Rejection::UnknownKey(1))
        );
        // What was taken before a rotation is still remembered.
        assert_eq!(b.open(&sealed, SRC).map(|_| ()), Ok(()));
        assert_eq!(b.open(&sealed, SRC), Err(Rejection::Older(0)));
    }

    #[test]
    fn a_sealed_message_opens_once_with_any_listed_key() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        let sender = Auth::new(ring(KEYS), WallClock::new(now));
        let mut receiver = Auth::new(
            ring("16 ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n7 000102030405060708090a0b0c0d0e0f"),
            WallClock::new(now),
        );
        let sealed = sender.seal(message());
        assert_eq!(sealed.len(), message().len() + AUTH_TRAILER_LEN);
        assert_eq!(&sealed[16..20], b"body");
        assert_eq!(sealed[6], 0x80, "AUTH flag set");
        assert_eq!(
            &sealed[20..24],
            &7u32.to_be_bytes(),
            "signed with the first key"
        );
        let body = receiver.open(&sealed, SRC).unwrap();
        assert_eq!(body, &sealed[..20]);
        assert_eq!(receiver.open(&sealed, SRC), Err(Rejection::Older(0)));
        assert_eq!(
            receiver.open(&sealed, OTHER),
            Err(Rejection::Replayed),
            "from another source, its MAC is remembered"
        );
        // The same message sent again (a retried QUERY) is a new datagram.
        let again = sender.seal(message());
        assert_ne!(again, sealed);
        assert!(receiver.open(&again, SRC).is_ok());
    }

    #[test]
    fn tampering_unknown_keys_and_plain_messages_are_refused() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        let sender = Auth::new(ring(KEYS), WallClock::new(now));
        let mut receiver = Auth::new(
            ring("0x10 ffeeddccbbaa99887766554433221100"),
            WallClock::new(now),
        );
        let sealed = sender.seal(message());
        assert_eq!(receiver.open(&sealed, SRC), Err(Rejection::UnknownKey(7)));
        let mut receiver = Auth::new(ring(KEYS), WallClock::new(now));
        for i in 0..sealed.len() {
            let mut t = sealed.clone();
            t[i] ^= 0x01;
            let r = receiver.open(&t, SRC);
            assert!(r.is_err(), "flipping byte {i} went unnoticed");
        }
        let mut cut = sealed.clone();
        cut.pop();
        assert!(receiver.open(&cut, SRC).is_err());
        assert_eq!(
            receiver.open(&message(), SRC),
            Err(Rejection::Unauthenticated)
        );
        assert_eq!(receiver.open(&[], SRC), Err(Rejection::Unauthenticated));
        // A wrong key with the right id.
        let forger = Auth::new(
            ring("7 0f0e0d0c0b0a09080706050403020100"),
            WallClock::new(now),
        );
        assert_eq!(
            receiver.open(&forger.seal(message()), SRC),
            Err(Rejection::BadMac)
        );
        assert_eq!(receiver.remembered(), 0, "nothing unverified is remembered");
        assert!(
            receiver.open(&sealed, SRC).is_ok(),
            "the original still opens"
        );
    }

    #[test]
    fn a_message_older_than_the_newest_from_its_source_is_refused() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        let sender = Auth::new(ring(KEYS), WallClock::new(now));
        let mut receiver = Auth::new(ring(KEYS), WallClock::new(now));
        // A captured announcement of the host's old GID, then its new one.
        let old = sender.seal(message());
        NOW.fetch_add(2_000_000, Ordering::Relaxed);
        let new = sender.seal(message());
        assert!(receiver.open(&old, SRC).is_ok());
        assert!(receiver.open(&new, SRC).is_ok());
        // The old one, replayed inside the window, never seen by this
        // receiver's replay memory under this MAC... still refused.
        let mut fresh_receiver = Auth::new(ring(KEYS), WallClock::new(now));
        assert!(fresh_receiver.open(&new, SRC).is_ok());
        assert_eq!(fresh_receiver.open(&old, SRC), Err(Rejection::Older(2000)));
        assert!(Rejection::Older(1).is_replay());
        // Each source has its own order.
        assert!(fresh_receiver.open(&old, OTHER).is_ok());
        // The copies of one message sent to several groups are sealed
        // one by one, so none of them looks replayed.
        let sealing = crate::discovery::seal::Sealing::with(sender.sealer());
        let m = message();
        let (a, b) = (sealing.copy(&m), sealing.copy(&m));
        assert!(receiver.open(&a, SRC).is_ok() && receiver.open(&b, OTHER).is_ok());
        let plain = crate::discovery::seal::Sealing::default();
        assert_eq!(plain.copy(&m), m.as_slice(), "off: sent as encoded");
    }

    #[test]
    fn messages_that_overtake_each_other_are_each_taken_once() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        let sender = Auth::new(ring(KEYS), WallClock::new(now));
        let mut receiver = Auth::new(ring(KEYS), WallClock::new(now));
        // Three tries of a query, 500 ms apart, held by the sender's kernel
        // until it resolved the receiver's link address: the last try
        // arrives first.
        let mut tries = Vec::new();
        for _ in 0..3 {
            tries.push(sender.seal(message()));
            NOW.fetch_add(500_000, Ordering::Relaxed);
        }
        for t in tries.iter().rev() {
            assert!(receiver.open(t, SRC).is_ok());
        }
        // Each once: again, from its source or another, it is refused.
        for (t, behind) in tries.iter().zip([1000, 500, 0]) {
            assert_eq!(receiver.open(t, SRC), Err(Rejection::Older(behind)));
            assert_eq!(receiver.open(t, OTHER), Err(Rejection::Replayed));
        }
        assert_eq!(receiver.remembered(), 3);
    }

    #[test]
    fn a_message_behind_the_window_is_refused_though_never_taken() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        let sender = Auth::new(ring(KEYS), WallClock::new(now));
        let mut receiver = Auth::new(ring(KEYS), WallClock::new(now));
        let edge = sender.seal(message());
        NOW.fetch_add(1, Ordering::Relaxed);
        let inside = sender.seal(message());
        NOW.fetch_add(REORDER_US / 2 - 1, Ordering::Relaxed);
        let middle = sender.seal(message());
        NOW.fetch_add(REORDER_US / 2, Ordering::Relaxed);
        let front = sender.seal(message());
        assert!(receiver.open(&front, SRC).is_ok());
        assert_eq!(receiver.open(&edge, SRC), Err(Rejection::Older(1500)));
        assert!(receiver.open(&inside, SRC).is_ok(), "a microsecond less");
        assert_eq!(receiver.open(&inside, SRC), Err(Rejection::Older(1499)));
        // Taking one behind the front leaves the front where it was; a
        // newer one moves it on, and what it passes is out for good.
        assert_eq!(receiver.open(&edge, SRC), Err(Rejection::Older(1500)));
        NOW.fetch_add(REORDER_US / 2, Ordering::Relaxed);
        let later = sender.seal(message());
        assert!(receiver.open(&later, SRC).is_ok());
        assert_eq!(receiver.open(&middle, SRC), Err(Rejection::Older(1500)));
        // The window is the source's: elsewhere the front is not known.
        assert!(receiver.open(&edge, OTHER).is_ok());
        assert!(receiver.open(&middle, OTHER).is_ok());
    }

    #[test]
    fn after_a_restart_a_captured_message_of_the_former_run_is_refused() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        let t0 = now();
        // The former run: its first message, then, 10 s later, the last
        // announcement of its GID, both captured.
        let former = Auth::new(ring(KEYS), WallClock::new(now));
        former.sealer().start();
        let first = former.seal(message());
        assert_eq!(first[24..32], (t0 + REORDER_US + 1).to_be_bytes());
        NOW.fetch_add(10_000_000, Ordering::Relaxed);
        let last = former.seal(message());
        // Killed, and back with a new GID 10 ms later: the new run's
        // first message is a whole window ahead of the former's last.
        NOW.fetch_add(10_000, Ordering::Relaxed);
        let run = Auth::new(ring(KEYS), WallClock::new(now));
        run.sealer().start();
        let hello = run.seal(message());
        // A receiver that saw nothing of the former run (it restarted too)
        // takes the new run's message, then refuses the captured ones.
        let mut receiver = Auth::new(ring(KEYS), WallClock::new(now));
        assert!(receiver.open(&hello, SRC).is_ok());
        assert_eq!(receiver.open(&last, SRC), Err(Rejection::Older(1510)));
        assert_eq!(receiver.open(&first, SRC), Err(Rejection::Older(10010)));
        // Its own messages go on from there, each taken.
        let next = run.sealer().seal(message());
        assert!(receiver.open(&next, SRC).is_ok());
        // A run that lasted 2 s, all of it ahead of its clock: what it sent
        // is as much older as the time between the two starts (less the
        // microseconds its timestamps stepped).
        NOW.fetch_add(2_000_000, Ordering::Relaxed);
        let third = Auth::new(ring(KEYS), WallClock::new(now));
        third.sealer().start();
        let hello3 = third.seal(message());
        let mut receiver = Auth::new(ring(KEYS), WallClock::new(now));
        assert!(receiver.open(&hello3, SRC).is_ok());
        assert_eq!(receiver.open(&next, SRC), Err(Rejection::Older(1999)));
    }

    /// A tiny deterministic generator (xorshift64) for the simulation.
    fn xorshift(state: &mut u64, below: u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state % below
    }

    #[test]
    fn on_a_reordering_network_nothing_is_lost_and_every_replay_fails() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        const V6: std::net::IpAddr =
            std::net::IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2));
        let sender = Auth::new(ring(KEYS), WallClock::new(now));
        sender.sealer().start();
        let mut rng = 0x2545_f491_4f6c_dd1d;
        // 2000 messages over about 20 s, from either of the host's
        // addresses, each on its way for up to 5 ms, one in ten held
        // through a lost solicitation (0.9 to 1.2 s).
        let mut flight = Vec::new();
        let mut t = now();
        for _ in 0..2000 {
            t += xorshift(&mut rng, 20_000);
            NOW.store(t, Ordering::Relaxed);
            let sealed = sender.seal(message());
            let delay = match xorshift(&mut rng, 10) {
                0 => 900_000 + xorshift(&mut rng, 300_000),
                _ => xorshift(&mut rng, 5_000),
            };
            let from = if xorshift(&mut rng, 2) == 0 { SRC } else { V6 };
            flight.push((t + delay, from, sealed));
        }
        flight.sort_by_key(|f| f.0);
        let mut receiver = Auth::new(ring(KEYS), WallClock::new(now));
        let mut overtaken = 0;
        let mut newest = Map::default();
        for (at, from, sealed) in &flight {
            NOW.store(*at, Ordering::Relaxed);
            assert_eq!(receiver.open(sealed, *from).map(|_| ()), Ok(()));
            let ts = u64::from_be_bytes(sealed[24..32].try_into().unwrap());
            let front = newest.entry(*from).or_insert(0);
            overtaken += usize::from(ts < *front);
            *front = ts.max(*front);
        }
        assert!(overtaken > 100, "only {overtaken} arrived out of order");
        // Every one of them again, last first, from where it came or from
        // the other address: refused, all of them.
        for (_, from, sealed) in flight.iter().rev() {
            let other = if *from == SRC { V6 } else { SRC };
            assert!(receiver.open(sealed, *from).unwrap_err().is_replay());
            assert!(receiver.open(sealed, other).unwrap_err().is_replay());
        }
        assert_eq!(receiver.remembered(), flight.len());
    }

    #[test]
    fn old_and_future_messages_are_stale() {
        clock!(NOW);
        let now = || NOW.load(Ordering::Relaxed);
        let sender = Auth::new(ring(KEYS), WallClock::new(now));
        let mut receiver = Auth::new(ring(KEYS), WallClock::new(now));
        let early = sender.seal(message());
        NOW.fetch_add(WINDOW_US + 1_000_000, Ordering::Relaxed);
        assert_eq!(receiver.open(&early, SRC), Err(Rejection::Stale(-31)));
        assert!(Rejection::Stale(-31).is_replay());
        let fresh = sender.seal(message());
        NOW.fetch_sub(2 * WINDOW_US, Ordering::Relaxed);
        assert_eq!(receiver.open(&fresh, SRC), Err(Rejection::Stale(60)));
        // Now 29 s behind the sender.
        NOW.fetch_add(WINDOW_US + 1_000_000, Ordering::Relaxed);
        assert!(
            receiver.open(&fresh, SRC).is_ok(),
            "29 s of skew is tolerated"
        );
    }
}
