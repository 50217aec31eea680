//! `urdma-acm check-config` on good and bad options, hosts and key files:
//! each problem at its file and line, in the words the provider logs.

use crate::{run, Scratch};
use std::fs;

#[test]
fn check_config_accepts_the_shipped_sample() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/ibacm.conf");
    let scratch = Scratch::new("sample");
    // The sample's hosts file path is the system one; point it at the
    // shipped example instead, as an operator installing both would.
    let hosts = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/examples/urdma_hosts");
    let text = fs::read_to_string(sample).unwrap() + &format!("urdma_hosts_file {hosts}\n");
    let opts = scratch.write("ibacm_opts.cfg", &text);
    let (code, out, err) = run(&["check-config", &opts]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out,
        format!("{opts}: no problems; hosts file {hosts}: 3 addresses\n")
    );
}

#[test]
fn check_config_prints_every_problem_at_file_and_line() {
    let scratch = Scratch::new("bad");
    // Latin-1 bytes in comments are fine; in a binding they are a bad line.
    let hosts = scratch.write(
        "hosts",
        b"# ADDRESS GID (r\xe9seau)\nnode2 fe80::2 lid=7\nnode3 fe80::zz\n10.0.0.4\n\
          node5 fe80::5 colour=red\nn\xf6de6 fe80::6\n",
    );
    let mut opts = b"# urdma_mtu 1 is a comment, caf\xe9\nprovider urdma default\nurdma_mtu 4097\n\
                     urdma_colour blue\n"
        .to_vec();
    opts.extend_from_slice(
        format!("urdma_hosts_file {hosts}\nurdma_retries\nlog_level 9\n").as_bytes(),
    );
    let opts = scratch.write("opts.cfg", opts);
    let (code, out, err) = run(&["check-config", &opts]);
    assert_eq!(code, 1, "{out}{err}");
    let want = format!(
        "\
{opts}:3: bad value '4097' for urdma_mtu: expected 256, 512, 1024, 2048 or 4096; keeping urdma_mtu 4096
{opts}:4: unknown key 'urdma_colour' (known: {known}); discovery stays off until this line is fixed
{opts}:6: 'urdma_retries' has no value; keeping urdma_retries 2
{hosts}:3: 'fe80::zz' is not a GID (expected IPv6 notation, e.g. fe80::1); line skipped
{hosts}:4: no GID after '10.0.0.4'; line skipped
{hosts}:5: unknown field 'colour=red' (expected lid=N); line skipped
{hosts}:6: not valid UTF-8 text (byte 0xf6 at column 2); line skipped
",
        known = ibacm_urdma::config::KEYS.join(", ")
    );
    assert_eq!(out, want);
    assert_eq!(err, "urdma-acm: 7 problem(s) found\n");
    // Word for word what the provider logs for the same files.
    let (_, provider) = ibacm_urdma::config::Config::load(std::path::Path::new(&opts));
    let hosts_read = ibacm_urdma::config::reload::read_hosts(std::path::Path::new(&hosts));
    let logged: String = provider
        .iter()
        .chain(&hosts_read.problems)
        .map(|d| format!("{d}\n"))
        .collect();
    assert_eq!(out, logged);

    // As JSON: the same problems, split into their parts, the same status.
    let (code, json, err) = run(&["check-config", "--json", &opts]);
    assert_eq!(code, 1, "{json}{err}");
    let j: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(j["ok"], false);
    assert_eq!(j["file"], opts.as_str());
    let problems = j["problems"].as_array().unwrap();
    let again: String = problems
        .iter()
        .map(|p| {
            format!(
                "{}:{}: {}\n",
                p["file"].as_str().unwrap(),
                p["line"],
                p["message"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(again, out);
    assert_eq!(j["hosts_file"], hosts.as_str());
    assert_eq!(j["hosts"], 1, "only node2's line binds: {json}");
}

#[test]
fn check_config_reports_unreadable_files_as_line_zero() {
    let scratch = Scratch::new("missing");
    let missing = scratch.0.join("nope.cfg").display().to_string();
    let (code, out, _) = run(&["check-config", &missing]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        format!("{missing}:0: cannot read: No such file or directory (os error 2)\n")
    );

    // A hosts file that is a directory cannot be read; an absent one is
    // fine (the provider then has no static hosts).
    let dir = scratch.0.display().to_string();
    let opts = scratch.write("opts.cfg", format!("urdma_hosts_file {dir}\n"));
    let (code, out, _) = run(&["check-config", &opts]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        format!("{dir}:0: cannot read: Is a directory (os error 21)\n")
    );
    let opts = scratch.write("opts.cfg", format!("urdma_hosts_file {missing}\n"));
    let (code, out, _) = run(&["check-config", &opts]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        format!("{opts}: no problems; hosts file {missing}: absent (no static hosts)\n")
    );
}

#[test]
fn check_config_refuses_key_files_the_provider_would_refuse() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("keys");
    let key = scratch.write("urdma.key", "7 00112233445566778899aabbccddeeff\n");
    let opts = scratch.write("opts.cfg", format!("urdma_auth_key_file {key}\n"));
    let mode = |m: u32| fs::set_permissions(&key, fs::Permissions::from_mode(m)).unwrap();
    mode(0o644);
    let (code, out, _) = run(&["check-config", &opts]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out,
        format!(
            "{key}:0: urdma_auth_key_file: mode 0644 lets other users read or change the key; \
             refused (chmod 600 {key})\n"
        )
    );
    mode(0o600);
    let (code, out, _) = run(&["check-config", &opts]);
    assert_eq!(code, 0, "{out}");
    fs::write(&key, "7 00112233\n").unwrap();
    let (code, out, _) = run(&["check-config", &opts]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out, format!("{key}:1: key 7 is not 32-128 hex digits\n"));
}
