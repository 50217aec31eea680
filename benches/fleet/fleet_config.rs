//! What each daemon of the fleet is (its NIC, addresses, names and
//! options) and what its metrics file says it did.

use crate::stage::Options;
use ibacm_urdma::metrics::parse;
use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;
use std::time::Duration;
use urdma_harness::{Host, HostConfig};

/// Host `n`'s NIC; a restart with new hardware is generation 1.
pub fn mac_of(n: usize, generation: u8) -> [u8; 6] {
    [0x52, 0x54, 0x00, generation, (n >> 8) as u8 | 0x10, n as u8]
}

pub fn ip4(n: usize) -> String {
    format!("10.0.{}.{}", n / 250, n % 250 + 1)
}

/// The names host `n` holds: `host{n}`, then `host{n}-1` and on.
pub fn names(n: usize, count: usize) -> Vec<String> {
    (0..count.max(1))
        .map(|i| match i {
            0 => format!("host{n}"),
            i => format!("host{n}-{i}"),
        })
        .collect()
}

/// Where daemon `n` writes its metrics: on tmpfs, as `/run` is on a real
/// host (the harness's run directories are on the disk of its temporary
/// directory, where 256 files renamed every second cost the kernel a tenth
/// of the machine).
pub fn metrics_file(n: usize) -> PathBuf {
    metrics_dir().join(format!("host{n}.prom"))
}

fn metrics_dir() -> PathBuf {
    PathBuf::from(format!("/dev/shm/urdma-fleet-{}", std::process::id()))
}

/// The metrics directory, made now and removed when dropped.
pub struct MetricsDir;

impl MetricsDir {
    pub fn new() -> MetricsDir {
        fs::create_dir_all(metrics_dir()).expect("/dev/shm");
        MetricsDir
    }
}

impl Drop for MetricsDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(metrics_dir());
    }
}

pub fn config_of(n: usize, generation: u8, o: &Options) -> HostConfig {
    let m = mac_of(n, generation);
    let mac = m.map(|b| format!("{b:02x}")).join(":");
    let (ip4, ip6) = (ip4(n), format!("fd00::{:x}", n + 1));
    let mut lines = vec![
        format!("{ip4} urdma0 1 default"),
        format!("{ip6} urdma0 1 default"),
    ];
    lines.extend(
        names(n, o.names)
            .iter()
            .map(|h| format!("{h} urdma0 1 default")),
    );
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let mut cfg = HostConfig::default()
        .log_level(if o.traced.contains(&n) {
            2
        } else {
            o.log_level
        })
        // A daemon restarted while 224 others ask at four times the storm's
        // rate took longer than the harness's default 10 s to open its
        // socket on two cores; what the storm measures starts only once it
        // is up.
        .start_timeout(Duration::from_secs(120))
        .ip_addrs(&[&format!("{ip4}/16"), &format!("{ip6}/64")])
        .addr_lines(&lines)
        .sim_config(&format!(
            "device urdma0\n  mac {mac}\n  node_desc URDMA Virtual HCA\n  port 1\n"
        ));
    for line in &o.opts {
        cfg = cfg.opt(line);
    }
    cfg.opt(&format!("urdma_metrics_file {}", metrics_file(n).display()))
}

/// The samples of metric `name` in the metrics file of daemon `n`, by what
/// their name adds to the family's (a histogram's `_sum`, `_count`, ...)
/// and their labels.
pub fn samples(n: usize, name: &str) -> Vec<(String, f64)> {
    let text = fs::read_to_string(metrics_file(n)).unwrap_or_default();
    parse(&text)
        .unwrap_or_default()
        .iter()
        .filter(|f| f.name == name)
        .flat_map(|f| &f.samples)
        .map(|s| {
            let labels: Vec<String> = s.labels.iter().map(|(_, v)| v.clone()).collect();
            (
                format!("{}{}", &s.name[name.len()..], labels.join(",")),
                s.value,
            )
        })
        .collect()
}

/// Datagrams the provider of daemon `n` says it sent.
pub fn sent(n: usize) -> u64 {
    samples(n, "urdma_datagrams_sent_total")
        .iter()
        .map(|(_, v)| *v as u64)
        .sum()
}

/// The lookups daemon `n`'s provider made, and the seconds they took
/// inside it in all (`urdma_lookup_duration_seconds`).
pub fn lookup_time(n: usize) -> (u64, f64) {
    let s = samples(n, "urdma_lookup_duration_seconds");
    let sum = |what: &str| -> f64 {
        s.iter()
            .filter(|(k, _)| k.starts_with(what))
            .map(|(_, v)| *v)
            .sum()
    };
    (sum("_count") as u64, sum("_sum"))
}

/// Datagrams the kernel of `host`'s namespace dropped for a full socket
/// receive buffer, IPv4 and IPv6.
pub fn rcvbuf_errors(host: &Host) -> u64 {
    let (_, text) = host.exec(&["cat", "/proc/net/snmp", "/proc/net/snmp6"]);
    let udp: Vec<&str> = text.lines().filter(|l| l.starts_with("Udp:")).collect();
    let v4_errors = match udp[..] {
        [names, values, ..] => names
            .split_whitespace()
            .position(|n| n == "RcvbufErrors")
            .and_then(|i| values.split_whitespace().nth(i))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        _ => 0,
    };
    let v6_errors: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Udp6RcvbufErrors"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    v4_errors + v6_errors
}

/// Metric `name` summed over the daemons `hosts`, per label set.
pub fn totals(hosts: impl IntoIterator<Item = usize>, name: &str) -> BTreeMap<String, u64> {
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    for (k, v) in hosts.into_iter().flat_map(|n| samples(n, name)) {
        *sum.entry(k).or_default() += v as u64;
    }
    sum
}

/// `totals` as text, less `before` (counters read earlier), where not 0.
pub fn show_totals(sum: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = sum
        .iter()
        .map(|(k, v)| (k, v.saturating_sub(before.get(k).copied().unwrap_or(0))))
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| match k.as_str() {
            "" => v.to_string(),
            k => format!("{k} {v}"),
        })
        .collect();
    parts.join(", ")
}

/// Metric `name` summed over the `hosts` daemons, per label set, where not
/// 0.
pub fn fleet_totals(hosts: usize, name: &str) -> String {
    show_totals(&totals(0..hosts, name), &BTreeMap::new())
}
