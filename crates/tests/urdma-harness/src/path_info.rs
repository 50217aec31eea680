//! The path `ib_acme` prints, as fields a test can compare: tests assert on
//! what a user of the daemon gets back, and `ib_acme` is how a user asks.
//! A field missing from the output fails the test by name rather than
//! comparing as empty.

use std::collections::BTreeMap;

/// The `Path information` block `ib_acme` prints: `field -> value`.
pub struct PathInfo(pub BTreeMap<String, String>);

impl PathInfo {
    pub fn parse(out: &str) -> PathInfo {
        let fields = out
            .lines()
            .skip_while(|l| *l != "Path information")
            .skip(1)
            .map_while(|l| l.strip_prefix("  "))
            .filter_map(|l| l.split_once(": "))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PathInfo(fields)
    }

    pub fn get(&self, field: &str) -> &str {
        self.0
            .get(field)
            .unwrap_or_else(|| panic!("no `{field}:` line in the path {:?}", self.0))
    }
}
