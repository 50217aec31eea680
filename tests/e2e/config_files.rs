//! The options and hosts files: each mistake reported at its file and line
//! while the rest takes effect, options read as bytes, the log on stderr,
//! and hosts file changes in force without a restart.

use crate::{
    log_line, resolve_fails, start, static_config, AssertRoute, GID0, HOSTS, REMOTE, WAIT,
};
use std::time::{Duration, Instant};
use urdma_harness::{Host, HostConfig, PathInfo};

/// The 1-based number of the first line of `file` that equals `line`.
fn line_number(file: &std::path::Path, line: &str) -> usize {
    let text = std::fs::read_to_string(file).expect("read file");
    text.lines()
        .position(|l| l == line)
        .unwrap_or_else(|| panic!("`{line}` not in {}", file.display()))
        + 1
}

// 13 -----------------------------------------------------------------------

#[test]
fn malformed_hosts_line_is_reported_and_skipped() {
    let host = Host::start(static_config().hosts_file(
        "node3 fe80::5054:ff:fe12:9999 lid=9\n\
         10.0.0.4 fe80::5054:ff:fe12:zzzz\n\
         10.0.0.3 fe80::5054:ff:fe12:9999\n",
    ));
    let located = format!("urdma: {}:2: ", host.hosts_path().display());
    let line = log_line(&host, &located);
    assert!(line.ends_with("line skipped"), "{line}");
    assert!(line.contains("fe80::5054:ff:fe12:zzzz"), "{line}");
    let log = host.log();
    for good in [1, 3] {
        let other = format!("{}:{good}:", host.hosts_path().display());
        assert!(!log.contains(&other), "line {good} is fine:\n{log}");
    }

    host.acme_path(&["-f", "n", "-s", "node1", "-d", "node3"])
        .0
        .assert_route(REMOTE, GID0, "9");
    host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"])
        .0
        .assert_route(REMOTE, GID0, "9");
    resolve_fails(
        &host,
        &["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.4"],
        "No data available",
    );
}

// 15 -----------------------------------------------------------------------

#[test]
fn with_log_file_stderr_every_line_reaches_stderr_with_its_severity() {
    // What docs/systemd.md recommends under systemd, where stderr is the
    // journal: the daemon then truncates no file at its next start.
    let host = Host::start(
        static_config()
            .hosts_file(HOSTS)
            .opt("urdma_mtu 999")
            .opt("log_file stderr"),
    );
    let deadline = std::time::Instant::now() + WAIT;
    while !host.daemon_output().contains("urdma: info: hosts file ")
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = host.daemon_output();
    for line in ["urdma: info: options from ", "urdma: info: hosts file "] {
        assert!(out.contains(line), "no `{line}` on stderr:\n{out}");
    }
    assert!(
        out.lines()
            .any(|l| l.contains("urdma: error: ") && l.contains("'999'")),
        "the bad value is not an error on stderr:\n{out}"
    );
    assert!(host.raw_log().is_empty(), "{}", host.raw_log());
}

#[test]
fn bad_option_lines_are_located_and_defaults_kept() {
    let host = Host::start(
        static_config()
            .hosts_file(HOSTS)
            .opt("urdma_mtu 999")
            .opt("urdma_sl 3")
            .opt("urdma_colour blue"),
    );
    let opts = host.path("ibacm_opts.cfg");
    let mtu_line = line_number(&opts, "urdma_mtu 999");
    let colour_line = line_number(&opts, "urdma_colour blue");

    let bad_mtu = log_line(&host, &format!("urdma: {}:{mtu_line}: ", opts.display()));
    assert!(bad_mtu.contains("'999'"), "{bad_mtu}");
    assert!(bad_mtu.contains("keeping urdma_mtu 4096"), "{bad_mtu}");
    let unknown = log_line(&host, &format!("urdma: {}:{colour_line}: ", opts.display()));
    assert!(unknown.contains("urdma_colour"), "{unknown}");
    host.expect_log("urdma: urdma_mtu 4096", WAIT);
    host.expect_log("urdma: urdma_sl 3", WAIT);
    // Each line says how much it matters, whatever level the daemon
    // writes it at: a mistake is an error, the summary is detail.
    let at = |message: &str| host.log_severity(message).unwrap_or_default();
    assert_eq!(at(&format!("{}:{mtu_line}: ", opts.display())), "error");
    assert_eq!(at("options from "), "info");
    assert_eq!(at("urdma_sl 3"), "debug");
    assert!(host.daemon_alive(), "{}", host.diagnostics());

    // Served with the default MTU (4096 = 5) and the good line's SL.
    let (path, _) = host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
    path.assert_route(REMOTE, GID0, "9");
    assert_eq!(path.get("sl"), "3");
}

