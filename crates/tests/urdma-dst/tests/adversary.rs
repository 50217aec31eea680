//! The adversary (`urdma_dst::sim::adversary`) beside the honest hosts of
//! a segment in every state a cluster is in (fresh, aged, joined,
//! rebooted): every attack it knows at once, then each alone, on 12 to 30
//! hosts, seeds fixed. A run that breaks a check fails the test with its
//! state, seed and the command that replays it (`cargo run -p urdma-dst --
//! adversary --state S --hosts N --seed K --attacks ...`; set
//! `URDMA_DST_TRACE_ADVERSARY=1` to read what it sent and heard).

use urdma_dst::attack::{run, Run};
use urdma_dst::sim::adversary::Attack;
use urdma_dst::states::State;

/// The segment's size for `seed`: 12 to 30 hosts.
fn hosts(seed: u64) -> usize {
    12 + (seed as usize * 7) % 19
}

/// Runs `runs`; fails with every run that broke a check.
fn all_clean(runs: Vec<Run>) {
    let total = runs.len();
    let mut failed = Vec::new();
    for r in runs {
        let report = run(&r);
        if !report.violations.is_empty() {
            failed.push(report.failure());
            continue;
        }
        // The run did what it is for: the adversary acted, and the job had
        // lookups it had to leave alone.
        let t = &report.tally;
        assert!(t.sent > 100 && t.unclaimed > 0, "{t:?}: {}", r.replay());
    }
    assert!(
        failed.is_empty(),
        "{} of {total} runs failed:\n\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}

#[test]
fn every_attack_at_once_in_every_state_changes_no_answer_and_breaks_no_bound() {
    let runs = State::ALL
        .into_iter()
        .flat_map(|state| (1..=16).map(move |seed| Run::new(state, hosts(seed), seed)))
        .collect();
    all_clean(runs);
}

#[test]
fn each_attack_alone_in_every_state_changes_no_answer_and_breaks_no_bound() {
    let mut runs = Vec::new();
    for attack in Attack::ALL {
        for state in State::ALL {
            for seed in [7, 8] {
                let mut r = Run::new(state, hosts(seed), seed);
                r.attacks = vec![attack];
                runs.push(r);
            }
        }
    }
    all_clean(runs);
}

#[test]
fn an_adversary_run_replays_exactly() {
    let r = Run::new(State::Rebooted, 16, 3);
    let (a, b) = (run(&r), run(&r));
    assert_eq!(
        (
            &a.tally,
            a.answered,
            a.succeeded,
            a.virtual_ms,
            &a.violations
        ),
        (
            &b.tally,
            b.answered,
            b.succeeded,
            b.virtual_ms,
            &b.violations
        )
    );
    let other = run(&Run::new(State::Rebooted, 16, 4));
    assert_ne!(a.tally, other.tally, "another seed, another run");
}
