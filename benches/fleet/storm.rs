//! The restart storm (`--restart R`): after the job, R daemons restart at
//! once on new hardware (new GIDs, killed: nothing withdrawn) while every
//! other keeps asking for them, and each survivor is timed until its
//! answers all name the new GIDs, from when each restarted daemon's socket
//! appeared. It also prints where the storm's datagrams went.

use crate::fleet_config::{config_of, ip4, mac_of, show_totals, totals};
use crate::machine;
use crate::pictures;
use crate::quantile;
use crate::stage::Options;
use ibacm_urdma::discovery::eui64_gid;
use std::collections::BTreeMap;
use std::fs;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use urdma_harness::load::verbose_timeline;
use urdma_harness::Host;

/// A survivor's answers: destination, the GID answered (`-`: an error),
/// when (ms since the epoch).
type Timeline = Vec<(String, String, u64)>;

const FOLLOW_BOUND: Duration = Duration::from_secs(3);

/// The counters that say where a storm's traffic went.
const COUNTED: [&str; 3] = [
    "urdma_datagrams_sent_total",
    "urdma_datagrams_received_total",
    "urdma_datagrams_dropped_total",
];

/// `COUNTED` of the daemons `hosts`, summed per label set.
fn traffic(hosts: std::ops::Range<usize>) -> Vec<BTreeMap<String, u64>> {
    COUNTED.iter().map(|m| totals(hosts.clone(), m)).collect()
}

/// The first `restart` daemons restart at once with new GIDs; every other
/// daemon asks for them by address, each of its four connections one
/// request every `interval_ms`, until all its answers name the new GIDs.
/// Prints how long the survivors took.
pub fn storm(fleet: &[Host], restart: usize, interval_ms: u64, o: &Options) {
    let hosts = fleet.len();
    let gone: Vec<usize> = (0..restart).collect();
    let dests: Vec<String> = gone.iter().map(|&d| ip4(d)).collect();
    let gids_of = |generation: u8| -> Vec<String> {
        gone.iter()
            .map(|&d| eui64_gid(mac_of(d, generation)).to_string())
            .collect()
    };
    let (old_gids, new_gids) = (gids_of(0), gids_of(1));
    let before = traffic(restart..hosts);
    let marks = machine::log_marks(&fleet[restart..]);
    let cpu = machine::CpuWatch::start();
    let (timelines, back_ms) = ask_through_restarts(fleet, restart, &dests, interval_ms, o);
    let follow: Vec<(Option<Slowest>, [u64; 2])> = timelines
        .iter()
        .map(|timeline| {
            (
                followed_after(timeline, &dests, &new_gids, &back_ms),
                gone_after(timeline, &dests, &old_gids, &back_ms),
            )
        })
        .collect();
    // Until the metrics files are rewritten (every second).
    std::thread::sleep(Duration::from_millis(1500));
    print_follow(&follow, restart);
    print_slowest(&follow, restart, &o.traced);
    print_machine(cpu, &follow, &back_ms);
    if let Some(dir) = &o.pictures {
        let followed: Vec<u64> = follow
            .iter()
            .filter_map(|(s, _)| s.map(|s| back_ms[s.dest] + s.followed_ms))
            .collect();
        pictures::storm(dir, hosts, &back_ms, &followed, interval_ms);
    }
    machine::print_late(
        machine::late_since(&fleet[..restart], None),
        machine::late_since(&fleet[restart..], Some(&marks)),
    );
    // Where the storm's traffic went: the survivors' counters from before
    // the restarts, the restarted daemons' since they came back.
    let none = BTreeMap::new();
    let (survivors, restarted) = (traffic(restart..hosts), traffic(0..restart));
    for (i, metric) in COUNTED.iter().enumerate() {
        println!(
            "{metric}: survivors {}; restarted {}\n",
            show_totals(&survivors[i], &before[i]),
            show_totals(&restarted[i], &none)
        );
    }
}

