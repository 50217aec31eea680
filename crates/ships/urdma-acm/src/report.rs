//! What `urdma-acm stats` prints besides the table: the provider's own
//! metrics, read from its metrics file with the provider's own parser, and
//! everything as JSON or in the Prometheus text format.

use acm_proto::msg::Endpoint;
use acm_prov_sys::ACM_MAX_COUNTER;
use ibacm_urdma::metrics::{self, Exposition, Family, Kind, Sample};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Column names in `ACM_CNTR_*` order, as the help text explains them.
pub const COUNTERS: [&str; ACM_MAX_COUNTER as usize] = [
    "error",
    "resolve",
    "no_data",
    "addr_query",
    "addr_cache",
    "route_query",
    "route_cache",
];

/// An endpoint and its counters, or why they could not be read.
pub type Row = (Endpoint, Result<Vec<u64>, String>);

/// A metrics file older than this is reported as stale: the provider
/// rewrites it every second while it runs.
pub const STALE_SECONDS: f64 = 10.0;

/// The metrics file: `--metrics`, else what the options file says, else
/// the provider's default.
pub fn metrics_path(given: Option<&Path>, opts: &Path) -> Option<PathBuf> {
    if let Some(p) = given {
        return Some(p.to_path_buf());
    }
    let (cfg, _) = ibacm_urdma::config::Config::load(opts);
    cfg.metrics_file
}

/// The provider's metrics, and how many seconds ago the provider last
/// renewed them (the file's modification time: it is rewritten when the
/// numbers change and touched every second otherwise).
pub fn read_metrics(path: &Path) -> Result<(Vec<Family>, f64), String> {
    let missing = |e: std::io::Error| {
        format!(
            "no metrics at {}: {e} (no device opened yet, urdma_metrics_file none, or another path)",
            path.display()
        )
    };
    let text = std::fs::read_to_string(path).map_err(missing)?;
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(missing)?;
    let families = metrics::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let age = SystemTime::now()
        .duration_since(modified)
        .map_or(0.0, |d| d.as_secs_f64());
    Ok((families, age))
}

fn series(s: &Sample) -> String {
    if s.labels.is_empty() {
        return s.name.clone();
    }
    let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}{{{}}}", s.name, labels.join(","))
}

/// The metrics as lines after the table: every series but the histogram
/// buckets (their count and sum stay).
pub fn lines(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        for s in f.samples.iter().filter(|s| !s.name.ends_with("_bucket")) {
            let _ = writeln!(out, "{} {}", series(s), number(s.value));
        }
    }
    out
}

fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// One endpoint in `stats --json`: its identity, then its counters (by
/// the table's column names) or why they could not be read.
#[derive(serde::Serialize)]
struct EndpointJson<'a> {
    guid: String,
    port: u8,
    pkey: String,
    provider: &'a str,
    address: Option<&'a str>,
    counters: Option<std::collections::BTreeMap<&'static str, u64>>,
    error: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct SampleJson<'a> {
    name: &'a str,
    labels: std::collections::BTreeMap<&'a str, &'a str>,
    /// Non-finite values are written as null.
    value: f64,
}

#[derive(serde::Serialize)]
struct FamilyJson<'a> {
    name: &'a str,
    help: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    samples: Vec<SampleJson<'a>>,
}

#[derive(serde::Serialize)]
struct StatsJson<'a> {
    /// Why the daemon could not be asked (then `endpoints` is empty).
    daemon_error: Option<&'a str>,
    endpoints: Vec<EndpointJson<'a>>,
    metrics: Vec<FamilyJson<'a>>,
    metrics_age_seconds: Option<f64>,
}

/// Endpoints and metrics as one JSON object (the schema is in urdma-acm(8)).
pub fn json(
    rows: &[Row],
    daemon_error: Option<&str>,
    families: &[Family],
    stale: Option<f64>,
) -> String {
    let endpoints = rows
        .iter()
        .map(|(ep, counters)| EndpointJson {
            guid: format!("{:#018x}", ep.guid),
            port: ep.port,
            pkey: format!("{:#06x}", ep.pkey),
            provider: &ep.provider,
            address: ep.addresses.first().map(String::as_str),
            counters: counters.as_ref().ok().map(|values| {
                COUNTERS
                    .iter()
                    .copied()
                    .zip(values.iter().copied())
                    .collect()
            }),
            error: counters.as_ref().err().map(String::as_str),
        })
        .collect();
    let metrics = families
        .iter()
        .map(|f| FamilyJson {
            name: &f.name,
            help: &f.help,
            kind: kind(f.kind),
            samples: f
                .samples
                .iter()
                .map(|s| SampleJson {
                    name: &s.name,
                    labels: s
                        .labels
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect(),
                    value: s.value,
                })
                .collect(),
        })
        .collect();
    let all = StatsJson {
        daemon_error,
        endpoints,
        metrics,
        metrics_age_seconds: stale,
    };
    serde_json::to_string(&all).expect("strings and numbers only") + "\n"
}

