//! `struct acm_msg`, the one message of the daemon's client socket and of
//! its provider calls, as plain bytes. The provider answers the messages
//! the daemon hands over, `urdma-acm` and `urdma-load` write requests and
//! read replies; with one codec a byte order or a length check is fixed for
//! all three at once. Every offset comes from the generated C layouts
//! (`offset_of!`), so a field the installed header moves moves here too
//! instead of being misread at a remembered index.
//!
//! Resolve and query messages keep the header's integers and the entries'
//! `flags` and `type` in host order and everything inside `info` in network
//! order (contract §1.3); perf and EP query messages carry their length and
//! their data big-endian.
//!
//! The provider's cache-hit path runs through these accessors and is
//! measured in instructions per request: the small ones are `#[inline]`, so
//! that they cost across the crate boundary what they cost inside it.

use acm_prov_sys::{
    acm_ep_addr_data, acm_ep_config_data, acm_ep_info, acm_hdr, acm_msg, ibv_path_record,
    ACM_ADDRESS_IP, ACM_ADDRESS_IP6, ACM_ADDRESS_NAME, ACM_EP_FLAG_SOURCE, ACM_EP_INFO_PATH,
    ACM_MAX_ADDRESS, ACM_MSG_EP_LENGTH, ACM_MSG_HDR_LENGTH, ACM_MSG_SIZE, ACM_OP_ACK,
    ACM_OP_EP_QUERY, ACM_OP_MASK, ACM_OP_PERF_QUERY, ACM_PATH_FLAGS_PRIMARY_ROUTE,
};
use std::mem::{align_of, offset_of, size_of};
use std::net::{Ipv4Addr, Ipv6Addr};

mod endpoint;
mod request;

pub use endpoint::Endpoint;
pub use request::{ep_query, perf_query, resolve_request};

/// Bytes of the header.
pub const HDR_LEN: usize = size_of::<acm_hdr>();
/// Bytes of one entry (`struct acm_ep_addr_data`).
pub const EP_LEN: usize = size_of::<acm_ep_addr_data>();
/// Bytes of an entry's address field (`union acm_ep_info`).
pub const ADDR_LEN: usize = size_of::<acm_ep_info>();
/// Bytes of a path record, which fills an entry's address field.
pub const PATH_LEN: usize = size_of::<ibv_path_record>();
/// Most entries a message can hold.
pub const MAX_ENTRIES: usize = (ACM_MSG_SIZE - HDR_LEN) / EP_LEN;

/// [`ENTRIES_BY_LENGTH`] of a length that is not a header and whole
/// entries.
const NOT_WHOLE: u8 = u8::MAX;

/// The entries a message length holds, by length up to the buffer's.
static ENTRIES_BY_LENGTH: [u8; ACM_MSG_SIZE + 1] = {
    let mut t = [NOT_WHOLE; ACM_MSG_SIZE + 1];
    let mut n = 0;
    while HDR_LEN + n * EP_LEN <= ACM_MSG_SIZE {
        t[HDR_LEN + n * EP_LEN] = n as u8;
        n += 1;
    }
    t
};
/// The `type` of an entry that holds a path record.
pub const PATH_TYPE: u16 = ACM_EP_INFO_PATH as u16;

// The header's constants and the generated structs agree, and the buffer
// can stand for the C message behind a pointer.
const _: () = {
    assert!(HDR_LEN == ACM_MSG_HDR_LENGTH as usize);
    assert!(EP_LEN == ACM_MSG_EP_LENGTH as usize);
    assert!(ADDR_LEN == ACM_MAX_ADDRESS as usize);
    assert!(PATH_LEN == ADDR_LEN);
    assert!(size_of::<MsgBuf>() == size_of::<acm_msg>());
    assert!(align_of::<MsgBuf>() == align_of::<acm_msg>());
};

// Header fields.
const VERSION: usize = offset_of!(acm_hdr, version);
const OPCODE: usize = offset_of!(acm_hdr, opcode);
const STATUS: usize = offset_of!(acm_hdr, status);
/// `data[3]`: `src_out`, `src_index`, `dst_index` of a resolve message
/// (macros in acm.h); the endpoint index and port of an EP query; the
/// number of counters of a perf reply.
const DATA: usize = offset_of!(acm_hdr, data);
const LENGTH: usize = offset_of!(acm_hdr, length);
const TID: usize = offset_of!(acm_hdr, tid);

