//! What an operator does in the first week, against real daemons: asks a
//! running provider what it knows (`urdma-acm show`), makes it forget a
//! host (`forget`), asks whether it serves (`health`), mends a key file
//! the provider refused, and reads the metrics file from the moment the
//! daemon starts. Real ibacm, real `ib_acme`, the built `urdma-acm` (see
//! `urdma_harness`); needs root and `cargo build --workspace`.

use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::{Duration, Instant};
use urdma_harness::nodes::{resolve_fails, resolve_node, Node, WAIT};
use urdma_harness::{Artifacts, Host, HostConfig, KeyFile, Net};

const KEY: &str = "1 00112233445566778899aabbccddeeff\n";

/// `urdma-acm ARGS` inside `host` (its /run is the host's): exit status
/// and output (stdout and stderr together).
fn tool(host: &Host, args: &[&str]) -> (i32, String) {
    let tool = Artifacts::urdma_acm();
    let mut argv = vec![tool.to_str().unwrap()];
    argv.extend_from_slice(args);
    host.exec(&argv)
}

/// The JSON object `urdma-acm ARGS --json` printed.
fn json(host: &Host, args: &[&str]) -> (i32, Value) {
    let mut args = args.to_vec();
    args.push("--json");
    let (code, out) = tool(host, &args);
    let line = out
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON from {args:?}:\n{out}"));
    (code, serde_json::from_str(line).expect("valid JSON"))
}

/// Queries `host`'s provider has sent, from its metrics file (renewed
/// every second).
fn queries_sent(host: &Host) -> f64 {
    let families = ibacm_urdma::metrics::parse(&host.metrics_file()).unwrap_or_default();
    families
        .iter()
        .filter(|f| f.name == "urdma_datagrams_sent_total")
        .flat_map(|f| &f.samples)
        .filter(|s| {
            s.labels
                .iter()
                .any(|(k, v)| k == "kind" && v.ends_with("_query") && v != "start_query")
        })
        .map(|s| s.value)
        .sum()
}

