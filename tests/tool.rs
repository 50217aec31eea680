//! `urdma-acm` as an operator runs it: `doctor` against simulated devices
//! with good and bad ports, `check-config` on good and bad files, and
//! `stats` against the real daemon after resolves made with `ib_acme`.
//! Needs root for the simulated hosts and `cargo build --workspace`;
//! `URDMA_ACM` and `URDMA_PROVIDER_SO` choose other builds of the tool and
//! the provider.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};
use urdma_harness::{Artifacts, Host, HostConfig};

/// `urdma-acm`: `URDMA_ACM` if set (the package test runs the installed
/// one), else the one built next to the provider in `target/<profile>/`.
fn tool() -> PathBuf {
    if let Some(path) = std::env::var_os("URDMA_ACM") {
        return PathBuf::from(path);
    }
    let path = Artifacts::profile_dir().join("urdma-acm");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` first",
        path.display()
    );
    path
}

/// Exit status, stdout and stderr of a finished command.
fn finish(mut cmd: Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run urdma-acm");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// `urdma-acm ARGS` outside any simulated host, for commands that need no
/// device and no daemon.
fn run(args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(tool());
    cmd.args(args);
    finish(cmd)
}

/// `urdma-acm ARGS` inside `host`, seeing the simulated devices of the
/// host's `sim.cfg` (bounded by `timeout`, as a stuck verbs call would
/// otherwise hang the test).
fn run_on(host: &Host, args: &[&str]) -> (i32, String, String) {
    let tool = tool();
    let mut argv = vec!["timeout", "15", tool.to_str().unwrap()];
    argv.extend_from_slice(args);
    let mut cmd = host.in_namespaces(true, &argv);
    cmd.env("URDMA_SIM_CONFIG", host.path("sim.cfg"))
        .env_remove("URDMA_SIM_CONTROL");
    finish(cmd)
}

/// A scratch directory removed at the end of the test.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("urdma-tool-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    /// Writes `text` (any bytes) to `name` and returns its path as a
    /// string.
    fn write(&self, name: &str, text: impl AsRef<[u8]>) -> String {
        let path = self.0.join(name);
        fs::write(&path, text).expect("write scratch file");
        path.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

// doctor ---------------------------------------------------------------------

/// One good port and one bad port of every kind the daemon or the provider
/// turns away, plus a device the daemon skips altogether.
const MIXED_DEVICES: &str = "\
device urdma0
  mac 52:54:00:12:34:56
  port 1
device urdma1
  mac 52:54:00:12:34:57
  port 1
    link_layer ethernet
  port 2
    state down
  port 3
    gid fe80::
  port 4
    pkeys -
  port 5
    pkey 0x8000
device roce0
  mac 52:54:00:12:34:58
  port 1
    link_layer ethernet
";

/// A host without a daemon whose simulated devices are `sim`, with the
/// provider installed in its provider directory and an options file
/// holding `opts` after the `provider_lib_path` line. Returns the host and
/// the doctor arguments naming its options and address files.
fn doctor_host(sim: &str, opts: &str) -> (Host, Vec<String>) {
    let host = Host::bare();
    fs::write(host.path("sim.cfg"), sim).expect("sim.cfg");
    fs::copy(
        &host.artifacts.provider,
        host.path("prov/libibacm_urdma.so"),
    )
    .expect("install provider");
    let opts_path = host.path("opts.cfg");
    let text = format!("provider_lib_path {}\n{opts}", host.path("prov").display());
    fs::write(&opts_path, text).expect("opts.cfg");
    let addr_path = host.path("addr.cfg");
    fs::write(&addr_path, "node1 urdma0 1 default\n").expect("addr.cfg");
    let args = vec![
        "doctor".to_string(),
        "-O".to_string(),
        opts_path.display().to_string(),
        "-A".to_string(),
        addr_path.display().to_string(),
    ];
    (host, args)
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn doctor_serves_the_good_port_and_says_why_not_for_each_bad_one() {
    let (host, args) = doctor_host(MIXED_DEVICES, "provider urdma default\n");
    let (code, out, err) = run_on(&host, &strs(&args));
    let opts = host.path("opts.cfg").display().to_string();
    let prov = host.path("prov").display().to_string();
    let want = format!(
        "\
options file: {opts}
providers in {prov}:
  libibacm_urdma.so: loaded (urdma)

urdma0 (node GUID 0x505400fffe123456)
  port 1: served by urdma (InfiniBand, ACTIVE, GID 0 fe80::5054:ff:fe12:3456, P_Keys 0xffff)

urdma1 (node GUID 0x505400fffe123457)
  port 1: not served by urdma:
    - link layer is Ethernet: urdma refuses ports that are not InfiniBand
  port 2: not served by urdma:
    - port state is DOWN: the daemon brings a port up only when it is ACTIVE
  port 3: not served by urdma:
    - GID 0 (fe80::) has a zero interface id: urdma needs a port GID
  port 4: not served by urdma:
    - the P_Key table is empty: the daemon opens no endpoint on it
  port 5: not served by urdma:
    - the P_Key table holds no partition (0x8000): the daemon opens no endpoint on it

roce0 (node GUID 0x505400fffe123458)
  the daemon skips this device: none of its ports is InfiniBand
  port 1: not served by urdma:
    - its device is skipped (no InfiniBand port)
    - link layer is Ethernet: urdma refuses ports that are not InfiniBand

1 of 7 ports can be served by urdma
"
    );
    assert_eq!(out, want, "stderr: {err}");
    assert_eq!(code, 0, "one port can be served: {err}");
}

#[test]
fn doctor_fails_when_no_port_gets_urdma_and_names_the_fix() {
    // No `provider urdma default`: the daemon's built-in default (ibacmp)
    // would take every port, and it is not even installed here.
    let (host, args) = doctor_host("device urdma0\n  port 1\n", "");
    let (code, out, err) = run_on(&host, &strs(&args));
    let opts = host.path("opts.cfg").display().to_string();
    assert_ne!(code, 0, "nothing can be served:\n{out}{err}");
    assert!(
        out.contains(&format!(
            "  port 1: not served by urdma:\n    - the daemon assigns no provider (no default provider is loaded); \
             add `provider urdma default` to {opts}\n"
        )),
        "{out}"
    );
    assert!(
        out.ends_with("no port can be served by urdma: 1 ports, each with the reasons above\n"),
        "{out}"
    );

    // A symlinked provider is skipped by the daemon, so it does not count.
    let installed = host.path("prov/libibacm_urdma.so");
    fs::rename(&installed, host.path("real.so")).expect("move provider");
    std::os::unix::fs::symlink(host.path("real.so"), &installed).expect("symlink");
    fs::write(
        host.path("opts.cfg"),
        format!(
            "provider_lib_path {}\nprovider urdma default\n",
            host.path("prov").display()
        ),
    )
    .expect("opts.cfg");
    let (code, out, err) = run_on(&host, &strs(&args));
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        out.contains("  libibacm_urdma.so: skipped by the daemon: a symbolic link (the daemon loads only regular files)\n"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "- the daemon assigns no provider (`provider urdma default` (line 2) names no loaded provider; \
             no default provider is loaded); install libibacm_urdma.so as a regular file in {}\n",
            host.path("prov").display()
        )),
        "{out}"
    );
}

// check-config ---------------------------------------------------------------

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
    let hosts_read = ibacm_urdma::reload::read_hosts(std::path::Path::new(&hosts));
    let logged: String = provider
        .iter()
        .chain(&hosts_read.problems)
        .map(|d| format!("{d}\n"))
        .collect();
    assert_eq!(out, logged);
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

// stats ----------------------------------------------------------------------

const HOSTS: &str = "node3 fe80::5054:ff:fe12:9999 lid=9\n10.0.0.3 fe80::5054:ff:fe12:9999\n";

#[test]
fn stats_counts_what_was_resolved_per_endpoint() {
    // Two endpoints on urdma0 port 1: the default partition and 0x8001.
    let cfg = HostConfig::default()
        .opt("urdma_discovery no")
        .hosts_file(HOSTS)
        .sim_config("device urdma0\n  mac 52:54:00:12:34:56\n  port 1\n    pkeys 0xffff,0x8001\n")
        .addr_lines(&[
            "10.0.0.1 urdma0 1 default",
            "node1 urdma0 1 default",
            "node1b urdma0 1 0x8001",
        ]);
    let host = Host::start(cfg);
    for _ in 0..3 {
        host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
    }
    let (code, out) = host.acme(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.99"]);
    assert_ne!(code, 0, "10.0.0.99 is unknown:\n{out}");
    host.acme_path(&["-f", "n", "-s", "node1b", "-d", "node3"]);

    // The daemon's default socket: /run is the host's run directory. Rows
    // come in the daemon's order (it lists a port's newest endpoint first).
    let tool = tool();
    let (code, out) = host.exec(&[tool.to_str().unwrap(), "stats"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "\
GUID                PORT  PKEY    PROVIDER  ADDRESS   ERROR  RESOLVE  NODATA  ADDR_QUERY  ADDR_CACHE  ROUTE_QUERY  ROUTE_CACHE
0x505400fffe123456  1     0x8001  urdma     node1b    0      1        0       1           0           1            0
0x505400fffe123456  1     0xffff  urdma     10.0.0.1  0      4        1       2           0           1            2
"
    );

    let sock = host.socket().display().to_string();
    let (code, again) = host.exec(&[tool.to_str().unwrap(), "stats", "--socket", &sock]);
    assert_eq!((code, again.as_str()), (0, out.as_str()), "--socket");
}

#[test]
fn stats_without_a_daemon_says_where_it_looked() {
    let (code, out, err) = run(&["stats", "-S", "/nonexistent/ibacm-unix.sock"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        err,
        "urdma-acm: cannot connect to the daemon at /nonexistent/ibacm-unix.sock: \
         No such file or directory (os error 2) (is ibacm running? see --socket)\n"
    );
}

// help -----------------------------------------------------------------------

#[test]
fn every_subcommand_has_help() {
    for sub in ["doctor", "check-config", "stats"] {
        let (code, out, err) = run(&[sub, "--help"]);
        assert_eq!(code, 0, "{sub} --help: {err}");
        assert!(
            out.contains(&format!("Usage: urdma-acm {sub}")),
            "{sub}: {out}"
        );
    }
    let (_, out, _) = run(&["stats", "--help"]);
    let columns = "error resolve nodata addr_query addr_cache route_query route_cache";
    for column in columns.split(' ') {
        assert!(
            out.contains(&format!("\n  {column} ")),
            "stats --help explains {column}:\n{out}"
        );
    }
    let (code, _, err) = run(&["frobnicate"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unrecognized subcommand 'frobnicate'"),
        "{err}"
    );
}
