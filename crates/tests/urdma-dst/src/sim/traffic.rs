//! What the simulated network carried: in all, per host each way, and
//! the group datagrams on their way.

use super::MS;
use std::net::{IpAddr, SocketAddr};

/// A group datagram on its way: from, to which group, and to which hosts
/// at what times (in order).
pub struct GroupBatch {
    pub(crate) from: SocketAddr,
    pub(crate) group: IpAddr,
    pub(crate) bytes: Vec<u8>,
    pub(crate) to: Vec<(u64, usize)>,
}

/// What the network carried, for the scaling tables.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Traffic {
    pub unicast: u64,
    pub multicast: u64,
    pub delivered: u64,
    /// Of the multicast, lookups of names asked of the groups (start
    /// queries aside).
    pub group_queries: u64,
}

/// Which way a datagram went, for [`Counts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Sent = 0,
    Received = 1,
}

/// Datagrams each host sent and received (indexed by [`Direction`]).
#[derive(Clone, Debug, Default)]
pub struct Counts {
    pub total: Vec<[u64; 2]>,
    /// The current 100 ms window, and what each host did in it.
    pub(crate) window: u64,
    pub(crate) in_window: Vec<[u64; 2]>,
    /// The most one host sent, and received, in one 100 ms window.
    pub peak: [u64; 2],
}

impl Counts {
    pub(crate) fn new(hosts: usize) -> Counts {
        Counts {
            total: vec![[0; 2]; hosts],
            in_window: vec![[0; 2]; hosts],
            ..Counts::default()
        }
    }

    /// What hosts did on average, one way.
    pub fn mean(&self, d: Direction) -> f64 {
        let sum: u64 = self.total.iter().map(|t| t[d as usize]).sum();
        sum as f64 / self.total.len().max(1) as f64
    }

    /// Counts a datagram host `h` sent or received at `now`, in all and in
    /// the current 100 ms window.
    pub(crate) fn count(&mut self, h: usize, d: Direction, now: u64) {
        let window = now / (100 * MS);
        if window != self.window {
            self.window = window;
            self.in_window.iter_mut().for_each(|n| *n = [0; 2]);
        }
        let i = d as usize;
        self.total[h][i] += 1;
        self.in_window[h][i] += 1;
        self.peak[i] = self.peak[i].max(self.in_window[h][i]);
    }

    /// Starts counting anew (the peaks too).
    pub fn reset(&mut self) {
        *self = Counts::new(self.total.len());
    }
}
