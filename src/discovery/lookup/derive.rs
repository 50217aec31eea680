//! The derivations (`urdma_derive`) that need the neighbour table: a GID
//! computed from a peer's MAC, for peers that do not run the provider.

use super::{Found, Lookups};
use crate::addr::Gid;
use crate::config::Derivation;
use crate::discovery::inflight::Stage;
use crate::discovery::state::Learned;
use crate::discovery::{Datagram, NeighbourJob};
use std::net::SocketAddr;
use std::time::Instant;

/// Where a datagram goes to make the kernel resolve a neighbour: the
/// discard port, so no provider takes it for a message.
const POKE_PORT: u16 = 9;

/// `fe80::` + modified EUI-64 of a MAC: how urdma forms a port's GID.
pub fn eui64_gid(mac: [u8; 6]) -> Gid {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8] = mac[0] ^ 0x02;
    g[9] = mac[1];
    g[10] = mac[2];
    g[11] = 0xff;
    g[12] = 0xfe;
    g[13..16].copy_from_slice(&mac[3..6]);
    Gid(g)
}

impl Lookups {
    /// The result of a neighbour lookup for an `eui64` derivation.
    pub(in crate::discovery) fn on_neighbour(
        &mut self,
        cx: Found<'_>,
        mut job: NeighbourJob,
        mac: Option<[u8; 6]>,
        now: Instant,
    ) {
        let Some(l) = self.inflight.lookup(&job.dest) else {
            return;
        };
        let Stage::Derive(i) = l.stage else { return };
        if cx.cfg.derive.get(i) != Some(&Derivation::Eui64) {
            return;
        }
        match mac {
            Some(mac) => {
                let learned = Learned::derived(eui64_gid(mac));
                self.succeed(cx, &job.dest.clone(), learned, now);
            }
            None if now < l.deadline() => {
                if !job.poked {
                    cx.out.work.datagrams.push(Datagram::Unicast {
                        to: SocketAddr::new(job.ip, POKE_PORT),
                        from: None,
                        bytes: vec![0],
                    });
                    job.poked = true;
                }
                job.at = now + crate::discovery::NEIGHBOUR_POLL;
                cx.out.work.neighbour_jobs.push(job);
            }
            // The timer moves the lookup on at its deadline.
            None => {}
        }
    }
}
