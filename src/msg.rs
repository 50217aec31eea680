//! The daemon's `struct acm_msg`, decoded from and encoded into plain bytes.
//!
//! Resolve messages keep header integers, `flags` and `type` in host order
//! and everything inside `info` in network order (contract §1.3).

use crate::addr::{AddrError, EntryAddress, ADDR_LEN};
use crate::path::{PathRecord, PATH_RECORD_LEN};
use acm_prov_sys::{
    ACM_EP_FLAG_DEST, ACM_EP_FLAG_SOURCE, ACM_EP_INFO_PATH, ACM_FLAGS_NODELAY, ACM_FLAGS_QUERY_SA,
    ACM_MSG_EP_LENGTH, ACM_MSG_HDR_LENGTH, ACM_MSG_SIZE, ACM_OP_ACK, ACM_OP_MASK, ACM_OP_RESOLVE,
    ACM_PATH_FLAGS_PRIMARY_ROUTE, ACM_STATUS_EDESTADDR, ACM_STATUS_EDESTTYPE, ACM_STATUS_EINVAL,
    ACM_STATUS_ESRCTYPE,
};

const HDR: usize = ACM_MSG_HDR_LENGTH as usize;
const EP: usize = ACM_MSG_EP_LENGTH as usize;
/// Most entries a message can hold.
pub const MAX_ENTRIES: usize = (ACM_MSG_SIZE - HDR) / EP;
const PATH_TYPE: u16 = ACM_EP_INFO_PATH as u16;

/// A whole `struct acm_msg`, aligned as the C type so the boundary can hand
/// it to the daemon by pointer.
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
    pub kind: u16,
    pub info: [u8; ADDR_LEN],
}

impl MsgBuf {
    #[inline]
    pub fn opcode(&self) -> u8 {
        self.0[1]
    }
    #[inline]
    pub fn status(&self) -> u8 {
        self.0[2]
    }
    /// `hdr.length` as a resolve message carries it (host order).
    #[inline]
    pub fn length(&self) -> u16 {
        u16::from_ne_bytes([self.0[6], self.0[7]])
    }
    #[inline]
    pub fn tid(&self) -> u64 {
        u64::from_ne_bytes(self.0[8..16].try_into().expect("8 bytes"))
    }
    #[inline]
    pub fn src_out(&self) -> u8 {
        self.0[3]
    }
    #[inline]
    pub fn src_index(&self) -> u8 {
        self.0[4]
    }
    #[inline]
    pub fn dst_index(&self) -> u8 {
        self.0[5]
    }

    fn set_length(&mut self, len: usize) {
        self.0[6..8].copy_from_slice(&(len as u16).to_ne_bytes());
    }

    /// Entries the header's length claims, bounded by the buffer.
    #[inline]
    pub fn entry_count(&self) -> usize {
        (usize::from(self.length()).saturating_sub(HDR) / EP).min(MAX_ENTRIES)
    }

    pub fn entry(&self, i: usize) -> Entry {
        let e = &self.0[HDR + i * EP..HDR + (i + 1) * EP];
        Entry {
            flags: u32::from_ne_bytes(e[0..4].try_into().expect("4 bytes")),
            kind: u16::from_ne_bytes([e[4], e[5]]),
            info: e[8..EP].try_into().expect("64 bytes"),
        }
    }

    /// Entry `i` (below [`MAX_ENTRIES`]) as a fixed-size array: one bounds
    /// check, and none on the fields read from it.
    #[inline]
    fn entry_at(&self, i: usize) -> &[u8; EP] {
        &self.0[HDR..].as_chunks::<EP>().0[i]
    }

    #[inline]
    fn entry_flags(&self, i: usize) -> u32 {
        u32::from_ne_bytes(self.entry_at(i)[0..4].try_into().expect("4 bytes"))
    }

    #[inline]
    fn entry_kind(&self, i: usize) -> u16 {
        let e = self.entry_at(i);
        u16::from_ne_bytes([e[4], e[5]])
    }

    /// The 64-byte address field of entry `i`, in place.
    #[inline]
    fn entry_info(&self, i: usize) -> &[u8; ADDR_LEN] {
        self.entry_at(i)[8..].try_into().expect("64 bytes")
    }

    fn set_entry(&mut self, i: usize, entry: &Entry) {
        let e = &mut self.0[HDR + i * EP..HDR + (i + 1) * EP];
        e[0..4].copy_from_slice(&entry.flags.to_ne_bytes());
        e[4..6].copy_from_slice(&entry.kind.to_ne_bytes());
        e[6..8].fill(0);
        e[8..].copy_from_slice(&entry.info);
    }

