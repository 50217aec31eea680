//! `urdma-load [-S PATH] [-s SRC] (-d DEST | --dest-file FILE | --range PREFIX N)...
//!            [-f i|n] [-c N] [-n COUNT | --duration SECS] [--window W] [--nodelay]
//!            [--timeout SECS] [--verbose] [--abandon] [--poll] [--interval-ms MS]`
//!
//! A load generator that speaks the daemon's client socket protocol itself
//! (RESOLVE `struct acm_msg`s over `/run/ibacm-unix.sock`), so a test can put
//! thousands of requests through the daemon and the provider and check that
//! every one is answered exactly once. One thread per connection, each
//! keeping up to `--window` requests outstanding; requests are handed out
//! from one shared counter so a slow connection does not hold back the run.
//!
//! Output: with `--verbose` one line per reply or missing request
//! (`tid=0x... conn=N dest=... status=N us=N dgid=... at=MS`, `at` the
//! wall-clock time of the reply in ms since the epoch), then one summary
//! line of `key=value` pairs whose keys and order never change (see
//! `print_summary`). Exit 0 when every planned request got exactly one
//! reply, whatever its status, and nothing else went wrong; 1 otherwise;
//! 2 on bad usage.
//!
//! `--interval-ms MS`: each connection sends a request at most every MS
//! milliseconds: a steady trickle whose answers are watched over time
//! (`--verbose`'s `at=`).
//!
//! `--poll`: all connections on one thread, multiplexed with poll(2),
//! instead of a thread each. With many connections on few cores, 64
//! threads taking turns cost more than the daemon they measure; one thread
//! that sends on every connection with room and reads every readable one
//! keeps the generator cheaper than the daemon.
//!
//! `--abandon`: every request goes on a connection of its own that is
//! closed right after the request is sent, before any reply: clients that
//! give up or crash. Nothing is read; a run is clean when every request
//! was sent (`abandoned` = `requests`).
//!
//! Pipelining caveat (rdma-core 44, `acm_svr_receive`): the daemon does one
//! `recv(sock, msg, 592)` per readable event and drops the client unless
//! exactly one whole message came back. On a stream socket two queued
//! requests come back together, so `--window` > 1 works only while the
//! daemon keeps up; when it falls behind it closes the connection, and the
//! requests in flight on it are counted as `lost` (and `missing`), the
//! close as a `disconnect`, and the connection is reopened.

mod args;
mod summary;
mod wire;

use acm_proto::msg::{self, MsgBuf};
use acm_prov_sys::{ACM_OP_MASK, ACM_OP_RESOLVE, ACM_VERSION};
use std::collections::{BTreeMap, HashSet};
use std::io::{self, ErrorKind, Write};
use std::net::Ipv6Addr;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use args::*;
use summary::*;
use wire::*;

/// After this many connections in a row that fail or close before any reply
/// a connection thread stops: the daemon is gone or refusing (all slots busy).
const MAX_FRUITLESS_CONNECTS: u32 = 3;

/// Missing requests named on stderr without `--verbose`; the rest only count.
const MAX_MISSING_REPORTS: u32 = 10;

/// Hands out request numbers to all connections until the count or the
/// deadline is reached.
struct Work {
    next: AtomicU64,
    limit: Option<u64>,
    deadline: Option<Instant>,
}

impl Work {
    fn take(&self) -> Option<u64> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        match self.limit {
            Some(l) if i >= l => None,
            _ => Some(i),
        }
    }
}

struct Pending {
    dest: usize,
    sent: Instant,
}

struct Shared {
    cfg: Config,
    work: Work,
    missing_reported: AtomicU32,
}

/// Tids carry the connection number in the top bits so that a reply routed
/// to the wrong client is recognisable, and stay unique across reconnects.
const TID_SEQ_BITS: u32 = 40;

struct Conn<'a> {
    id: usize,
    sh: &'a Shared,
    stats: Stats,
    outstanding: BTreeMap<u64, Pending>,
    timed_out: HashSet<u64>,
    next_seq: u64,
    /// First sequence number sent on the current socket: replies below it
    /// cannot legitimately arrive on this socket.
    socket_first_seq: u64,
}

