//! The discovery protocol's wire format: hosts running this provider
//! resolve each other's names and IP addresses to urdma endpoints over UDP,
//! because urdma ports have no SA and no IB multicast to ask instead.
//!
//! Pure encoding and decoding, no I/O; `docs/protocol.md` is the
//! specification, and the golden test below keeps the two in step.
//!
//! Every value that can be built satisfies the protocol's rules (the
//! constructors check them), so [`Message::encode`] cannot fail, and
//! [`Message::decode`] accepts exactly the byte strings `encode` produces:
//! decoding is strict so that a peer's bug or a forged datagram is dropped
//! whole instead of half-understood.

use crate::addr::{Address, Gid};
use acm_prov_sys::{ACM_ADDRESS_IP, ACM_ADDRESS_IP6, ACM_ADDRESS_NAME};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::num::NonZeroU64;

mod codec;
#[cfg(test)]
mod tests;

/// IPv4 group for name queries: in the organization-local scope that RFC
/// 2365 leaves to local administration, so it collides with no assignment;
/// senders use TTL 1 to keep it on the segment.
pub const V4_GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 65, 67);
/// IPv6 group for name queries: transient (`T` flag) link-local scope, the
/// range anyone may use without IANA, unlike the assigned `ff02::` space.
pub const V6_GROUP: Ipv6Addr = Ipv6Addr::new(0xff12, 0, 0, 0, 0, 0, 1, 0x6126);

pub const MAGIC: [u8; 4] = *b"URDD";
pub const VERSION: u8 = 1;

/// ANNOUNCE only: the records' bindings are withdrawn, not (re)stated.
pub const FLAG_WITHDRAWN: u16 = 0x0001;
/// Set on a message followed by an authentication trailer
/// ([`AUTH_TRAILER_LEN`] bytes; `crate::discovery::auth` seals and opens it).
pub const FLAG_AUTH: u16 = 0x8000;

pub const HEADER_LEN: usize = 16;
/// Longest name: what fits, with its NUL, in the daemon's 64-byte address.
pub const MAX_NAME_LEN: usize = 63;
pub const MAX_PKEYS: usize = 8;
pub const MAX_ADDRESSES: usize = 8;
/// Two records keep an ANNOUNCE within 1232 bytes, the UDP payload that
/// the IPv6 minimum MTU carries unfragmented; more endpoints take more
/// ANNOUNCEs.
pub const MAX_ANNOUNCE_RECORDS: usize = 2;

/// An encoded address: type, length, bytes.
pub const MAX_ADDRESS_LEN: usize = 2 + MAX_NAME_LEN;
const RECORD_FIXED_LEN: usize = 22;
pub const MAX_RECORD_LEN: usize =
    RECORD_FIXED_LEN + 2 * MAX_PKEYS + MAX_ADDRESSES * MAX_ADDRESS_LEN;
/// A FOUND reply with the largest record and target.
pub const MAX_REPLY_LEN: usize = HEADER_LEN + 1 + MAX_ADDRESS_LEN + MAX_RECORD_LEN;
/// Every QUERY is padded to exactly this length, so that no reply can be
/// larger than the query that caused it: answering a forged source address
/// never amplifies.
pub const QUERY_LEN: usize = MAX_REPLY_LEN;
pub const MAX_ANNOUNCE_LEN: usize = HEADER_LEN + 1 + MAX_ANNOUNCE_RECORDS * MAX_RECORD_LEN;
pub const MAX_MESSAGE_LEN: usize = max(max(QUERY_LEN, MAX_REPLY_LEN), MAX_ANNOUNCE_LEN);
/// Key id (4), timestamp (8) and HMAC-SHA256 (32) after an authenticated
/// message. Every message carries the same trailer, so a reply stays no
/// larger than its query.
pub const AUTH_TRAILER_LEN: usize = 44;
/// The largest datagram: the largest message, authenticated.
pub const MAX_DATAGRAM_LEN: usize = MAX_MESSAGE_LEN + AUTH_TRAILER_LEN;
/// Receive into a buffer this large: UDP silently truncates a datagram to
/// the buffer, and one byte more than any valid datagram lets an oversized
/// one be seen, and rejected, as such.
pub const RECV_BUF_LEN: usize = MAX_DATAGRAM_LEN + 1;