    /// Turns a resolve request into its reply header: the request's
    /// version, opcode and `tid` (the kernel path stores a pointer there), a
    /// status, no index bytes.
    fn make_reply_header(&mut self, status: u8) {
        self.0[2] = status;
        self.0[3..6].fill(0);
    }

    /// Turns a `resolve` request into its error reply: header only. The
    /// bytes past `hdr.length` are never sent.
    pub fn make_resolve_error(&mut self, status: u8) {
        self.make_reply_header(status);
        self.set_length(HDR);
    }

    /// Turns a `resolve` request into its success reply, in place: the path
    /// as the kernel accepts a primary route (flags 0x2B), then the source
    /// the daemon chose, if the client is to learn it.
    pub fn make_resolve_success(
        &mut self,
        path: &[u8; PATH_RECORD_LEN],
        echo_source: Option<usize>,
    ) {
        self.make_reply_header(0);
        let mut n = 1;
        // The source first: entry 0, about to hold the path, may be it.
        if let Some(i) = echo_source.filter(|&i| i < MAX_ENTRIES) {
            if i != 1 {
                self.0
                    .copy_within(HDR + i * EP..HDR + (i + 1) * EP, HDR + EP);
            }
            self.0[HDR + EP..HDR + EP + 4].copy_from_slice(&ACM_EP_FLAG_SOURCE.to_ne_bytes());
            self.0[HDR + EP + 6..HDR + EP + 8].fill(0);
            n = 2;
        }
        let e = &mut self.0[HDR..HDR + EP];
        e[0..4].copy_from_slice(&ACM_PATH_FLAGS_PRIMARY_ROUTE.to_ne_bytes());
        e[4..6].copy_from_slice(&PATH_TYPE.to_ne_bytes());
        e[6..8].fill(0);
        e[8..].copy_from_slice(path);
        self.set_length(HDR + n * EP);
    }
}

/// What a resolve request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target<'a> {
    /// Name/IP/GID/LID resolution: the destination address, read in place.
    Address(EntryAddress<'a>),
    /// A path request (kernel netlink, `ib_acme -f l|g`): the partial record.
    Path(PathRecord),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveRequest<'a> {
    pub target: Target<'a>,
    /// Index of the source entry to copy into the reply (the daemon chose
    /// the source and the client wants to learn it).
    pub echo_source: Option<usize>,
    pub nodelay: bool,
}

/// A request the provider cannot act on, with the status to reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub status: u8,
    pub why: String,
}

fn reject(status: u32, why: impl Into<String>) -> Rejected {
    Rejected {
        status: status as u8,
        why: why.into(),
    }
}

fn check_shape(msg: &MsgBuf) -> Result<usize, Rejected> {
    if msg.opcode() & ACM_OP_MASK as u8 != ACM_OP_RESOLVE as u8 {
        return Err(reject(
            ACM_STATUS_EINVAL,
            format!("opcode {:#x} is not a resolve", msg.opcode()),
        ));
    }
    let len = usize::from(msg.length());
    if !(HDR + EP..=ACM_MSG_SIZE).contains(&len) || !(len - HDR).is_multiple_of(EP) {
        return Err(reject(
            ACM_STATUS_EINVAL,
            format!("bad message length {len}"),
        ));
    }
    Ok(msg.entry_count())
}

fn path_of(info: &[u8; ADDR_LEN]) -> PathRecord {
    PathRecord::decode(info.first_chunk::<PATH_RECORD_LEN>().expect("64 bytes"))
}