fn kind(k: Kind) -> &'static str {
    match k {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        Kind::Histogram => "histogram",
    }
}

/// The endpoints' counters in the Prometheus text format: the provider's
/// request families (`Exposition::requests`), per endpoint as
/// `urdma_endpoint_*`, labelled with the endpoint's device GUID, port,
/// P_Key, provider and first address. The provider's own families are not
/// repeated: they are in its metrics file.
pub fn prometheus(rows: &[Row]) -> String {
    let series: Vec<metrics::RequestSeries> = rows
        .iter()
        .filter_map(|(ep, counters)| {
            let values: [u64; 7] = counters.as_ref().ok()?.as_slice().try_into().ok()?;
            let labels = [
                ("guid", format!("{:#018x}", ep.guid)),
                ("port", ep.port.to_string()),
                ("pkey", format!("{:#06x}", ep.pkey)),
                ("provider", ep.provider.clone()),
                ("address", ep.addresses.first().cloned().unwrap_or_default()),
            ];
            Some((labels.map(|(k, v)| (k.to_string(), v)).to_vec(), values))
        })
        .collect();
    let mut e = Exposition::default();
    e.requests("urdma_endpoint", &series);
    e.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        let ep = Endpoint {
            guid: 0x5254_00ff_fe12_3456,
            port: 1,
            pkey: 0xffff,
            provider: "urdma".into(),
            addresses: vec!["10.0.0.1".into()],
        };
        vec![(ep, Ok(vec![0, 5, 1, 2, 0, 2, 3]))]
    }

    fn families() -> Vec<Family> {
        let mut e = Exposition::default();
        e.by_label(
            "urdma_datagrams_dropped_total",
            "Dropped \"datagrams\".",
            Kind::Counter,
            "reason",
            &[("wrong_source", 4)],
        );
        e.families
    }

    #[test]
    fn prometheus_output_is_the_endpoints_only_and_parses_back() {
        let text = prometheus(&rows());
        let back = metrics::parse(&text).unwrap();
        let names: Vec<&str> = back.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "urdma_endpoint_resolve_requests_total",
                "urdma_endpoint_resolve_failures_total",
                "urdma_endpoint_address_resolutions_total",
                "urdma_endpoint_path_resolutions_total"
            ]
        );
        // rows(): error 0, resolve 5, no_data 1, addr_query 2, addr_cache
        // 0, route_query 2, route_cache 3.
        let values: Vec<Vec<f64>> = back
            .iter()
            .map(|f| f.samples.iter().map(|s| s.value).collect())
            .collect();
        assert_eq!(
            values,
            [vec![5.0], vec![1.0, 0.0], vec![2.0, 0.0], vec![2.0, 3.0]]
        );
        let labels = &back[1].samples[0].labels;
        assert!(
            labels.contains(&("reason".into(), "no_data".into())),
            "{labels:?}"
        );
        assert!(
            labels.contains(&("address".into(), "10.0.0.1".into())),
            "{labels:?}"
        );
    }

    #[test]
    fn json_is_typed_escaped_and_never_holds_a_non_finite_number() {
        let mut families = families();
        families[0].samples[0].value = f64::NAN;
        let mut rows = rows();
        let mut broken = rows[0].clone();
        broken.1 = Err("no endpoint owns 10.0.0.1 any more".into());
        rows.push(broken);
        let j = json(&rows, None, &families, Some(1.0));
        assert!(j.contains(r#""help":"Dropped \"datagrams\".""#), "{j}");
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        let ep = &v["endpoints"][0];
        assert_eq!(ep["counters"]["route_cache"], 3);
        assert_eq!(ep["counters"]["error"], 0, "a counter, apart from messages");
        assert!(ep["error"].is_null());
        let bad = &v["endpoints"][1];
        assert!(bad["counters"].is_null());
        assert_eq!(bad["error"], "no endpoint owns 10.0.0.1 any more");
        assert!(v["metrics"][0]["samples"][0]["value"].is_null(), "{j}");
        assert_eq!(v["metrics"][0]["type"], "counter");
        assert_eq!(v["metrics_age_seconds"], 1.0);
    }
}
