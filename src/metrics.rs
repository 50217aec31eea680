//! The provider's numbers for operators, in the Prometheus text exposition
//! format (version 0.0.4): the runtime writes them to a file of their own
//! (`urdma_metrics_file`), which node_exporter's textfile collector can
//! read as it is, and `urdma-acm stats` reads them back ([`parse`]) to show
//! them as a table or JSON. One codec for the format, on both sides.

use std::fmt::Write as _;
use std::time::Duration;

/// Upper bounds of the lookup-duration buckets, in seconds: from a reply on
/// the same switch to the longest a lookup may take (`urdma_timeout`
/// 60 s × 11 tries is the extreme; the default is 3.5 s per stage).
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// Durations observed, by bucket (not cumulative: rendered cumulatively).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// One count per bucket of [`BUCKETS`], then the overflow.
    pub counts: [u64; BUCKETS.len() + 1],
    pub sum_seconds: f64,
}

impl Histogram {
    pub fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[i] += 1;
        self.sum_seconds += s;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// What kind of number a family is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One number, by its series: the metric name and its labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// A family of samples, with what it means.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

/// One series of the daemon's request counters: its labels, and the seven
/// counters in `ACM_CNTR_*` order.
pub type RequestSeries = (Vec<(String, String)>, [u64; 7]);

/// A label (empty: none), its value, and the counter it takes.
type Split = (&'static str, &'static str, usize);

/// Builds the families of an exposition, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub families: Vec<Family>,
}

fn sample(name: &str, labels: &[(&str, &str)], value: f64) -> Sample {
    Sample {
        name: name.to_string(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        value,
    }
}

impl Exposition {
    fn family(&mut self, name: &str, help: &str, kind: Kind) -> &mut Family {
        self.families.push(Family {
            name: name.to_string(),
            help: help.to_string(),
            kind,
            samples: Vec::new(),
        });
        self.families.last_mut().expect("just pushed")
    }

    /// A counter or gauge with one series per label value.
    pub fn by_label(
        &mut self,
        name: &str,
        help: &str,
        kind: Kind,
        label: &str,
        values: &[(&str, u64)],
    ) {
        let f = self.family(name, help, kind);
        for (v, n) in values {
            f.samples.push(sample(name, &[(label, v)], *n as f64));
        }
    }

    /// A counter or gauge with one series.
    pub fn single(&mut self, name: &str, help: &str, kind: Kind, value: u64) {
        self.family(name, help, kind)
            .samples
            .push(sample(name, &[], value as f64));
    }

    /// A gauge of one duration, in seconds.
    pub fn seconds(&mut self, name: &str, help: &str, value: std::time::Duration) {
        self.family(name, help, Kind::Gauge)
            .samples
            .push(sample(name, &[], value.as_secs_f64()));
    }

    /// A histogram with one series per label value.
    pub fn histograms(
        &mut self,
        name: &str,
        help: &str,
        label: &str,
        values: &[(&str, &Histogram)],
    ) {
        let f = self.family(name, help, Kind::Histogram);
        for (v, h) in values {
            let mut cumulative = 0;
            for (i, le) in BUCKETS
                .iter()
                .map(|b| b.to_string())
                .chain(["+Inf".to_string()])
                .enumerate()
            {
                cumulative += h.counts[i];
                let bucket = format!("{name}_bucket");
                f.samples.push(sample(
                    &bucket,
                    &[(label, v), ("le", &le)],
                    cumulative as f64,
                ));
            }
            f.samples
                .push(sample(&format!("{name}_sum"), &[(label, v)], h.sum_seconds));
            f.samples.push(sample(
                &format!("{name}_count"),
                &[(label, v)],
                h.count() as f64,
            ));
        }
    }

    /// The daemon's request counters (`ACM_CNTR_*` order) of each series
    /// of `labels`, as four families that each count one thing, so that a
    /// `sum()` over any of them means something: requests, failures by
    /// reason, address resolutions and paths by where they came from. The
    /// provider writes them for all its endpoints together (`prefix`
    /// `urdma`), `urdma-acm stats --prometheus` per endpoint
    /// (`urdma_endpoint`).
    pub fn requests(&mut self, prefix: &str, series: &[RequestSeries]) {
        let [error, resolve, no_data, addr_query, addr_cache, route_query, route_cache] =
            [0, 1, 2, 3, 4, 5, 6];
        // Name, help, and each series' label and counter.
        let families: [(&str, &str, &[Split]); 4] = [
            (
                "resolve_requests_total",
                "Resolve requests the daemon gave the provider.",
                &[("", "", resolve)],
            ),
            (
                "resolve_failures_total",
                "Requests answered with an error, by reason: no_data (the destination is unknown: ENODATA) or error (any other, such as ETIMEDOUT when a lookup got no answer).",
                &[("reason", "no_data", no_data), ("reason", "error", error)],
            ),
            (
                "address_resolutions_total",
                "Destinations resolved to an address, by source: lookup (not cached: local addresses, the hosts file, then discovery) or cache (cached, its path expired).",
                &[("source", "lookup", addr_query), ("source", "cache", addr_cache)],
            ),
            (
                "path_resolutions_total",
                "Path records answered, by source: built (after a resolution) or cache.",
                &[("source", "built", route_query), ("source", "cache", route_cache)],
            ),
        ];
        for (name, help, values) in families {
            let name = format!("{prefix}_{name}");
            let f = self.family(&name, help, Kind::Counter);
            for (labels, counters) in series {
                for (key, value, i) in values {
                    let mut labels = labels.clone();
                    if !key.is_empty() {
                        labels.push((key.to_string(), value.to_string()));
                    }
                    f.samples.push(Sample {
                        name: name.clone(),
                        labels,
                        value: counters[*i] as f64,
                    });
                }
            }
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let _ = writeln!(out, "# HELP {} {}", f.name, escape(&f.help, false));
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind.name());
            for s in &f.samples {
                out.push_str(&s.name);
                if !s.labels.is_empty() {
                    let labels: Vec<String> = s
                        .labels
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape(v, true)))
                        .collect();
                    let _ = write!(out, "{{{}}}", labels.join(","));
                }
                let _ = writeln!(out, " {}", number(s.value));
            }
        }
        out
    }
}

