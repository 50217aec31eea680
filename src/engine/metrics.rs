//! The provider's numbers as metrics (docs/man/urdma-acm.8 lists them):
//! a snapshot the runtime renders into its metrics file.

use super::counters::ERROR_REASONS;
use super::{Engine, Limits, Tables};
use crate::daemon::Daemon;
use crate::discovery::counts::{Counts, LookupStats};
use crate::discovery::Status;
use crate::metrics::{Exposition, Kind, Sample};

/// The provider's numbers, all that its metrics are made of: compared in
/// a few hundred instructions where building the metrics costs a hundred
/// thousand, so that the metrics writer of an idle provider builds
/// nothing, and built into the metrics ([`Numbers::exposition`]) with the
/// engine released.
#[derive(Clone, Debug, PartialEq)]
pub struct Numbers {
    requests: [u64; crate::daemon::COUNTERS],
    errors: [u64; ERROR_REASONS.len()],
    counts: Counts,
    tables: Tables,
    hosts: usize,
    ports: usize,
}

impl Numbers {
    /// The numbers of `e`, now.
    pub fn of<D: Daemon>(e: &Engine<D>) -> Numbers {
        Numbers {
            requests: e.requests.counters.totals(),
            errors: e.requests.counters.errors,
            counts: e.discovery.counts().clone(),
            tables: e.tables(),
            hosts: e.hosts.len(),
            ports: e.local.ports().count(),
        }
    }

    /// Every metric.
    pub fn exposition(&self) -> Exposition {
        let mut e = Exposition::default();
        e.by_label(
            "urdma_build_info",
            "Always 1: the provider's version is in the label.",
            Kind::Gauge,
            "version",
            &[(env!("CARGO_PKG_VERSION"), 1)],
        );
        e.single(
            "urdma_up",
            "1 while the provider is loaded: a file whose numbers stopped changing and that node_exporter reports old (node_textfile_mtime_seconds) is a provider that stopped.",
            Kind::Gauge,
            1,
        );
        e.single(
            "urdma_ports",
            "Ports the provider serves (InfiniBand ports with a GID, open by the daemon).",
            Kind::Gauge,
            self.ports as u64,
        );
        e.requests("urdma", &[(Vec::new(), self.requests)]);
        split_errors(&mut e, &self.errors);
        traffic(&mut e, &self.tables.discovery, &self.counts);
        lookups(&mut e, &self.counts.lookups);
        self.sizes(&mut e);
        self.limits(&mut e);
        e
    }

    /// The tables' sizes and bounds.
    fn sizes(&self, e: &mut Exposition) {
        let t = &self.tables.discovery;
        let gauges = [
            ("urdma_lookups_in_flight", "Lookups in flight.", t.lookups),
            ("urdma_lookups_max", "urdma_max_lookups.", t.max_lookups),
            (
                "urdma_probes_in_flight",
                "Queries waiting for a reply.",
                t.probes,
            ),
            (
                "urdma_requests_waiting",
                "Requests waiting for a lookup.",
                self.tables.waiting,
            ),
            (
                "urdma_bindings",
                "Addresses bound by discovery.",
                t.bindings,
            ),
            ("urdma_bindings_max", "urdma_max_learned.", t.max_bindings),
            (
                "urdma_failures_remembered",
                "Failed lookups remembered (urdma_negative_timeout).",
                t.failures,
            ),
            (
                "urdma_cache_entries",
                "Destinations in the cache.",
                self.tables.cached,
            ),
            (
                "urdma_cache_max",
                "urdma_max_cached.",
                self.tables.max_cached,
            ),
            (
                "urdma_hosts_file_addresses",
                "Addresses in the hosts file in force.",
                self.hosts,
            ),
        ];
        for (name, help, v) in gauges {
            e.single(name, help, Kind::Gauge, v as u64);
        }
    }

