//! What `urdma-load` reports, checked: the load generator counts replies,
//! duplicates and missing ones per transaction id, which `ib_acme` cannot,
//! so the scenarios that must prove "every request answered exactly once"
//! run their clients through it and read its summary here.

use std::collections::BTreeMap;

/// The `key=value` summary line `urdma-load` ends with.
pub fn load_summary(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .rev()
        .find(|l| l.starts_with("requests="))
        .unwrap_or_else(|| panic!("no urdma-load summary in:\n{out}"))
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
