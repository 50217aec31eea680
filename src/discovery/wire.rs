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

/// UDP port (configurable as `urdma_discovery_port`). Not IANA-registered.
pub const DEFAULT_PORT: u16 = 6126;
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
            + self.addresses.iter().map(address_len).sum::<usize>()
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

impl Message {
    /// One UDP datagram's payload, at most [`MAX_MESSAGE_LEN`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(MAX_MESSAGE_LEN);
        b.extend_from_slice(&MAGIC);
        b.push(VERSION);
        match self {
            Message::Query(q) => {
                put_header(&mut b, TYPE_QUERY, 0, q.txid.get());
                put_address(&mut b, &q.target);
                put_record(&mut b, &q.sender);
                b.resize(QUERY_LEN, 0);
            }
            Message::Reply(r) => {
                put_header(&mut b, TYPE_REPLY, 0, r.txid.get());
                b.push(match r.answer {
                    Answer::Found(_) => STATUS_FOUND,
                    Answer::Refused => STATUS_REFUSED,
                });
                put_address(&mut b, &r.target);
                if let Answer::Found(rec) = &r.answer {
                    put_record(&mut b, rec);
                }
            }
            Message::Announce(a) => {
                let flags = if a.withdrawn { FLAG_WITHDRAWN } else { 0 };
                put_header(&mut b, TYPE_ANNOUNCE, flags, 0);
                // Bounded by MAX_ANNOUNCE_RECORDS in the constructor.
                b.push(a.records.len() as u8);
                for rec in &a.records {
                    put_record(&mut b, rec);
                }
            }
        }
        debug_assert!(b.len() <= MAX_MESSAGE_LEN);
        b
    }

    /// Accepts exactly what [`Message::encode`] produces; anything else is
    /// an error naming the first rule it breaks. Never panics, and
    /// allocates only what the bounded counts allow.
    /// The transaction id of a QUERY, from its header alone: what comes
    /// back in an ICMP error is this host's own query, possibly cut short
    /// (ICMPv4 quotes at most 576 bytes of the packet), so it cannot be
    /// decoded whole.
    pub fn query_txid(buf: &[u8]) -> Option<NonZeroU64> {
        let header = buf.get(..HEADER_LEN)?;
        if header[..4] != MAGIC || header[4] != VERSION || header[5] != TYPE_QUERY {
            return None;
        }
        NonZeroU64::new(u64::from_be_bytes(header[8..16].try_into().ok()?))
    }

    pub fn decode(buf: &[u8]) -> Result<Message, WireError> {
        Message::decode_with(buf, false)
    }

    /// Decodes the message part of an authenticated datagram (its trailer
    /// already checked and cut off by `crate::discovery::auth`): the AUTH flag must be
    /// set, and the rest is held to the same rules as [`Message::decode`].
    pub fn decode_authenticated(body: &[u8]) -> Result<Message, WireError> {
        Message::decode_with(body, true)
    }

    fn decode_with(buf: &[u8], authenticated: bool) -> Result<Message, WireError> {
        if buf.len() > MAX_MESSAGE_LEN {
            return Err(WireError::TooLong(buf.len()));
        }
        let mut r = Reader { buf, pos: 0 };
        let magic = r.array::<4>("header")?;
        if magic != MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        let version = r.u8("header")?;
        if version != VERSION {
            return Err(WireError::BadVersion(version));
        }
        let kind = r.u8("header")?;
        let flags = r.u16("header")?;
        let txid = r.u64("header")?;
        // Before anything else about the body: without a key, the trailer
        // of an authenticated message cannot be checked or parsed.
        let flags = match (authenticated, flags & FLAG_AUTH != 0) {
            (true, true) => flags & !FLAG_AUTH,
            (true, false) => return Err(WireError::NotAuthenticated),
            (false, true) => return Err(WireError::AuthUnsupported),
            (false, false) => flags,
        };
        let allowed = if kind == TYPE_ANNOUNCE {
            FLAG_WITHDRAWN
        } else {
            0
        };
        match kind {
            TYPE_QUERY | TYPE_REPLY | TYPE_ANNOUNCE => {}
            other => return Err(WireError::BadType(other)),
        }
        if flags & !allowed != 0 {
            return Err(WireError::BadFlags(flags & !allowed));
        }
        match kind {
            TYPE_QUERY => {
                if buf.len() < QUERY_LEN {
                    return Err(WireError::UnpaddedQuery(buf.len()));
                }
                let txid = NonZeroU64::new(txid).ok_or(WireError::ZeroTxid)?;
                // Parsing within QUERY_LEN keeps the body from reaching into
                // whatever follows; what it leaves is the padding.
                let mut r = Reader {
                    buf: &buf[..QUERY_LEN],
                    pos: HEADER_LEN,
                };
                let target = r.address("query target")?;
                let sender = r.record("query sender")?;
                if r.rest().iter().any(|&b| b != 0) {
                    return Err(WireError::NonZeroPadding);
                }
                if buf.len() > QUERY_LEN {
                    return Err(WireError::TrailingBytes(buf.len() - QUERY_LEN));
                }
                Ok(Message::Query(Query::new(txid, target, sender)))
            }
            TYPE_REPLY => {
                let txid = NonZeroU64::new(txid).ok_or(WireError::ZeroTxid)?;
                let status = r.u8("reply status")?;
                if status != STATUS_FOUND && status != STATUS_REFUSED {
                    return Err(WireError::BadStatus(status));
                }
                let target = r.address("reply target")?;
                let answer = if status == STATUS_FOUND {
                    Answer::Found(r.record("reply record")?)
                } else {
                    Answer::Refused
                };
                r.finish()?;
                Ok(Message::Reply(Reply::new(txid, target, answer)?))
            }
            _ => {
                if txid != 0 {
                    return Err(WireError::AnnounceTxid(txid));
                }
                let n = usize::from(r.u8("announce count")?);
                if !(1..=MAX_ANNOUNCE_RECORDS).contains(&n) {
                    return Err(WireError::BadRecordCount(n));
                }
                let mut records = Vec::with_capacity(n);
                for _ in 0..n {
                    records.push(r.record("announce record")?);
                }
                r.finish()?;
                let withdrawn = flags & FLAG_WITHDRAWN != 0;
                Ok(Message::Announce(Announce::new(records, withdrawn)?))
            }
        }
    }
}

