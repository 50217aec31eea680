//! The provider's own threads fail, and every request is still answered:
//! the real daemon with a build of the provider that has the
//! `fault-injection` feature (never shipped), whose discovery thread
//! panics when asked for a name and whose hosts-file watcher panics on a
//! marked file.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::nodes::{resolve_node, resolves_by_every_kind, Node, WAIT};
use urdma_harness::{Host, Net};

/// The provider built with `fault-injection`, in a target directory of its
/// own so that it never replaces the library the other tests load.
fn faulty_provider() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
            let target = root.join("target/fault-injection");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let out = std::process::Command::new(cargo)
                .current_dir(&root)
                .args([
                    "build",
                    "--lib",
                    "--features",
                    "fault-injection",
                    "--target-dir",
                ])
                .arg(&target)
                .output()
                .expect("run cargo");
            assert!(
                out.status.success(),
                "cargo build --features fault-injection:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            target.join("debug/libibacm_urdma.so")
        })
        .clone()
}

fn start(net: &Net, node: Node, opts: &[&str]) -> Host {
    let mut cfg = node.config(opts);
    cfg.provider_so = Some(faulty_provider());
    Host::start_on(net, "eth0", cfg)
}

#[test]
fn a_panic_in_the_discovery_thread_answers_every_waiting_request_at_once() {
    let net = Net::new();
    // An unanswered lookup would wait 5 s x 3 tries.
    let opts = ["urdma_timeout 5000", "urdma_retries 2"];
    let a = start(&net, Node::A, &opts);
    let _b = start(&net, Node::B, &opts);
    std::thread::scope(|s| {
        // A request waiting for an address nobody holds.
        let waiting = s.spawn(|| {
            let t0 = Instant::now();
            let r = a.acme(&["-f", "i", "-s", &Node::A.ip4(), "-d", "10.0.0.99"]);
            (r, t0.elapsed())
        });
        a.expect_log("lookup 10.0.0.99: started", WAIT);
        let t0 = Instant::now();
        let (code, out) = a.acme(&["-f", "n", "-s", "node-a", "-d", "urdma-fault-worker"]);
        let asked = t0.elapsed();
        assert_ne!(code, 0, "the faulted request cannot succeed:\n{out}");
        let ((code, out), waited) = waiting.join().unwrap();
        assert_ne!(code, 0, "nobody holds 10.0.0.99:\n{out}");
        eprintln!(
            "answered after the fault: {asked:?}; the other waiting request after {waited:?}"
        );
        assert!(
            asked < Duration::from_secs(3),
            "{asked:?}\n{}",
            a.diagnostics()
        );
        // Unanswered, it would end only with the ICMP error of the failed
        // ARP (about 3 s) or the timeouts (15 s).
        assert!(
            waited < Duration::from_millis(1500),
            "{waited:?}\n{}",
            a.diagnostics()
        );
    });
    let log = a.log();
    assert!(
        log.contains("discovery thread: internal error: fault injected"),
        "the panic is logged through the daemon:\n{log}"
    );
    assert!(log.contains("answered with an error"), "{log}");
    // The thread is back: discovery goes on, asked anew.
    resolves_by_every_kind(&a, Node::A, Node::B);
    // And fails again the same way, still answered.
    let (code, _) = a.acme(&["-f", "n", "-s", "node-a", "-d", "urdma-fault-worker"]);
    assert_ne!(code, 0);
    assert!(a.wait_log_count("discovery thread: internal error", 2, WAIT));
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", "node-a", "-d", "node-b"],
    );
    assert!(a.daemon_alive(), "{}", a.diagnostics());
}

#[test]
fn a_panic_in_the_hosts_file_watcher_is_logged_and_the_watcher_comes_back() {
    let net = Net::new();
    let a = Host::start_on(&net, "eth0", {
        let mut cfg = Node::A.config(&[]).hosts_file("node-x fe80::77\n");
        cfg.provider_so = Some(faulty_provider());
        cfg
    });
    let by_name = |name: &str| a.acme(&["-f", "n", "-s", "node-a", "-d", name]);
    assert_eq!(by_name("node-x").0, 0, "{}", a.diagnostics());
    std::fs::write(a.hosts_path(), "# urdma-fault-watcher\nnode-x fe80::77\n").unwrap();
    a.expect_log("files watcher thread: internal error: fault injected", WAIT);
    // Fixed: the watcher, back, loads the file.
    std::fs::write(a.hosts_path(), "node-x fe80::77\nnode-y fe80::78\n").unwrap();
    let deadline = Instant::now() + WAIT;
    while by_name("node-y").0 != 0 {
        assert!(
            Instant::now() < deadline,
            "node-y never loaded\n{}",
            a.diagnostics()
        );
        sleep(Duration::from_millis(200));
    }
    assert!(a.daemon_alive(), "{}", a.diagnostics());
}