fn number(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    format!("{v}")
}

/// `s` with the characters the format escapes escaped (`"` too in a
/// label); almost always `s` itself, borrowed: the file is written every
/// second.
fn escape(s: &str, label: bool) -> std::borrow::Cow<'_, str> {
    let special = |c: char| c == '\\' || c == '\n' || (label && c == '"');
    if !s.contains(special) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if label => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.into()
}

/// A metric or label name as the format allows it.
pub fn valid_name(name: &str, label: bool) -> bool {
    let mut chars = name.chars();
    let first_ok = |c: char| c.is_ascii_alphabetic() || c == '_' || (!label && c == ':');
    chars.next().is_some_and(first_ok)
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (!label && c == ':'))
}

/// Reads an exposition back: its families with their samples. Strict: a
/// line this module would not write is an error naming its number.
pub fn parse(text: &str) -> Result<Vec<Family>, String> {
    let mut families: Vec<Family> = Vec::new();
    for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        let bad = |why: &str| format!("line {n}: {why}: {line:?}");
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest
                .split_once(' ')
                .ok_or_else(|| bad("HELP without text"))?;
            if !valid_name(name, false) {
                return Err(bad("bad metric name"));
            }
            families.push(Family {
                name: name.to_string(),
                help: unescape(help, false).map_err(|e| bad(&e))?,
                kind: Kind::Gauge,
                samples: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .ok_or_else(|| bad("TYPE without kind"))?;
            let f = families
                .last_mut()
                .filter(|f| f.name == name)
                .ok_or_else(|| bad("TYPE not after its HELP"))?;
            f.kind = match kind {
                "counter" => Kind::Counter,
                "gauge" => Kind::Gauge,
                "histogram" => Kind::Histogram,
                _ => return Err(bad("unknown type")),
            };
        } else if line.is_empty() || line.starts_with('#') {
            continue;
        } else {
            let s = parse_sample(line).map_err(|e| bad(&e))?;
            let f = families
                .last_mut()
                .ok_or_else(|| bad("sample before any HELP"))?;
            let own = s.name == f.name
                || (f.kind == Kind::Histogram
                    && ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|x| s.name == format!("{}{x}", f.name)));
            if !own {
                return Err(bad("sample outside its family"));
            }
            f.samples.push(s);
        }
    }
    Ok(families)
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let (series, value) = line.rsplit_once(' ').ok_or("no value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().map_err(|_| "bad value")?,
    };
    let (name, labels) = match series.split_once('{') {
        None => (series, Vec::new()),
        Some((name, rest)) => {
            let body = rest.strip_suffix('}').ok_or("unclosed labels")?;
            (name, parse_labels(body)?)
        }
    };
    if !valid_name(name, false) {
        return Err("bad metric name".into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Where the quoted value that `s` starts inside of ends.
fn closing_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

/// Undoes [`escape`].
fn unescape(s: &str, label: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some('"') if label => out.push('"'),
            _ => return Err("bad escape".into()),
        }
    }
    Ok(out)
}