impl Conn<'_> {
    fn tid(&self, seq: u64) -> u64 {
        ((self.id as u64 + 1) << TID_SEQ_BITS) | seq
    }

    fn report_missing(&self, seq: u64, p: &Pending, why: &str) {
        let dest = &self.sh.cfg.dests[p.dest].text;
        let tid = self.tid(seq);
        if self.sh.cfg.verbose {
            println!(
                "tid={tid:#x} conn={} dest={dest} status=missing reason={why}",
                self.id
            );
        } else if self.sh.missing_reported.fetch_add(1, Ordering::Relaxed) < MAX_MISSING_REPORTS {
            eprintln!(
                "urdma-load: no reply to tid={tid:#x} (conn {} dest {dest}): {why}",
                self.id
            );
        }
    }

    fn connect(&mut self) -> Option<UnixStream> {
        match UnixStream::connect(&self.sh.cfg.socket) {
            Ok(s) => {
                // A daemon that stops reading must not hang the run in send().
                if let Err(e) = s.set_write_timeout(Some(self.sh.cfg.timeout)) {
                    eprintln!("urdma-load: conn {}: set_write_timeout: {e}", self.id);
                }
                self.socket_first_seq = self.next_seq;
                self.timed_out.clear();
                Some(s)
            }
            Err(e) => {
                eprintln!(
                    "urdma-load: conn {}: connect {}: {e}",
                    self.id, self.sh.cfg.socket
                );
                self.stats.connect_errors += 1;
                None
            }
        }
    }

    fn drop_connection(&mut self, err: &io::Error) {
        self.stats.disconnects += 1;
        if !self.outstanding.is_empty() || err.kind() != ErrorKind::UnexpectedEof {
            eprintln!(
                "urdma-load: conn {}: {err} ({} request(s) in flight lost)",
                self.id,
                self.outstanding.len()
            );
        }
        for (seq, p) in std::mem::take(&mut self.outstanding) {
            self.report_missing(seq, &p, "connection closed");
            self.stats.lost += 1;
        }
    }

    fn handle_reply(&mut self, reply: &MsgBuf) {
        let tid = reply.tid();
        if u32::from(reply.version()) != ACM_VERSION
            || (u32::from(reply.opcode()) & ACM_OP_MASK) != ACM_OP_RESOLVE
        {
            eprintln!(
                "urdma-load: conn {}: reply tid={tid:#x} with version {} opcode {:#x}",
                self.id,
                reply.version(),
                reply.opcode()
            );
            self.stats.bad_replies += 1;
            return;
        }
        let conn_tag = tid >> TID_SEQ_BITS;
        let seq = tid & ((1 << TID_SEQ_BITS) - 1);
        let oldest = self.outstanding.keys().next().copied();
        let Some(p) = self
            .outstanding
            .remove(&seq)
            .filter(|_| conn_tag == self.id as u64 + 1)
        else {
            if conn_tag == self.id as u64 + 1 && self.timed_out.remove(&seq) {
                self.stats.late += 1;
            } else if conn_tag == self.id as u64 + 1
                && (self.socket_first_seq..self.next_seq).contains(&seq)
            {
                self.stats.duplicates += 1;
                eprintln!("urdma-load: conn {}: duplicate reply tid={tid:#x}", self.id);
            } else {
                self.stats.unknown_tid += 1;
                eprintln!(
                    "urdma-load: conn {}: reply with unknown tid={tid:#x}",
                    self.id
                );
            }
            return;
        };
        let us = p.sent.elapsed().as_micros().min(u32::MAX as u128) as u32;
        self.stats.replies += 1;
        self.stats.latencies_us.push(us);
        if oldest != Some(seq) {
            self.stats.out_of_order += 1;
        }
        let status = reply.status();
        *self.stats.by_status.entry(status).or_default() += 1;
        let path = reply.primary_path();
        if status == 0 {
            self.stats.ok += 1;
            if path.is_none() {
                self.stats.ok_without_path += 1;
            }
        }
        if self.sh.cfg.verbose {
            let dgid = path
                .map(|p| Ipv6Addr::from(msg::path_dgid(p)).to_string())
                .unwrap_or_else(|| "-".into());
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            println!(
                "tid={tid:#x} conn={} dest={} status={status} us={us} dgid={dgid} at={at}",
                self.id, self.sh.cfg.dests[p.dest].text
            );
        }
    }

    /// Moves requests older than the timeout to `timed_out`; returns how
    /// long to wait for the next reply before checking again.
    fn expire(&mut self, now: Instant) -> Duration {
        let timeout = self.sh.cfg.timeout;
        while let Some((&seq, p)) = self.outstanding.first_key_value() {
            // Sequence order is send order, so the first entry expires first.
            let due = p.sent + timeout;
            if due > now {
                return (due - now).max(Duration::from_millis(1));
            }
            let p = self.outstanding.remove(&seq).expect("present");
            self.report_missing(seq, &p, "timed out");
            self.stats.timeouts += 1;
            self.timed_out.insert(seq);
        }
        timeout
    }

    /// `--abandon`: one connection per request, closed unread.
    fn run_abandoning(&mut self) {
        let cfg = &self.sh.cfg;
        let mut fruitless = 0;
        while fruitless < MAX_FRUITLESS_CONNECTS {
            let Some(i) = self.sh.work.take() else { return };
            let Some(mut sock) = self.connect() else {
                fruitless += 1;
                thread::sleep(Duration::from_millis(100));
                continue;
            };
            let dest = (i % cfg.dests.len() as u64) as usize;
            let seq = self.next_seq;
            self.next_seq += 1;
            self.stats.requests += 1;
            match sock.write_all(build_request(cfg, &cfg.dests[dest], self.tid(seq)).bytes()) {
                Ok(()) => {
                    fruitless = 0;
                    self.stats.abandoned += 1;
                }
                Err(e) => {
                    fruitless += 1;
                    self.drop_connection(&e);
                }
            }
        }
    }

    fn new(id: usize, sh: &Shared) -> Conn<'_> {
        Conn {
            id,
            sh,
            stats: Stats::default(),
            outstanding: BTreeMap::new(),
            timed_out: HashSet::new(),
            next_seq: 0,
            socket_first_seq: 0,
        }
    }

    /// Sends request number `i` on `sock`, counted as outstanding.
    fn send(&mut self, sock: &mut UnixStream, i: u64) -> io::Result<()> {
        let cfg = &self.sh.cfg;
        let dest = (i % cfg.dests.len() as u64) as usize;
        let seq = self.next_seq;
        self.next_seq += 1;
        let msg = build_request(cfg, &cfg.dests[dest], self.tid(seq));
        self.stats.requests += 1;
        let sent = Instant::now();
        self.outstanding.insert(seq, Pending { dest, sent });
        sock.write_all(msg.bytes())
    }

    fn run(&mut self) {
        if self.sh.cfg.abandon {
            return self.run_abandoning();
        }
        let sh = self.sh;
        let cfg = &sh.cfg;
        let mut fruitless = 0;
        let mut exhausted = false;
        'connections: while !exhausted && fruitless < MAX_FRUITLESS_CONNECTS {
            let Some(mut sock) = self.connect() else {
                fruitless += 1;
                // A refused connect is usually a daemon still starting or
                // shedding clients; give it a moment before the next try.
                thread::sleep(Duration::from_millis(100));
                continue;
            };
            let mut framer = Framer::new();
            let replies_before = self.stats.replies;
            let mut last_sent: Option<Instant> = None;
            loop {
                while self.outstanding.len() < cfg.window && !exhausted {
                    if let (Some(iv), Some(t)) = (cfg.interval, last_sent) {
                        thread::sleep((t + iv).saturating_duration_since(Instant::now()));
                    }
                    last_sent = Some(Instant::now());
                    let Some(i) = sh.work.take() else {
                        exhausted = true;
                        break;
                    };
                    if let Err(e) = self.send(&mut sock, i) {
                        self.drop_connection(&e);
                        fruitless = if self.stats.replies > replies_before {
                            0
                        } else {
                            fruitless + 1
                        };
                        continue 'connections;
                    }
                }
                if self.outstanding.is_empty() && exhausted {
                    break 'connections;
                }
                let wait = self.expire(Instant::now());
                if self.outstanding.is_empty() {
                    continue;
                }
                if let Err(e) = sock.set_read_timeout(Some(wait)) {
                    eprintln!("urdma-load: conn {}: set_read_timeout: {e}", self.id);
                }
                match framer.next(&mut sock) {
                    Ok(Frame::Msg(reply)) => self.handle_reply(reply),
                    Ok(Frame::TimedOut) => {}
                    Err(e) => {
                        self.drop_connection(&e);
                        fruitless = if self.stats.replies > replies_before {
                            0
                        } else {
                            fruitless + 1
                        };
                        continue 'connections;
                    }
                }
            }
        }
    }
}