#[test]
fn options_are_read_as_bytes_and_a_line_about_discovery_that_cannot_be_read_keeps_it_off() {
    use std::os::unix::fs::PermissionsExt;
    let host = Host::start(HostConfig::default().opt("urdma_discovery no"));
    let key = host.path("urdma.key");
    std::fs::write(&key, "1 000102030405060708090a0b0c0d0e0f\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let key = key.display().to_string();
    let bytes = |parts: &[&[u8]]| parts.concat();

    // A Latin-1 comment (0xe9 alone is not UTF-8) used to make the
    // provider ignore every urdma_ key of the file, silently: discovery
    // then ran unauthenticated on the default port.
    host.restart(&HostConfig::default().raw_opts(&bytes(&[
        b"# r\xe9seau de test, cl\xe9 partag\xe9e\n",
        b"urdma_discovery_port 7000\nurdma_auth_key_file ",
        key.as_bytes(),
        b"\n",
    ])));
    host.expect_log(
        "urdma: discovery: authenticated, signing with key 1 of 1",
        WAIT,
    );
    host.expect_log("urdma: discovery on UDP port 7000", WAIT);
    assert!(
        !host.log().contains("ibacm_opts.cfg:"),
        "nothing to report:\n{}",
        host.log()
    );

    // A key that is not text: nothing can tell what it was meant to be
    // (here, the key file), so discovery stays off rather than run
    // unauthenticated.
    host.restart(&HostConfig::default().raw_opts(&bytes(&[
        b"urdma_auth_key_fil\xe9 ",
        key.as_bytes(),
        b"\n",
    ])));
    let opts = host.path("ibacm_opts.cfg");
    let line = std::fs::read(&opts)
        .unwrap()
        .split(|&b| b == b'\n')
        .position(|l| l.starts_with(b"urdma_auth_key_fil\xe9"))
        .unwrap()
        + 1;
    let reported = log_line(&host, &format!("urdma: {}:{line}: ", opts.display()));
    assert!(
        reported.ends_with("discovery stays off until this line is fixed"),
        "{reported}"
    );
    host.expect_log("urdma: discovery disabled", WAIT);
    assert!(
        !host.log().contains("discovery on UDP port"),
        "{}",
        host.log()
    );
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}

// 17 -----------------------------------------------------------------------

/// Polls `ib_acme ARGS` until it prints a path to `dgid` (or, with `None`,
/// fails with "No data available"); returns how long that took.
fn until_answer(host: &Host, args: &[&str], dgid: Option<&str>, since: Instant) -> Duration {
    loop {
        let (code, out) = host.acme(args);
        let path = PathInfo::parse(&out);
        let done = match dgid {
            Some(g) => code == 0 && path.0.get("dgid").map(String::as_str) == Some(g),
            None => code != 0 && out.contains("failed: No data available"),
        };
        if done {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < WAIT,
            "ib_acme {args:?} still answers the old file:\n{out}\n{}",
            host.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn hosts_file_changes_are_in_force_within_two_seconds_without_a_restart() {
    const MOVED: &str = "fe80::5054:ff:fe12:aaaa";
    const NEW: &str = "fe80::5054:ff:fe12:4444";
    let host = start();
    let by_name = ["-f", "n", "-s", "node1", "-d", "node3"];
    let by_ip = ["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"];
    let new_name = ["-f", "n", "-s", "node1", "-d", "node4"];
    host.acme_path(&by_name).0.assert_route(REMOTE, GID0, "9");
    host.acme_path(&by_ip).0.assert_route(REMOTE, GID0, "9");
    resolve_fails(&host, &new_name, "No data available");

    // Edited in place: node3 moves, 10.0.0.3 goes, node4 comes, and a
    // typo is reported at its line while the rest takes effect.
    let edited =
        "node3 fe80::5054:ff:fe12:aaaa lid=9\nnode4 fe80::5054:ff:fe12:4444\nnode5 fe80::zz\n";
    let written = Instant::now();
    std::fs::write(host.hosts_path(), edited).unwrap();
    let mut took = vec![until_answer(&host, &new_name, Some(NEW), written)];
    took.push(until_answer(&host, &by_name, Some(MOVED), written));
    took.push(until_answer(&host, &by_ip, None, written));
    host.expect_log(
        &format!(
            "urdma: {}:3: 'fe80::zz' is not a GID",
            host.hosts_path().display()
        ),
        WAIT,
    );
    // node3, 10.0.0.3, fd00::3, node4, three GIDs and LID 9.
    host.expect_log("reloaded, 2 addresses, 8 destinations changed", WAIT);

    // Replaced by rename, the way configuration tools write files.
    let tmp = host.path("hosts.new");
    std::fs::write(&tmp, HOSTS).unwrap();
    let written = Instant::now();
    std::fs::rename(&tmp, host.hosts_path()).unwrap();
    took.push(until_answer(&host, &by_ip, Some(REMOTE), written));
    took.push(until_answer(&host, &new_name, None, written));
    host.acme_path(&by_name).0.assert_route(REMOTE, GID0, "9");

    // Removed: nothing from it resolves any more.
    let written = Instant::now();
    std::fs::remove_file(host.hosts_path()).unwrap();
    took.push(until_answer(&host, &by_name, None, written));
    for (i, t) in took.iter().enumerate() {
        assert!(
            *t < Duration::from_secs(2),
            "change {i} took {t:?} to be in force: {took:?}"
        );
    }
    // The daemon's own addresses never depended on the file.
    host.acme_path(&["-f", "n", "-s", "node1", "-d", "node1"]);
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}
