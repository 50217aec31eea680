//! The provider's knowledge as the control socket shows it
//! (`crate::control`): this host's addresses, the hosts file's, and what
//! discovery holds; forgetting what was learned; whether it serves.

use super::Engine;
use crate::addr::Address;
use crate::control::{self, Answer, Binding, Health};
use crate::daemon::Daemon;
use crate::discovery::inspect as discovery;
use std::time::Instant;

/// What the provider knows about `only`, or everything it learned (the
/// hosts file's addresses are only counted: there may be a million).
pub fn show<D: Daemon>(e: &Engine<D>, only: Option<&Address>, now: Instant) -> Answer {
    let mut bindings = Vec::new();
    for ep in e.local.endpoint_ids() {
        let Some(gid) = e.local.port_of(ep).and_then(|p| p.gids.first()) else {
            continue;
        };
        for a in e.local.addresses_of(ep) {
            if only.is_none_or(|o| o == a) {
                bindings.push(fixed(a, gid.to_string(), "local"));
            }
        }
    }
    if let Some(a) = only {
        if let Some(r) = e.hosts.lookup(a) {
            bindings.push(fixed(a, r.gid.to_string(), "hosts"));
        }
    }
    let (learned, hints, failures) = discovery::view(&e.discovery, only, now);
    bindings.extend(learned);
    Answer {
        bindings,
        hints,
        failures,
        hosts_file: Some((e.cfg.hosts_file.display().to_string(), e.hosts.len() as u64)),
        ..Answer::default()
    }
}

/// A binding that no lookup made: it lasts as long as its source.
fn fixed(a: &Address, gid: String, source: &str) -> Binding {
    Binding {
        address: control::show_address(a),
        gid,
        source: source.into(),
        ..Binding::default()
    }
}

/// Forgets what was learned about `which` (`None`: everything) and the
/// paths cached for it, so that the next request asks again. What this
/// host holds or the hosts file says is not learned: it is refused, with
/// where to change it.
pub fn forget<D: Daemon>(e: &mut Engine<D>, which: Option<&Address>, now: Instant) -> Answer {
    let Some(a) = which else {
        let n = discovery::forget(&mut e.discovery, None, now) + e.requests.cache.len();
        e.requests.cache.flush_all();
        log::info!("urdma-acm forget --all: {n} entries forgotten");
        return forgotten(n);
    };
    if e.local.holder(a).is_some() {
        return Answer::refused(format!("{a} is an address of this host"));
    }
    let n = discovery::forget(&mut e.discovery, Some(a), now) + e.requests.cache.evict(a);
    if n == 0 && e.hosts.lookup(a).is_some() {
        return Answer::refused(format!(
            "{a} comes from the hosts file {}: change it there",
            e.cfg.hosts_file.display()
        ));
    }
    log::info!("urdma-acm forget {a}: {n} entries forgotten");
    forgotten(n)
}

fn forgotten(n: usize) -> Answer {
    Answer {
        forgotten: Some(n as u64),
        ..Answer::default()
    }
}

/// Whether the provider serves: degraded without a port, or with
/// discovery configured on and not running (`problems` says why, from
/// the runtime: a key file refused, a port that could not be opened).
pub fn health<D: Daemon>(e: &Engine<D>, mut problems: Vec<String>) -> Health {
    let ports = e.local.ports().count() as u64;
    if ports == 0 {
        problems.push("no port served: the daemon opened no InfiniBand port with a GID".into());
    }
    let discovery = match (e.cfg.discovery, e.discovery.status().up) {
        (false, _) => "off",
        (true, true) => "on",
        (true, false) => {
            if problems.is_empty() {
                problems.push("discovery is configured on but not running".into());
            }
            "down"
        }
    };
    Health {
        state: if problems.is_empty() {
            "serving"
        } else {
            "degraded"
        }
        .into(),
        ports,
        discovery: discovery.into(),
        authenticated: discovery::authenticated(&e.discovery),
        problems,
    }
}
