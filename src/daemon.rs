//! What the provider needs from the daemon, as a safe interface: the
//! boundary implements it over the daemon's exported helpers, unit tests
//! over a fake.

use acm_proto::msg::MsgBuf;

/// `ACM_CNTR_*`, the order of `query_perf` values and of `ib_acme -P`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Counter {
    Error = 0,
    Resolve = 1,
    NoData = 2,
    AddrQuery = 3,
    AddrCache = 4,
    RouteQuery = 5,
    RouteCache = 6,
}

pub const COUNTERS: usize = 7;

pub trait Daemon: Send + Sync {
    /// `acm_resolve_response`: answers a `resolve` (id 0 is the kernel).
    fn resolve_response(&self, id: u64, msg: &MsgBuf) -> i32;
    /// `acm_query_response`: answers a `query`.
    fn query_response(&self, id: u64, msg: &MsgBuf) -> i32;
    /// `acm_increment_counter`: the daemon-wide counters.
    fn increment_counter(&self, counter: Counter);
    /// Runs `send`, which answers clients that asked a while ago and may
    /// have hung up since: the daemon must survive writing to them.
    fn answer_late(&self, send: &mut dyn FnMut()) {
        send()
    }
}

/// A daemon that takes every reply and counter and does nothing with them:
/// for driving the engine outside ibacm (benchmarks, fuzzing).
pub struct NullDaemon;

impl Daemon for NullDaemon {
    fn resolve_response(&self, _: u64, _: &MsgBuf) -> i32 {
        0
    }
    fn query_response(&self, _: u64, _: &MsgBuf) -> i32 {
        0
    }
    fn increment_counter(&self, counter: Counter) {
        // Kept, so a benchmark counts the call the daemon would get.
        std::hint::black_box(counter);
    }
}

/// The daemon as unit tests see it: replies come back from the engine as
/// values, so only the daemon-wide counters need recording.
#[cfg(test)]
#[derive(Default)]
pub struct FakeDaemon {
    pub counters: std::sync::Mutex<Vec<Counter>>,
}

#[cfg(test)]
impl Daemon for FakeDaemon {
    fn resolve_response(&self, _: u64, _: &MsgBuf) -> i32 {
        unreachable!("the engine returns replies; the boundary sends them")
    }
    fn query_response(&self, _: u64, _: &MsgBuf) -> i32 {
        unreachable!("the engine returns replies; the boundary sends them")
    }
    fn increment_counter(&self, c: Counter) {
        self.counters.lock().unwrap().push(c);
    }
}
