//! What `urdma-acm stats` prints besides the table: the provider's own
//! metrics, read from its metrics file with the provider's own parser, and
//! everything as JSON or in the Prometheus text format.

use acm_proto::msg::Endpoint;
use acm_prov_sys::ACM_MAX_COUNTER;
use ibacm_urdma::metrics::{self, Exposition, Family, Kind, Sample};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

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

/// The provider's metrics, and how many seconds ago they were written.
pub fn read_metrics(path: &Path) -> Result<(Vec<Family>, f64), String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "no metrics at {}: {e} (no port up yet, urdma_metrics_file none, or another path)",
            path.display()
        )
    })?;
    let families = metrics::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let written = families
        .iter()
        .find(|f| f.name == "urdma_metrics_written_timestamp_seconds")
        .and_then(|f| f.samples.first())
        .map_or(0.0, |s| s.value);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    Ok((families, (now - written).max(0.0)))
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

/// A JSON string literal.
fn string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Endpoints and metrics as one JSON object (documented in urdma-acm(8)).
pub fn json(rows: &[Row], families: &[Family], stale: Option<f64>) -> String {
    let endpoints: Vec<String> = rows
        .iter()
        .map(|(ep, counters)| {
            let mut fields = vec![
                format!("\"guid\":{}", string(&format!("{:#018x}", ep.guid))),
                format!("\"port\":{}", ep.port),
                format!("\"pkey\":{}", string(&format!("{:#06x}", ep.pkey))),
                format!("\"provider\":{}", string(&ep.provider)),
                format!(
                    "\"address\":{}",
                    ep.addresses.first().map_or("null".into(), |a| string(a))
                ),
            ];
            match counters {
                Ok(values) => fields.extend(
                    COUNTERS
                        .iter()
                        .zip(values)
                        .map(|(c, v)| format!("{}:{v}", string(c))),
                ),
                Err(e) => fields.push(format!("\"error\":{}", string(e))),
            }
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    let families: Vec<String> = families
        .iter()
        .map(|f| {
            let samples: Vec<String> = f
                .samples
                .iter()
                .map(|s| {
                    let labels: Vec<String> = s
                        .labels
                        .iter()
                        .map(|(k, v)| format!("{}:{}", string(k), string(v)))
                        .collect();
                    format!(
                        "{{\"name\":{},\"labels\":{{{}}},\"value\":{}}}",
                        string(&s.name),
                        labels.join(","),
                        number(s.value)
                    )
                })
                .collect();
            format!(
                "{{\"name\":{},\"help\":{},\"type\":{},\"samples\":[{}]}}",
                string(&f.name),
                string(&f.help),
                string(kind(f.kind)),
                samples.join(",")
            )
        })
        .collect();
    let stale = stale.map_or("null".into(), number);
    format!(
        "{{\"endpoints\":[{}],\"metrics\":[{}],\"metrics_age_seconds\":{stale}}}\n",
        endpoints.join(","),
        families.join(",")
    )
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
    fn json_strings_are_escaped() {
        let j = json(&rows(), &families(), Some(1.0));
        assert!(j.contains(r#""help":"Dropped \"datagrams\".""#), "{j}");
        assert!(j.contains(r#""route_cache":3"#), "{j}");
        assert!(j.ends_with("\"metrics_age_seconds\":1}\n"), "{j}");
    }
}
