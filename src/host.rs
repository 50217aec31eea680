//! What the provider needs from the daemon, as a safe interface: the
//! boundary implements it over the daemon's exported helpers, unit tests
//! over a fake.

use crate::msg::MsgBuf;

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

pub trait Host: Send + Sync {
    /// `acm_resolve_response`: answers a `resolve` (id 0 is the kernel).
    fn resolve_response(&self, id: u64, msg: &MsgBuf) -> i32;
    /// `acm_query_response`: answers a `query`.
    fn query_response(&self, id: u64, msg: &MsgBuf) -> i32;
    /// `acm_increment_counter`: the daemon-wide counters.
    fn increment_counter(&self, counter: Counter);
}
