//! The provider's metrics as Prometheus reads them: `urdma-acm stats`
//! beside the provider's metrics file, held to the exposition format and to
//! the traffic and attacks that were counted, and the example alerting
//! rules and dashboard held to what the provider writes.

use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::{Answer, Message, Reply, WireAddress};
use std::collections::BTreeMap;
use std::fs;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::num::NonZeroU64;
use std::process::Command;
use std::time::{Duration, Instant};
use urdma_harness::forger::Forger;
use urdma_harness::nodes::{resolve_node, Node, DISCOVERY_PORT, WAIT};
use urdma_harness::{Host, HostConfig, Net};

/// Holds `text` to the rules of the Prometheus text exposition format
/// (0.0.4), checked here on their own rather than by the provider's parser:
/// HELP and TYPE once per family before its samples, names and labels of
/// the allowed characters, quoted and escaped label values, numbers, no
/// series twice, and histograms whose buckets rise to `+Inf`, which equals
/// their count, beside a sum. Returns the value of each series.
fn check_prometheus(text: &str) -> BTreeMap<String, f64> {
    let mut read = ExpositionRead::default();
    for line in text.lines() {
        read.line(line);
    }
    read.check_histograms();
    read.values
}

/// A metric name (`colon`) or a label name of the allowed characters.
fn name_ok(n: &str, colon: bool) -> bool {
    let mut c = n.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || (colon && f == ':'))
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || (colon && x == ':'))
}

/// What `check_prometheus` has read of an exposition so far.
#[derive(Default)]
struct ExpositionRead {
    /// The kind each TYPE line gave its family.
    families: BTreeMap<String, String>,
    /// The family whose samples may come now, and its kind once typed.
    current: Option<(String, String)>,
    /// The value of each series.
    values: BTreeMap<String, f64>,
    /// Each histogram's (upper bound, count) pairs, by family and the
    /// labels other than `le`.
    buckets: BTreeMap<String, Vec<(f64, f64)>>,
}

