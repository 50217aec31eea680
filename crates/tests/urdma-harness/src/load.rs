//! What `urdma-load` reports, checked: the load generator counts replies,
//! duplicates and missing ones per transaction id, which `ib_acme` cannot,
//! so the scenarios that must prove "every request answered exactly once"
//! run their clients through it and read its summary here.

use crate::Host;
use std::collections::BTreeMap;
use std::time::Duration;

/// The `key=value` summary line `urdma-load` ends with.
pub fn load_summary(out: &str) -> BTreeMap<String, String> {
    try_load_summary(out).unwrap_or_else(|| panic!("no urdma-load summary in:\n{out}"))
}

/// The summary, if urdma-load printed one (it may have been killed).
pub fn try_load_summary(out: &str) -> Option<BTreeMap<String, String>> {
    let line = out.lines().rev().find(|l| l.starts_with("requests="))?;
    Some(
        line.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// Runs `urdma-load ARGS` on `host` and checks its summary: exit 0, every
/// request answered exactly once, and the given keys. Returns the output
/// and the summary.
pub fn load_ok(
    host: &Host,
    args: &[&str],
    timeout: Duration,
    want: &[(&str, &str)],
) -> (String, BTreeMap<String, String>) {
    let (code, out) = host.load(args, timeout);
    let sum = load_summary(&out);
    assert_eq!(
        code,
        0,
        "urdma-load {args:?}:\n{out}\n{}",
        host.diagnostics()
    );
    for (k, v) in [
        ("missing", "0"),
        ("duplicates", "0"),
        ("unknown_tid", "0"),
        ("bad_replies", "0"),
    ]
    .iter()
    .chain(want)
    {
        assert_eq!(
            sum.get(*k).map(String::as_str),
            Some(*v),
            "`{k}` of urdma-load {args:?}: {sum:?}\n{}",
            host.diagnostics()
        );
    }
    (out, sum)
}

/// Resolves every IPv4 address of `dests` from 10.0.0.1 at once, one
/// connection each, with `urdma-load --verbose` (see `load_ok`).
pub fn resolve_all(
    host: &Host,
    dests: &[String],
    want: &[(&str, &str)],
) -> (String, BTreeMap<String, String>) {
    let file = host.path("dests.txt");
    std::fs::write(&file, dests.join("\n")).unwrap();
    let n = dests.len().to_string();
    let mut want = want.to_vec();
    want.push(("requests", &n));
    let args = [
        "-s",
        "10.0.0.1",
        "-f",
        "i",
        "--dest-file",
        file.to_str().unwrap(),
        "-c",
        &n,
        "-n",
        &n,
        "--verbose",
    ];
    load_ok(host, &args, Duration::from_secs(60), &want)
}

/// The per-request lines of a `--verbose` run of `urdma-load`.
fn verbose_lines(out: &str) -> impl Iterator<Item = &str> {
    out.lines().filter(|l| l.starts_with("tid="))
}

/// The value of `key=` (`key` given with its `=`) in a `--verbose` line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|kv| kv.strip_prefix(key))
}

/// The time each request of a `--verbose` run took, in microseconds.
pub fn verbose_us(out: &str) -> Vec<u64> {
    verbose_lines(out)
        .filter_map(|l| field(l, "us=")?.parse().ok())
        .collect()
}

/// The replies of a `--verbose` run in the order they came: destination,
/// DGID (`-` for a failure) and wall-clock time in ms since the epoch.
pub fn verbose_timeline(out: &str) -> Vec<(String, String, u64)> {
    verbose_lines(out)
        .filter_map(|l| {
            let at = field(l, "at=")?.parse().ok()?;
            Some((
                field(l, "dest=")?.to_string(),
                field(l, "dgid=")?.to_string(),
                at,
            ))
        })
        .collect()
}

/// The requests of a `--verbose` run that got no path: `DEST: status S
/// after T ms, at MS` (`at` in ms since the epoch, when the reply came;
/// `status=missing` lines, never answered, say why instead).
pub fn verbose_failures(out: &str) -> Vec<String> {
    verbose_lines(out)
        .filter(|l| field(l, "status=") != Some("0"))
        .map(|l| {
            let f = |k: &str| field(l, k).unwrap_or("?");
            match field(l, "reason=") {
                Some(why) => format!("{}: no reply ({why})", f("dest=")),
                None => format!(
                    "{}: status {} after {} ms, at {}",
                    f("dest="),
                    f("status="),
                    f("us=").parse::<u64>().map_or(0, |us| us / 1000),
                    f("at=")
                ),
            }
        })
        .collect()
}

/// `dest -> dgid` from the `--verbose` lines of `urdma-load`.
pub fn verbose_dgids(out: &str) -> BTreeMap<String, Vec<String>> {
    let mut by_dest: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in verbose_lines(out) {
        let value = |k: &str| field(l, k).unwrap_or("").to_string();
        by_dest
            .entry(value("dest="))
            .or_default()
            .push(value("dgid="));
    }
    by_dest
}