impl<'a> ResolveRequest<'a> {
    /// Validates a `resolve` request. The daemon has checked most of this
    /// already; the provider checks again rather than trust a length or an
    /// index it is about to use.
    ///
    /// Inlined into the engine's request path, its one caller there: the
    /// request is then built where it is used instead of being returned
    /// through memory.
    #[inline]
    pub fn parse(msg: &'a MsgBuf) -> Result<ResolveRequest<'a>, Rejected> {
        let count = check_shape(msg)?;
        if msg.entry_kind(0) == PATH_TYPE {
            let path = path_of(msg.entry_info(0));
            if path.dgid.is_zero() && path.dlid == 0 {
                return Err(reject(
                    ACM_STATUS_EDESTADDR,
                    "path request without DGID or DLID",
                ));
            }
            return Ok(ResolveRequest {
                target: Target::Path(path),
                echo_source: None,
                nodelay: msg.entry_flags(0) & ACM_FLAGS_NODELAY != 0,
            });
        }
        // Entry indices, NONE until found (a sentinel keeps each in one
        // register on the request path).
        const NONE: usize = usize::MAX;
        let (mut dest, mut source) = (NONE, NONE);
        for i in 0..count {
            let flags = msg.entry_flags(i);
            if flags & ACM_EP_FLAG_DEST != 0 {
                if dest != NONE {
                    return Err(reject(ACM_STATUS_EDESTTYPE, "more than one destination"));
                }
                dest = i;
            } else if flags & ACM_EP_FLAG_SOURCE != 0 {
                if source != NONE {
                    return Err(reject(ACM_STATUS_ESRCTYPE, "more than one source"));
                }
                source = i;
            }
        }
        let mut source = (source != NONE).then_some(source);
        if msg.src_out() != 0 && source.is_none() {
            // The daemon picked the source and wrote it at `src_index`, one
            // past the entries `hdr.length` counts.
            source = Some(usize::from(msg.src_index())).filter(|&i| i < MAX_ENTRIES);
        }
        let d = dest;
        if d == NONE {
            return Err(reject(ACM_STATUS_EDESTTYPE, "no destination entry"));
        }
        let target =
            EntryAddress::check(msg.entry_kind(d), msg.entry_info(d)).map_err(|e| match e {
                AddrError::UnknownType(t) => {
                    reject(ACM_STATUS_EDESTTYPE, format!("destination type {t}"))
                }
                AddrError::BadName => {
                    reject(ACM_STATUS_EDESTADDR, "destination name is not a valid name")
                }
            })?;
        // The daemon found the source among its endpoint addresses before
        // calling: only its type is checked here, nothing is built from it.
        if let Some(i) = source {
            let kind = msg.entry_kind(i);
            if kind == 0 || kind >= acm_prov_sys::ACM_ADDRESS_RESERVED {
                return Err(reject(ACM_STATUS_ESRCTYPE, format!("source type {kind}")));
            }
        }
        Ok(ResolveRequest {
            target: Target::Address(target),
            echo_source: source.filter(|_| msg.src_out() != 0),
            nodelay: msg.entry_flags(d) & ACM_FLAGS_NODELAY != 0,
        })
    }
}

/// A `query` (QUERY_SA) request: the path record to verify.
pub fn parse_query(msg: &MsgBuf) -> Result<PathRecord, Rejected> {
    check_shape(msg)?;
    if msg.entry_kind(0) != PATH_TYPE || msg.entry_flags(0) & ACM_FLAGS_QUERY_SA == 0 {
        return Err(reject(
            ACM_STATUS_EINVAL,
            "query without a QUERY_SA path entry",
        ));
    }
    Ok(path_of(msg.entry_info(0)))
}

/// The error reply to a `resolve`: header only.
pub fn resolve_error(req: &MsgBuf, status: u8) -> MsgBuf {
    let mut r = req.clone();
    r.make_resolve_error(status);
    r
}

/// The success reply to a `resolve` (see [`MsgBuf::make_resolve_success`]).
pub fn resolve_success(
    req: &MsgBuf,
    path: &[u8; PATH_RECORD_LEN],
    echo_source: Option<usize>,
) -> MsgBuf {
    let mut r = req.clone();
    r.make_resolve_success(path, echo_source);
    r
}

/// The reply to a `query`: same length, ACK bit, and the completed record
/// when there is one.
pub fn query_reply(req: &MsgBuf, status: u8, path: Option<&[u8; PATH_RECORD_LEN]>) -> MsgBuf {
    let mut r = req.clone();
    r.0[1] |= ACM_OP_ACK as u8;
    r.0[2] = status;
    r.0[3..6].fill(0);
    if let Some(p) = path {
        r.0[HDR + 8..HDR + 8 + PATH_RECORD_LEN].copy_from_slice(p);
    }
    r
}

/// A resolve request as the daemon hands one over: for clients of the
/// engine other than the daemon (benchmarks, tests).
pub fn request(entries: &[Entry], src_out: bool, tid: u64) -> MsgBuf {
    let mut m = MsgBuf::default();
    m.0[0] = 1;
    m.0[1] = ACM_OP_RESOLVE as u8;
    m.0[3] = src_out as u8;
    m.0[8..16].copy_from_slice(&tid.to_ne_bytes());
    for (i, e) in entries.iter().enumerate().take(MAX_ENTRIES) {
        m.set_entry(i, e);
    }
    m.set_length(HDR + entries.len().min(MAX_ENTRIES) * EP);
    m
}

/// An address entry of a request: `bytes` in the 64-byte address field.
pub fn addr_entry(flags: u32, kind: u16, bytes: &[u8]) -> Entry {
    let mut info = [0; ADDR_LEN];
    let n = bytes.len().min(ADDR_LEN);
    info[..n].copy_from_slice(&bytes[..n]);
    Entry { flags, kind, info }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    pub use super::{addr_entry, request};
    use acm_prov_sys::{ACM_ADDRESS_IP, ACM_ADDRESS_NAME, ACM_STATUS_ENODATA};

    #[test]
    fn parses_an_ip_request_with_a_daemon_chosen_source() {
        let m = request(
            &[
                addr_entry(
                    ACM_EP_FLAG_DEST | ACM_FLAGS_NODELAY,
                    ACM_ADDRESS_IP,
                    &[10, 0, 0, 2],
                ),
                addr_entry(ACM_EP_FLAG_SOURCE, ACM_ADDRESS_IP, &[10, 0, 0, 1]),
            ],
            true,
            77,
        );
        let r = ResolveRequest::parse(&m).unwrap();
        let Target::Address(a) = r.target else {
            panic!("{:?}", r.target)
        };
        assert_eq!(
            a.to_address(),
            crate::addr::Address::Ip4([10, 0, 0, 2].into())
        );
        assert_eq!(r.echo_source, Some(1));
        assert!(r.nodelay);
    }

    #[test]
    fn finds_the_source_the_daemon_appended_past_the_length() {
        // What the daemon hands over for `ib_acme -d 10.0.0.2`: one DEST
        // entry counted by hdr.length, the chosen source after it.
        let mut m = request(
            &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_IP, &[10, 0, 0, 2])],
            true,
            5,
        );
        m.0[4] = 1;
        m.set_entry(
            1,
            &addr_entry(ACM_EP_FLAG_SOURCE, ACM_ADDRESS_IP, &[10, 0, 0, 1]),
        );
        let r = ResolveRequest::parse(&m).unwrap();
        assert_eq!(r.echo_source, Some(1));
        let reply = resolve_success(&m, &[0; 64], r.echo_source);
        assert_eq!(reply.length(), 16 + 2 * 72);
        assert_eq!(&reply.entry(1).info[..4], &[10, 0, 0, 1]);
    }

    #[test]
    fn rejects_malformed_requests_with_the_right_status() {
        let dest = addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node2");
        let mut m = request(&[dest], false, 1);
        m.set_length(16 + 71);
        assert_eq!(
            ResolveRequest::parse(&m).unwrap_err().status,
            ACM_STATUS_EINVAL as u8
        );
        m.set_length(600);
        assert_eq!(
            ResolveRequest::parse(&m).unwrap_err().status,
            ACM_STATUS_EINVAL as u8
        );
        let m = request(
            &[addr_entry(ACM_EP_FLAG_SOURCE, ACM_ADDRESS_NAME, b"a")],
            false,
            1,
        );
        assert_eq!(
            ResolveRequest::parse(&m).unwrap_err().status,
            ACM_STATUS_EDESTTYPE as u8
        );
        let m = request(&[dest, dest], false, 1);
        assert_eq!(
            ResolveRequest::parse(&m).unwrap_err().status,
            ACM_STATUS_EDESTTYPE as u8
        );
        let m = request(&[addr_entry(ACM_EP_FLAG_DEST, 42, b"x")], false, 1);
        assert_eq!(
            ResolveRequest::parse(&m).unwrap_err().status,
            ACM_STATUS_EDESTTYPE as u8
        );
        let m = request(&[dest, addr_entry(ACM_EP_FLAG_SOURCE, 77, b"x")], false, 1);
        assert_eq!(
            ResolveRequest::parse(&m).unwrap_err().status,
            ACM_STATUS_ESRCTYPE as u8
        );
        let mut m = request(&[dest], false, 1);
        m.0[1] = 2;
        assert_eq!(
            ResolveRequest::parse(&m).unwrap_err().status,
            ACM_STATUS_EINVAL as u8
        );
        let m = request(&[addr_entry(0, PATH_TYPE, &[])], false, 1);
        assert_eq!(
            ResolveRequest::parse(&m).unwrap_err().status,
            ACM_STATUS_EDESTADDR as u8
        );
    }

    #[test]
    fn replies_keep_the_tid_and_follow_the_contract() {
        let m = request(
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
}