fn put_header(b: &mut Vec<u8>, kind: u8, flags: u16, txid: u64) {
    b.push(kind);
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&txid.to_be_bytes());
}

fn address_len(a: &WireAddress) -> usize {
    2 + match &a.0 {
        Address::Name(n) => n.len(),
        Address::Ip4(_) => 4,
        _ => 16,
    }
}

fn put_address(b: &mut Vec<u8>, a: &WireAddress) {
    // Lengths fit a u8: names are at most MAX_NAME_LEN (WireAddress::new).
    match &a.0 {
        Address::Name(n) => {
            b.extend_from_slice(&[NAME, n.len() as u8]);
            b.extend_from_slice(n.as_bytes());
        }
        Address::Ip4(v4) => {
            b.extend_from_slice(&[IP4, 4]);
            b.extend_from_slice(&v4.octets());
        }
        Address::Ip6(v6) => {
            b.extend_from_slice(&[IP6, 16]);
            b.extend_from_slice(&v6.octets());
        }
        // WireAddress::new admits no other kind.
        Address::Gid(_) | Address::Lid(_) => unreachable!("WireAddress holds {}", a.0),
    }
}

fn put_record(b: &mut Vec<u8>, r: &EndpointRecord) {
    let start = b.len();
    b.extend_from_slice(&r.gid.0);
    b.extend_from_slice(&r.lid.to_be_bytes());
    b.push(r.mtu);
    b.push(r.rate);
    // Counts fit a u8: bounded by MAX_PKEYS and MAX_ADDRESSES (new()).
    b.push(r.pkeys.len() as u8);
    b.push(r.addresses.len() as u8);
    for p in &r.pkeys {
        b.extend_from_slice(&p.to_be_bytes());
    }
    for a in &r.addresses {
        put_address(b, a);
    }
    debug_assert_eq!(b.len() - start, r.encoded_len());
}

