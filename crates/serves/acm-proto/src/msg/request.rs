//! The requests a client writes: a resolve as `ib_acme` and `urdma-load`
//! send it (and the daemon hands it to the provider), and the EP and perf
//! queries `urdma-acm` asks.

use super::{
    write, Entry, MsgBuf, DATA, EP_LEN, HDR_LEN, LENGTH, MAX_ENTRIES, OPCODE, TID, VERSION,
};
use acm_prov_sys::{ACM_OP_EP_QUERY, ACM_OP_PERF_QUERY, ACM_OP_RESOLVE, ACM_VERSION};

/// A request being written: a header of this version and opcode, the rest
/// zero until set.
struct Request(MsgBuf);

impl Request {
    fn new(opcode: u32) -> Request {
        let mut m = MsgBuf::default();
        m.0[VERSION] = ACM_VERSION as u8;
        m.0[OPCODE] = opcode as u8;
        Request(m)
    }

    /// `hdr.data[0]`: `src_out` of a resolve, the endpoint index of an EP
    /// query.
    fn data(mut self, byte: u8) -> Request {
        self.0 .0[DATA] = byte;
        self
    }

    fn tid(mut self, tid: u64) -> Request {
        write(&mut self.0 .0, TID, &tid.to_ne_bytes());
        self
    }

    fn entry(mut self, i: usize, entry: &Entry) -> Request {
        self.0.set_entry(i, entry);
        self
    }

    /// The request with `hdr.length` in host order, as resolves carry it.
    fn length(mut self, len: usize) -> MsgBuf {
        self.0.set_length(len);
        self.0
    }

    /// The request with `hdr.length` big-endian, as perf and EP queries
    /// carry it.
    fn length_be(mut self, len: usize) -> MsgBuf {
        write(&mut self.0 .0, LENGTH, &(len as u16).to_be_bytes());
        self.0
    }
}

/// A resolve request as a client sends it and the daemon hands it over
/// (`src_out`: the daemon chose the source and appended it).
pub fn resolve_request(entries: &[Entry], src_out: bool, tid: u64) -> MsgBuf {
    let mut r = Request::new(ACM_OP_RESOLVE).data(src_out as u8).tid(tid);
    for (i, e) in entries.iter().enumerate().take(MAX_ENTRIES) {
        r = r.entry(i, e);
    }
    r.length(HDR_LEN + entries.len().min(MAX_ENTRIES) * EP_LEN)
}

/// An EP query for the `index`-th endpoint (from 1) over all ports, as
/// `ib_acme -e` asks.
pub fn ep_query(index: u8) -> MsgBuf {
    // data[1], the port, stays 0: all ports.
    Request::new(ACM_OP_EP_QUERY).data(index).length_be(HDR_LEN)
}

/// A perf query for the endpoint that owns the address of `source` (an
/// entry flagged SOURCE), as `ib_acme -P s -s ADDRESS` asks (by index, the
/// daemon looks endpoint N up on port N).
pub fn perf_query(source: &Entry) -> MsgBuf {
    Request::new(ACM_OP_PERF_QUERY)
        .entry(0, source)
        .length_be(HDR_LEN + EP_LEN)
}
