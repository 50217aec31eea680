//! Bytes to messages and back: [`Message::encode`] and the strict
//! [`Message::decode`], which accepts exactly what `encode` produces.

use super::*;

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
            TYPE_QUERY => query_body(buf, txid),
            TYPE_REPLY => reply_body(r, txid),
            _ => announce_body(r, txid, flags),
        }
    }
}

/// A QUERY's body: its target and its sender's record, then zeros to
/// [`QUERY_LEN`].
fn query_body(buf: &[u8], txid: u64) -> Result<Message, WireError> {
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

/// A REPLY's body, past the header `r` read: its status, target and,
/// when found, the record.
fn reply_body(mut r: Reader<'_>, txid: u64) -> Result<Message, WireError> {
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

/// An ANNOUNCE's body, past the header `r` read: its records.
fn announce_body(mut r: Reader<'_>, txid: u64, flags: u16) -> Result<Message, WireError> {
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

fn put_header(b: &mut Vec<u8>, kind: u8, flags: u16, txid: u64) {
    b.push(kind);
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&txid.to_be_bytes());
}

pub(super) fn address_len(a: &WireAddress) -> usize {
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
