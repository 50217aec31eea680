//! A test or bench stopped by SIGTERM (`timeout`, CI) or SIGINT (Ctrl-C)
//! removes everything it made: a run of this file's helper, in a process
//! of its own with two daemons up, is signalled, and nothing of it may be
//! left: no network namespace, no temporary directory, no daemon. Needs
//! root and `cargo build --workspace`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use urdma_harness::interrupt::{made_by, running_in, Made};
use urdma_harness::nodes::Node;
use urdma_harness::{KeyFile, Net};

/// Two hosts with their daemons, a key file, then waiting to be stopped.
#[test]
#[ignore = "run by the tests below, in a process of its own"]
fn a_run_to_interrupt() {
    if std::env::var_os("URDMA_INTERRUPT_ME").is_none() {
        return;
    }
    let net = Net::new();
    let _a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    let _key = KeyFile::new("interrupt", "1 00112233445566778899aabbccddeeff\n", 0o600);
    println!("ready");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn interrupted_by(signal: i32) {
    urdma_harness::require_root();
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "a_run_to_interrupt", "--ignored", "--nocapture"])
        .env("URDMA_INTERRUPT_ME", "1")
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the helper");
    let pid = child.id();
    let stdout = child.stdout.take().expect("its stdout");
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|l| l == "ready");
    assert!(ready, "the helper never got its daemons up");
    let made = made_by(pid);
    let daemons: Vec<String> = made
        .namespaces
        .iter()
        .flat_map(|ns| running_in(ns))
        .collect();
    assert_eq!(
        (made.namespaces.len(), made.dirs.len()),
        (3, 3),
        "3 namespaces (2 hosts, the network), 3 directories (2 hosts, the key): {made:?}"
    );
    assert!(daemons.len() >= 2, "two daemons at least: {daemons:?}");

    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "still running after signal {signal}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(128 + signal), "{status:?}");
    assert_eq!(made_by(pid), Made::default(), "left behind");
    let alive: Vec<&String> = daemons
        .iter()
        .filter(|p| {
            fs::read_to_string(format!("/proc/{p}/status")).is_ok_and(|s| !s.contains("State:\tZ"))
        })
        .collect();
    assert!(alive.is_empty(), "still running: {alive:?}");
}

#[test]
fn sigterm_removes_every_namespace_directory_and_daemon() {
    interrupted_by(libc::SIGTERM);
}

#[test]
fn sigint_removes_every_namespace_directory_and_daemon() {
    interrupted_by(libc::SIGINT);
}