impl ExpositionRead {
    fn line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(name_ok(name, true), "{line}");
            assert!(!self.families.contains_key(name), "family twice: {line}");
            self.current = Some((name.to_string(), String::new()));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            let (cur, _) = self.current.clone().expect("TYPE after HELP");
            assert_eq!(name, cur, "{line}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            self.families.insert(name.to_string(), kind.to_string());
            self.current = Some((cur, kind.to_string()));
        } else {
            self.sample(line);
        }
    }

    fn sample(&mut self, line: &str) {
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').expect("series value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value: {line}")),
        };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        assert!(name_ok(name, true), "{line}");
        let (family, kind) = self.current.clone().expect("sample after HELP and TYPE");
        let suffix = name
            .strip_prefix(family.as_str())
            .expect("sample of its family");
        match kind.as_str() {
            "histogram" => assert!(["_bucket", "_sum", "_count"].contains(&suffix), "{line}"),
            _ => assert_eq!(suffix, "", "{line}"),
        }
        let (le, others) = labels_of(labels, line);
        assert!(
            self.values.insert(series.to_string(), value).is_none(),
            "series twice: {line}"
        );
        if let Some(le) = le {
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("le")
            };
            let key = format!("{family}{{{}}}", others.join(","));
            self.buckets.entry(key).or_default().push((bound, value));
        }
    }

    /// Buckets rise to `+Inf`, whose count is the histogram's `_count`.
    fn check_histograms(&self) {
        for (key, b) in &self.buckets {
            assert!(
                b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                "{key}: {b:?}"
            );
            let (last, total) = *b.last().unwrap();
            assert_eq!(last, f64::INFINITY, "{key} ends at +Inf");
            let (family, labels) = key.split_once('{').unwrap();
            let labels = labels.trim_end_matches('}');
            let count_series = match labels {
                "" => format!("{family}_count"),
                l => format!(
                    "{family}_count{{{}}}",
                    l.split(',')
                        .map(|kv| {
                            let (k, v) = kv.split_once('=').unwrap();
                            format!("{k}=\"{v}\"")
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            };
            assert_eq!(
                self.values.get(&count_series),
                Some(&total),
                "{count_series}"
            );
        }
    }
}

/// The `le` label of a sample's `labels` (what follows `{`), if it has
/// one, and its other labels as `name=value`, each name and quoted value
/// held to the format (of `line`).
fn labels_of<'a>(labels: &'a str, line: &str) -> (Option<&'a str>, Vec<String>) {
    let mut le = None;
    let mut rest = labels.strip_suffix('}').unwrap_or(labels);
    let mut others = Vec::new();
    while !rest.is_empty() {
        let (k, v) = rest.split_once("=\"").expect("label=\"value\"");
        assert!(name_ok(k, false), "label {k}: {line}");
        let end = closing_quote(v, line).expect("closed label value");
        if k == "le" {
            le = Some(&v[..end]);
        } else {
            others.push(format!("{k}={}", &v[..end]));
        }
        rest = v[end + 1..].strip_prefix(',').unwrap_or(&v[end + 1..]);
    }
    (le, others)
}

/// Where the quoted label value that `v` starts with ends, its escapes
/// held to the three the format allows.
fn closing_quote(v: &str, line: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in v.char_indices() {
        match c {
            _ if escaped => {
                assert!(['\\', '"', 'n'].contains(&c), "escape: {line}");
                escaped = false
            }
            '\\' => escaped = true,
            '"' => return Some(i),
            _ => {}
        }
    }
    None
}

/// `promtool check metrics` (Debian's `prometheus`): Prometheus' own
/// parser and its naming lints (units, `_total` on counters, no metric
/// named like a label), which print a line per problem.
fn promtool_check_metrics(text: &str) {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool (apt-get install prometheus): {e}"));
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(text.as_bytes()).expect("write to promtool");
    drop(stdin);
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Replies to queries A never sent, and datagrams that are no message at
/// all, that the attack sends: the drops must grow by exactly these.
const FORGED: u64 = 37;
const GARBAGE: u64 = 23;

#[test]
fn stats_reports_metrics_that_match_the_traffic_and_the_attacks() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", &Node::B.ip4()]);
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", "node-a", "-d", "node-b"],
    );

    // What A counted before the attack, once its lookups have settled (a
    // second answer to the group query that comes after the lookup ended
    // is counted as late).
    std::thread::sleep(Duration::from_millis(1500));
    let (before, _) = collected(&a);
    let _forger = attack(&net);
    let values = drops_grown_by_the_attack(&a, &before);
    assert_traffic_counted(&values);
    let (_, endpoints, _) = a.stats(&["--prometheus"]);
    promtool_check_metrics(&a.metrics_file());
    promtool_check_metrics(&endpoints);
    assert_json_agrees(&a, &values);

    // And after the table, one line per series.
    let (code, out, _) = a.stats(&[]);
    assert_eq!(code, 0);
    let unsolicited = dropped(&values, "unsolicited");
    let line = format!("urdma_datagrams_dropped_total{{reason=unsolicited}} {unsolicited}\n");
    assert!(out.contains(&line), "{out}");
}

/// What node_exporter's textfile collector reads of `host`: the provider's
/// file and, beside it, the endpoints' counters from urdma-acm. Together
/// they must be one valid exposition (no family twice), and each passes
/// Prometheus' own linter. Returns the value of each series and the text.
fn collected(host: &Host) -> (BTreeMap<String, f64>, String) {
    let (code, endpoints, err) = host.stats(&["--prometheus"]);
    assert_eq!(code, 0, "{err}");
    let out = host.metrics_file() + &endpoints;
    (check_prometheus(&out), out)
}

