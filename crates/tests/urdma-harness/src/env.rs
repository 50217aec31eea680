//! What the machine must give the tests, and how slow it makes them.
//!
//! Root is checked loudly rather than skipped: CI runs the tests as root,
//! so a quiet skip would hide a broken CI setup. Under valgrind every
//! daemon is 20-50 times slower; the harness stretches its own waits for
//! that, and only those, so that a test's bounds on the provider's timing
//! still mean what they say.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Suppressions for what memcheck reports in code that is not ours (the
/// daemon, libc), kept in the repository so a run is reproducible; relative
/// to the workspace root.
const VALGRIND_SUPPRESSIONS: &str = "scripts/memcheck.supp";

/// Whether daemons run under valgrind memcheck (`URDMA_TEST_VALGRIND=1`).
pub fn under_valgrind() -> bool {
    std::env::var_os("URDMA_TEST_VALGRIND").is_some_and(|v| v == "1")
}

/// How much slower a daemon is than normal: memcheck makes it 20-50 times
/// slower, which the harness's waits must allow for.
pub fn slowdown() -> u32 {
    if under_valgrind() {
        30
    } else {
        1
    }
}

/// `d`, stretched by `slowdown()`: for waits on the daemon, never for the
/// bounds a test asserts about the provider's timing.
pub fn scaled(d: Duration) -> Duration {
    d * slowdown()
}

/// Panics with a clear message unless running as root: these tests need
/// namespaces and mounts, and CI runs them as root, so skipping quietly would
/// hide a broken CI setup.
pub fn require_root() {
    let uid = fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    assert_eq!(
        uid, 0,
        "end-to-end ibacm tests need root (network namespaces, bind mounts); run them as root"
    );
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A name unique across the tests of this process and concurrent processes.
pub(crate) fn unique(prefix: &str) -> String {
    crate::interrupt::park_if_stopping();
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// `valgrind` and its options, to go before the daemon's argv. Only
/// definite leaks count as errors: the daemon exits without freeing what
/// it still reaches, which is not a leak. `%p` keeps the logs of restarted
/// daemons apart.
pub(crate) fn valgrind_prefix() -> Vec<String> {
    let dir = std::env::var_os("URDMA_TEST_VALGRIND_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    fs::create_dir_all(&dir).expect("create the valgrind log dir");
    // This crate lives in crates/tests/urdma-harness of the workspace.
    let supp = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(3)
        .expect("the workspace root")
        .join(VALGRIND_SUPPRESSIONS);
    let mut v: Vec<String> = [
        "valgrind",
        "--tool=memcheck",
        "--leak-check=full",
        "--show-leak-kinds=definite",
        "--errors-for-leak-kinds=definite",
        "--track-origins=yes",
        "--num-callers=40",
        "--xml=yes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!(
        "--xml-file={}",
        dir.join(format!("memcheck.{}.%p.xml", std::process::id()))
            .display()
    ));
    v.push(format!(
        "--log-file={}",
        dir.join(format!("memcheck.{}.%p.log", std::process::id()))
            .display()
    ));
    if supp.is_file() {
        v.push(format!("--suppressions={}", supp.display()));
    }
    v
}
