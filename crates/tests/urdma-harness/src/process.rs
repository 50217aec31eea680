//! Running the commands that set hosts up and that clients are.
//!
//! A set-up command that fails panics with its output, since a test can
//! mean nothing on a half-built network. A client is killed after a
//! timeout, since a provider that never answers would otherwise hang
//! `ib_acme` or librdmacm, and with them the whole test run.

use std::fs::{self, File};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Runs a setup command, panicking with its output if it fails.
pub(crate) fn run(argv: &[&str]) {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", argv[0]));
    assert!(
        out.status.success(),
        "`{}` failed: {}{}",
        argv.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `cmd` with stdout and stderr into one file (keeps their order and
/// cannot fill a pipe), killing it after `timeout`.
pub(crate) fn run_with_timeout(
    mut cmd: Command,
    out_path: &Path,
    timeout: Duration,
) -> (i32, String) {
    let out = File::create(out_path).expect("client output file");
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out);
    let mut child = cmd.spawn().expect("spawn client");
    let deadline = Instant::now() + timeout;
    // Quick clients are seen at once; slow ones are looked at less often,
    // so that hundreds of them (the fleet bench) do not keep two cores
    // busy waking their waiters.
    let mut pause = Duration::from_millis(1);
    let code = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.code().unwrap_or(-1),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let mut text = fs::read_to_string(out_path).unwrap_or_default();
                text.push_str(&format!("\n[killed after {timeout:?}]\n"));
                return (-1, text);
            }
            Ok(None) => {
                sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => panic!("wait: {e}"),
        }
    };
    let text = fs::read_to_string(out_path).unwrap_or_default();
    let _ = fs::remove_file(out_path);
    (code, text)
}

/// `ip -n NETNS ARGS`, which must succeed.
pub(crate) fn ip_in(netns: &str, args: &[&str]) {
    let mut full = vec!["ip", "-n", netns];
    full.extend_from_slice(args);
    run(&full);
}

/// Sends SIGTERM to `child`, as `systemctl stop` does to a daemon: std
/// only sends SIGKILL, which leaves valgrind or callgrind no time to write
/// their reports.
#[allow(unsafe_code)] // kill(2)
pub fn sigterm(child: &Child) {
    // SAFETY: kill(2) takes no pointers and touches no memory of this
    // process; the pid is that of a child of ours.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
}
