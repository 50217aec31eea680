//! What the requests the daemon hands over ask of the provider, checked
//! before the engine acts on them: a `resolve` names a destination or a
//! partial path record, a `query` a record to verify. The message itself,
//! its fields and the replies are acm-proto's, shared with the tools that
//! speak the daemon's protocol; the names are re-exported here for the
//! provider's modules, tests and benchmarks.

use crate::addr::{AddrError, EntryAddress, ADDR_LEN};
use crate::request::path::{PathRecord, PATH_RECORD_LEN};
use acm_proto::msg::PATH_TYPE;
pub use acm_proto::msg::{
    addr_entry, query_reply, resolve_error, resolve_request as request, resolve_success, Entry,
    MsgBuf, MAX_ENTRIES,
};
use acm_prov_sys::{
    ACM_EP_FLAG_DEST, ACM_EP_FLAG_SOURCE, ACM_FLAGS_NODELAY, ACM_FLAGS_QUERY_SA, ACM_OP_MASK,
    ACM_OP_RESOLVE, ACM_STATUS_EDESTADDR, ACM_STATUS_EDESTTYPE, ACM_STATUS_EINVAL,
    ACM_STATUS_ESRCTYPE,
};

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

/// Cold: every request passes the checks that could call it, and with its
/// `String` built out of the way the parse stays in registers on the hit path.
#[cold]
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
    match msg.whole_entries() {
        Some(count) if count > 0 => Ok(count),
        _ => Err(reject(
            ACM_STATUS_EINVAL,
            format!("bad message length {}", msg.length()),
        )),
    }
}

fn path_of(info: &[u8; ADDR_LEN]) -> PathRecord {
    PathRecord::decode(info.first_chunk::<PATH_RECORD_LEN>().expect("64 bytes"))
}

impl<'a> ResolveRequest<'a> {
    /// Validates a `resolve` request. The daemon has checked most of this
    /// already; the provider checks again rather than trust a length or an
    /// index it is about to use.
    ///
    /// Inlined into the engine's request path: the request is then built
    /// where it is used instead of being returned through memory.
    #[inline(always)]
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

#[cfg(test)]
pub mod tests {
    use super::*;
    pub use super::{addr_entry, request};
    use acm_prov_sys::{ACM_ADDRESS_IP, ACM_ADDRESS_NAME};

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
}