// Entry fields, from the start of the entry.
const FLAGS: usize = offset_of!(acm_ep_addr_data, flags);
const TYPE: usize = offset_of!(acm_ep_addr_data, type_);
const RESERVED: usize = offset_of!(acm_ep_addr_data, reserved);
const INFO: usize = offset_of!(acm_ep_addr_data, info);

// EP query reply fields, from the end of the header.
const EP_GUID: usize = HDR_LEN + offset_of!(acm_ep_config_data, dev_guid);
const EP_PORT: usize = HDR_LEN + offset_of!(acm_ep_config_data, port_num);
const EP_PKEY: usize = HDR_LEN + offset_of!(acm_ep_config_data, pkey);
const EP_ADDR_CNT: usize = HDR_LEN + offset_of!(acm_ep_config_data, addr_cnt);
const EP_PROV_NAME: usize = HDR_LEN + offset_of!(acm_ep_config_data, prov_name);
const EP_ADDRS: usize = HDR_LEN + offset_of!(acm_ep_config_data, addrs);

const PATH_DGID: usize = offset_of!(ibv_path_record, dgid);

/// Where entry `i` starts.
#[inline]
const fn entry_at(i: usize) -> usize {
    HDR_LEN + i * EP_LEN
}

/// The `N` bytes of `buf` at `at`.
#[inline]
fn read<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    buf[at..at + N].try_into().expect("N bytes")
}

/// `bytes` into `buf` at `at`.
#[inline]
fn write(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

/// A whole `struct acm_msg`, aligned as the C type so that the provider's
/// boundary can take the daemon's message by pointer as this type.
#[repr(C, align(8))]
#[derive(Clone, PartialEq, Eq)]
pub struct MsgBuf(pub [u8; ACM_MSG_SIZE]);

impl Default for MsgBuf {
    fn default() -> Self {
        MsgBuf([0; ACM_MSG_SIZE])
    }
}

impl std::fmt::Debug for MsgBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MsgBuf(op {:#x}, status {}, len {})",
            self.opcode(),
            self.status(),
            self.length()
        )
    }
}

/// One `struct acm_ep_addr_data`, by value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Entry {
    pub flags: u32,
    /// The entry's `type`.
    pub kind: u16,
    pub info: [u8; ADDR_LEN],
}

impl MsgBuf {
    /// A message as read from the socket: `bytes` at the start, zeros after.
    pub fn from_bytes(bytes: &[u8]) -> MsgBuf {
        let mut m = MsgBuf::default();
        let n = bytes.len().min(ACM_MSG_SIZE);
        m.0[..n].copy_from_slice(&bytes[..n]);
        m
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.0[VERSION]
    }
    #[inline]
    pub fn opcode(&self) -> u8 {
        self.0[OPCODE]
    }
    #[inline]
    pub fn status(&self) -> u8 {
        self.0[STATUS]
    }
    #[inline]
    pub fn src_out(&self) -> u8 {
        self.0[DATA]
    }
    #[inline]
    pub fn src_index(&self) -> u8 {
        self.0[DATA + 1]
    }
    #[inline]
    pub fn dst_index(&self) -> u8 {
        self.0[DATA + 2]
    }
    /// `hdr.length` as a resolve or query message carries it (host order).
    #[inline]
    pub fn length(&self) -> u16 {
        u16::from_ne_bytes(read(&self.0, LENGTH))
    }
    #[inline]
    pub fn tid(&self) -> u64 {
        u64::from_ne_bytes(read(&self.0, TID))
    }

    /// Sets `hdr.length` as a resolve or query message carries it.
    #[inline]
    pub fn set_length(&mut self, len: usize) {
        write(&mut self.0, LENGTH, &(len as u16).to_ne_bytes());
    }
    /// `hdr.length` in the order the opcode carries it: big-endian in perf
    /// and EP queries and their replies, host order in the others.
    pub fn message_len(&self) -> usize {
        match u32::from(self.opcode()) & ACM_OP_MASK {
            ACM_OP_PERF_QUERY | ACM_OP_EP_QUERY => {
                usize::from(u16::from_be_bytes(read(&self.0, LENGTH)))
            }
            _ => usize::from(self.length()),
        }
    }

