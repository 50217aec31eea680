//! The requests `urdma-load` sends and the framing of the replies it reads.

use acm_proto::msg::{self, Entry, MsgBuf, HDR_LEN};
use acm_prov_sys::{ACM_EP_FLAG_DEST, ACM_EP_FLAG_SOURCE, ACM_FLAGS_NODELAY};
use std::io::{self, ErrorKind, Read};
use std::os::unix::net::UnixStream;

use super::args::*;

pub fn build_request(cfg: &Config, dest: &Addr, tid: u64) -> MsgBuf {
    let dflags = ACM_EP_FLAG_DEST | if cfg.nodelay { ACM_FLAGS_NODELAY } else { 0 };
    let dest = Entry {
        flags: dflags,
        ..dest.entry
    };
    match &cfg.src {
        Some(src) => {
            let src = Entry {
                flags: ACM_EP_FLAG_SOURCE,
                ..src.entry
            };
            msg::resolve_request(&[src, dest], false, tid)
        }
        None => msg::resolve_request(&[dest], false, tid),
    }
}

/// Reassembles messages from a stream socket whose reads may time out half
/// way: the partial message survives until the next call.
pub struct Framer {
    pub buf: MsgBuf,
    pub filled: usize,
}

/// A whole reply, valid until the next read, or a read that timed out.
pub enum Frame<'a> {
    Msg(&'a MsgBuf),
    TimedOut,
}

impl Framer {
    pub fn new() -> Framer {
        Framer {
            buf: MsgBuf::default(),
            filled: 0,
        }
    }

    pub fn next(&mut self, sock: &mut UnixStream) -> io::Result<Frame<'_>> {
        loop {
            let want = if self.filled < HDR_LEN {
                HDR_LEN
            } else if self.buf.whole_entries().is_some() {
                usize::from(self.buf.length())
            } else {
                // The stream cannot be resynchronised after a bad length.
                return Err(io::Error::new(
                    ErrorKind::InvalidData,
                    format!("reply with impossible length {}", self.buf.length()),
                ));
            };
            if self.filled >= HDR_LEN && self.filled == want {
                self.filled = 0;
                return Ok(Frame::Msg(&self.buf));
            }
            // Never read past the current message: the next one may be
            // only partly there and belongs to the next call.
            match sock.read(&mut self.buf.0[self.filled..want]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "daemon closed the connection",
                    ))
                }
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(Frame::TimedOut)
                }
                Err(e) => return Err(e),
            }
        }
    }
}
