//! The fleet's pictures (`--svg DIR`): how long lookups by name took in
//! each state a cluster is in, and how the survivors of a restart storm
//! followed the restarted daemons. Each run is of one state, so a run
//! keeps its distribution beside the picture (`name-lookups-STATE.txt`)
//! and draws the picture again from every state's file there: the
//! picture shows the latest run of each.

use std::fs;
use std::path::Path;
use urdma_dst::plot::{self, cdf, Axis, Chart, Join, Scale, Series};
use urdma_dst::states::State;

/// Points of a distribution kept per state: enough for a smooth curve,
/// few enough to read in a diff.
const KEPT: usize = 200;

/// Keeps this run's lookups by name (`us`, sorted) for `state`, then draws
/// `name-lookup-by-state.svg` from what `dir` holds for each state.
pub fn name_lookups(dir: &Path, state: State, hosts: usize, us: &[u64]) {
    let seconds: Vec<f64> = us.iter().map(|u| *u as f64 / 1e6).collect();
    // The p99 exactly, as the bench's table has it: the kept points are
    // too few in the tail to read it from.
    let p99 = crate::quantile(us, 0.99);
    let mut kept = format!("# {hosts} daemons on one bridge\n# p99 {p99:.6}\n");
    for (s, f) in cdf(&seconds, KEPT) {
        kept.push_str(&format!("{s:.6} {f:.4}\n"));
    }
    write(
        &dir.join(format!("name-lookups-{}.txt", state.name())),
        &kept,
    );
    let mut series = Vec::new();
    let mut runs = Vec::new();
    for s in State::ALL {
        let Ok(text) = fs::read_to_string(dir.join(format!("name-lookups-{}.txt", s.name())))
        else {
            continue;
        };
        let (run, p99, points) = parse_kept(&text);
        // Milliseconds: a lookup's time is read in them.
        let points: Vec<(f64, f64)> = points.into_iter().map(|(x, y)| (x * 1e3, y)).collect();
        let p99 = p99 * 1e3;
        let p99 = match p99 < 10.0 {
            true => format!("{p99:.1}"),
            false => plot::label(p99.round()),
        };
        let name = format!("{}, p99 {p99} ms", s.name());
        series.push(Series::new(&name, Join::Steps, points));
        runs.push(run);
    }
    runs.dedup();
    let note = match &runs[..] {
        [one] => format!("{one}, each daemon asking every other; one run per state"),
        _ => runs.join("; "),
    };
    let chart = Chart {
        title: "A lookup by name, by the state the cluster is in (real daemons)".into(),
        note,
        x: Axis::new("time to answer, ms", Scale::Log10),
        y: Axis::new("fraction of lookups answered", Scale::Linear).range(0.0, 1.0),
        series,
    };
    write(&dir.join("name-lookup-by-state.svg"), &chart.svg());
}

/// A kept distribution: its first line's description, its p99 (seconds)
/// and its points.
fn parse_kept(text: &str) -> (String, f64, Vec<(f64, f64)>) {
    let header = |key: &str| {
        text.lines()
            .filter_map(|l| l.strip_prefix("# "))
            .find_map(|l| l.strip_prefix(key))
            .map(str::to_string)
    };
    let run = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# "))
        .unwrap_or("")
        .to_string();
    let p99 = header("p99 ").and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let points = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (x, y) = l.split_once(' ')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect();
    (run, p99, points)
}

/// The restart storm over time, from the first restarted daemon's return:
/// how many restarted daemons were back (`back_ms`, since the epoch) and
/// how many survivors followed them all (`followed_ms`, since the epoch,
/// one per survivor that did).
pub fn storm(dir: &Path, hosts: usize, back_ms: &[u64], followed_ms: &[u64], interval_ms: u64) {
    let first = back_ms.iter().copied().min().unwrap_or(0);
    // Each group as a share of itself, so that 32 restarted and 224
    // survivors rise on one scale.
    let over_time = |times: &[u64], of: usize| {
        let mut t: Vec<f64> = times
            .iter()
            .map(|ms| ms.saturating_sub(first) as f64 / 1e3)
            .collect();
        t.sort_by(f64::total_cmp);
        let mut points = vec![(0.0, 0.0)];
        let share = |i: usize| 100.0 * (i + 1) as f64 / of.max(1) as f64;
        points.extend(t.iter().enumerate().map(|(i, s)| (*s, share(i))));
        points
    };
    let (restarted, survivors) = (back_ms.len(), hosts - back_ms.len());
    let chart = Chart {
        title: format!("Restart storm: {restarted} of {hosts} daemons back at once, new GIDs"),
        note: format!(
            "each survivor asks for each restarted daemon every {:.2} s",
            interval_ms as f64 * restarted as f64 / 4.0 / 1e3
        ),
        x: Axis::new(
            "seconds since the first restarted daemon was back",
            Scale::Linear,
        ),
        y: Axis::new("per cent of the group", Scale::Linear).range(0.0, 100.0),
        series: vec![
            Series::new(
                &format!("back, of {restarted}"),
                Join::Steps,
                over_time(back_ms, restarted),
            ),
            Series::new(
                &format!("followed, of {survivors}"),
                Join::Steps,
                over_time(followed_ms, survivors),
            ),
        ],
    };
    write(&dir.join("restart-storm.svg"), &chart.svg());
}

fn write(file: &Path, text: &str) {
    match fs::write(file, text) {
        Ok(()) => println!("drew {}", file.display()),
        Err(e) => eprintln!("{}: {e}", file.display()),
    }
}