/// A cursor whose every read is bounds-checked and names the field it was
/// reading, so a short message says where it ended.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated(field))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(WireError::Truncated(field))?;
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WireError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array(field)?))
    }

    fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    fn finish(&self) -> Result<(), WireError> {
        match self.rest().len() {
            0 => Ok(()),
            n => Err(WireError::TrailingBytes(n)),
        }
    }

    fn address(&mut self, field: &'static str) -> Result<WireAddress, WireError> {
        let kind = self.u8(field)?;
        let len = usize::from(self.u8(field)?);
        let want = match kind {
            NAME => 1..=MAX_NAME_LEN,
            IP4 => 4..=4,
            IP6 => 16..=16,
            other => return Err(WireError::UnsupportedAddressType(other.into())),
        };
        if !want.contains(&len) {
            return Err(WireError::BadAddressLength { kind, len });
        }
        let bytes = self.take(len, field)?;
        match kind {
            NAME => {
                // Lower-case only, so each message has one encoding.
                let ok = bytes
                    .iter()
                    .all(|b| b.is_ascii_graphic() && !b.is_ascii_uppercase());
                let name = std::str::from_utf8(bytes).ok().filter(|_| ok);
                name.and_then(Address::name)
                    .map(WireAddress)
                    .ok_or(WireError::BadName)
            }
            IP4 => {
                let mut o = [0; 4];
                o.copy_from_slice(bytes);
                Ok(Ipv4Addr::from(o).into())
            }
            _ => {
                let mut o = [0; 16];
                o.copy_from_slice(bytes);
                Ok(Ipv6Addr::from(o).into())
            }
        }
    }

    fn record(&mut self, field: &'static str) -> Result<EndpointRecord, WireError> {
        let gid = Gid(self.array(field)?);
        let lid = self.u16(field)?;
        let mtu = self.u8(field)?;
        let rate = self.u8(field)?;
        let npkeys = usize::from(self.u8(field)?);
        let naddrs = usize::from(self.u8(field)?);
        // Counts are checked before the vectors are sized from them.
        if !(1..=MAX_PKEYS).contains(&npkeys) {
            return Err(WireError::BadPkeyCount(npkeys));
        }
        if !(1..=MAX_ADDRESSES).contains(&naddrs) {
            return Err(WireError::BadAddressCount(naddrs));
        }
        let mut pkeys = Vec::with_capacity(npkeys);
        for _ in 0..npkeys {
            pkeys.push(self.u16(field)?);
        }
        let mut addresses = Vec::with_capacity(naddrs);
        for _ in 0..naddrs {
            addresses.push(self.address(field)?);
        }
        // The constructor's rules are the decoder's rules.
        EndpointRecord::new(gid, lid, mtu, rate, pkeys, addresses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txid(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).unwrap()
    }

    fn addr(s: &str) -> WireAddress {
        WireAddress::new(Address::parse_host(s).unwrap()).unwrap()
    }

    fn gid(s: &str) -> Gid {
        s.parse().unwrap()
    }

    /// The endpoint of the specification's example.
    fn node1() -> EndpointRecord {
        EndpointRecord::new(
            gid("fe80::5054:ff:fe12:3456"),
            7,
            5,
            16,
            vec![0xffff],
            vec![addr("node1"), addr("10.0.0.1"), addr("fd00::1")],
        )
        .unwrap()
    }

    fn node2() -> EndpointRecord {
        EndpointRecord::new(
            gid("fe80::5054:ff:fe12:3457"),
            0,
            4,
            3,
            vec![0xffff, 0x8001],
            vec![addr("node2"), addr("10.0.0.2"), addr("fd00::2")],
        )
        .unwrap()
    }

    /// The largest record there is: every count and every name at its bound.
    fn biggest_record() -> EndpointRecord {
        let names = (0..MAX_ADDRESSES)
            .map(|i| addr(&format!("{i}").repeat(MAX_NAME_LEN)))
            .collect();
        let pkeys = (1..=MAX_PKEYS as u16).collect();
        EndpointRecord::new(gid("fd00::1:2"), 0xbfff, 5, 63, pkeys, names).unwrap()
    }

    fn golden_query() -> Message {
        Query::new(txid(0x0123_4567_89ab_cdef), addr("10.0.0.2"), node1()).into()
    }

    #[rustfmt::skip]
    const GOLDEN_PREFIX: [u8; 77] = [
        // header: magic, version 1, type QUERY, flags, txid
        0x55, 0x52, 0x44, 0x44, 0x01, 0x01, 0x00, 0x00,
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
        // target: IPv4, 4 bytes, 10.0.0.2
        0x02, 0x04, 0x0a, 0x00, 0x00, 0x02,
        // sender: GID fe80::5054:ff:fe12:3456
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56,
        // LID 7, MTU 4096, rate 100 Gb/s, 1 P_Key, 3 addresses, P_Key
        0x00, 0x07, 0x05, 0x10, 0x01, 0x03, 0xff, 0xff,
        // name "node1", IPv4 10.0.0.1, IPv6 fd00::1
        0x01, 0x05, b'n', b'o', b'd', b'e', b'1',
        0x02, 0x04, 0x0a, 0x00, 0x00, 0x01,
        0x03, 0x10, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    ];

    fn hexdump(b: &[u8]) -> String {
        b.chunks(16)
            .enumerate()
            .map(|(i, line)| {
                let hex: Vec<String> = line.iter().map(|x| format!("{x:02x}")).collect();
                format!("{:04x}  {}\n", i * 16, hex.join(" "))
            })
            .collect()
    }

    #[test]
    fn sizes_are_the_documented_ones() {
        assert_eq!(MAX_ADDRESS_LEN, 65);
        assert_eq!(MAX_RECORD_LEN, 558);
        assert_eq!(MAX_REPLY_LEN, 640);
        assert_eq!(QUERY_LEN, 640);
        assert_eq!(MAX_ANNOUNCE_LEN, 1133);
        assert_eq!(MAX_MESSAGE_LEN, 1133);
        assert_eq!(MAX_DATAGRAM_LEN, 1177);
        assert_eq!(biggest_record().encoded_len(), MAX_RECORD_LEN);
    }

    #[test]
    fn golden_query_is_byte_exact() {
        let bytes = golden_query().encode();
        let mut want = GOLDEN_PREFIX.to_vec();
        want.resize(QUERY_LEN, 0);
        assert_eq!(bytes, want);
        assert_eq!(Message::decode(&want), Ok(golden_query()));
    }

    #[test]
    fn specification_shows_the_golden_query() {
        let spec = include_str!("../../docs/protocol.md");
        // Through the end of the line holding the last byte before padding.
        let dump = hexdump(&golden_query().encode()[..80]);
        assert!(spec.contains(&dump), "docs/protocol.md lacks:\n{dump}");
        assert!(spec.contains("0050 .. 027f  00 (padding to 640 bytes)"));
    }

    fn samples() -> Vec<Message> {
        let q = Query::new(txid(42), addr("node2"), node1());
        let found = q.reply(Answer::Found(node2())).unwrap();
        let refused = q.reply(Answer::Refused).unwrap();
        let big = biggest_record();
        let big_target = big.addresses()[MAX_ADDRESSES - 1].clone();
        vec![
            golden_query(),
            q.into(),
            Query::new(txid(u64::MAX), big_target.clone(), big.clone()).into(),
            found.into(),
            refused.into(),
            Reply::new(txid(1), big_target, Answer::Found(big.clone()))
                .unwrap()
                .into(),
            Announce::new(vec![node1()], false).unwrap().into(),
            Announce::new(vec![node1(), node2()], true).unwrap().into(),
            Announce::new(vec![big.clone(), node1()], false)
                .unwrap()
                .into(),
        ]
    }

    #[test]
    fn every_message_type_round_trips() {
        for m in samples() {
            let b = m.encode();
            assert!(b.len() <= MAX_MESSAGE_LEN);
            assert_eq!(Message::decode(&b), Ok(m.clone()), "{m:?}");
            if let Message::Query(_) = m {
                assert_eq!(b.len(), QUERY_LEN);
            }
        }
    }

    #[test]
    fn no_reply_is_larger_than_any_query() {
        let big = biggest_record();
        let target = big.addresses()[0].clone();
        let reply: Message = Reply::new(txid(9), target.clone(), Answer::Found(big))
            .unwrap()
            .into();
        let largest_reply = reply.encode().len();
        assert_eq!(largest_reply, MAX_REPLY_LEN);
        // The smallest query there is: shortest target, smallest sender.
        let tiny =
            EndpointRecord::new(gid("fe80::1"), 0, 1, 2, vec![0x7fff], vec![addr("a")]).unwrap();
        let smallest_query: Message = Query::new(txid(9), addr("b"), tiny).into();
        assert!(largest_reply <= smallest_query.encode().len());
        for m in samples() {
            if let Message::Reply(_) = m {
                assert!(m.encode().len() <= QUERY_LEN);
            }
        }
    }

    #[test]
    fn addresses_that_cannot_travel_are_refused() {
        assert_eq!(
            WireAddress::new(Address::Gid(gid("fe80::1"))),
            Err(WireError::UnsupportedAddressType(4))
        );
        assert_eq!(
            WireAddress::new(Address::Lid(1)),
            Err(WireError::UnsupportedAddressType(5))
        );
        assert_eq!(
            WireAddress::new(Address::Name("a".repeat(64).into())),
            Err(WireError::BadAddressLength { kind: 1, len: 64 })
        );
        assert_eq!(
            WireAddress::new(Address::Name("".into())),
            Err(WireError::BadAddressLength { kind: 1, len: 0 })
        );
        assert_eq!(
            WireAddress::new(Address::Name("a b".into())),
            Err(WireError::BadName)
        );
        // Built around Address::name, so upper case is folded, not refused.
        assert_eq!(
            WireAddress::new(Address::Name("Node1".into())),
            Ok(addr("node1"))
        );
    }

    #[test]
    fn constructors_enforce_the_record_rules() {
        let g = gid("fe80::1");
        let a = || vec![addr("x")];
        let rec = |gid, lid, mtu, rate, pkeys: Vec<u16>, addrs| {
            EndpointRecord::new(gid, lid, mtu, rate, pkeys, addrs)
        };
        assert_eq!(
            rec(Gid::default(), 0, 5, 3, vec![1], a()),
            Err(WireError::BadGid(Gid::default()))
        );
        assert!(matches!(
            rec(gid("ff02::1"), 0, 5, 3, vec![1], a()),
            Err(WireError::BadGid(_))
        ));
        assert_eq!(
            rec(g, 0xc000, 5, 3, vec![1], a()),
            Err(WireError::BadLid(0xc000))
        );
        assert_eq!(rec(g, 0, 0, 3, vec![1], a()), Err(WireError::BadMtu(0)));
        assert_eq!(rec(g, 0, 6, 3, vec![1], a()), Err(WireError::BadMtu(6)));
        assert_eq!(rec(g, 0, 5, 1, vec![1], a()), Err(WireError::BadRate(1)));
        assert_eq!(rec(g, 0, 5, 64, vec![1], a()), Err(WireError::BadRate(64)));
        assert_eq!(
            rec(g, 0, 5, 3, vec![], a()),
            Err(WireError::BadPkeyCount(0))
        );
        assert_eq!(
            rec(g, 0, 5, 3, (1..=9).collect(), a()),
            Err(WireError::BadPkeyCount(9))
        );
        assert_eq!(
            rec(g, 0, 5, 3, vec![0x8000], a()),
            Err(WireError::BadPkey(0x8000))
        );
        assert_eq!(
            rec(g, 0, 5, 3, vec![0xffff, 0x7fff], a()),
            Err(WireError::DuplicatePkey(0x7fff))
        );
        assert_eq!(
            rec(g, 0, 5, 3, vec![1], vec![]),
            Err(WireError::BadAddressCount(0))
        );
        let nine = (0..9).map(|i| addr(&format!("h{i}"))).collect();
        assert_eq!(
            rec(g, 0, 5, 3, vec![1], nine),
            Err(WireError::BadAddressCount(9))
        );
        assert_eq!(
            rec(g, 0, 5, 3, vec![1], vec![addr("x"), addr("X")]),
            Err(WireError::DuplicateAddress(Address::name("x").unwrap()))
        );
    }

    #[test]
    fn constructors_enforce_the_message_rules() {
        assert_eq!(
            Reply::new(txid(1), addr("10.9.9.9"), Answer::Found(node1())),
            Err(WireError::TargetNotInRecord)
        );
        assert!(Reply::new(txid(1), addr("10.9.9.9"), Answer::Refused).is_ok());
        assert_eq!(
            Announce::new(vec![], false),
            Err(WireError::BadRecordCount(0))
        );
        assert_eq!(
            Announce::new(vec![node1(), node2(), node2()], false),
            Err(WireError::BadRecordCount(3))
        );
        assert_eq!(
            Announce::new(vec![node1(), node1()], false),
            Err(WireError::DuplicateAddress(Address::name("node1").unwrap()))
        );
    }

    /// `bytes` with `patch` written at `at`.
    fn patched(bytes: &[u8], at: usize, patch: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        b[at..at + patch.len()].copy_from_slice(patch);
        b
    }

    fn decode_err(b: &[u8]) -> WireError {
        Message::decode(b).expect_err("decoded")
    }

    // Offsets in the golden query (see GOLDEN_PREFIX).
    const TARGET: usize = 16;
    const SENDER: usize = 22;
    const LID: usize = SENDER + 16;
    const MTU: usize = LID + 2;
    const RATE: usize = MTU + 1;
    const NPKEYS: usize = RATE + 1;
    const NADDRS: usize = NPKEYS + 1;
    const PKEY: usize = NADDRS + 1;
    const NAME_ADDR: usize = PKEY + 2;

    #[test]
    fn a_query_cut_short_still_names_its_transaction() {
        let bytes = golden_query().encode();
        assert_eq!(
            Message::query_txid(&bytes[..520]),
            Some(txid(0x0123_4567_89ab_cdef))
        );
        assert_eq!(Message::query_txid(&bytes[..15]), None);
        let mut reply = bytes.clone();
        reply[5] = TYPE_REPLY;
        assert_eq!(Message::query_txid(&reply), None, "only our own queries");
        assert_eq!(
            Message::query_txid(b"URDX\x01\x01\0\0\0\0\0\0\0\0\0\x07"),
            None
        );
    }

    #[test]
    fn rejects_bad_headers() {
        let q = golden_query().encode();
        assert_eq!(decode_err(&[]), WireError::Truncated("header"));
        assert_eq!(decode_err(&q[..15]), WireError::Truncated("header"));
        assert_eq!(
            decode_err(&patched(&q, 0, b"URDX")),
            WireError::BadMagic(*b"URDX")
        );
        assert_eq!(decode_err(&patched(&q, 4, &[2])), WireError::BadVersion(2));
        assert_eq!(decode_err(&patched(&q, 4, &[0])), WireError::BadVersion(0));
        assert_eq!(decode_err(&patched(&q, 5, &[0])), WireError::BadType(0));
        assert_eq!(decode_err(&patched(&q, 5, &[4])), WireError::BadType(4));
        assert_eq!(
            decode_err(&patched(&q, 6, &[0x80, 0])),
            WireError::AuthUnsupported
        );
        assert_eq!(decode_err(&patched(&q, 6, &[0, 2])), WireError::BadFlags(2));
        // The authenticated decoder wants the flag, and takes nothing else
        // the plain one refuses.
        assert_eq!(
            Message::decode_authenticated(&q),
            Err(WireError::NotAuthenticated)
        );
        assert!(Message::decode_authenticated(&patched(&q, 6, &[0x80, 0])).is_ok());
        assert_eq!(
            Message::decode_authenticated(&patched(&q, 6, &[0x80, 2])),
            Err(WireError::BadFlags(2))
        );
        // Withdrawn means something only on an announce.
        assert_eq!(decode_err(&patched(&q, 6, &[0, 1])), WireError::BadFlags(1));
        assert_eq!(decode_err(&patched(&q, 8, &[0; 8])), WireError::ZeroTxid);
        let big = vec![0; MAX_MESSAGE_LEN + 1];
        assert_eq!(decode_err(&big), WireError::TooLong(MAX_MESSAGE_LEN + 1));
    }

    #[test]
    fn rejects_unpadded_or_overlong_queries() {
        let q = golden_query().encode();
        assert_eq!(decode_err(&q[..77]), WireError::UnpaddedQuery(77));
        assert_eq!(
            decode_err(&q[..QUERY_LEN - 1]),
            WireError::UnpaddedQuery(QUERY_LEN - 1)
        );
        assert_eq!(
            decode_err(&patched(&q, 600, &[1])),
            WireError::NonZeroPadding
        );
        let mut long = q.clone();
        long.push(0);
        assert_eq!(decode_err(&long), WireError::TrailingBytes(1));
    }

    #[test]
    fn rejects_bad_addresses() {
        let q = golden_query().encode();
        assert_eq!(
            decode_err(&patched(&q, TARGET, &[4])),
            WireError::UnsupportedAddressType(4)
        );
        assert_eq!(
            decode_err(&patched(&q, TARGET, &[0])),
            WireError::UnsupportedAddressType(0)
        );
        assert_eq!(
            decode_err(&patched(&q, TARGET, &[3])),
            WireError::BadAddressLength { kind: 3, len: 4 }
        );
        assert_eq!(
            decode_err(&patched(&q, TARGET + 1, &[5])),
            WireError::BadAddressLength { kind: 2, len: 5 }
        );
        let name_len = NAME_ADDR + 1;
        assert_eq!(
            decode_err(&patched(&q, name_len, &[0])),
            WireError::BadAddressLength { kind: 1, len: 0 }
        );
        assert_eq!(
            decode_err(&patched(&q, name_len, &[64])),
            WireError::BadAddressLength { kind: 1, len: 64 }
        );
        for bad in [b' ', 0x7f, 0x80, 0, b'N'] {
            assert_eq!(
                decode_err(&patched(&q, name_len + 1, &[bad])),
                WireError::BadName,
                "{bad:#x}"
            );
        }
        // "node1" turned into "10.0.0.1"'s duplicate is impossible by length,
        // so duplicate the IPv4 entry over the IPv6 one instead.
        let v4 = q[NAME_ADDR + 7..NAME_ADDR + 13].to_vec();
        let mut dup = q[..NAME_ADDR + 13].to_vec();
        dup.extend_from_slice(&v4);
        dup[NADDRS] = 3;
        dup.resize(QUERY_LEN, 0);
        assert_eq!(
            decode_err(&dup),
            WireError::DuplicateAddress(Address::Ip4(Ipv4Addr::new(10, 0, 0, 1)))
        );
    }

    #[test]
    fn rejects_bad_records() {
        let q = golden_query().encode();
        assert!(matches!(
            decode_err(&patched(&q, SENDER, &[0xff])),
            WireError::BadGid(_)
        ));
        // (field, bytes written there, the error that names it)
        let cases: [(usize, &[u8], WireError); 11] = [
            (SENDER, &[0; 16], WireError::BadGid(Gid::default())),
            (LID, &[0xff, 0xff], WireError::BadLid(0xffff)),
            (MTU, &[0], WireError::BadMtu(0)),
            (RATE, &[0], WireError::BadRate(0)),
            (NPKEYS, &[0], WireError::BadPkeyCount(0)),
            (NPKEYS, &[9], WireError::BadPkeyCount(9)),
            (NPKEYS, &[255], WireError::BadPkeyCount(255)),
            (NADDRS, &[0], WireError::BadAddressCount(0)),
            (NADDRS, &[9], WireError::BadAddressCount(9)),
            (PKEY, &[0, 0], WireError::BadPkey(0)),
            // One address more than there is: the zero padding is read as
            // an address of type 0.
            (NADDRS, &[4], WireError::UnsupportedAddressType(0)),
        ];
        for (at, bytes, want) in cases {
            assert_eq!(
                decode_err(&patched(&q, at, bytes)),
                want,
                "{bytes:?} at {at}"
            );
        }
    }

    #[test]
    fn rejects_bad_replies() {
        let q = Query::new(txid(5), addr("node2"), node1());
        let found: Message = q.reply(Answer::Found(node2())).unwrap().into();
        let f = found.encode();
        assert_eq!(decode_err(&patched(&f, 16, &[0])), WireError::BadStatus(0));
        assert_eq!(decode_err(&patched(&f, 16, &[3])), WireError::BadStatus(3));
        assert_eq!(decode_err(&f[..16]), WireError::Truncated("reply status"));
        assert_eq!(decode_err(&f[..18]), WireError::Truncated("reply target"));
        assert_eq!(
            decode_err(&f[..f.len() - 1]),
            WireError::Truncated("reply record")
        );
        let mut long = f.clone();
        long.push(0);
        assert_eq!(decode_err(&long), WireError::TrailingBytes(1));
        // Asked node2, answered with a record of node2's that lacks it.
        let other = patched(&f, 19, b"nodex");
        assert_eq!(decode_err(&other), WireError::TargetNotInRecord);
        // A refusal carries no record.
        let refused: Message = q.reply(Answer::Refused).unwrap().into();
        let r = refused.encode();
        assert_eq!(r.len(), 16 + 1 + 2 + 5);
        assert_eq!(
            decode_err(&patched(&f, 16, &[2])),
            WireError::TrailingBytes(f.len() - r.len())
        );
        assert_eq!(decode_err(&patched(&r, 8, &[0; 8])), WireError::ZeroTxid);
    }

    #[test]
    fn rejects_bad_announces() {
        let one: Message = Announce::new(vec![node1()], false).unwrap().into();
        let a = one.encode();
        assert_eq!(
            decode_err(&patched(&a, 15, &[1])),
            WireError::AnnounceTxid(1)
        );
        assert_eq!(
            decode_err(&patched(&a, 16, &[0])),
            WireError::BadRecordCount(0)
        );
        assert_eq!(
            decode_err(&patched(&a, 16, &[3])),
            WireError::BadRecordCount(3)
        );
        assert_eq!(
            decode_err(&patched(&a, 16, &[2])),
            WireError::Truncated("announce record")
        );
        assert_eq!(decode_err(&patched(&a, 6, &[0, 3])), WireError::BadFlags(2));
        assert_eq!(decode_err(&a[..16]), WireError::Truncated("announce count"));
        let mut long = a.clone();
        long.extend_from_slice(&[0; 3]);
        assert_eq!(decode_err(&long), WireError::TrailingBytes(3));
        let mut twice = a.clone();
        twice.extend_from_slice(&a[17..]);
        twice[16] = 2;
        assert_eq!(
            decode_err(&twice),
            WireError::DuplicateAddress(Address::name("node1").unwrap())
        );
        match Message::decode(&patched(&a, 6, &[0, 1])) {
            Ok(Message::Announce(w)) => assert!(w.withdrawn()),
            other => panic!("{other:?}"),
        }
    }

    /// xorshift64: deterministic, so a failure reproduces.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        fn byte(&mut self) -> u8 {
            // Mostly the values length and count checks hinge on.
            const EDGES: [u8; 12] = [0, 1, 2, 3, 4, 8, 9, 16, 63, 64, 0x80, 0xff];
            if self.next() & 1 == 0 {
                EDGES[self.below(EDGES.len())]
            } else {
                self.next() as u8
            }
        }
    }

    #[test]
    fn mutated_messages_never_panic_and_decode_canonically() {
        let seeds: Vec<Vec<u8>> = samples().iter().map(Message::encode).collect();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut decoded = 0;
        for _ in 0..20_000 {
            let mut b = seeds[rng.below(seeds.len())].clone();
            for _ in 0..=rng.below(4) {
                match rng.below(7) {
                    0 if !b.is_empty() => {
                        let i = rng.below(b.len());
                        b[i] ^= 1 << rng.below(8);
                    }
                    1 if !b.is_empty() => {
                        let i = rng.below(b.len());
                        b[i] = rng.byte();
                    }
                    2 => {
                        let n = rng.below(b.len() + 1);
                        b.truncate(n);
                    }
                    3 => {
                        for _ in 0..=rng.below(64) {
                            b.push(rng.byte());
                        }
                    }
                    4 => {
                        let i = rng.below(b.len() + 1);
                        b.insert(i, rng.byte());
                    }
                    5 if !b.is_empty() => {
                        let i = rng.below(b.len());
                        b.remove(i);
                    }
                    _ => {
                        // Header fields, where one byte changes the meaning.
                        let i = rng.below(HEADER_LEN.min(b.len()));
                        if let Some(x) = b.get_mut(i) {
                            *x = rng.byte();
                        }
                    }
                }
            }
            // Decoding is the inverse of encoding: whatever is accepted
            // re-encodes to the same bytes.
            if let Ok(m) = Message::decode(&b) {
                decoded += 1;
                assert_eq!(m.encode(), b, "{m:?}");
            }
        }
        // Some mutations (a flipped txid or address byte) stay valid; if
        // none did, the loop would only ever exercise the first checks.
        assert!(decoded > 100, "{decoded}");
        for len in [0, 1, 16, 17, 100, QUERY_LEN, MAX_MESSAGE_LEN] {
            for _ in 0..200 {
                let noise: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                let _ = Message::decode(&noise);
            }
        }
    }
}
