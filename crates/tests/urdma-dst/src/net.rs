//! The simulated network: a deterministic random stream, the event queue in
//! virtual time, and the fate of each datagram (loss, duplication, delay
//! and with it reordering, partitions).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// SplitMix64: small, fast, and the same stream from the same seed on
/// every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// What the network does to datagrams.
#[derive(Clone, Debug)]
pub struct Conditions {
    /// Probability a datagram is lost.
    pub loss: f64,
    /// Probability a group datagram is lost on its way to each host, on
    /// top of `loss`: a segment overloaded by group traffic, whose
    /// switches and receivers drop multicast first.
    pub group_loss: f64,
    /// Probability a datagram arrives twice.
    pub duplication: f64,
    /// One-way delay: `base` plus up to `jitter` more, drawn per datagram,
    /// so datagrams overtake each other.
    pub base_us: u64,
    pub jitter_us: u64,
}

impl Default for Conditions {
    fn default() -> Self {
        Conditions {
            loss: 0.01,
            group_loss: 0.0,
            duplication: 0.01,
            base_us: 50,
            jitter_us: 2_000,
        }
    }
}

impl Conditions {
    /// The delays of the copies of one datagram that arrive (none: lost).
    pub fn fate(&self, rng: &mut Rng) -> Vec<u64> {
        let copies = 1 + usize::from(rng.chance(self.duplication));
        let mut delays = Vec::with_capacity(copies);
        for _ in 0..copies {
            if !rng.chance(self.loss) {
                delays.push(self.base_us * 1000 + rng.below(self.jitter_us * 1000 + 1));
            }
        }
        delays
    }
}

/// Something due at a time.
struct Item<E> {
    at: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Item<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<E> Eq for Item<E> {}
impl<E> PartialOrd for Item<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Item<E> {
    // Earliest first; equal times in the order they were queued.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Events in virtual time (nanoseconds since the start).
pub struct Queue<E> {
    heap: BinaryHeap<Item<E>>,
    seq: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Queue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<E> Queue<E> {
    pub fn push(&mut self, at: u64, event: E) {
        self.seq += 1;
        self.heap.push(Item {
            at,
            seq: self.seq,
            event,
        });
    }

    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.heap.pop().map(|i| (i.at, i.event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_and_queues_are_deterministic() {
        let (mut a, mut b) = (Rng::new(5), Rng::new(5));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        let mut q = Queue::default();
        q.push(5, 'b');
        q.push(1, 'a');
        q.push(5, 'c');
        assert_eq!(
            std::iter::from_fn(|| q.pop()).collect::<Vec<_>>(),
            [(1, 'a'), (5, 'b'), (5, 'c')]
        );
        let lossy = Conditions {
            loss: 0.5,
            ..Conditions::default()
        };
        let mut r = Rng::new(1);
        let arrived: usize = (0..10_000).map(|_| lossy.fate(&mut r).len()).sum();
        assert!((4_800..5_300).contains(&arrived), "{arrived}");
    }
}
