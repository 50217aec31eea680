//! The man pages stay complete: ibacm_urdma(7) documents every `urdma_`
//! key with the default the provider really uses, and urdma-acm(8) every
//! subcommand.
use ibacm_urdma::config::{Config, KEYS};

fn page(name: &str) -> String {
    let path = format!("{}/docs/man/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The default a key's `.TP` entry states: the word after the line that
/// ends in `Default:`, roff escapes and closing punctuation removed.
fn documented_default(man: &str, key: &str) -> Option<String> {
    let lines: Vec<&str> = man.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.split_whitespace().take(2).eq([".BI", key]))?;
    let entry = lines[start + 1..]
        .iter()
        .take_while(|l| !matches!(**l, ".TP" | ".PP"));
    let mut after_default = entry.skip_while(|l| !l.ends_with("Default:")).skip(1);
    let value = after_default.next()?.split_whitespace().nth(1)?;
    Some(value.replace("\\-", "-").trim_end_matches('.').to_string())
}

#[test]
fn every_key_is_documented_with_its_default() {
    let man = page("ibacm_urdma.7");
    let defaults = Config::default();
    for key in KEYS {
        let want = defaults.describe(key).unwrap();
        assert_eq!(
            documented_default(&man, key).as_deref(),
            Some(want.as_str()),
            "ibacm_urdma.7 must have a `.BI {key} ...` entry ending in `Default:` {want}"
        );
    }
}

#[test]
fn every_subcommand_is_documented() {
    let man = page("urdma-acm.8");
    for sub in ["doctor", "check\\-config", "stats"] {
        assert!(
            man.lines().any(|l| l.starts_with(&format!(".B {sub}"))),
            "urdma-acm.8 has no `.B {sub}` entry"
        );
    }
}

#[test]
fn every_metric_the_provider_writes_is_documented() {
    let man = page("urdma-acm.8");
    let engine = ibacm_urdma::engine::Engine::new(
        ibacm_urdma::daemon::NullDaemon,
        Config::default(),
        Default::default(),
    );
    let mut names: Vec<String> = engine
        .metrics()
        .families
        .into_iter()
        .map(|f| f.name)
        .collect();
    names.push("urdma_metrics_written_timestamp_seconds".into());
    assert!(names.len() > 20, "{names:?}");
    // Entries name metrics as `.B name` or in a `\fBname` list.
    let documented = |n: &str| {
        man.lines().any(|l| {
            l.starts_with(".B ")
                && (l[3..].split(['\\', ' ']).next() == Some(n) || l.contains(&format!("\\fB{n}")))
        })
    };
    for n in &names {
        assert!(documented(n), "urdma-acm.8 does not document {n}");
    }
}