/// One connection of `--poll`: its requests, socket and partial reply.
struct Slot<'a> {
    conn: Conn<'a>,
    sock: Option<UnixStream>,
    framer: Framer,
}

impl<'a> Slot<'a> {
    /// Connection `id`, its socket non-blocking (none if that fails).
    fn open(id: usize, sh: &'a Shared) -> Slot<'a> {
        let mut conn = Conn::new(id, sh);
        let sock = conn.connect().filter(|s| match s.set_nonblocking(true) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("urdma-load: conn {id}: set_nonblocking: {e}");
                false
            }
        });
        Slot {
            conn,
            sock,
            framer: Framer::new(),
        }
    }

    /// Sends requests while the window has room: true once `work` has
    /// none left.
    fn fill(&mut self, work: &Work, window: usize) -> bool {
        let Some(sock) = self.sock.as_mut() else {
            return false;
        };
        while self.conn.outstanding.len() < window {
            let Some(i) = work.take() else {
                return true;
            };
            // 592 bytes into an idle stream socket's buffer: a write
            // that would block means the daemon stopped reading.
            if let Err(e) = self.conn.send(sock, i) {
                self.conn.drop_connection(&e);
                self.sock = None;
                break;
            }
        }
        false
    }

    /// Handles every whole reply the socket has.
    fn read_ready(&mut self) {
        let Some(sock) = self.sock.as_mut() else {
            return;
        };
        loop {
            match self.framer.next(sock) {
                Ok(Frame::Msg(reply)) => self.conn.handle_reply(reply),
                Ok(Frame::TimedOut) => break,
                Err(e) => {
                    self.conn.drop_connection(&e);
                    self.sock = None;
                    break;
                }
            }
        }
    }
}