/// Waits until the metrics file shows more queries sent than `before`.
fn asked_again(host: &Host, before: f64) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if queries_sent(host) > before {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

#[test]
fn show_forget_and_health_answer_from_the_running_provider() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    let (code, out) = tool(&a, &["health"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "serving: 1 port(s), discovery on\n")
    );
    let (code, h) = json(&a, &["health"]);
    assert_eq!(code, 0);
    assert_eq!(h["state"], "serving");
    assert_eq!(h["authenticated"], false);

    let (name, source) = (Node::B.name(), Node::A.name());
    let by_name = ["-f", "n", "-s", &source, "-d", &name];
    resolve_node(&a, Node::A, Node::B, &by_name);
    let (code, out) = tool(&a, &["show"]);
    assert_eq!(code, 0, "{out}");
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .unwrap_or_else(|| panic!("{name} not shown:\n{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..3], [Node::B.gid().as_str(), "discovery"], "{out}");
    assert!(
        out.contains(&format!("{} ", Node::A.name())) && out.contains(" local "),
        "this host's own names are listed:\n{out}"
    );
    let (_, shown) = json(&a, &["show", &name]);
    let bindings = shown["bindings"].as_array().unwrap();
    assert_eq!(bindings.len(), 1, "{shown}");
    assert_eq!(bindings[0]["gid"], Node::B.gid());
    assert_eq!(bindings[0]["source"], "discovery");
    assert!(bindings[0]["expires_in_seconds"].as_f64().unwrap() > 0.0);
    assert!(bindings[0]["age_seconds"].as_f64().unwrap() < 60.0);
    assert!(shown["failures"].as_array().unwrap().is_empty());

    // Cached: asked again, the network is not (the file is a second
    // behind at most).
    std::thread::sleep(Duration::from_millis(1500));
    let before = queries_sent(&a);
    resolve_node(&a, Node::A, Node::B, &by_name);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        queries_sent(&a),
        before,
        "a cached name went to the network"
    );
    // Forgotten: the next request asks the network, and gets it again.
    let (code, out) = tool(&a, &["forget", &name]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&format!("{name}: ")), "{out}");
    a.expect_log(&format!("urdma-acm forget {name}: "), WAIT);
    let (_, none) = json(&a, &["show", &name]);
    assert!(none["bindings"].as_array().unwrap().is_empty(), "{none}");
    resolve_node(&a, Node::A, Node::B, &by_name);
    assert!(asked_again(&a, before), "the forgotten name was not asked");

    // What is not learned is not forgotten; a bad address is refused.
    let (code, out) = tool(&a, &["forget", &Node::A.name()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is an address of this host"), "{out}");
    let (code, out) = tool(&a, &["show", "no such"]);
    assert_eq!(code, 2, "{out}");
    let (code, f) = json(&a, &["forget", "--all"]);
    assert_eq!(code, 0);
    assert!(f["forgotten"].as_u64().unwrap() >= 1, "{f}");

    // The daemon gone: not running, and nothing started.
    a.kill_daemon();
    let (code, out) = tool(&a, &["health"]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("no provider answers at /run/ibacm-urdma.sock"),
        "{out}"
    );
    let (code, h) = json(&a, &["health"]);
    assert_eq!((code, &h["state"]), (2, &Value::from("not running")));
}

#[test]
fn a_key_file_refused_for_its_mode_turns_discovery_on_once_mended() {
    let (ka, kb) = (
        KeyFile::new("mend-a", KEY, 0o644),
        KeyFile::new("mend-b", KEY, 0o600),
    );
    let net = Net::new();
    let a = Node::A.start(&net, &[&ka.opt()]);
    let _b = Node::B.start(&net, &[&kb.opt()]);
    a.expect_log("discovery off until the key file is mended", WAIT);
    let pid = a.daemon_pid();
    let (code, out) = tool(&a, &["health"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with("degraded: 1 port(s), discovery down\n") && out.contains("mode 0644"),
        "{out}"
    );
    let (code, h) = json(&a, &["health"]);
    assert_eq!((code, &h["discovery"]), (1, &Value::from("down")));
    resolve_fails(&a, &["-f", "i", "-d", &Node::B.ip4()], "No data available");

    let mended = Instant::now();
    std::fs::set_permissions(&ka.0, std::fs::Permissions::from_mode(0o600)).unwrap();
    a.expect_log(
        &format!("key file {}: accepted; discovery on", ka.0.display()),
        WAIT,
    );
    let took = mended.elapsed();
    assert!(took < Duration::from_secs(5), "mended after {took:?}");
    let (code, out) = tool(&a, &["health"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "serving: 1 port(s), discovery on, authenticated\n")
    );
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", &Node::B.ip4()]);
    let (name, source) = (Node::B.name(), Node::A.name());
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", &source, "-d", &name],
    );
    assert_eq!(a.daemon_pid(), pid, "no restart");
}

#[test]
fn the_metrics_file_is_there_from_the_start_renewed_not_rewritten_and_moves_live() {
    let host = Host::start(HostConfig::default().opt("urdma_discovery no"));
    let path = host.path("run/ibacm-urdma.prom");
    // Written at the first device, before its port is served; the
    // simulated host has two devices of one port each.
    let deadline = Instant::now() + WAIT;
    while !host.metrics_file().contains("urdma_ports 2\n") {
        assert!(Instant::now() < deadline, "no urdma_ports 2");
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = host.metrics_file();
    assert!(text.contains("urdma_up 1\n"), "{text}");
    assert!(
        text.contains("urdma_resolve_failures_total{reason=\"timeout\"} 0\n")
            && !text.contains("reason=\"error\""),
        "{text}"
    );

    // Idle: the same file, its time renewed every second.
    let (ino, mtime) = {
        let m = std::fs::metadata(&path).unwrap();
        (m.ino(), m.modified().unwrap())
    };
    std::thread::sleep(Duration::from_millis(2500));
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!(m.ino(), ino, "an idle provider rewrote its file");
    assert!(
        m.modified().unwrap() > mtime,
        "an idle provider stopped renewing its file"
    );
    // A request changes the numbers: a new file.
    host.acme(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.99"]);
    let deadline = Instant::now() + WAIT;
    while std::fs::metadata(&path).unwrap().ino() == ino {
        assert!(
            Instant::now() < deadline,
            "the numbers changed, the file did not"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // urdma_metrics_file is live: the file moves, the old one goes.
    let moved = host.path("run/moved.prom");
    let opts = host.path("ibacm_opts.cfg");
    let text = std::fs::read_to_string(&opts).unwrap()
        + &format!("urdma_metrics_file {}\n", moved.display());
    std::fs::write(&opts, text).unwrap();
    host.expect_log(": urdma_metrics_file ", WAIT);
    let deadline = Instant::now() + WAIT;
    while path.exists() || !moved.exists() {
        assert!(Instant::now() < deadline, "the metrics file did not move");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn stats_answers_tools_when_the_daemon_is_down_and_writes_its_output_whole() {
    let host = Host::start(HostConfig::default().opt("urdma_discovery no"));
    // No daemon at that socket: still one object, saying why.
    let (code, j) = json(&host, &["stats", "-S", "/nonexistent/ibacm-unix.sock"]);
    assert_eq!(code, 1);
    let why = j["daemon_error"].as_str().expect("daemon_error");
    assert!(why.contains("cannot connect to the daemon"), "{why}");
    assert_eq!(j["endpoints"], Value::Array(Vec::new()));

    // --output: the whole table, or the old file left as it was.
    let out = host.path("endpoints.prom");
    let shown = out.display().to_string();
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, text) = tool(&host, &["stats", "--prometheus", "-o", &shown]);
        if code == 0 {
            assert!(text.is_empty(), "nothing on stdout: {text}");
            break;
        }
        assert!(Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        written.contains("urdma_endpoint_resolve_requests_total{"),
        "{written}"
    );
    let (code, text) = tool(
        &host,
        &[
            "stats",
            "--prometheus",
            "-S",
            "/nonexistent/s",
            "-o",
            &shown,
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        written,
        "the old file stays"
    );
    let leftovers = std::fs::read_dir(host.path(""))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
}
