//! What changes while the daemon runs, without a restart: a key rotated
//! across hosts that go on resolving each other, a key file the provider
//! must refuse, and `urdma_` keys of the options file, in force at once or
//! named as needing a restart. Real daemons, real `ib_acme` (see
//! `urdma_harness`); needs root and `cargo build --workspace`.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};
use urdma_harness::nodes::{b_with_addresses, resolve_fails, resolve_node, Node, WAIT};
use urdma_harness::{Host, HostConfig, KeyFile, Net};

const OLD: &str = "1 00112233445566778899aabbccddeeff\n";
const NEW: &str = "2 ffeeddccbbaa99887766554433221100\n";

/// Writes `keys` over `key` (its mode stays 0600) and waits until `host`
/// says it put them in force, signing with `signing` ("N of M").
fn rotate(host: &Host, key: &KeyFile, keys: &str, signing: &str) {
    let reloaded = format!("urdma: key file {}: reloaded, ", key.0.display());
    let before = host.log_count(&reloaded);
    std::fs::write(&key.0, keys).unwrap();
    assert!(
        host.wait_log_count(&reloaded, before + 1, WAIT),
        "no `{reloaded}`\n{}",
        host.diagnostics()
    );
    let log = host.log();
    let last = log.lines().rfind(|l| l.contains(&reloaded)).unwrap();
    assert!(
        last.ends_with(&format!("signing with key {signing}")),
        "{last}"
    );
}

/// What `host`'s provider dropped for `reason`, from its metrics file.
fn dropped(host: &Host, reason: &str) -> f64 {
    let families = ibacm_urdma::metrics::parse(&host.metrics_file()).unwrap_or_default();
    families
        .iter()
        .filter(|f| f.name == "urdma_datagrams_dropped_total")
        .flat_map(|f| &f.samples)
        .find(|s| s.labels.iter().any(|(k, v)| k == "reason" && v == reason))
        .map_or(0.0, |s| s.value)
}

#[test]
fn a_key_rotated_across_two_running_hosts_loses_no_lookup() {
    let (ka, kb) = (
        KeyFile::new("rot-a", OLD, 0o600),
        KeyFile::new("rot-b", OLD, 0o600),
    );
    let net = Net::new();
    let a = Node::A.start(&net, &[&ka.opt()]);
    // Each lookup below asks for an address A has not asked before, so
    // each is a query sealed by A and a reply sealed by B, under the keys
    // of that moment.
    let (b, ips) = b_with_addresses(&net, 12, &[&kb.opt()]);
    let mut fresh = ips.iter();
    let mut lookup = || {
        let ip = fresh.next().expect("an address not asked yet");
        resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", ip]);
    };
    a.expect_log("discovery: authenticated, signing with key 1 of 1", WAIT);
    let pids = (a.daemon_pid(), b.daemon_pid());
    lookup();

    // The documented rotation: add the new key, move it first, drop the
    // old; each host in turn, resolving at every moment between.
    for (n, (keys, signing)) in [
        (format!("{OLD}{NEW}"), "1 of 2"),
        (format!("{NEW}{OLD}"), "2 of 2"),
        (NEW.to_string(), "2 of 1"),
    ]
    .iter()
    .enumerate()
    {
        rotate(&a, &ka, keys, signing);
        lookup();
        rotate(&b, &kb, keys, signing);
        lookup();
        if n == 0 {
            // A key file the provider must refuse (others may read it)
            // changes nothing: the keys in force stay, lookups go on.
            std::fs::set_permissions(&ka.0, std::fs::Permissions::from_mode(0o644)).unwrap();
            a.expect_log("; the keys in force stay", WAIT);
            lookup();
            let reloaded = format!("urdma: key file {}: reloaded, ", ka.0.display());
            let before = a.log_count(&reloaded);
            std::fs::set_permissions(&ka.0, std::fs::Permissions::from_mode(0o600)).unwrap();
            assert!(a.wait_log_count(&reloaded, before + 1, WAIT));
        }
    }
    assert_eq!((a.daemon_pid(), b.daemon_pid()), pids, "no restart");

    // The old key opens nothing any more: C, still on it, is not
    // answered, and what it sends A is dropped as unauthenticated.
    let kc = KeyFile::new("rot-c", OLD, 0o600);
    let c = Node::C.start(&net, &[&kc.opt()]);
    c.expect_log("discovery: authenticated, signing with key 1 of 1", WAIT);
    let before = dropped(&a, "unauthenticated");
    resolve_fails(
        &a,
        &["-f", "i", "-d", &Node::C.ip4()],
        "Connection timed out",
    );
    let deadline = Instant::now() + WAIT;
    while dropped(&a, "unauthenticated") <= before {
        assert!(
            Instant::now() < deadline,
            "nothing of C's dropped\n{}",
            a.metrics_file()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for h in [&a, &b] {
        assert!(h.daemon_alive(), "{}", h.diagnostics());
    }
}

#[test]
fn an_options_change_is_in_force_at_once_or_named_as_needing_a_restart() {
    let host = Host::start(
        HostConfig::default()
            .opt("urdma_discovery no")
            .hosts_file("10.0.0.3 fe80::5054:ff:fe12:9999\n"),
    );
    let sl = |host: &Host| {
        let (path, out) = host.acme_path(&["-f", "i", "-s", "10.0.0.1", "-d", "10.0.0.3"]);
        (path.get("sl").to_string(), out)
    };
    assert_eq!(sl(&host).0, "0");
    let pid = host.daemon_pid();

    let opts = host.path("ibacm_opts.cfg");
    let text = std::fs::read_to_string(&opts).unwrap() + "urdma_sl 3\nurdma_max_cached 100\n";
    std::fs::write(&opts, text).unwrap();
    host.expect_log("urdma: options file ", WAIT);
    host.expect_log(": urdma_sl 3 in force", WAIT);
    host.expect_log(
        ": urdma_max_cached 100 needs a restart of the daemon; urdma_max_cached 65536 stays in force",
        WAIT,
    );
    assert_eq!(host.log_severity("options file "), Some("info".to_string()));
    // The cached path of SL 0 is not served any more.
    let (now, out) = sl(&host);
    assert_eq!(now, "3", "{out}");
    assert_eq!(host.daemon_pid(), pid, "no restart");
    assert!(host.daemon_alive(), "{}", host.diagnostics());
}
