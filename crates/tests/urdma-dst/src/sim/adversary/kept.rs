//! What the adversary keeps of what it sent: its announcements, to renew
//! them or withdraw them, and the claims whose confirmations it answers
//! slowly.

use super::{remember, MEMORY};
use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::Message;
use std::collections::VecDeque;
use std::net::IpAddr;

/// Its announcements to the groups and their sources, the newest kept.
#[derive(Default)]
pub(super) struct Announced {
    kept: VecDeque<(IpAddr, Message)>,
}

impl Announced {
    /// It sent the announcement `a` from `src`.
    pub(super) fn keep(&mut self, src: IpAddr, a: Message) {
        if self.kept.len() >= MEMORY {
            self.kept.pop_front();
        }
        self.kept.push_back((src, a));
    }

    /// How many it keeps.
    pub(super) fn count(&self) -> u64 {
        self.kept.len() as u64
    }

    /// The `i`-th it keeps, oldest first.
    pub(super) fn get(&self, i: u64) -> &(IpAddr, Message) {
        &self.kept[i as usize]
    }

    /// All it keeps, forgotten: to withdraw them.
    pub(super) fn take(&mut self) -> VecDeque<(IpAddr, Message)> {
        std::mem::take(&mut self.kept)
    }
}

/// Claims it made whose confirmations it answers slowly
/// (`Attack::SlowClaims`): the askers and the names.
#[derive(Default)]
pub(super) struct SlowClaims {
    owed: VecDeque<(IpAddr, Address)>,
}

impl SlowClaims {
    /// It claimed `name` to `asker`, which will ask it to confirm.
    pub(super) fn owe(&mut self, asker: IpAddr, name: Address) {
        remember(&mut self.owed, (asker, name));
    }

    /// Whether `asker` asking to confirm `name` is answered slowly: once
    /// per claim.
    pub(super) fn settle(&mut self, asker: IpAddr, name: &Address) -> bool {
        let owed = self
            .owed
            .iter()
            .position(|(ip, n)| *ip == asker && n == name);
        owed.map(|i| self.owed.remove(i)).is_some()
    }
}