// The padding rule only works if an unpadded query always fits.
const _: () = assert!(HEADER_LEN + MAX_ADDRESS_LEN + MAX_RECORD_LEN <= QUERY_LEN);
const _: () = assert!(MAX_DATAGRAM_LEN <= 1232);

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

const TYPE_QUERY: u8 = 1;
const TYPE_REPLY: u8 = 2;
const TYPE_ANNOUNCE: u8 = 3;
// Zero is no status so that a zeroed buffer never reads as an answer.
const STATUS_FOUND: u8 = 1;
const STATUS_REFUSED: u8 = 2;
const NAME: u8 = ACM_ADDRESS_NAME as u8;
const IP4: u8 = ACM_ADDRESS_IP as u8;
const IP6: u8 = ACM_ADDRESS_IP6 as u8;

/// Why a byte string is not a message, or a value cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The message ends inside the named field.
    Truncated(&'static str),
    TooLong(usize),
    BadMagic([u8; 4]),
    BadVersion(u8),
    BadType(u8),
    /// An authenticated message reached a receiver without a key.
    AuthUnsupported,
    /// A message without the AUTH flag given to the authenticated decoder.
    NotAuthenticated,
    /// Flags undefined, or undefined for this message type.
    BadFlags(u16),
    ZeroTxid,
    AnnounceTxid(u64),
    BadStatus(u8),
    /// A QUERY shorter than [`QUERY_LEN`].
    UnpaddedQuery(usize),
    NonZeroPadding,
    TrailingBytes(usize),
    /// Only names, IPv4 and IPv6 addresses travel (ACM address type).
    UnsupportedAddressType(u16),
    BadAddressLength {
        kind: u8,
        len: usize,
    },
    /// Not printable ASCII, or (on the wire) not lower-case.
    BadName,
    /// Zero or multicast.
    BadGid(Gid),
    /// Multicast or permissive.
    BadLid(u16),
    BadMtu(u8),
    BadRate(u8),
    BadPkeyCount(usize),
    BadPkey(u16),
    DuplicatePkey(u16),
    BadAddressCount(usize),
    DuplicateAddress(Address),
    BadRecordCount(usize),
    /// A FOUND reply whose record does not hold the address asked.
    TargetNotInRecord,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use WireError::*;
        match self {
            Truncated(field) => write!(f, "message truncated in {field}"),
            TooLong(n) => write!(
                f,
                "{n} bytes is longer than any message ({MAX_MESSAGE_LEN})"
            ),
            BadMagic(m) => write!(f, "bad magic {m:02x?}"),
            BadVersion(v) => write!(f, "unsupported version {v}"),
            BadType(t) => write!(f, "unknown message type {t}"),
            AuthUnsupported => {
                f.write_str("authenticated message, but no urdma_auth_key_file is configured")
            }
            NotAuthenticated => f.write_str("message is not authenticated"),
            BadFlags(x) => write!(f, "flags {x:#06x} not defined for this message type"),
            ZeroTxid => f.write_str("transaction id 0 in a query or reply"),
            AnnounceTxid(t) => write!(f, "announce with transaction id {t:#x}, must be 0"),
            BadStatus(s) => write!(f, "unknown reply status {s}"),
            UnpaddedQuery(n) => write!(f, "query of {n} bytes, must be padded to {QUERY_LEN}"),
            NonZeroPadding => f.write_str("query padding is not zero"),
            TrailingBytes(n) => write!(f, "{n} bytes after the end of the message"),
            UnsupportedAddressType(t) => write!(f, "address type {t} cannot be sent"),
            BadAddressLength { kind, len } => {
                write!(f, "address of type {kind} with bad length {len}")
            }
            BadName => f.write_str("name is not lower-case printable ASCII"),
            BadGid(g) => write!(f, "GID {g} is not a unicast GID"),
            BadLid(l) => write!(f, "LID {l:#x} is not a unicast LID"),
            BadMtu(m) => write!(f, "MTU enum {m} is not 1..=5"),
            BadRate(r) => write!(f, "rate enum {r} is not 2..=63"),
            BadPkeyCount(n) => write!(f, "{n} P_Keys, must be 1..={MAX_PKEYS}"),
            BadPkey(p) => write!(f, "P_Key {p:#06x} is invalid"),
            DuplicatePkey(p) => write!(f, "P_Key {p:#06x} listed twice"),
            BadAddressCount(n) => write!(f, "{n} addresses, must be 1..={MAX_ADDRESSES}"),
            DuplicateAddress(a) => write!(f, "address {a} listed twice"),
            BadRecordCount(n) => write!(f, "{n} records, must be 1..={MAX_ANNOUNCE_RECORDS}"),
            TargetNotInRecord => f.write_str("found record does not hold the target address"),
        }
    }
}

