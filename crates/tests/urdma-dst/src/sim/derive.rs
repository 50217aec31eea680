//! Derivations (`urdma_derive`) in the simulation: with one configured,
//! each host's port GID is what that derivation computes for it (from its
//! NIC's MAC for `eui64`, from its IPv4 address for `ipv4-mapped`), as on
//! a segment whose hosts follow the convention. The GID is then the NIC's
//! identity: it stays the same across restarts, and a host whose daemon is
//! down still answers the kernel's neighbour discovery, so a derived answer
//! for it is right. The neighbour table is simulated: a job gets the MAC of
//! the address's owner if the segment lets them meet, nothing otherwise.

use super::{Event, Sim, MS};
use ibacm_urdma::addr::Gid;
use ibacm_urdma::config::Derivation;
use ibacm_urdma::discovery::eui64_gid;
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
    /// Host `host`'s GID by the configured derivation, if there is one.
    pub(crate) fn derived_gid(&self, host: usize) -> Option<Gid> {
        match self.tuning.derive? {
            Derivation::Eui64 => Some(eui64_gid(mac(host))),
            Derivation::Ipv4Mapped => Some(Gid(self.hosts[host].ip.to_ipv6_mapped().octets())),
        }
    }

    /// Queues the kernel's answers to host `h`'s neighbour lookups.
    pub(crate) fn neighbour_jobs(&mut self, h: usize, jobs: Vec<NeighbourJob>) {
        for job in jobs {
            let at = job.at.saturating_duration_since(self.base).as_nanos() as u64;
            let at = at.max(self.now) + NEIGHBOUR_DELAY;
            self.queue.push(at, Event::Neighbour { host: h, job });
        }
    }

    /// Host `host`'s kernel answers its neighbour lookup.
    pub(crate) fn neighbour(&mut self, host: usize, job: NeighbourJob) {
        let owner = self.by_ip.get(&job.ip).copied();
        let mac = owner.filter(|&o| self.reachable(host, o)).map(mac);
        let now = self.instant(self.now);
        if let Some(e) = self.hosts[host].engine.as_mut() {
            e.input(Input::Neighbour(job, mac), now);
            self.after(host);
        }
    }
}
