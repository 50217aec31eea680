//! What a run varies in the engines it runs: their configuration, the
//! stack of the segment, authentication, derivations and the faults they
//! inject into themselves.

use super::{derive, Authenticated, Stack, MS, NSS_DELAY};
use ibacm_urdma::addr::Gid;
use ibacm_urdma::buggify::Fault;
use ibacm_urdma::config::{Config, Derivation, Lifetime, NameLookup};
use ibacm_urdma::discovery::eui64_gid;
use std::net::Ipv4Addr;
use std::time::Duration;

/// The parts of the engine's configuration the simulation varies.
#[derive(Clone, Debug)]
pub struct Tuning {
    pub timeout_ms: u32,
    pub retries: u32,
    /// Status small enough to fill in a run.
    pub max_cached: usize,
    pub max_learned: usize,
    pub max_lookups: usize,
    /// `urdma_reply_rate`: replies per second to one source.
    pub reply_rate: u32,
    /// `urdma_reconfirm`.
    pub reconfirm: Option<Duration>,
    /// `urdma_addr_timeout`: how long what a host heard lasts.
    pub addr_timeout: Lifetime,
    /// How long claims to a name are heard, where not the provider's
    /// (`Config::claim_window`).
    pub claim_window: Option<Duration>,
    /// Names not found on the segment go to the system's resolver
    /// (`urdma_name_lookup segment,nss`), which knows none of them (the
    /// names are only in the hosts' ibacm_addr.cfg) unless `dns`.
    pub nss: bool,
    /// The resolver (a simulated DNS) knows every host's name and answers
    /// with its addresses.
    pub dns: bool,
    /// Names are not asked of the segment: only of the resolver.
    pub no_segment: bool,
    pub stack: Stack,
    pub auth: Option<Authenticated>,
    /// Faults every engine injects into itself.
    pub faults: Option<Faults>,
    /// The derivation after discovery (`urdma_derive`), which every
    /// host's GID then follows (`derive.rs`).
    pub derive: Option<Derivation>,
    /// A host whose daemon is down is a machine rebooting: what is sent
    /// to it meets silence, not a port unreachable.
    pub silent_when_down: bool,
}

/// Faults the engines inject into themselves (`ibacm_urdma::buggify`),
/// each where it can with `percent` % chance.
#[derive(Clone, Debug)]
pub struct Faults {
    pub enabled: Vec<Fault>,
    pub percent: u8,
}

impl Default for Tuning {
    fn default() -> Self {
        let c = Config::default();
        Tuning {
            timeout_ms: c.timeout_ms,
            retries: c.retries,
            max_cached: c.max_cached,
            max_learned: c.max_learned,
            max_lookups: c.max_lookups,
            reply_rate: c.reply_rate,
            reconfirm: c.reconfirm,
            addr_timeout: c.addr_timeout,
            claim_window: None,
            nss: false,
            dns: false,
            no_segment: false,
            stack: Stack::V4,
            auth: None,
            faults: None,
            derive: None,
            silent_when_down: false,
        }
    }
}

impl Tuning {
    /// Every host's configuration.
    pub(crate) fn config(&self) -> Config {
        Config {
            hosts_file: "/nonexistent/urdma-dst-hosts".into(),
            name_lookup: [
                (!self.no_segment).then_some(NameLookup::Segment),
                self.nss.then_some(NameLookup::Nss),
            ]
            .into_iter()
            .flatten()
            .collect(),
            metrics_file: None,
            timeout_ms: self.timeout_ms,
            retries: self.retries,
            claim_window: self.claim_window,
            max_cached: self.max_cached,
            max_learned: self.max_learned,
            max_lookups: self.max_lookups,
            reply_rate: self.reply_rate,
            reconfirm: self.reconfirm,
            addr_timeout: self.addr_timeout,
            derive: self.derive.into_iter().collect(),
            ..Config::default()
        }
    }

    /// Every request is answered within its lookup's time (each stage's,
    /// at the longest try the replies' times can make, and one timeout for
    /// a neighbour lookup), and a little.
    pub fn bound(&self) -> u64 {
        let stages = u64::from(!self.no_segment) + u64::from(self.nss);
        let timeout = u64::from(self.timeout_ms) * MS;
        let neighbour = u64::from(self.derive == Some(Derivation::Eui64));
        let longest_try = timeout * u64::from(ibacm_urdma::discovery::RETRY_CEILING);
        stages * longest_try * u64::from(self.retries + 1)
            + stages * NSS_DELAY
            + neighbour * timeout
            + MS
    }

    /// Host `host`'s GID (its IPv4 address `ip`) by the configured
    /// derivation, if there is one (`derive.rs`).
    pub(crate) fn derived_gid(&self, host: usize, ip: Ipv4Addr) -> Option<Gid> {
        match self.derive? {
            Derivation::Eui64 => Some(eui64_gid(derive::mac(host))),
            Derivation::Ipv4Mapped => Some(Gid(ip.to_ipv6_mapped().octets())),
        }
    }
}