    /// The message as it goes on the socket: the bytes its length counts,
    /// at most the buffer.
    pub fn bytes(&self) -> &[u8] {
        &self.0[..self.message_len().min(ACM_MSG_SIZE)]
    }

    /// Entries a resolve or query message's length claims, bounded by the
    /// buffer.
    #[inline]
    pub fn entry_count(&self) -> usize {
        (usize::from(self.length()).saturating_sub(HDR_LEN) / EP_LEN).min(MAX_ENTRIES)
    }

    /// The entries of a resolve or query message whose length is a header
    /// and whole entries within the buffer; `None` for any other length.
    #[inline]
    pub fn whole_entries(&self) -> Option<usize> {
        // A table lookup: this runs on every request, and the division
        // and remainder by 72 cost a dozen instructions.
        match ENTRIES_BY_LENGTH.get(usize::from(self.length())) {
            Some(&n) if n != NOT_WHOLE => Some(usize::from(n)),
            _ => None,
        }
    }

    #[inline]
    pub fn entry_flags(&self, i: usize) -> u32 {
        u32::from_ne_bytes(read(&self.0, entry_at(i) + FLAGS))
    }

    #[inline]
    pub fn entry_kind(&self, i: usize) -> u16 {
        u16::from_ne_bytes(read(&self.0, entry_at(i) + TYPE))
    }

    /// The address field of entry `i`, in place.
    #[inline]
    pub fn entry_info(&self, i: usize) -> &[u8; ADDR_LEN] {
        let at = entry_at(i) + INFO;
        self.0[at..at + ADDR_LEN]
            .try_into()
            .expect("ADDR_LEN bytes")
    }

    #[inline]
    pub fn entry(&self, i: usize) -> Entry {
        Entry {
            flags: self.entry_flags(i),
            kind: self.entry_kind(i),
            info: *self.entry_info(i),
        }
    }

    #[inline]
    fn write_entry(&mut self, i: usize, flags: u32, kind: u16, info: &[u8; ADDR_LEN]) {
        let at = entry_at(i);
        write(&mut self.0, at + FLAGS, &flags.to_ne_bytes());
        write(&mut self.0, at + TYPE, &kind.to_ne_bytes());
        write(&mut self.0, at + RESERVED, &[0; 2]);
        write(&mut self.0, at + INFO, info);
    }

    #[inline]
    pub fn set_entry(&mut self, i: usize, entry: &Entry) {
        self.write_entry(i, entry.flags, entry.kind, &entry.info);
    }

    /// Turns a request into its reply header: the request's version, opcode
    /// and `tid` (the kernel path stores a pointer there), a status, no
    /// index bytes.
    #[inline]
    fn make_reply_header(&mut self, status: u8) {
        self.0[STATUS] = status;
        self.0[DATA..DATA + 3].fill(0);
    }

    /// Turns a `resolve` request into its error reply: header only. The
    /// bytes past `hdr.length` are never sent.
    #[inline]
    pub fn make_resolve_error(&mut self, status: u8) {
        self.make_reply_header(status);
        self.set_length(HDR_LEN);
    }

    /// Turns a `resolve` request into its success reply, in place: the path
    /// as the kernel accepts a primary route (flags 0x2B), then the source
    /// the daemon chose, if the client is to learn it.
    #[inline]
    pub fn make_resolve_success(&mut self, path: &[u8; PATH_LEN], echo_source: Option<usize>) {
        self.make_reply_header(0);
        let mut n = 1;
        // The source first: entry 0, about to hold the path, may be it.
        if let Some(i) = echo_source.filter(|&i| i < MAX_ENTRIES) {
            let at = entry_at(1);
            if i != 1 {
                let from = entry_at(i);
                self.0.copy_within(from..from + EP_LEN, at);
            }
            write(&mut self.0, at + FLAGS, &ACM_EP_FLAG_SOURCE.to_ne_bytes());
            write(&mut self.0, at + RESERVED, &[0; 2]);
            n = 2;
        }
        self.write_entry(0, ACM_PATH_FLAGS_PRIMARY_ROUTE, PATH_TYPE, path);
        self.set_length(entry_at(n));
    }

