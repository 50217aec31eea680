//! What a run counted, and the one summary line it ends with.

use std::collections::BTreeMap;
use std::time::Duration;

/// Status codes that always get a `status_N=` key, so the summary's keys do
/// not depend on what happened (4 is unused by the daemon).
pub const KNOWN_STATUSES: [u8; 9] = [1, 2, 3, 5, 6, 7, 8, 9, 10];

#[derive(Default)]
pub struct Stats {
    pub requests: u64,
    pub replies: u64,
    pub timeouts: u64,
    pub lost: u64,
    pub late: u64,
    pub duplicates: u64,
    pub unknown_tid: u64,
    pub bad_replies: u64,
    pub ok: u64,
    pub ok_without_path: u64,
    pub out_of_order: u64,
    pub by_status: BTreeMap<u8, u64>,
    pub disconnects: u64,
    pub connect_errors: u64,
    pub abandoned: u64,
    pub latencies_us: Vec<u32>,
}

impl Stats {
    pub fn merge(&mut self, o: Stats) {
        self.requests += o.requests;
        self.replies += o.replies;
        self.timeouts += o.timeouts;
        self.lost += o.lost;
        self.late += o.late;
        self.duplicates += o.duplicates;
        self.unknown_tid += o.unknown_tid;
        self.bad_replies += o.bad_replies;
        self.ok += o.ok;
        self.ok_without_path += o.ok_without_path;
        self.out_of_order += o.out_of_order;
        for (s, n) in o.by_status {
            *self.by_status.entry(s).or_default() += n;
        }
        self.disconnects += o.disconnects;
        self.connect_errors += o.connect_errors;
        self.abandoned += o.abandoned;
        self.latencies_us.extend(o.latencies_us);
    }
}

pub fn percentile(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn print_summary(st: &mut Stats, unsent: u64, elapsed: Duration) {
    st.latencies_us.sort_unstable();
    let lat = &st.latencies_us;
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        st.replies as f64 / secs
    } else {
        0.0
    };
    let mut line = format!(
        "requests={} replies={} missing={} timeouts={} lost={} late={} unsent={} duplicates={} \
         unknown_tid={} bad_replies={} disconnects={} connect_errors={} out_of_order={} ok={} \
         ok_without_path={} abandoned={}",
        st.requests,
        st.replies,
        st.timeouts + st.lost,
        st.timeouts,
        st.lost,
        st.late,
        unsent,
        st.duplicates,
        st.unknown_tid,
        st.bad_replies,
        st.disconnects,
        st.connect_errors,
        st.out_of_order,
        st.ok,
        st.ok_without_path,
        st.abandoned,
    );
    for s in KNOWN_STATUSES {
        line += &format!(" status_{s}={}", st.by_status.get(&s).copied().unwrap_or(0));
    }
    for (s, n) in &st.by_status {
        if *s != 0 && !KNOWN_STATUSES.contains(s) {
            line += &format!(" status_{s}={n}");
        }
    }
    line += &format!(
        " elapsed_s={secs:.3} rate_per_s={rate:.0} p50_us={} p90_us={} p99_us={} max_us={}",
        percentile(lat, 50.0),
        percentile(lat, 90.0),
        percentile(lat, 99.0),
        lat.last().copied().unwrap_or(0),
    );
    println!("{line}");
}