impl std::error::Error for WireError {}

/// An address that can travel: a name (lower-case printable ASCII, 1..=63
/// bytes), an IPv4 or an IPv6 address.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WireAddress(Address);

impl WireAddress {
    /// Lower-cases names, as the daemon compares them case-insensitively;
    /// refuses GIDs and LIDs, which are resolved without asking anyone.
    pub fn new(addr: Address) -> Result<WireAddress, WireError> {
        match addr {
            Address::Name(n) => {
                if n.is_empty() || n.len() > MAX_NAME_LEN {
                    return Err(WireError::BadAddressLength {
                        kind: NAME,
                        len: n.len(),
                    });
                }
                // Address::name, so that a name valid here is one the
                // daemon's own parser accepts too.
                Address::name(&n).map(WireAddress).ok_or(WireError::BadName)
            }
            a @ (Address::Ip4(_) | Address::Ip6(_)) => Ok(WireAddress(a)),
            other => Err(WireError::UnsupportedAddressType(other.wire_type())),
        }
    }

    pub fn address(&self) -> &Address {
        &self.0
    }
}

impl TryFrom<Address> for WireAddress {
    type Error = WireError;
    fn try_from(a: Address) -> Result<Self, WireError> {
        WireAddress::new(a)
    }
}

impl From<WireAddress> for Address {
    fn from(a: WireAddress) -> Address {
        a.0
    }
}

impl From<Ipv4Addr> for WireAddress {
    fn from(a: Ipv4Addr) -> Self {
        WireAddress(Address::Ip4(a))
    }
}

impl From<Ipv6Addr> for WireAddress {
    fn from(a: Ipv6Addr) -> Self {
        WireAddress(Address::Ip6(a))
    }
}

impl fmt::Display for WireAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// What a host tells others about one urdma endpoint: enough to build a
/// path record to it, and the addresses it answers for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct EndpointRecord {
    gid: Gid,
    lid: u16,
    mtu: u8,
    rate: u8,
    pkeys: Vec<u16>,
    addresses: Vec<WireAddress>,
}

impl EndpointRecord {
    /// `mtu` and `rate` are `enum ibv_mtu` (1..=5) and `enum ibv_rate`
    /// (2..=63: any value the 6-bit path record field holds, so rates newer
    /// than this code still pass). `lid` 0 means the port has none.
    pub fn new(
        gid: Gid,
        lid: u16,
        mtu: u8,
        rate: u8,
        pkeys: Vec<u16>,
        addresses: Vec<WireAddress>,
    ) -> Result<EndpointRecord, WireError> {
        if gid.is_zero() || gid.0[0] == 0xff {
            return Err(WireError::BadGid(gid));
        }
        if lid >= 0xc000 {
            return Err(WireError::BadLid(lid));
        }
        if !(1..=5).contains(&mtu) {
            return Err(WireError::BadMtu(mtu));
        }
        if !(2..=63).contains(&rate) {
            return Err(WireError::BadRate(rate));
        }
        if !(1..=MAX_PKEYS).contains(&pkeys.len()) {
            return Err(WireError::BadPkeyCount(pkeys.len()));
        }
        for (i, &p) in pkeys.iter().enumerate() {
            // 0x0000 and 0x8000 are the invalid P_Keys of the IB spec; the
            // top bit is only the membership type, so it does not make a
            // second partition.
            if p & 0x7fff == 0 {
                return Err(WireError::BadPkey(p));
            }
            if pkeys[..i].iter().any(|&q| q & 0x7fff == p & 0x7fff) {
                return Err(WireError::DuplicatePkey(p));
            }
        }
        if !(1..=MAX_ADDRESSES).contains(&addresses.len()) {
            return Err(WireError::BadAddressCount(addresses.len()));
        }
        check_unique(&addresses)?;
        Ok(EndpointRecord {
            gid,
            lid,
            mtu,
            rate,
            pkeys,
            addresses,
        })
    }

