//! `urdma-acm` as an operator runs it: `doctor` against simulated devices
//! with good and bad ports, `check-config` on good and bad files
//! (`check_config`), and `stats` against the real daemon after resolves
//! made with `ib_acme`, its metrics read as Prometheus reads them
//! (`prometheus`). Needs root for the simulated hosts and
//! `cargo build --workspace`; `URDMA_ACM` and `URDMA_PROVIDER_SO` choose
//! other builds of the tool and the provider.

mod check_config;
mod prometheus;

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use urdma_harness::{Artifacts, Host, HostConfig};

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
    let mut cmd = Command::new(Artifacts::urdma_acm());
    cmd.args(args);
    finish(cmd)
}

/// `urdma-acm ARGS` inside `host`, seeing the simulated devices of the
/// host's `sim.cfg` (bounded by `timeout`, as a stuck verbs call would
/// otherwise hang the test).
fn run_on(host: &Host, args: &[&str]) -> (i32, String, String) {
    let tool = Artifacts::urdma_acm();
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
        // The report names the daemon's release; pinned so that the
        // expected text does not depend on the machine's ibacm.
        "--daemon-version".to_string(),
        "44".to_string(),
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
daemon: --daemon-version 44, rdma-core 44: loads the regular files whose name ends in .so
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
    assert_doctor_json_agrees(&host, &args);
}

/// `doctor --json` with `args` on `host` (with `MIXED_DEVICES`): the same
/// diagnosis as the text, with the same exit status.
fn assert_doctor_json_agrees(host: &Host, args: &[String]) {
    let opts = host.path("opts.cfg").display().to_string();
    let mut json_args = strs(args);
    json_args.push("--json");
    let (code, out, err) = run_on(host, &json_args);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(
        (
            j["ok"].as_bool(),
            j["ports_served"].as_u64(),
            j["ports_total"].as_u64()
        ),
        (Some(true), Some(1), Some(7)),
        "{out}"
    );
    assert_eq!(j["options_file"], opts.as_str());
    assert_eq!(j["daemon_release"], 44);
    assert!(
        j["provider_dir_source"].is_null(),
        "named by the options file"
    );
    assert_eq!(j["providers"][0]["file"], "libibacm_urdma.so");
    assert_eq!(j["providers"][0]["urdma"], true);
    assert_eq!(j["loading_errors"].as_array().map(Vec::len), Some(0));
    assert!(j["devices_error"].is_null());
    let devices = j["devices"].as_array().unwrap();
    let names: Vec<&str> = devices
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["urdma0", "urdma1", "roce0"]);
    assert_eq!(devices[0]["node_guid"], "0x505400fffe123456");
    assert_eq!(devices[0]["ports"][0]["served"], true);
    assert_eq!(
        devices[0]["ports"][0]["attributes"],
        "InfiniBand, ACTIVE, GID 0 fe80::5054:ff:fe12:3456, P_Keys 0xffff"
    );
    assert_eq!(
        devices[1]["ports"][1]["problems"][0],
        "port state is DOWN: the daemon brings a port up only when it is ACTIVE"
    );
    assert_eq!(devices[2]["skipped"], true);
    assert_eq!(
        devices[2]["ports"][0]["problems"].as_array().map(Vec::len),
        Some(2)
    );
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
    let tool = Artifacts::urdma_acm();
    // The table, then the provider's metrics (discovery off or not), which
    // are written every second.
    let deadline = Instant::now() + Duration::from_secs(5);
    let out = loop {
        let (code, out) = host.exec(&[tool.to_str().unwrap(), "stats"]);
        assert_eq!(code, 0, "{out}");
        let (table, metrics) = out.split_once("\n\n").expect("a table, then metrics");
        if metrics.contains("urdma_resolve_requests_total 5\n") {
            break format!("{table}\n");
        }
        assert!(Instant::now() < deadline, "{metrics}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        out,
        "\
GUID                PORT  PKEY    PROVIDER  ADDRESS   ERROR  RESOLVE  NO_DATA  ADDR_QUERY  ADDR_CACHE  ROUTE_QUERY  ROUTE_CACHE
0x505400fffe123456  1     0x8001  urdma     node1b    0      1        0        1           0           1            0
0x505400fffe123456  1     0xffff  urdma     10.0.0.1  0      4        1        2           0           1            2
"
    );

    let sock = host.socket().display().to_string();
    let (code, again) = host.exec(&[tool.to_str().unwrap(), "stats", "--socket", &sock]);
    assert_eq!(code, 0, "--socket: {again}");
    assert!(again.starts_with(&out), "--socket: {again}");
}

#[test]
fn stats_reads_an_endpoint_with_more_addresses_than_a_message_holds() {
    // The daemon answers the EP query with 64 bytes per address: with 40,
    // its reply is longer than a `struct acm_msg`.
    let lines: Vec<String> = (1..=40)
        .map(|i| format!("10.0.0.{i} urdma0 1 default"))
        .collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let cfg = HostConfig::default()
        .opt("urdma_discovery no")
        .hosts_file(HOSTS)
        .addr_lines(&lines);
    let host = Host::start(cfg);
    host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
    let (code, out, err) = host.stats(&["--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ep = &json["endpoints"][0];
    assert_eq!(ep["provider"], "urdma", "{out}");
    assert_eq!(ep["counters"]["resolve"], 1, "{out}");
    assert!(ep["error"].is_null(), "{out}");
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
    for sub in ["doctor", "check-config", "stats", "completions"] {
        let (code, out, err) = run(&[sub, "--help"]);
        assert_eq!(code, 0, "{sub} --help: {err}");
        assert!(
            out.contains(&format!("Usage: urdma-acm {sub}")),
            "{sub}: {out}"
        );
    }
    let (_, out, _) = run(&["stats", "--help"]);
    let columns = "error resolve no_data addr_query addr_cache route_query route_cache";
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

#[test]
fn completions_offer_every_subcommand_and_option_and_nothing_internal() {
    let (code, script, err) = run(&["completions", "bash"]);
    assert_eq!(code, 0, "{err}");
    // Loaded into bash, asked what follows `urdma-acm ` and `urdma-acm stats --`.
    let scratch = Scratch::new("completions");
    let file = scratch.write("urdma-acm.bash", &script);
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let program = format!(
            "source {file}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
             _urdma__acm urdma-acm '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
            words.len() - 1,
            words[words.len() - 1],
            words[words.len() - 2],
        );
        let out = Command::new("bash")
            .args(["-c", &program])
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = complete("urdma-acm ");
    for sub in ["doctor", "check-config", "stats", "completions"] {
        assert!(top.lines().any(|l| l == sub), "no {sub} in:\n{top}");
    }
    assert!(!top.contains("__"), "an internal command offered:\n{top}");
    let stats = complete("urdma-acm stats --");
    for opt in ["--json", "--prometheus", "--socket", "--metrics", "--opts"] {
        assert!(stats.lines().any(|l| l == opt), "no {opt} in:\n{stats}");
    }
    for shell in ["zsh", "fish"] {
        let (code, script, err) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(
            script.contains("check-config") && script.contains("prometheus"),
            "{shell}:\n{script}"
        );
    }
    let (code, _, err) = run(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
}