    /// The path of a resolve reply that carries one the way the kernel
    /// accepts a primary route: entry 0, a path, flags 0x2B.
    pub fn primary_path(&self) -> Option<&[u8; PATH_LEN]> {
        let path = self.entry_count() > 0
            && self.entry_kind(0) == PATH_TYPE
            && self.entry_flags(0) == ACM_PATH_FLAGS_PRIMARY_ROUTE;
        path.then(|| self.entry_info(0))
    }

    /// The counters of a perf query reply, as many as `hdr.data[0]` says,
    /// big-endian; `None` when the reply is shorter than that.
    pub fn counters(&self) -> Option<Vec<u64>> {
        let count = usize::from(self.0[DATA]);
        let data = self.bytes().get(HDR_LEN..).unwrap_or_default();
        let values: Vec<u64> = data
            .chunks_exact(8)
            .take(count)
            .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
            .collect();
        (values.len() == count).then_some(values)
    }
}

/// The destination GID of a path record.
pub fn path_dgid(path: &[u8; PATH_LEN]) -> [u8; 16] {
    path[PATH_DGID..PATH_DGID + 16]
        .try_into()
        .expect("16 bytes")
}

/// The error reply to a `resolve`: header only.
#[inline]
pub fn resolve_error(req: &MsgBuf, status: u8) -> MsgBuf {
    let mut r = req.clone();
    r.make_resolve_error(status);
    r
}

/// The success reply to a `resolve` (see [`MsgBuf::make_resolve_success`]).
#[inline]
pub fn resolve_success(req: &MsgBuf, path: &[u8; PATH_LEN], echo_source: Option<usize>) -> MsgBuf {
    let mut r = req.clone();
    r.make_resolve_success(path, echo_source);
    r
}

/// The reply to a `query`: the request's length, the ACK bit, and the
/// completed record when there is one.
#[inline]
pub fn query_reply(req: &MsgBuf, status: u8, path: Option<&[u8; PATH_LEN]>) -> MsgBuf {
    let mut r = req.clone();
    r.0[OPCODE] |= ACM_OP_ACK as u8;
    r.make_reply_header(status);
    if let Some(p) = path {
        write(&mut r.0, entry_at(0) + INFO, p);
    }
    r
}

/// An address entry: `bytes` at the start of the address field.
pub fn addr_entry(flags: u32, kind: u16, bytes: &[u8]) -> Entry {
    let mut info = [0; ADDR_LEN];
    let n = bytes.len().min(ADDR_LEN);
    info[..n].copy_from_slice(&bytes[..n]);
    Entry { flags, kind, info }
}

/// An IPv4 or IPv6 literal as an address entry.
pub fn ip_entry(flags: u32, text: &str) -> Option<Entry> {
    if let Ok(v4) = text.parse::<Ipv4Addr>() {
        Some(addr_entry(flags, ACM_ADDRESS_IP, &v4.octets()))
    } else if let Ok(v6) = text.parse::<Ipv6Addr>() {
        Some(addr_entry(flags, ACM_ADDRESS_IP6, &v6.octets()))
    } else {
        None
    }
}

/// A name entry; `None` for an empty name or one too long to keep the NUL
/// that ends it (the daemon and the providers read names as C strings).
pub fn name_entry(flags: u32, name: &str) -> Option<Entry> {
    (!name.is_empty() && name.len() < ADDR_LEN)
        .then(|| addr_entry(flags, ACM_ADDRESS_NAME, name.as_bytes()))
}

