//! What discovery knows, for `urdma-acm show`, and forgetting it, for
//! `urdma-acm forget` (`crate::control`): read and dropped here, where
//! the bindings, failures and hints are.

use super::Discovery;
use crate::addr::Address;
use crate::control::{self, Binding, Failure, Hint};
use acm_prov_sys::{ACM_STATUS_ENODATA, ACM_STATUS_ETIMEDOUT};
use std::time::Instant;

/// Seconds from `now` to `at` (0 once past); `None`: never.
pub fn seconds_until(at: Option<Instant>, now: Instant) -> Option<f64> {
    at.map(|at| at.saturating_duration_since(now).as_secs_f64())
}

fn status_name(status: u8) -> String {
    match u32::from(status) {
        ACM_STATUS_ENODATA => "ENODATA".into(),
        ACM_STATUS_ETIMEDOUT => "ETIMEDOUT".into(),
        s => s.to_string(),
    }
}

/// The bindings and failures discovery holds (of `only`, or all), and
/// the hints (of `only`, or the endpoints heard).
pub fn view(
    d: &Discovery,
    only: Option<&Address>,
    now: Instant,
) -> (Vec<Binding>, Vec<Hint>, Vec<Failure>) {
    let wanted = |a: &Address| only.is_none_or(|o| o == a);
    let bindings = d
        .state
        .bindings()
        .filter(|(a, _, _)| wanted(a))
        .map(|(a, l, expires)| Binding {
            address: control::show_address(a),
            gid: l.gid.to_string(),
            source: l.source.name().into(),
            via: l.via.map(|v| v.to_string()),
            age: l
                .confirmed
                .map(|c| now.saturating_duration_since(c).as_secs_f64()),
            expires_in: seconds_until(expires, now),
        })
        .collect();
    let failures = d
        .state
        .remembered_failures()
        .filter(|(a, _, _)| wanted(a))
        .map(|(a, status, expires)| Failure {
            address: control::show_address(a),
            status: status_name(status),
            expires_in: seconds_until(expires, now),
        })
        .collect();
    (bindings, d.presence.hints().view(only, now), failures)
}

/// Forgets what discovery learned about `which` (`None`: everything):
/// its binding (and that of its GID, for an address bound with one), a
/// failure remembered, the name's hint. Lookups in flight go on. Returns
/// how many entries went.
pub fn forget(d: &mut Discovery, which: Option<&Address>, now: Instant) -> usize {
    let Some(a) = which else {
        return d.state.forget_all() + d.presence.hints_mut().clear();
    };
    let mut n = 0;
    if let Some(l) = d.state.binding(a) {
        let gid = Address::Gid(l.gid);
        // The GID's own entry came with this binding (`State::bind`); the
        // GID's other names keep it.
        let others = d
            .state
            .bindings()
            .filter(|(k, l2, _)| *k != a && **k != gid && l2.gid == l.gid)
            .count();
        n += usize::from(d.state.forget(a));
        if others == 0 && *a != gid {
            n += usize::from(d.state.forget(&gid));
        }
    }
    let failures = d.state.failures();
    d.state.forget_failures(Some(std::slice::from_ref(a)));
    n += failures - d.state.failures();
    if !d.presence.hints().view(Some(a), now).is_empty() {
        d.presence.hints_mut().forget(a);
        n += 1;
    }
    n
}

/// Whether discovery signs and checks its datagrams.
pub fn authenticated(d: &Discovery) -> bool {
    d.auth.is_some()
}
