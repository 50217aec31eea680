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
    for sub in [
        "doctor",
        "check\\-config",
        "stats",
        "show",
        "forget",
        "health",
    ] {
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
    let names: Vec<String> = ibacm_urdma::engine::metrics::Numbers::of(&engine)
        .exposition()
        .families
        .into_iter()
        .map(|f| f.name)
        .collect();
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

/// The lines of a key's `.TP` entry in ibacm_urdma.7.
fn entry<'a>(man: &'a str, key: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = man.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|l| l.split_whitespace().take(2).eq([".BI", key]))
    else {
        return Vec::new();
    };
    lines[start + 1..]
        .iter()
        .copied()
        .take_while(|l| !matches!(*l, ".TP" | ".PP"))
        .collect()
}

fn accepted(key: &str, value: i64) -> bool {
    let (_, problems) = Config::parse(format!("{key} {value}\n"), "opts");
    problems.is_empty()
}

#[test]
fn every_range_the_page_gives_is_the_one_the_provider_takes() {
    let man = page("ibacm_urdma.7");
    let mut checked = 0;
    for key in KEYS {
        let text = entry(&man, key).join(" ");
        // "A\(enB": the key's whole range, its ends taken and no further.
        for (i, _) in text.match_indices("\\(en") {
            let lo: String = text[..i]
                .chars()
                .rev()
                .take_while(char::is_ascii_digit)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let hi: String = text[i + 4..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let (Ok(lo), Ok(hi)) = (lo.parse::<i64>(), hi.parse::<i64>()) else {
                continue;
            };
            assert!(
                accepted(key, lo) && accepted(key, hi),
                "{key}: {lo} and {hi} are documented as valid"
            );
            assert!(
                !accepted(key, hi + 1),
                "{key}: {} is accepted beyond the documented {lo}-{hi}",
                hi + 1
            );
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} ranges found");
}

#[test]
fn the_rates_listed_are_exactly_the_rates_taken() {
    let man = entry(&page("ibacm_urdma.7"), "urdma_rate").join(" ");
    let listed = man
        .split_once("one of ")
        .and_then(|(_, rest)| rest.split_once(" ("))
        .map(|(list, _)| list)
        .expect("urdma_rate lists its values");
    let listed: Vec<i64> = listed
        .split(", ")
        .map(|v| v.parse().unwrap_or_else(|_| panic!("'{v}' in {listed}")))
        .collect();
    let taken: Vec<i64> = (0..=2000).filter(|&v| accepted("urdma_rate", v)).collect();
    assert_eq!(listed, taken);
    let sample = std::fs::read_to_string(format!("{}/ibacm.conf", env!("CARGO_MANIFEST_DIR")))
        .unwrap()
        .replace("\n# ", " ");
    let words: Vec<String> = taken.iter().map(i64::to_string).collect();
    assert!(
        sample.contains(&format!(
            "an IB rate: {} or {}.",
            words[..words.len() - 1].join(", "),
            words[words.len() - 1]
        )),
        "ibacm.conf lists other rates"
    );
}
