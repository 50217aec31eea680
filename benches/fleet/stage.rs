//! Setting the fleet up in the state a job meets (`--state`): fresh (every
//! daemon started at once), aged (up longer than `urdma_addr_timeout`:
//! each daemon keeps what it hears `--aged-minutes`, and the job starts
//! 10 s past that after the last is up), joined (half the daemons start
//! 35 s after the others, past their start-up announcements) or rebooted
//! (a quarter come back with new hardware, new GIDs). Records when each
//! daemon came up, and when each restarted one went down and came back,
//! for the simulation to replay.

use crate::fleet_config::{config_of, sent};
use std::time::{Duration, Instant};
use urdma_dst::states::{State, Timeline};
use urdma_harness::{Host, Net};

/// Options every daemon of the fleet gets.
#[derive(Clone, Default)]
pub struct Options {
    /// Names each daemon holds (`host{n}`, then `host{n}-1` and on).
    pub names: usize,
    /// `urdma_*` lines for every daemon's options file.
    pub opts: Vec<String>,
    /// The daemons' `log_level` (0, the default, unless `--log-level`: a
    /// trace of every lookup costs what the job measures).
    pub log_level: u8,
    /// Daemons that trace what they do (`log_level` 2) whatever the
    /// others do (`--trace-hosts a,b`).
    pub traced: Vec<usize>,
    /// The aged state's `urdma_addr_timeout`, in minutes (`--aged-minutes`).
    pub aged_minutes: u32,
    /// Where the pictures are drawn (`--svg DIR`), if anywhere.
    pub pictures: Option<std::path::PathBuf>,
}

/// The fleet, set up.
pub struct Staged {
    pub fleet: Vec<Host>,
    pub timeline: Timeline,
    /// How long the first start of every daemon took, all at once.
    pub up: Duration,
    /// Datagrams each daemon sent before it restarted (its metrics file
    /// starts from zero with it).
    pub sent_before: Vec<u64>,
}

/// How long the job waits after the last daemon came up: for the hosts
/// already there to announce themselves to it (within a welcome window,
/// at most a welcome period after their last), and for that to settle
/// into hints (docs/protocol.md, Name hints).
pub fn settle_after(hosts: usize) -> Duration {
    let (window, every) = ibacm_urdma::discovery::welcome_pace(hosts);
    window + every + ibacm_urdma::discovery::HINT_SETTLE + Duration::from_secs(1)
}

/// Late daemons of the joined state start this long after the first ones
/// are up.
const LATE: Duration = Duration::from_secs(35);
/// How long after the last daemon is up the aged state's job starts, past
/// its `urdma_addr_timeout`.
fn aged_after(minutes: u32) -> Duration {
    Duration::from_secs(u64::from(minutes) * 60 + 10)
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// Starts `hosts` daemons in `state`, then waits until the job may start.
pub fn stage(net: &Net, state: State, hosts: usize, o: &Options) -> Staged {
    let mut o = o.clone();
    if state == State::Aged {
        o.opts
            .push(format!("urdma_addr_timeout {}", o.aged_minutes));
    }
    let started = Instant::now();
    let (first, late): (Vec<usize>, Vec<usize>) = match state {
        State::Joined => (0..hosts).partition(|n| *n < hosts / 2),
        _ => ((0..hosts).collect(), Vec::new()),
    };
    let mut slots: Vec<Option<(Host, u64)>> = (0..hosts).map(|_| None).collect();
    for (n, h) in start_all(net, &first, &o, started) {
        slots[n] = Some(h);
    }
    let up = started.elapsed();
    let mut last_up = up;
    if !late.is_empty() {
        std::thread::sleep(LATE.saturating_sub(started.elapsed() - up));
        for (n, h) in start_all(net, &late, &o, started) {
            slots[n] = Some(h);
        }
        last_up = started.elapsed();
    }
    let (fleet, starts_ms): (Vec<Host>, Vec<u64>) =
        slots.into_iter().map(|s| s.expect("started")).unzip();
    let mut sent_before = vec![0; hosts];
    let mut restarts = Vec::new();
    if state == State::Rebooted {
        std::thread::sleep(LATE.saturating_sub(started.elapsed() - up));
        restarts = reboot_a_quarter(&fleet, &mut sent_before, &o, started);
        last_up = started.elapsed();
    }
    let wait = match state {
        State::Aged => aged_after(o.aged_minutes),
        _ => settle_after(hosts),
    };
    eprintln!(
        "{}: daemons up in {:.1} s, the last at {:.1} s; the job starts {:.1} s after it",
        state.name(),
        up.as_secs_f64(),
        last_up.as_secs_f64(),
        wait.as_secs_f64()
    );
    std::thread::sleep(wait);
    let addr_timeout = match state {
        State::Aged => ibacm_urdma::config::Lifetime::Minutes(o.aged_minutes),
        _ => ibacm_urdma::config::Config::default().addr_timeout,
    };
    let timeline = Timeline {
        starts_ms,
        restarts,
        job_at_ms: ms(started.elapsed()),
        addr_timeout,
    };
    Staged {
        fleet,
        timeline,
        up,
        sent_before,
    }
}

/// Every fourth daemon restarts on new hardware, all at once: each one's
/// (host, down at, up at), in ms since `t0`; what each sent before is kept
/// in `sent_before` (its metrics file starts from zero again).
fn reboot_a_quarter(
    fleet: &[Host],
    sent_before: &mut [u64],
    o: &Options,
    t0: Instant,
) -> Vec<(usize, u64, u64)> {
    let quarter: Vec<usize> = (0..fleet.len()).filter(|n| n % 4 == 0).collect();
    for &n in &quarter {
        sent_before[n] = sent(n);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = quarter
            .iter()
            .map(|&n| {
                let host = &fleet[n];
                s.spawn(move || {
                    let down = ms(t0.elapsed());
                    host.restart(&config_of(n, 1, o));
                    (n, down, ms(t0.elapsed()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("restart"))
            .collect()
    })
}

/// Starts the daemons `which` at once, each on the bridge; with when each
/// was up, in ms since `t0`.
fn start_all(net: &Net, which: &[usize], o: &Options, t0: Instant) -> Vec<(usize, (Host, u64))> {
    std::thread::scope(|s| {
        let handles: Vec<_> = which
            .iter()
            .map(|&n| {
                s.spawn(move || {
                    let host = Host::start_on(net, "eth0", config_of(n, 0, o));
                    (n, (host, ms(t0.elapsed())))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("start"))
            .collect()
    })
}
