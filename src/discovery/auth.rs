//! Optional authentication of discovery messages (docs/protocol.md,
//! Authentication). With `urdma_auth_key_file` set, every datagram carries
//! a trailer: key id, timestamp, and an HMAC-SHA256 over the message and
//! both. A receiver drops what it cannot verify, what is too old or too
//! far ahead, and what it has seen before.
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

use crate::config::Diagnostic;
use crate::discovery::wire::{AUTH_TRAILER_LEN, FLAG_AUTH, HEADER_LEN};
use crate::fastmap::Map;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

type HmacSha256 = Hmac<Sha256>;

/// How far a timestamp may be from the receiver's clock, either way: the
/// clock skew tolerated between hosts, and how long a message is replayable
/// (so how long its MAC is remembered).
pub const WINDOW_US: u64 = 30_000_000;
/// How far behind the newest message taken from a source another one from
/// it may be and still be taken (if never taken before): the reordering
/// tolerated. A datagram waiting for the sender's kernel to resolve the
/// receiver's link address (ARP, IPv6 neighbour discovery) is released
/// when a solicitation is answered, and solicitations go once a second: a
/// datagram held through one lost solicitation arrives about a second late,
/// after those sent since. A captured message this much older than what
/// the source has sent since is useless.
pub const REORDER_US: u64 = 1_500_000;
/// Shortest key accepted: 128 bits.
pub const MIN_KEY_BYTES: usize = 16;
/// HMAC-SHA256 hashes longer keys down to 32 bytes anyway.
pub const MAX_KEY_BYTES: usize = 64;
/// MACs remembered against replays. Only verified messages are
/// remembered, so only a key holder can fill this; when it is full of
/// messages still inside the window, new ones are refused rather than old
/// ones forgotten (forgetting would reopen them to replay).
const MAX_REMEMBERED: usize = 1 << 16;
const MAC_LEN: usize = 32;

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
struct Key {
    id: u32,
    /// Keyed once; each message clones the state.
    mac: HmacSha256,
}

