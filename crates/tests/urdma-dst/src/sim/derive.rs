//! Derivations (`urdma_derive`) in the simulation: with one configured,
//! each host's port GID is what that derivation computes for it (from its
//! NIC's MAC for `eui64`, from its IPv4 address for `ipv4-mapped`), as on
//! a segment whose hosts follow the convention. The GID is then the NIC's
//! identity: it stays the same across restarts, and a host whose daemon is
//! down still answers the kernel's neighbour discovery, so a derived answer
//! for it is right. The neighbour table is simulated: a job gets the MAC of
//! the address's owner if the segment lets them meet, nothing otherwise.

use super::{Event, Sim, MS};
use ibacm_urdma::discovery::NeighbourJob;
use ibacm_urdma::engine::Input;

/// How long the kernel takes to answer a neighbour lookup.
const NEIGHBOUR_DELAY: u64 = MS / 10;

/// Host `n`'s NIC.
pub(crate) fn mac(n: usize) -> [u8; 6] {
    let [.., hi, lo] = (n as u32).to_be_bytes();
    [0x52, 0x54, 0x00, 0x5e, hi, lo]
}

impl Sim {
    /// Queues the kernel's answers to host `h`'s neighbour lookups.
    pub(crate) fn neighbour_jobs(&mut self, h: usize, jobs: Vec<NeighbourJob>) {
        for job in jobs {
            let at = self.clock.ns(job.at);
            let at = at.max(self.now) + NEIGHBOUR_DELAY;
            self.queue.push(at, Event::Neighbour { host: h, job });
        }
    }

    /// Host `host`'s kernel answers its neighbour lookup.
    pub(crate) fn neighbour(&mut self, host: usize, job: NeighbourJob) {
        let owner = self.by_ip.get(&job.ip).copied();
        let mac = owner.filter(|&o| self.partition.meet(host, o)).map(mac);
        let now = self.clock.instant(self.now);
        if let Some(e) = self.hosts[host].engine.as_mut() {
            e.input(Input::Neighbour(job, mac), now);
            self.after(host);
        }
    }
}