fn parse_labels(mut body: &str) -> Result<Vec<(String, String)>, String> {
    let mut labels = Vec::new();
    while !body.is_empty() {
        let (key, rest) = body.split_once("=\"").ok_or("label without value")?;
        if !valid_name(key, true) {
            return Err(format!("bad label name {key:?}"));
        }
        let end = closing_quote(rest).ok_or("unclosed label value")?;
        labels.push((key.to_string(), unescape(&rest[..end], true)?));
        body = &rest[end + 1..];
        body = match body.strip_prefix(',') {
            Some(more) => more,
            None if body.is_empty() => body,
            None => return Err("labels not separated by commas".into()),
        };
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Exposition {
        let mut e = Exposition::default();
        e.by_label(
            "urdma_x_total",
            "What \"x\" counts\\n",
            Kind::Counter,
            "reason",
            &[("a", 3), ("b\"q", 0)],
        );
        e.single("urdma_y", "A gauge.", Kind::Gauge, 7);
        let mut h = Histogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(30));
        e.histograms("urdma_z_seconds", "Durations.", "result", &[("ok", &h)]);
        e
    }

    #[test]
    fn what_is_rendered_parses_back_the_same() {
        let e = example();
        let text = e.render();
        assert!(
            text.contains("urdma_z_seconds_bucket{result=\"ok\",le=\"0.0005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("urdma_z_seconds_bucket{result=\"ok\",le=\"0.005\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("urdma_z_seconds_bucket{result=\"ok\",le=\"+Inf\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("urdma_z_seconds_count{result=\"ok\"} 3\n"),
            "{text}"
        );
        assert_eq!(parse(&text).unwrap(), e.families);
    }

    #[test]
    fn malformed_lines_are_refused_with_their_number() {
        for (text, line) in [
            ("urdma_a 1\n", 1),
            ("# HELP urdma_a A.\n# TYPE urdma_a counter\nurdma_b 1\n", 3),
            (
                "# HELP urdma_a A.\n# TYPE urdma_a counter\nurdma_a{x=\"1} 1\n",
                3,
            ),
            ("# HELP urdma_a A.\n# TYPE urdma_a summary\n", 2),
            ("# HELP 9a A.\n", 1),
            ("# HELP urdma_a A.\n# TYPE urdma_a gauge\nurdma_a one\n", 3),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.starts_with(&format!("line {line}:")), "{text:?}: {e}");
        }
    }
}