/// The datagrams dropped for `reason`, by `values`.
fn dropped(values: &BTreeMap<String, f64>, reason: &str) -> f64 {
    values
        .get(&format!(
            "urdma_datagrams_dropped_total{{reason=\"{reason}\"}}"
        ))
        .copied()
        .unwrap_or_else(|| panic!("no drops by {reason}"))
}

/// A forger on `net` sends node A, in B's name, `FORGED` replies to
/// queries A never sent and `GARBAGE` datagrams. Returns the forger.
fn attack(net: &Net) -> Forger {
    let forger = Forger::start(net, Ipv4Addr::new(10, 0, 0, 66), DISCOVERY_PORT);
    let (to_a, from_b) = (
        SocketAddrV4::new(Node::A.ip4().parse().unwrap(), DISCOVERY_PORT),
        SocketAddrV4::new(Node::B.ip4().parse().unwrap(), DISCOVERY_PORT),
    );
    for i in 0..FORGED {
        let target = WireAddress::new(Address::parse_host("10.0.0.9").unwrap()).unwrap();
        let txid = NonZeroU64::new(0x5eed_0000 + i).unwrap();
        let reply = Reply::new(txid, target, Answer::Refused).unwrap();
        forger.send(from_b, to_a, &Message::from(reply).encode());
    }
    for i in 0..GARBAGE {
        forger.send(
            from_b,
            to_a,
            format!("not a discovery message {i}").as_bytes(),
        );
    }
    forger
}