/// The keys of a key file: the first signs, all verify (so keys can be
/// rotated host by host without a flag day).
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
    /// Reads a key file, refusing one that other users can read or write:
    /// whoever reads the key can forge every binding of the segment.
    /// Problems with the whole file are at line 0.
    pub fn load(path: &Path) -> Result<Keyring, Diagnostic> {
        use std::os::unix::fs::PermissionsExt;
        let shown = path.display().to_string();
        let whole = |message: String| Diagnostic {
            file: shown.clone(),
            line: 0,
            message: format!("urdma_auth_key_file: {message}"),
        };
        let meta = std::fs::metadata(path).map_err(|e| whole(e.to_string()))?;
        if !meta.is_file() {
            return Err(whole("not a regular file".into()));
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(whole(format!(
                "mode {mode:04o} lets other users read or change the key; refused \
                 (chmod 600 {shown})"
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| whole(e.to_string()))?;
        Keyring::parse(bytes, &shown)
    }

    /// One key per line, `ID HEX`: a key id (decimal or 0x hex, 32 bits)
    /// and the key as 32 to 128 hex digits. `#` starts a comment line,
    /// which may hold any bytes; any other line that is not text makes the
    /// whole file unusable, like any other bad line.
    pub fn parse(bytes: impl AsRef<[u8]>, file: &str) -> Result<Keyring, Diagnostic> {
        let mut keys: Vec<Key> = Vec::new();
        let at = |line: usize, message: String| Diagnostic {
            file: file.to_string(),
            line,
            message,
        };
        for (n, line) in acm_proto::text::lines(bytes.as_ref()) {
            let line = line.trim_ascii();
            if line.is_empty() || line.starts_with(b"#") {
                continue;
            }
            let line = acm_proto::text::text(line).map_err(|e| at(n, e))?;
            let mut tokens = line.split_whitespace();
            let (Some(id), Some(hex), None) = (tokens.next(), tokens.next(), tokens.next()) else {
                return Err(at(n, "expected 'KEY-ID HEX-KEY'".into()));
            };
            let id = parse_id(id).ok_or_else(|| at(n, format!("bad key id '{id}'")))?;
            if keys.iter().any(|k| k.id == id) {
                return Err(at(n, format!("key id {id} listed twice")));
            }
            // The key itself never appears in a message: logs are not secret.
            let bytes = parse_hex(hex).ok_or_else(|| {
                let (lo, hi) = (2 * MIN_KEY_BYTES, 2 * MAX_KEY_BYTES);
                at(n, format!("key {id} is not {lo}-{hi} hex digits"))
            })?;
            let mac = HmacSha256::new_from_slice(&bytes).map_err(|e| at(n, e.to_string()))?;
            keys.push(Key { id, mac });
        }
        if keys.is_empty() {
            return Err(at(0, "urdma_auth_key_file: no key".into()));
        }
        Ok(Keyring { keys })
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
}

fn parse_id(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let digits = s.as_bytes();
    if !digits.len().is_multiple_of(2)
        || !(2 * MIN_KEY_BYTES..=2 * MAX_KEY_BYTES).contains(&digits.len())
    {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

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

/// Seals outgoing datagrams. Shared by whatever sends them; timestamps
/// strictly increase across all of them, so no two messages from this host
/// share a MAC, even a retried QUERY or the copies of one announcement.
/// Threads seal and send independently, so they may send in another order
/// than they sealed: receivers tolerate that within [`REORDER_US`].
pub struct Sealer {
    key: Key,
    clock: WallClock,
    /// The last timestamp sent.
    last_sent: AtomicU64,
}

impl Sealer {
    /// Starts this run's timestamps [`REORDER_US`] ahead of the clock;
    /// called once, before the first datagram leaves (net.rs). Until the
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

    /// Sets the AUTH flag of an encoded message and appends its trailer.
    pub fn seal(&self, mut bytes: Vec<u8>) -> Vec<u8> {
        let now = self.clock.micros();
        let next = |last: u64| now.max(last + 1);
        let last = self
            .last_sent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| Some(next(l)))
            .unwrap_or_else(|l| l);
        let ts = next(last);
        bytes[6] |= (FLAG_AUTH >> 8) as u8;
        bytes.reserve(AUTH_TRAILER_LEN);
        bytes.extend_from_slice(&self.key.id.to_be_bytes());
        bytes.extend_from_slice(&ts.to_be_bytes());
        let mut mac = self.key.mac.clone();
        mac.update(&bytes);
        bytes.extend_from_slice(&mac.finalize().into_bytes());
        bytes
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
        let sealer = std::sync::Arc::new(Sealer {
            key: ring.keys[0].clone(),
            clock: clock.clone(),
            last_sent: AtomicU64::new(0),
        });
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
        let key = self
            .ring
            .keys
            .iter()
            .find(|k| k.id == id)
            .ok_or(Rejection::UnknownKey(id))?;
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

    const KEYS: &str = "# rotated 2026-11\n7 000102030405060708090a0b0c0d0e0f\n\
                        0x10 ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n";

    const SRC: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));
    const OTHER: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 3));

    fn ring(text: &str) -> Keyring {
        Keyring::parse(text, "k").unwrap()
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
        let sealer = sender.sealer();
        let (a, b) = (sealer.seal(message()), sealer.seal(message()));
        assert!(receiver.open(&a, SRC).is_ok() && receiver.open(&b, OTHER).is_ok());
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

    #[test]
    fn key_files_are_checked_line_by_line() {
        let err = |t: &str| {
            Keyring::parse(t, "/etc/rdma/urdma.key")
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(""),
            "/etc/rdma/urdma.key:0: urdma_auth_key_file: no key"
        );
        assert_eq!(err("# only\n\n"), err(""));
        assert_eq!(
            err("1 00010203"),
            "/etc/rdma/urdma.key:1: key 1 is not 32-128 hex digits"
        );
        assert_eq!(
            err("\n1 000102030405060708090a0b0c0d0e0f extra"),
            "/etc/rdma/urdma.key:2: expected 'KEY-ID HEX-KEY'"
        );
        assert_eq!(
            err("x 000102030405060708090a0b0c0d0e0f"),
            "/etc/rdma/urdma.key:1: bad key id 'x'"
        );
        assert_eq!(
            err("1 000102030405060708090a0b0c0d0e0f\n1 000102030405060708090a0b0c0d0e0f"),
            "/etc/rdma/urdma.key:2: key id 1 listed twice"
        );
        assert!(err("1 000102030405060708090a0b0c0d0e0g").contains("hex digits"));
        assert!(
            !err("1 00010203zz").contains("00010203"),
            "no key material in errors"
        );
        // Bytes: a comment may hold any, a key line must be text.
        let latin1 = b"# cl\xe9 de Fran\xe7ois\n1 000102030405060708090a0b0c0d0e0f\n";
        assert_eq!(Keyring::parse(latin1, "k").unwrap().signing_id(), 1);
        let bad = b"1 000102030405060708090a0b0c0d0e0f\n2 0001\xe9\n";
        assert_eq!(
            Keyring::parse(bad, "/etc/rdma/urdma.key")
                .unwrap_err()
                .to_string(),
            "/etc/rdma/urdma.key:2: not valid UTF-8 text (byte 0xe9 at column 7)"
        );
        let r = ring(KEYS);
        assert_eq!((r.signing_id(), r.len()), (7, 2));
        assert_eq!(format!("{r:?}"), "Keyring { ids: [7, 16] }");
    }

    #[test]
    fn key_files_others_can_read_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("urdma-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key");
        std::fs::write(&path, KEYS).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Keyring::load(&path).unwrap_err().to_string();
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(Keyring::load(&path).is_err(), "group-readable too");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Keyring::load(&path).unwrap().signing_id(), 7);
        let e = Keyring::load(&dir).unwrap_err();
        assert_eq!(
            (e.line, e.message.as_str()),
            (0, "urdma_auth_key_file: not a regular file")
        );
        assert!(Keyring::load(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
