//! What the run's totals keep of engines that are gone (their host
//! crashed): the faults they injected and the replays they refused, which
//! the live engines' own counts no longer hold.

use super::SimHost;
use ibacm_urdma::buggify::Injected;
use ibacm_urdma::daemon::NullDaemon;
use ibacm_urdma::engine::Engine;

#[derive(Default)]
pub(crate) struct Gone {
    replayed: u64,
    injected: Injected,
}

impl Gone {
    /// An engine leaves the run: what it counted stays in the totals.
    pub(crate) fn keep(&mut self, e: &Engine<NullDaemon>) {
        self.replayed += e.discovery().counts().drops.replay_window();
        add(&mut self.injected, e.discovery().buggify().injected());
    }

    /// How many times each fault was injected, by every engine that ran.
    pub(crate) fn faults_injected(&self, hosts: &[SimHost]) -> Injected {
        let mut all = self.injected;
        for e in hosts.iter().filter_map(|h| h.engine.as_ref()) {
            add(&mut all, e.discovery().buggify().injected());
        }
        all
    }

    /// Datagrams refused as replays, by every engine that ran.
    pub(crate) fn replays_refused(&self, hosts: &[SimHost]) -> u64 {
        let live: u64 = hosts
            .iter()
            .filter_map(|h| h.engine.as_ref())
            .map(|e| e.discovery().counts().drops.replay_window())
            .sum();
        live + self.replayed
    }
}

/// `more` faults counted into `total`, kind by kind.
fn add(total: &mut Injected, more: Injected) {
    for (t, n) in total.iter_mut().zip(more) {
        *t += n;
    }
}
