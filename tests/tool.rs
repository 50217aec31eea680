//! `urdma-acm` as an operator runs it: `doctor` against simulated devices
//! with good and bad ports, `check-config` on good and bad files, and
//! `stats` against the real daemon after resolves made with `ib_acme`.
//! Needs root for the simulated hosts and `cargo build --workspace`;
//! `URDMA_ACM` and `URDMA_PROVIDER_SO` choose other builds of the tool and
//! the provider.

use std::collections::BTreeMap;
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

    // The same diagnosis as JSON, with the same exit status.
    let mut json_args = strs(&args);
    json_args.push("--json");
    let (code, out, err) = run_on(&host, &json_args);
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

// stats: the provider's metrics ------------------------------------------------

/// Holds `text` to the rules of the Prometheus text exposition format
/// (0.0.4), checked here on their own rather than by the provider's parser:
/// HELP and TYPE once per family before its samples, names and labels of
/// the allowed characters, quoted and escaped label values, numbers, no
/// series twice, and histograms whose buckets rise to `+Inf`, which equals
/// their count, beside a sum. Returns the value of each series.
fn check_prometheus(text: &str) -> BTreeMap<String, f64> {
    let name_ok = |n: &str, colon: bool| {
        let mut c = n.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || (colon && f == ':'))
            && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || (colon && x == ':'))
    };
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut values = BTreeMap::new();
    let mut buckets: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(name_ok(name, true), "{line}");
            assert!(!families.contains_key(name), "family twice: {line}");
            current = Some((name.to_string(), String::new()));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            let (cur, _) = current.clone().expect("TYPE after HELP");
            assert_eq!(name, cur, "{line}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line}"
            );
            families.insert(name.to_string(), kind.to_string());
            current = Some((cur, kind.to_string()));
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').expect("series value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value: {line}")),
        };
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        assert!(name_ok(name, true), "{line}");
        let (family, kind) = current.clone().expect("sample after HELP and TYPE");
        let suffix = name
            .strip_prefix(family.as_str())
            .expect("sample of its family");
        match kind.as_str() {
            "histogram" => assert!(["_bucket", "_sum", "_count"].contains(&suffix), "{line}"),
            _ => assert_eq!(suffix, "", "{line}"),
        }
        let mut le = None;
        let mut rest = labels.strip_suffix('}').unwrap_or(labels);
        let mut others = Vec::new();
        while !rest.is_empty() {
            let (k, v) = rest.split_once("=\"").expect("label=\"value\"");
            assert!(name_ok(k, false), "label {k}: {line}");
            let mut end = None;
            let mut escaped = false;
            for (i, c) in v.char_indices() {
                match c {
                    _ if escaped => {
                        assert!(['\\', '"', 'n'].contains(&c), "escape: {line}");
                        escaped = false
                    }
                    '\\' => escaped = true,
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end.expect("closed label value");
            if k == "le" {
                le = Some(&v[..end]);
            } else {
                others.push(format!("{k}={}", &v[..end]));
            }
            rest = v[end + 1..].strip_prefix(',').unwrap_or(&v[end + 1..]);
        }
        assert!(
            values.insert(series.to_string(), value).is_none(),
            "series twice: {line}"
        );
        if let Some(le) = le {
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().expect("le")
            };
            let key = format!("{family}{{{}}}", others.join(","));
            buckets.entry(key).or_default().push((bound, value));
        }
    }
    for (key, b) in &buckets {
        assert!(
            b.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "{key}: {b:?}"
        );
        let (last, total) = *b.last().unwrap();
        assert_eq!(last, f64::INFINITY, "{key} ends at +Inf");
        let (family, labels) = key.split_once('{').unwrap();
        let labels = labels.trim_end_matches('}');
        let count_series = match labels {
            "" => format!("{family}_count"),
            l => format!(
                "{family}_count{{{}}}",
                l.split(',')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap();
                        format!("{k}=\"{v}\"")
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        };
        assert_eq!(values.get(&count_series), Some(&total), "{count_series}");
    }
    values
}