/// The worker writes the metrics every second: waits until the drops
/// `host` reports have grown from `before` by exactly what was sent, never
/// by more. Returns the values then.
fn drops_grown_by_the_attack(host: &Host, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (values, out) = collected(host);
        let grew = |reason: &str| dropped(&values, reason) - dropped(before, reason);
        if (grew("malformed"), grew("unsolicited")) == (GARBAGE as f64, FORGED as f64) {
            return values;
        }
        assert!(
            grew("malformed") <= GARBAGE as f64 && grew("unsolicited") <= FORGED as f64,
            "{out}"
        );
        assert!(
            Instant::now() < deadline,
            "drops never reached the datagrams sent:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The series of A's traffic: its two lookups of B, what it sent and
/// received for them and for the attack, and the endpoints' counters.
fn assert_traffic_counted(values: &BTreeMap<String, f64>) {
    let get = |series: &str| {
        values
            .get(series)
            .copied()
            .unwrap_or_else(|| panic!("no {series}"))
    };
    assert_eq!(get("urdma_discovery_up"), 1.0);
    assert!(get("urdma_lookup_duration_seconds_count{result=\"resolved\"}") >= 2.0);
    assert!(
        get("urdma_datagrams_sent_total{kind=\"unicast_query\"}") >= 2.0,
        "the address, then the name's claimant"
    );
    assert!(
        get("urdma_datagrams_sent_total{kind=\"group_query\"}") >= 1.0,
        "the name"
    );
    assert!(get("urdma_datagrams_received_total") >= (FORGED + GARBAGE + 2) as f64);
    assert!(get("urdma_bindings") >= 2.0, "B's address and name");
    let resolves: f64 = values
        .iter()
        .filter(|(k, _)| {
            k.starts_with("urdma_endpoint_resolve_requests_total{")
                && k.contains("address=\"10.0.0.1\"")
        })
        .map(|(_, v)| v)
        .sum();
    assert!(resolves >= 2.0, "the endpoint's own counters come along");
    assert!(get("urdma_resolve_requests_total") >= resolves);
    assert_eq!(
        get(&format!(
            "urdma_build_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )),
        1.0
    );
}

/// `stats --json` of `host`, read by a JSON parser: the same numbers as
/// `values`.
fn assert_json_agrees(host: &Host, values: &BTreeMap<String, f64>) {
    let (code, out, err) = host.stats(&["--json"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}:\n{out}"));
    assert!(json["metrics_age_seconds"].as_f64().unwrap() < 10.0);
    assert_eq!(json["endpoints"][0]["provider"], "urdma");
    let family = |name: &str| {
        json["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    let dropped_family = family("urdma_datagrams_dropped_total");
    assert_eq!(dropped_family["type"], "counter");
    let malformed = dropped_family["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["labels"]["reason"] == "malformed")
        .unwrap();
    assert_eq!(
        malformed["value"].as_f64(),
        Some(dropped(values, "malformed"))
    );
    assert_eq!(family("urdma_lookup_duration_seconds")["type"], "histogram");
}

/// The metric names a PromQL expression mentions.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("urdma_") {
        let word: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + word.len()..];
        names.push(word);
    }
    names
}

#[test]
fn the_example_alerts_and_dashboard_use_only_metrics_the_provider_writes() {
    let rules = "docs/examples/urdma-alerts.yml";
    promtool(&["check", "rules", rules]);
    // Each alert fires on what it is about and on nothing healthy.
    promtool(&["test", "rules", "tests/prometheus/urdma-alerts.test.yml"]);

    let host = Host::start(HostConfig::default());
    let (families, written) = written_metrics(&host);
    let mut exprs = rule_expressions(&read_example(rules));
    exprs.extend(dashboard_queries(
        "docs/examples/urdma-grafana-dashboard.json",
    ));

    let mut used = 0;
    for expr in &exprs {
        for name in metric_names(expr) {
            assert!(
                written.contains(&name),
                "`{name}` (in `{expr}`) is not a metric the provider writes: {written:?}"
            );
            used += 1;
        }
    }
    assert!(
        used >= 40,
        "{used} metric names found in the rules and dashboard"
    );
    // Every family the provider writes is on the dashboard.
    let all: String = exprs.concat();
    for f in &families {
        assert!(all.contains(&f.name), "{} is on no panel", f.name);
    }
}

/// `promtool ARGS` in the source tree, which must succeed.
fn promtool(args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("promtool (apt-get install prometheus): {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
}

/// The file at `path` in the source tree.
fn read_example(path: &str) -> String {
    fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The families a running provider on `host` writes, and the names of
/// their series (a histogram's with their suffixes).
fn written_metrics(host: &Host) -> (Vec<ibacm_urdma::metrics::Family>, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while host.metrics_file().is_empty() {
        assert!(Instant::now() < deadline, "{}", host.diagnostics());
        std::thread::sleep(Duration::from_millis(100));
    }
    let families = ibacm_urdma::metrics::parse(&host.metrics_file()).unwrap();
    let written = families
        .iter()
        .flat_map(|f| {
            let suffixes: &[&str] = match f.kind {
                ibacm_urdma::metrics::Kind::Histogram => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            suffixes
                .iter()
                .map(|s| format!("{}{s}", f.name))
                .collect::<Vec<_>>()
        })
        .collect();
    (families, written)
}

/// The alerting rules' expressions (not their annotations, which name
/// options), each joined from its lines.
fn rule_expressions(text: &str) -> Vec<String> {
    let mut exprs = Vec::new();
    let mut in_expr = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(e) = t.strip_prefix("expr:") {
            in_expr = true;
            exprs.push(e.to_string());
        } else if in_expr && !t.contains(':') {
            exprs.last_mut().unwrap().push_str(t);
        } else {
            in_expr = false;
        }
    }
    exprs
}

/// The queries of the dashboard at `dash`: its panels' targets and its
/// variables.
fn dashboard_queries(dash: &str) -> Vec<String> {
    let json: serde_json::Value = serde_json::from_str(&read_example(dash)).unwrap();
    let panels = json["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "{dash}: {} panels", panels.len());
    let mut exprs = Vec::new();
    for p in panels {
        for t in p["targets"].as_array().expect("targets") {
            exprs.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    exprs.push(json["templating"]["list"][1]["definition"].to_string());
    exprs
}
