//! The kernel's neighbour table is one table for every network namespace,
//! and its default limit (`gc_thresh3`, 1024 entries per address family)
//! is what a fleet of daemons in namespaces of their own reaches first:
//! 64 hosts that each talk to all others need 4,032 entries per family.
//! Past it the kernel drops datagrams to hosts it cannot add, which looks
//! like loss to the provider. Every broadcast on the fleet's bridge (an
//! ARP request) is queued once per namespace, at once, on the sending
//! CPU's backlog (`net.core.netdev_max_backlog`, 1000 by default): 256
//! hosts resolving each other overflow it, and the kernel drops ARP and
//! discovery datagrams alike. A bench that needs more raises the limits
//! for its run, says so, and puts them back, also when it is interrupted.

use crate::interrupt::{forget_undo, undo_on_signal};
use std::fs;

const FAMILIES: [&str; 2] = ["ipv4", "ipv6"];
const KNOBS: [&str; 2] = ["gc_thresh2", "gc_thresh3"];

fn path(family: &str, knob: &str) -> String {
    format!("/proc/sys/net/{family}/neigh/default/{knob}")
}

fn read(p: &str) -> Option<u64> {
    fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// The limits as they were, put back on drop.
pub struct NeighbourLimits {
    saved: Vec<(String, u64)>,
    undo: u64,
}

impl NeighbourLimits {
    /// Room for `entries` neighbours per family: `gc_thresh3` at least
    /// twice that and `gc_thresh2` at least `entries`, and a backlog of as
    /// many, never lowered. Prints what it changed.
    pub fn at_least(entries: u64) -> NeighbourLimits {
        let mut wanted: Vec<(String, u64)> = FAMILIES
            .iter()
            .flat_map(|family| {
                KNOBS
                    .iter()
                    .zip([entries, 2 * entries])
                    .map(move |(knob, want)| (path(family, knob), want))
            })
            .collect();
        // Room for the copies of as many broadcasts at once as there are
        // namespaces (entries: about one per pair of them).
        wanted.push((
            "/proc/sys/net/core/netdev_max_backlog".to_string(),
            entries.min(1 << 20),
        ));
        let mut saved = Vec::new();
        for (p, want) in wanted {
            let Some(was) = read(&p) else { continue };
            if was >= want {
                continue;
            }
            match fs::write(&p, want.to_string()) {
                Ok(()) => {
                    println!("(neighbour table: {p} raised from {was} to {want} for this run)");
                    saved.push((p, was));
                }
                Err(e) => println!("(neighbour table: cannot raise {p} from {was}: {e})"),
            }
        }
        let undo_saved = saved.clone();
        let undo = undo_on_signal(move || put_back(&undo_saved));
        NeighbourLimits { saved, undo }
    }
}

fn put_back(saved: &[(String, u64)]) {
    for (p, was) in saved.iter().rev() {
        if fs::write(p, was.to_string()).is_ok() {
            println!("(neighbour table: {p} put back to {was})");
        }
    }
}

impl Drop for NeighbourLimits {
    fn drop(&mut self) {
        // Lower gc_thresh3 before gc_thresh2, which must stay below it.
        put_back(&self.saved);
        forget_undo(self.undo);
    }
}