    /// What the tables' bounds cost.
    fn limits(&self, e: &mut Exposition) {
        let Limits {
            cache_evicted,
            bindings_evicted: learned_evicted,
            failures_evicted: failed_evicted,
            lookups_refused: refused,
            checks_skipped: skipped,
        } = self.tables.limits();
        let c = &self.counts;
        let counters = [
            (
                "urdma_cache_evicted_total",
                "Destinations evicted from the full cache.",
                cache_evicted,
            ),
            (
                "urdma_bindings_evicted_total",
                "Bindings evicted from the full table.",
                learned_evicted,
            ),
            (
                "urdma_failures_evicted_total",
                "Remembered failures evicted from the full table.",
                failed_evicted,
            ),
            (
                "urdma_lookups_refused_total",
                "Misses refused because urdma_max_lookups were in flight.",
                refused,
            ),
            (
                "urdma_checks_skipped_total",
                "Hints left unchecked because 1024 checks were in flight.",
                skipped,
            ),
            (
                "urdma_checks_unanswered_total",
                "Checks whose holder never answered; the binding was kept.",
                c.checks_unanswered,
            ),
            (
                "urdma_hints_refused_total",
                "New names not kept as hints because urdma_max_learned were kept.",
                self.tables.discovery.hints_refused,
            ),
            (
                "urdma_name_conflicts_total",
                "Names left unanswered because hosts with different GIDs confirmed them.",
                c.conflicts,
            ),
            (
                "urdma_names_disputed_total",
                "Names heard announced by two endpoints, so asked of the groups rather than of one host.",
                c.disputed_names,
            ),
        ];
        for (name, help, v) in counters {
            e.single(name, help, Kind::Counter, v);
        }
    }
}

/// `urdma_resolve_failures_total{reason="error"}`, the daemon's one error
/// counter, told apart by reason (the sum is the same).
fn split_errors(e: &mut Exposition, errors: &[u64; ERROR_REASONS.len()]) {
    let Some(f) = e
        .families
        .iter_mut()
        .find(|f| f.name == "urdma_resolve_failures_total")
    else {
        return;
    };
    let error = |s: &Sample| s.labels.iter().any(|(k, v)| k == "reason" && v == "error");
    f.samples.retain(|s| !error(s));
    f.help = "Requests answered with an error, by reason: no_data (the destination is unknown: ENODATA), timeout (no answer in time: ETIMEDOUT), no_memory (a table full: ENOMEM), invalid (a malformed request or an unknown source), no_route (no usable path to the destination), port_down (the port went down with the request waiting), other.".into();
    for (reason, n) in ERROR_REASONS.iter().zip(errors) {
        f.samples.push(Sample {
            name: f.name.clone(),
            labels: vec![("reason".into(), (*reason).into())],
            value: *n as f64,
        });
    }
}

/// Discovery's datagrams: sent, received, dropped.
fn traffic(e: &mut Exposition, status: &Status, counts: &Counts) {
    e.single(
        "urdma_discovery_up",
        "1 when the discovery sockets are open.",
        Kind::Gauge,
        u64::from(status.up),
    );
    e.seconds(
        "urdma_discovery_try_seconds",
        "How long one try of a query waits now: urdma_timeout, or up to four times it while replies have lately taken longer.",
        status.try_time,
    );
    let t = &counts.traffic;
    e.single(
        "urdma_datagrams_received_total",
        "Discovery datagrams received.",
        Kind::Counter,
        t.received,
    );
    e.by_label(
        "urdma_datagrams_sent_total",
        "Discovery datagrams sent, by kind.",
        Kind::Counter,
        "kind",
        &[
            ("unicast_query", t.unicast_queries),
            ("group_query", t.group_queries),
            ("start_query", t.start_queries),
            ("reply", t.replies),
            ("announcement", t.announcements),
        ],
    );
    let x = &counts.drops;
    e.by_label(
            "urdma_datagrams_dropped_total",
            "Discovery datagrams dropped, by reason: forged, replayed, unasked-for or malformed traffic, a clock more than 30 s off (stale_timestamp), a full replay memory, replies to this host's queries that came after it stopped waiting, or replies left out by urdma_reply_rate.",
            Kind::Counter,
            "reason",
            &[
                ("malformed", x.malformed),
                ("unsolicited", x.unsolicited),
                ("late", x.late),
                ("wrong_source", x.wrong_source),
                ("own", x.own),
                ("unauthenticated", x.unauthenticated),
                ("replayed", x.replayed),
                ("stale_timestamp", x.stale),
                ("replay_memory_full", x.replay_full),
                ("rate_limited", x.rate_limited),
            ],
        );
}

/// Lookups by discovery and names asked of the system's resolver.
fn lookups(e: &mut Exposition, s: &LookupStats) {
    e.histograms(
        "urdma_lookup_duration_seconds",
        "Lookups by discovery, from the miss to their end, by result.",
        "result",
        &[("resolved", &s.resolved), ("failed", &s.failed)],
    );
    e.by_label(
        "urdma_nss_lookups_total",
        "Names asked of the system's resolver (urdma_name_lookup nss), by result: found, not_found (no such name, or no address), error (the resolver failed: a DNS outage, not an answer).",
        Kind::Counter,
        "result",
        &[
            ("found", s.nss_asked - s.nss_failed),
            ("not_found", s.nss_failed - s.nss_errors),
            ("error", s.nss_errors),
        ],
    );
}
