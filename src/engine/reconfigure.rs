//! What changes in the configuration while the provider runs: the hosts
//! file, the options file and the key file, reread by the watcher. Whatever can take effect
//! at once does; the rest is named, so the operator knows to restart.

use super::Engine;
use crate::addr::Address;
use crate::config::hosts::Hosts;
use crate::config::Config;
use crate::daemon::Daemon;
use crate::discovery::auth::Auth;
use crate::discovery::seal::Keyring;
use std::sync::Arc;

/// The `urdma_` keys that take effect while the provider runs: what a
/// path record says (answered from the next request on; the cache is
/// emptied so that no path of the old values is served) and how long a
/// path is kept; where the metrics go (the writer reads it every time).
/// Every other key shapes tables, sockets or discovery's timing, which are
/// made once, at start.
pub const LIVE: [&str; 8] = [
    "urdma_mtu",
    "urdma_rate",
    "urdma_sl",
    "urdma_packet_lifetime",
    "urdma_hop_limit",
    "urdma_tclass",
    "urdma_route_timeout",
    "urdma_metrics_file",
];

/// A change to put in force.
pub enum Change {
    /// Authentication, from now on (the key file read at start).
    Auth(Auth),
    /// The options file as read again.
    Options(Config),
    /// The key file as read again.
    Keys(Keyring),
    /// A new version of the hosts file, and the addresses whose entries
    /// it changed (from [`Hosts::changes`]): they leave the destination
    /// cache and the memory of failed lookups, so they resolve by the new
    /// file at the next request.
    Hosts {
        hosts: Arc<Hosts>,
        changed: Vec<Address>,
    },
}

/// What became of a change.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// Keys whose new values are in force.
    pub live: Vec<&'static str>,
    /// Keys whose new values wait for a restart of the daemon.
    pub restart: Vec<&'static str>,
}

impl<D: Daemon> Engine<D> {
    /// Puts `change` in force as far as it can be while running.
    pub fn reconfigure(&mut self, change: Change) -> Applied {
        match change {
            Change::Auth(auth) => {
                self.discovery.set_auth(Some(auth));
                Applied::default()
            }
            Change::Keys(ring) => match self.discovery.auth_mut() {
                Some(auth) => {
                    auth.rekey(ring);
                    Applied {
                        live: vec!["urdma_auth_key_file"],
                        restart: Vec::new(),
                    }
                }
                // Authentication was off from the start, or its key file
                // unusable: discovery runs without it or not at all.
                None => Applied {
                    live: Vec::new(),
                    restart: vec!["urdma_auth_key_file"],
                },
            },
            Change::Options(new) => {
                let old = &self.cfg;
                let changed: Vec<&'static str> = crate::config::KEYS
                    .iter()
                    .copied()
                    .filter(|k| old.describe(k) != new.describe(k))
                    .collect();
                let (live, restart): (Vec<_>, Vec<_>) =
                    changed.into_iter().partition(|k| LIVE.contains(k));
                self.cfg.metrics_file = new.metrics_file.clone();
                if live.iter().any(|k| *k != "urdma_metrics_file") {
                    let c = &mut self.cfg;
                    (c.mtu, c.rate_gbps, c.sl) = (new.mtu, new.rate_gbps, new.sl);
                    (c.packet_lifetime, c.hop_limit, c.tclass) =
                        (new.packet_lifetime, new.hop_limit, new.tclass);
                    c.route_timeout = new.route_timeout;
                    self.local.set_offer(super::offer(&new));
                    self.requests.cache.flush_all();
                }
                Applied { live, restart }
            }
            Change::Hosts { hosts, changed } => {
                self.hosts = hosts;
                let cache = &mut self.requests.cache;
                // A whole new file changes more than is cached: then
                // forgetting everything is cheaper than a removal per
                // address, and only costs rebuilding paths (failed lookups
                // are asked again).
                let failures = self.discovery.state_mut();
                if changed.len() > cache.len() + failures.failures() {
                    cache.flush_all();
                    failures.forget_failures(None);
                } else {
                    for a in &changed {
                        cache.evict(a);
                    }
                    failures.forget_failures(Some(&changed));
                }
                Applied::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::FakeDaemon;
    use crate::local::PortInfo;
    use crate::request::msg::tests::{addr_entry, request};
    use crate::request::path::PathRecord;
    use acm_prov_sys::{ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST};

    #[test]
    fn path_keys_change_the_next_answer_and_the_others_wait_for_a_restart() {
        let (hosts, _) = Hosts::parse("peer fe80::2\n", "hosts");
        let mut e = Engine::new(FakeDaemon::default(), Config::default(), hosts);
        let dev = e.open_device(1);
        let port = e
            .open_port(dev, PortInfo::infiniband(1, "fe80::1".parse().unwrap()))
            .unwrap();
        let ep = e.open_endpoint(port, 0xffff).unwrap();
        let src = e.add_address(ep, Address::name("self").unwrap()).unwrap();
        let ask = |e: &mut Engine<FakeDaemon>| {
            let req = request(
                &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"peer")],
                false,
                1,
            );
            let reply = e
                .resolve_at(src, &req, 1, std::time::Instant::now())
                .unwrap();
            PathRecord::decode(reply.entry(0).info.first_chunk().unwrap())
        };
        assert_eq!(ask(&mut e).sl, 0);

        let mut new = Config::default();
        (new.sl, new.max_cached, new.addr_timeout) = (5, 7, crate::config::Lifetime::Minutes(3));
        let applied = e.reconfigure(Change::Options(new));
        assert_eq!(applied.live, ["urdma_sl"]);
        assert_eq!(applied.restart, ["urdma_addr_timeout", "urdma_max_cached"]);
        assert_eq!(ask(&mut e).sl, 5, "the cached path was not served");
        assert_eq!(e.config().max_cached, Config::default().max_cached);

        // Keys without authentication in force cannot change anything.
        let ring = Keyring::new(
            &crate::config::keyfile::KeyFile::parse("1 00112233445566778899aabbccddeeff", "k")
                .unwrap(),
        );
        assert_eq!(
            e.reconfigure(Change::Keys(ring)).restart,
            ["urdma_auth_key_file"]
        );
    }
}