/// `--poll`: every connection on this thread (see the module comment). A
/// connection that fails is not reopened: a benchmark wants a steady set
/// of clients, and the summary counts whatever was lost.
fn run_polled(sh: &Shared) -> Stats {
    let cfg = &sh.cfg;
    let mut slots: Vec<Slot> = (0..cfg.conns).map(|id| Slot::open(id, sh)).collect();
    let mut exhausted = false;
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(slots.len());
    loop {
        for slot in &mut slots {
            if exhausted {
                break;
            }
            exhausted = slot.fill(&sh.work, cfg.window);
        }
        let now = Instant::now();
        let live = slots.iter_mut().filter(|s| s.sock.is_some());
        let Some(wait) = live.map(|s| s.conn.expire(now)).min() else {
            break;
        };
        let idle = slots
            .iter()
            .all(|s| s.sock.is_none() || s.conn.outstanding.is_empty());
        if idle && exhausted {
            break;
        }
        match poll(&slots, &mut fds, wait) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("urdma-load: poll: {e}");
                break;
            }
        }
        for (slot, fd) in slots.iter_mut().zip(&fds) {
            if fd.revents != 0 {
                slot.read_ready();
            }
        }
    }
    let mut total = Stats::default();
    for s in slots {
        total.merge(s.conn.stats);
    }
    total
}

/// Waits up to `wait` for replies on `slots`' sockets: `fds` has their
/// readiness, in their order.
fn poll(slots: &[Slot], fds: &mut Vec<libc::pollfd>, wait: Duration) -> io::Result<()> {
    // Refilled in place: the generator must cost less than the daemon,
    // so no allocation per round.
    fds.clear();
    fds.extend(slots.iter().map(|s| libc::pollfd {
        fd: s.sock.as_ref().map_or(-1, |x| x.as_raw_fd()),
        events: libc::POLLIN,
        revents: 0,
    }));
    let ms = wait.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `fds` is an array of `fds.len()` pollfd structs, valid and
    // not otherwise borrowed for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match parse_args(&args) {
        Ok(Some(c)) => c,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("urdma-load: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if cfg.conns > 1000 {
        // The daemon has 1023 client slots and select()s on its sockets, so
        // descriptors past FD_SETSIZE are not safe for it.
        eprintln!(
            "urdma-load: warning: -c {} exceeds the daemon's ~1023 client slots",
            cfg.conns
        );
    }

    let start = Instant::now();
    let sh = Arc::new(Shared {
        work: Work {
            next: AtomicU64::new(0),
            limit: cfg.count,
            deadline: cfg.duration.map(|d| start + d),
        },
        missing_reported: AtomicU32::new(0),
        cfg,
    });
    let handles: Vec<_> = (0..sh.cfg.conns)
        .filter(|_| !sh.cfg.poll)
        .map(|id| {
            let sh = Arc::clone(&sh);
            thread::spawn(move || {
                let mut c = Conn::new(id, &sh);
                c.run();
                c.stats
            })
        })
        .collect();
    let mut total = match sh.cfg.poll {
        true => run_polled(&sh),
        false => Stats::default(),
    };
    for h in handles {
        match h.join() {
            Ok(s) => total.merge(s),
            Err(_) => total.connect_errors += 1,
        }
    }
    let elapsed = start.elapsed();
    let unsent = sh.cfg.count.map_or(0, |n| n.saturating_sub(total.requests));
    let missing = total.timeouts + total.lost;
    print_summary(&mut total, unsent, elapsed);
    if total.disconnects > 0 && sh.cfg.window > 1 {
        eprintln!(
            "urdma-load: note: the daemon drops a client when one recv() returns more than one \
             request, which pipelining (--window > 1) causes whenever it falls behind"
        );
    }
    let answered = if sh.cfg.abandon {
        total.abandoned
    } else {
        total.replies
    };
    let clean = missing == 0
        && unsent == 0
        && answered == total.requests
        && total.duplicates == 0
        && total.unknown_tid == 0
        && total.bad_replies == 0;
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
