//! The discovery datagrams a daemon dropped, from its log.
//!
//! A datagram the provider refuses changes nothing a client can see, so
//! the tests that send bad ones prove the refusal by the daemon's own
//! account: one log line per drop, with its source, its reason and a
//! running total.

use crate::env::scaled;
use crate::nodes::WAIT;
use crate::Host;
use std::collections::BTreeMap;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Log lines of `host` saying a datagram from `from` was dropped, by
/// reason (the text between the source and the running total).
pub fn drops_from(host: &Host, from: &str) -> BTreeMap<String, usize> {
    let needle = format!("discovery: dropped a datagram from {from}: ");
    let mut by_reason = BTreeMap::new();
    for l in host.log().lines() {
        if let Some((_, rest)) = l.split_once(&needle) {
            let reason = rest.rsplit_once(" (").map_or(rest, |(r, _)| r);
            // Malformed datagrams carry the decoder's detail; group them.
            let reason = reason.split(':').next().unwrap_or(reason);
            *by_reason.entry(reason.to_string()).or_default() += 1;
        }
    }
    by_reason
}

/// The running total of drops from the last drop line of the log.
pub fn total_drops(host: &Host) -> u64 {
    host.log()
        .lines()
        .rev()
        .find_map(|l| {
            l.rsplit_once('(')?
                .1
                .strip_suffix(" dropped so far)")?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Waits until `drops_from(host, from)[reason]` reaches `count`.
pub fn expect_drops(host: &Host, from: &str, reason: &str, count: usize) {
    wait_for_drops(host, from, &format!("`{reason}`"), count, &[reason]);
}

/// Why a reply to no query in flight was dropped: "late" while a reply to
/// a query this host ended could still be on its way, "unsolicited"
/// after that or for a transaction it never had. Which one a given reply
/// gets depends on when it comes; both mean it was dropped.
pub const STALE: [&str; 2] = [
    "a reply no longer awaited",
    "no query with that transaction id",
];

/// Waits until `count` replies from `from` were dropped as late or
/// unsolicited ([`STALE`]).
pub fn expect_stale_drops(host: &Host, from: &str, count: usize) {
    wait_for_drops(host, from, "late or unsolicited", count, &STALE);
}

/// Waits until the drops from `from` for any of `reasons` add up to `count`.
fn wait_for_drops(host: &Host, from: &str, what: &str, count: usize, reasons: &[&str]) {
    let deadline = Instant::now() + scaled(WAIT);
    let counted = || {
        let d = drops_from(host, from);
        reasons
            .iter()
            .map(|r| d.get(*r).copied().unwrap_or(0))
            .sum::<usize>()
    };
    while counted() < count {
        assert!(
            Instant::now() < deadline,
            "expected {count} {what} drops from {from}, got {:?}\n{}",
            drops_from(host, from),
            host.diagnostics()
        );
        sleep(Duration::from_millis(20));
    }
}