/// An address as `ib_acme` takes one: an IP literal, else a name.
pub fn address_entry(flags: u32, text: &str) -> Option<Entry> {
    ip_entry(flags, text).or_else(|| name_entry(flags, text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use acm_prov_sys::{ACM_EP_FLAG_DEST, ACM_STATUS_ENODATA};

    #[test]
    fn replies_keep_the_tid_and_follow_the_contract() {
        let m = resolve_request(
            &[
                addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_IP, &[10, 0, 0, 2]),
                addr_entry(ACM_EP_FLAG_SOURCE, ACM_ADDRESS_IP, &[10, 0, 0, 1]),
            ],
            true,
            0xdead_beef_0102,
        );
        let path = [7u8; 64];
        let r = resolve_success(&m, &path, Some(1));
        assert_eq!(
            (r.tid(), r.status(), r.length()),
            (0xdead_beef_0102, 0, 16 + 2 * 72)
        );
        assert_eq!((r.src_out(), r.src_index(), r.dst_index()), (0, 0, 0));
        assert_eq!(r.entry(0).flags, 0x2B);
        assert_eq!(r.entry(0).kind, PATH_TYPE);
        assert_eq!(&r.entry(0).info[..], &path[..]);
        assert_eq!(r.entry(1).flags, ACM_EP_FLAG_SOURCE);
        assert_eq!(&r.entry(1).info[..4], &[10, 0, 0, 1]);
        let e = resolve_error(&m, ACM_STATUS_ENODATA as u8);
        assert_eq!((e.tid(), e.status(), e.length()), (0xdead_beef_0102, 3, 16));
        let q = query_reply(&m, 0, Some(&path));
        assert_eq!(
            (q.opcode(), q.length(), q.tid()),
            (0x81, m.length(), m.tid())
        );
    }

    #[test]
    fn requests_have_the_layout_ib_acme_sends() {
        let q = ep_query(3);
        assert_eq!(q.bytes(), [1, 3, 0, 3, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0]);
        let p = perf_query(&address_entry(ACM_EP_FLAG_SOURCE, "10.0.0.1").unwrap());
        let p = p.bytes();
        assert_eq!(p.len(), 88);
        assert_eq!(&p[..8], &[1, 2, 0, 0, 0, 0, 0, 88]);
        assert_eq!(
            u32::from_ne_bytes(p[16..20].try_into().unwrap()),
            1,
            "SOURCE"
        );
        assert_eq!(u16::from_ne_bytes([p[20], p[21]]), 2, "IPv4");
        assert_eq!(&p[24..29], &[10, 0, 0, 1, 0]);
        let n = perf_query(&address_entry(ACM_EP_FLAG_SOURCE, "node1").unwrap());
        let n = n.bytes();
        assert_eq!(u16::from_ne_bytes([n[20], n[21]]), 1, "name");
        assert_eq!(&n[24..30], b"node1\0");
        let r = resolve_request(&[addr_entry(ACM_EP_FLAG_DEST, 2, &[10, 0, 0, 2])], false, 9);
        assert_eq!(r.bytes().len(), 88, "a header and one entry");
        assert_eq!(&r.bytes()[..8], &[1, 1, 0, 0, 0, 0, 88, 0][..]);
    }

    #[test]
    fn addresses_are_ip_literals_or_names_that_keep_their_nul() {
        let six = address_entry(ACM_EP_FLAG_DEST, "fe80::2").unwrap();
        assert_eq!((six.flags, six.kind), (ACM_EP_FLAG_DEST, ACM_ADDRESS_IP6));
        assert_eq!(&six.info[..2], &[0xfe, 0x80]);
        assert_eq!(ip_entry(0, "node1"), None);
        assert_eq!(name_entry(0, "10.0.0.1").unwrap().kind, ACM_ADDRESS_NAME);
        assert!(name_entry(0, &"n".repeat(63)).is_some());
        assert_eq!(name_entry(0, &"n".repeat(64)), None);
        assert_eq!(address_entry(0, ""), None);
    }

    #[test]
    fn lengths_are_whole_entries_within_the_buffer() {
        let mut m = resolve_request(&[addr_entry(0, 2, &[])], false, 1);
        assert_eq!(m.whole_entries(), Some(1));
        for (len, whole) in [
            (16, Some(0)),
            (15, None),
            (87, None),
            (592, Some(8)),
            (664, None),
        ] {
            m.set_length(len);
            assert_eq!(m.whole_entries(), whole, "length {len}");
        }
        for len in 0..=usize::from(u16::MAX) {
            m.set_length(len);
            let whole = (HDR_LEN..=ACM_MSG_SIZE)
                .contains(&len)
                .then(|| len - HDR_LEN)
                .filter(|body| body % EP_LEN == 0)
                .map(|body| body / EP_LEN);
            assert_eq!(m.whole_entries(), whole, "length {len}");
        }
        m.set_length(664);
        assert_eq!(m.entry_count(), 8, "bounded by the buffer");
    }

    #[test]
    fn a_primary_path_is_found_only_where_the_kernel_takes_it() {
        let req = resolve_request(&[addr_entry(ACM_EP_FLAG_DEST, 2, &[10, 0, 0, 2])], false, 1);
        let mut path = [0u8; PATH_LEN];
        path[PATH_DGID..PATH_DGID + 2].copy_from_slice(&[0xfe, 0x80]);
        let ok = MsgBuf::from_bytes(resolve_success(&req, &path, None).bytes());
        assert_eq!(ok.primary_path(), Some(&path));
        assert_eq!(path_dgid(ok.primary_path().unwrap())[..2], [0xfe, 0x80]);
        assert_eq!(resolve_error(&ok, 3).primary_path(), None, "header only");
        assert_eq!(req.primary_path(), None, "an address entry");
    }

    #[test]
    fn replies_of_ep_and_perf_queries_decode() {
        let mut ep = vec![1, 0x83, 0, 0, 0, 0, 0, 224, 0, 0, 0, 0, 0, 0, 0, 0];
        ep.extend_from_slice(&0x5054_00ff_fe12_3456u64.to_be_bytes());
        ep.extend_from_slice(&[1, 1, 0, 0, 0xff, 0xff, 0, 2]);
        let mut name = [0u8; 64];
        name[..5].copy_from_slice(b"urdma");
        ep.extend_from_slice(&name);
        for a in ["10.0.0.1", "node1"] {
            let mut b = [0u8; 64];
            b[..a.len()].copy_from_slice(a.as_bytes());
            ep.extend_from_slice(&b);
        }
        let e = Endpoint::decode(&ep).unwrap();
        assert_eq!(
            e,
            Endpoint {
                guid: 0x5054_00ff_fe12_3456,
                port: 1,
                pkey: 0xffff,
                provider: "urdma".into(),
                addresses: vec!["10.0.0.1".into(), "node1".into()],
            }
        );
        ep[7] = 95;
        assert_eq!(Endpoint::decode(&ep), None, "shorter than one endpoint");
        ep[7] = 225;
        assert_eq!(Endpoint::decode(&ep), None, "shorter than its header says");
        // Forty addresses: longer than a `struct acm_msg`, as the daemon
        // sends it for a port with that many.
        ep.truncate(96);
        for i in 0..40u8 {
            let mut b = [0u8; 64];
            b[..8].copy_from_slice(&[b'1', b'0', b'.', b'0', b'.', b'1', b'.', b'0' + i % 10]);
            ep.extend_from_slice(&b);
        }
        assert!(ep.len() > ACM_MSG_SIZE);
        let len = u16::try_from(ep.len()).unwrap();
        ep[6..8].copy_from_slice(&len.to_be_bytes());
        ep[HDR_LEN + 14..HDR_LEN + 16].copy_from_slice(&40u16.to_be_bytes());
        let e = Endpoint::decode(&ep).unwrap();
        assert_eq!(e.addresses.len(), 40);
        assert_eq!(e.addresses[39], "10.0.1.9");
        let mut perf = vec![1, 0x82, 0, 7, 0, 0, 0, 72, 0, 0, 0, 0, 0, 0, 0, 0];
        for v in [0u64, 4, 0, 1, 0, 1, 3] {
            perf.extend_from_slice(&v.to_be_bytes());
        }
        let counters = MsgBuf::from_bytes(&perf).counters();
        assert_eq!(counters, Some(vec![0, 4, 0, 1, 0, 1, 3]));
        perf[7] = 64;
        assert_eq!(MsgBuf::from_bytes(&perf).counters(), None, "short");
        perf[7] = 0;
        assert_eq!(MsgBuf::from_bytes(&perf).counters(), None, "no header");
    }
}
