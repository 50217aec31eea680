//! The derivations (`urdma_derive`) that need the neighbour table: a GID
//! computed from a peer's MAC, for peers that do not run the provider.

use super::inflight::Stage;
use super::state::Learned;
use super::{Datagram, Discovery, NeighbourJob};
use crate::addr::Gid;
use crate::config::Derivation;
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

impl Discovery {
    /// The result of a neighbour lookup for an `eui64` derivation.
    pub fn on_neighbour(&mut self, mut job: NeighbourJob, mac: Option<[u8; 6]>, now: Instant) {
        let Some(l) = self.inflight.lookup(&job.dest) else {
            return;
        };
        let Stage::Derive(i) = l.stage else { return };
        if self.cfg.derive.get(i) != Some(&Derivation::Eui64) {
            return;
        }
        match mac {
            Some(mac) => {
                let learned = Learned::derived(eui64_gid(mac));
                self.succeed(&job.dest.clone(), learned, now);
            }
            None if now < l.deadline() => {
                if !job.poked {
                    self.out.work.datagrams.push(Datagram::Unicast {
                        to: SocketAddr::new(job.ip, POKE_PORT),
                        from: None,
                        bytes: vec![0],
                    });
                    job.poked = true;
                }
                job.at = now + super::NEIGHBOUR_POLL;
                self.out.work.neighbour_jobs.push(job);
            }
            // The timer moves the lookup on at its deadline.
            None => {}
        }
    }
}