    pub fn gid(&self) -> Gid {
        self.gid
    }
    pub fn lid(&self) -> u16 {
        self.lid
    }
    pub fn mtu(&self) -> u8 {
        self.mtu
    }
    pub fn rate(&self) -> u8 {
        self.rate
    }
    pub fn pkeys(&self) -> &[u16] {
        &self.pkeys
    }
    pub fn addresses(&self) -> &[WireAddress] {
        &self.addresses
    }
    pub fn holds(&self, addr: &WireAddress) -> bool {
        self.addresses.contains(addr)
    }

    fn encoded_len(&self) -> usize {
        RECORD_FIXED_LEN
            + 2 * self.pkeys.len()
            + self.addresses.iter().map(codec::address_len).sum::<usize>()
    }
}

fn check_unique<'a>(addrs: impl IntoIterator<Item = &'a WireAddress>) -> Result<(), WireError> {
    let all: Vec<&WireAddress> = addrs.into_iter().collect();
    for (i, a) in all.iter().enumerate() {
        if all[..i].contains(a) {
            return Err(WireError::DuplicateAddress(a.0.clone()));
        }
    }
    Ok(())
}

/// "Who holds `target`?", with the asker's own endpoint so the owner can
/// cache the asker too: both sides learn each other from one exchange.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Query {
    txid: NonZeroU64,
    target: WireAddress,
    sender: EndpointRecord,
}

impl Query {
    /// `txid` should be unpredictable: with no authentication, it is what
    /// keeps an off-path host from forging replies.
    pub fn new(txid: NonZeroU64, target: WireAddress, sender: EndpointRecord) -> Query {
        Query {
            txid,
            target,
            sender,
        }
    }

    /// The reply to this query, echoing its txid and target.
    pub fn reply(&self, answer: Answer) -> Result<Reply, WireError> {
        Reply::new(self.txid, self.target.clone(), answer)
    }

    pub fn txid(&self) -> NonZeroU64 {
        self.txid
    }
    pub fn target(&self) -> &WireAddress {
        &self.target
    }
    pub fn sender(&self) -> &EndpointRecord {
        &self.sender
    }
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Answer {
    /// The responder's endpoint that holds the target.
    Found(EndpointRecord),
    /// The responder runs this provider but holds the target on no urdma
    /// endpoint: the asker can stop waiting.
    Refused,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Reply {
    txid: NonZeroU64,
    target: WireAddress,
    answer: Answer,
}

impl Reply {
    pub fn new(txid: NonZeroU64, target: WireAddress, answer: Answer) -> Result<Reply, WireError> {
        if let Answer::Found(r) = &answer {
            if !r.holds(&target) {
                return Err(WireError::TargetNotInRecord);
            }
        }
        Ok(Reply {
            txid,
            target,
            answer,
        })
    }

    pub fn txid(&self) -> NonZeroU64 {
        self.txid
    }
    pub fn target(&self) -> &WireAddress {
        &self.target
    }
    pub fn answer(&self) -> &Answer {
        &self.answer
    }
}

/// Unsolicited news about the sender's own endpoints, so that caches
/// elsewhere follow a port that came up, went down or changed its GID.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Announce {
    records: Vec<EndpointRecord>,
    withdrawn: bool,
}

impl Announce {
    /// `withdrawn`: these bindings are no longer valid (a port went down).
    pub fn new(records: Vec<EndpointRecord>, withdrawn: bool) -> Result<Announce, WireError> {
        if !(1..=MAX_ANNOUNCE_RECORDS).contains(&records.len()) {
            return Err(WireError::BadRecordCount(records.len()));
        }
        // One address belongs to one endpoint, else a cache could not tell
        // which binding the announce means.
        check_unique(records.iter().flat_map(|r| r.addresses.iter()))?;
        Ok(Announce { records, withdrawn })
    }

    pub fn records(&self) -> &[EndpointRecord] {
        &self.records
    }
    pub fn withdrawn(&self) -> bool {
        self.withdrawn
    }
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Message {
    Query(Query),
    Reply(Reply),
    Announce(Announce),
}

impl From<Query> for Message {
    fn from(q: Query) -> Message {
        Message::Query(q)
    }
}

impl From<Reply> for Message {
    fn from(r: Reply) -> Message {
        Message::Reply(r)
    }
}

impl From<Announce> for Message {
    fn from(a: Announce) -> Message {
        Message::Announce(a)
    }
}