/// `promtool check metrics` (Debian's `prometheus`): Prometheus' own
/// parser and its naming lints (units, `_total` on counters, no metric
/// named like a label), which print a line per problem.
fn promtool_check_metrics(text: &str) {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("promtool (apt-get install prometheus): {e}"));
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(text.as_bytes()).expect("write to promtool");
    drop(stdin);
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn stats_reports_metrics_that_match_the_traffic_and_the_attacks() {
    use ibacm_urdma::addr::Address;
    use ibacm_urdma::discovery::wire::{Answer, Message, Reply, WireAddress};
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::num::NonZeroU64;
    use urdma_harness::forger::Forger;
    use urdma_harness::nodes::{resolve_node, Node, DISCOVERY_PORT, WAIT};

    let net = urdma_harness::Net::new();
    let a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", &Node::B.ip4()]);
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", "node-a", "-d", "node-b"],
    );

    // What A counted before the attack, once its lookups have settled (a
    // second answer to the group query that comes after the lookup ended
    // is counted as late).
    // What node_exporter's textfile collector reads: the provider's file
    // and, beside it, the endpoints' counters from urdma-acm. Together they
    // must be one valid exposition (no family twice), and each passes
    // Prometheus' own linter.
    let prometheus = || {
        let (code, endpoints, err) = a.stats(&["--prometheus"]);
        assert_eq!(code, 0, "{err}");
        let out = a.metrics_file() + &endpoints;
        (check_prometheus(&out), out)
    };
    let dropped = |values: &BTreeMap<String, f64>, reason: &str| {
        values
            .get(&format!(
                "urdma_datagrams_dropped_total{{reason=\"{reason}\"}}"
            ))
            .copied()
            .unwrap_or_else(|| panic!("no drops by {reason}"))
    };
    std::thread::sleep(Duration::from_millis(1500));
    let (before, _) = prometheus();

    // Replies to queries A never sent, from B's address, and garbage.
    let forger = Forger::start(&net, Ipv4Addr::new(10, 0, 0, 66), DISCOVERY_PORT);
    let (to_a, from_b) = (
        SocketAddrV4::new(Node::A.ip4().parse().unwrap(), DISCOVERY_PORT),
        SocketAddrV4::new(Node::B.ip4().parse().unwrap(), DISCOVERY_PORT),
    );
    const FORGED: u64 = 37;
    const GARBAGE: u64 = 23;
    for i in 0..FORGED {
        let target = WireAddress::new(Address::parse_host("10.0.0.9").unwrap()).unwrap();
        let txid = NonZeroU64::new(0x5eed_0000 + i).unwrap();
        let reply = Reply::new(txid, target, Answer::Refused).unwrap();
        forger.send(from_b, to_a, &Message::from(reply).encode());
    }
    for i in 0..GARBAGE {
        forger.send(
            from_b,
            to_a,
            format!("not a discovery message {i}").as_bytes(),
        );
    }

    // The worker writes the metrics every second: the drops reported grow
    // by exactly what was sent.
    let deadline = Instant::now() + WAIT;
    let values = loop {
        let (values, out) = prometheus();
        let grew = |reason: &str| dropped(&values, reason) - dropped(&before, reason);
        if (grew("malformed"), grew("unsolicited")) == (GARBAGE as f64, FORGED as f64) {
            break values;
        }
        assert!(
            grew("malformed") <= GARBAGE as f64 && grew("unsolicited") <= FORGED as f64,
            "{out}"
        );
        assert!(
            Instant::now() < deadline,
            "drops never reached the datagrams sent:\n{out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let get = |series: &str| {
        values
            .get(series)
            .copied()
            .unwrap_or_else(|| panic!("no {series}"))
    };
    assert_eq!(get("urdma_discovery_up"), 1.0);
    assert!(get("urdma_lookup_duration_seconds_count{result=\"resolved\"}") >= 2.0);
    assert!(
        get("urdma_datagrams_sent_total{kind=\"unicast_query\"}") >= 2.0,
        "the address, then the name's claimant"
    );
    assert!(
        get("urdma_datagrams_sent_total{kind=\"group_query\"}") >= 1.0,
        "the name"
    );
    assert!(get("urdma_datagrams_received_total") >= (FORGED + GARBAGE + 2) as f64);
    assert!(get("urdma_bindings") >= 2.0, "B's address and name");
    let resolves: f64 = values
        .iter()
        .filter(|(k, _)| {
            k.starts_with("urdma_endpoint_resolve_requests_total{")
                && k.contains("address=\"10.0.0.1\"")
        })
        .map(|(_, v)| v)
        .sum();
    assert!(resolves >= 2.0, "the endpoint's own counters come along");
    assert!(get("urdma_resolve_requests_total") >= resolves);
    assert_eq!(
        get(&format!(
            "urdma_build_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )),
        1.0
    );
    let (_, endpoints, _) = a.stats(&["--prometheus"]);
    promtool_check_metrics(&a.metrics_file());
    promtool_check_metrics(&endpoints);

    // The same numbers as JSON, read by a JSON parser.
    let (code, out, err) = a.stats(&["--json"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}:\n{out}"));
    assert!(json["metrics_age_seconds"].as_f64().unwrap() < 10.0);
    assert_eq!(json["endpoints"][0]["provider"], "urdma");
    let family = |name: &str| {
        json["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    let dropped_family = family("urdma_datagrams_dropped_total");
    assert_eq!(dropped_family["type"], "counter");
    let malformed = dropped_family["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["labels"]["reason"] == "malformed")
        .unwrap();
    assert_eq!(
        malformed["value"].as_f64(),
        Some(dropped(&values, "malformed"))
    );
    assert_eq!(family("urdma_lookup_duration_seconds")["type"], "histogram");

    // And after the table, one line per series.
    let (code, out, _) = a.stats(&[]);
    assert_eq!(code, 0);
    let unsolicited = dropped(&values, "unsolicited");
    let line = format!("urdma_datagrams_dropped_total{{reason=unsolicited}} {unsolicited}\n");
    assert!(out.contains(&line), "{out}");
}

/// The metric names a PromQL expression mentions.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("urdma_") {
        let word: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + word.len()..];
        names.push(word);
    }
    names
}

#[test]
fn the_example_alerts_and_dashboard_use_only_metrics_the_provider_writes() {
    let root = env!("CARGO_MANIFEST_DIR");
    let promtool = |args: &[&str]| {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(root)
            .output()
            .unwrap_or_else(|e| panic!("promtool (apt-get install prometheus): {e}"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "promtool {args:?}:\n{text}");
    };
    let rules = "docs/examples/urdma-alerts.yml";
    promtool(&["check", "rules", rules]);
    // Each alert fires on what it is about and on nothing healthy.
    promtool(&["test", "rules", "tests/prometheus/urdma-alerts.test.yml"]);

    // What a running provider writes, histograms with their series.
    let host = Host::start(HostConfig::default());
    let deadline = Instant::now() + Duration::from_secs(10);
    while host.metrics_file().is_empty() {
        assert!(Instant::now() < deadline, "{}", host.diagnostics());
        std::thread::sleep(Duration::from_millis(100));
    }
    let families = ibacm_urdma::metrics::parse(&host.metrics_file()).unwrap();
    let written: Vec<String> = families
        .iter()
        .flat_map(|f| {
            let suffixes: &[&str] = match f.kind {
                ibacm_urdma::metrics::Kind::Histogram => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            suffixes
                .iter()
                .map(|s| format!("{}{s}", f.name))
                .collect::<Vec<_>>()
        })
        .collect();

    // The rules' expressions (not their annotations, which name options).
    let text = fs::read_to_string(format!("{root}/{rules}")).unwrap();
    let mut exprs = Vec::new();
    let mut in_expr = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(e) = t.strip_prefix("expr:") {
            in_expr = true;
            exprs.push(e.to_string());
        } else if in_expr && !t.contains(':') {
            exprs.last_mut().unwrap().push_str(t);
        } else {
            in_expr = false;
        }
    }
    // The dashboard's queries: its panels' targets and its variables.
    let dash = "docs/examples/urdma-grafana-dashboard.json";
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(format!("{root}/{dash}")).unwrap()).unwrap();
    let panels = json["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "{dash}: {} panels", panels.len());
    for p in panels {
        for t in p["targets"].as_array().expect("targets") {
            exprs.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    exprs.push(json["templating"]["list"][1]["definition"].to_string());

    let mut used = 0;
    for expr in &exprs {
        for name in metric_names(expr) {
            assert!(
                written.contains(&name),
                "`{name}` (in `{expr}`) is not a metric the provider writes: {written:?}"
            );
            used += 1;
        }
    }
    assert!(
        used >= 40,
        "{used} metric names found in the rules and dashboard"
    );
    // Every family the provider writes is on the dashboard.
    let all: String = exprs.concat();
    for f in &families {
        assert!(all.contains(&f.name), "{} is on no panel", f.name);
    }
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