/// Every survivor asks for the restarted ones (`dests`) in a steady
/// trickle, on four connections one every `interval_ms` each (160 ms:
/// every one of them about every 1.3 s; a connection waiting for a lookup
/// holds up a quarter of them), from before the restart until well after,
/// and notes when each answer came: one load generator each, so that
/// starting processes does not count. (A connection per restarted daemon,
/// 7,168 at 256 daemons, was more than the machine could start.) Two
/// seconds in, the first `restart` daemons restart. Each survivor's
/// answers, and when each restarted daemon was back (ms since the epoch).
fn ask_through_restarts(
    fleet: &[Host],
    restart: usize,
    dests: &[String],
    interval_ms: u64,
    o: &Options,
) -> (Vec<Timeline>, Vec<u64>) {
    std::thread::scope(|s| {
        let asking: Vec<_> = fleet[restart..]
            .iter()
            .map(|host| s.spawn(move || trickle(host, dests, interval_ms)))
            .collect();
        std::thread::sleep(Duration::from_secs(2));
        let back_ms = restart_all(&fleet[..restart], o);
        let timelines = asking
            .into_iter()
            .map(|h| verbose_timeline(&h.join().expect("survivor")))
            .collect();
        (timelines, back_ms)
    })
}

/// One survivor's load generator: `dests` by address for 25 s; its
/// verbose output.
fn trickle(host: &Host, dests: &[String], interval_ms: u64) -> String {
    let file = host.path("dests-restarted");
    fs::write(&file, dests.join("\n") + "\n").expect("dest file");
    let interval = interval_ms.to_string();
    let args = [
        "-f",
        "i",
        "--dest-file",
        file.to_str().unwrap(),
        "-c",
        "4",
        "--duration",
        "25",
        "--interval-ms",
        &interval,
        "--timeout",
        "10",
        "--verbose",
    ];
    host.load(&args, Duration::from_secs(120)).1
}

/// Restarts `gone` at once on new hardware: when each was back (they come
/// back over seconds: a restart waits for the old daemon to die), as when
/// its socket appeared, which the harness, polling on a machine with no
/// idle time, sees some time later (printed).
fn restart_all(gone: &[Host], o: &Options) -> Vec<u64> {
    let (back_ms, seen_ms): (Vec<u64>, Vec<u64>) = std::thread::scope(|r| {
        let restarting: Vec<_> = gone
            .iter()
            .enumerate()
            .map(|(d, host)| {
                r.spawn(move || {
                    host.restart(&config_of(d, 1, o));
                    let seen = epoch_ms(SystemTime::now());
                    let made = fs::metadata(host.socket()).and_then(|m| m.modified());
                    (made.map_or(seen, epoch_ms), seen)
                })
            })
            .collect();
        restarting
            .into_iter()
            .map(|h| h.join().expect("restart"))
            .unzip()
    });
    let lag: Vec<u64> = seen_ms
        .iter()
        .zip(&back_ms)
        .map(|(s, b)| s - b.min(s))
        .collect();
    println!(
        "restarted daemons' sockets seen by the harness {} ms (mean), {} ms (most) after they \
         appeared\n",
        lag.iter().sum::<u64>() / lag.len().max(1) as u64,
        lag.iter().max().unwrap_or(&0)
    );
    back_ms
}

/// How busy the machine was from the first restarted daemon's return
/// (`back_ms`) to the last survivor's following: when its slowest
/// destination's new GID came for good.
fn print_machine(cpu: machine::CpuWatch, follow: &[(Option<Slowest>, [u64; 2])], back_ms: &[u64]) {
    let first_back = back_ms.iter().copied().min().unwrap_or(0);
    let last_followed = follow
        .iter()
        .filter_map(|(s, _)| s.map(|s| back_ms[s.dest] + s.followed_ms))
        .max()
        .unwrap_or(first_back);
    cpu.print(first_back, last_followed);
}

pub fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The storm's table: how long the survivors took to follow the `restart`
/// daemons (`follow`, one per survivor: when it followed, and how many of
/// its answers after a host was back named the old GID, of how many).
fn print_follow(follow: &[(Option<Slowest>, [u64; 2])], restart: usize) {
    let survivors = follow.len();
    let mut took: Vec<u64> = follow
        .iter()
        .filter_map(|(d, _)| *d)
        .map(|d| d.followed_ms * 1000)
        .collect();
    let [stale, answers] = follow
        .iter()
        .fold([0, 0], |[s, a], (_, [s1, a1])| [s + s1, a + a1]);
    took.sort_unstable();
    println!(
        "## restart storm: {restart} daemons back at once with new GIDs, {survivors} survivors \
         asking\n"
    );
    println!("| | |\n|---|---:|");
    println!(
        "| survivors whose answers all name the new GIDs | {} of {survivors} |",
        took.len()
    );
    if !took.is_empty() {
        for (what, q) in [("p50", 0.5), ("p99", 0.99), ("last", 1.0)] {
            println!("| followed, {what} | {:.2} s |", quantile(&took, q));
        }
    }
    println!("| answers after a host was back naming its old GID | {stale} of {answers} |");
    println!(
        "| within the bound ({:.0} s) | {} |\n",
        FOLLOW_BOUND.as_secs_f64(),
        took.len() == survivors
            && took
                .last()
                .is_none_or(|us| *us <= FOLLOW_BOUND.as_micros() as u64)
    );
}

/// The survivor that followed last, and each traced one (`--trace-hosts`),
/// with the restarted daemon it followed last: where a trace of the two
/// shows the seconds.
fn print_slowest(follow: &[(Option<Slowest>, [u64; 2])], restart: usize, traced: &[usize]) {
    let survivors = || {
        follow
            .iter()
            .enumerate()
            .filter_map(|(i, (s, _))| s.map(|s| (restart + i, s)))
    };
    let last = survivors().max_by_key(|(_, s)| s.followed_ms);
    let shown = survivors().filter(|(h, _)| traced.contains(h));
    for (what, (host, s)) in last
        .map(|l| ("slowest", l))
        .into_iter()
        .chain(shown.map(|t| ("traced", t)))
    {
        println!(
            "{what}: host {host} following host {}: its last other answer at {} ms, the new \
             GID for good at {} ms after that host's socket appeared",
            s.dest,
            s.last_other_ms.map_or("-".to_string(), |ms| ms.to_string()),
            s.followed_ms
        );
    }
    println!();
}

/// Of the answers (`timeline`) that came after their destination was back
/// (`back_ms`), how many named the GID it had before (`old`), and how many
/// there were: answers that would send traffic to hardware gone.
fn gone_after(
    timeline: &[(String, String, u64)],
    dests: &[String],
    old: &[String],
    back_ms: &[u64],
) -> [u64; 2] {
    let mut counts = [0, 0];
    for ((d, g), back) in dests.iter().zip(old).zip(back_ms) {
        for (_, gid, _) in timeline.iter().filter(|(x, _, at)| x == d && at > back) {
            counts[0] += u64::from(gid == g);
            counts[1] += 1;
        }
    }
    counts
}

/// How a survivor followed its slowest destination: which (an index of
/// `dests`), and when, in ms after that one was back, its last answer
/// that did not name the new GID came (if one did) and its first that
/// did for good.
#[derive(Clone, Copy, Default)]
struct Slowest {
    dest: usize,
    last_other_ms: Option<i64>,
    followed_ms: u64,
}

/// How long after each of `dests` was back (`back_ms`) a survivor's
/// answers (`timeline`) named its new GID for good: the first answer after
/// the last one that did not (an old GID or a failure); the longest of
/// those. `None` if some destination never had its new GID in the end.
fn followed_after(
    timeline: &[(String, String, u64)],
    dests: &[String],
    new: &[String],
    back_ms: &[u64],
) -> Option<Slowest> {
    let mut slowest = Slowest::default();
    for (i, ((d, g), &back)) in dests.iter().zip(new).zip(back_ms).enumerate() {
        let answers: Vec<&(String, String, u64)> =
            timeline.iter().filter(|(dest, _, _)| dest == d).collect();
        let last_other = answers.iter().rposition(|(_, gid, _)| gid != g);
        let first_new = match last_other {
            Some(i) => answers.get(i + 1)?,
            None => answers.first()?,
        };
        let followed_ms = first_new.2.saturating_sub(back);
        if followed_ms >= slowest.followed_ms {
            slowest = Slowest {
                dest: i,
                last_other_ms: last_other.map(|o| answers[o].2 as i64 - back as i64),
                followed_ms,
            };
        }
    }
    Some(slowest)
}
