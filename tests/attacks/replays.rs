//! Captured datagrams sent again, with keys: a replay is refused and
//! counted, and nothing in normal operation is taken for one.

use crate::{at, settle, summary, v4, FORGER_IP};
use std::net::IpAddr;
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::forger::Forger;
use urdma_harness::nodes::{
    poll_until_resolved, resolve_node, resolves_by_every_kind, Node, DISCOVERY_PORT,
};
use urdma_harness::{Host, KeyFile, Net};

/// The key both hosts sign with.
/// The key the hosts sign with.
const KEY: &str = "1 000102030405060708090a0b0c0d0e0f\n";

/// The replayed count of `host`'s latest drop summary (0 without one).
fn replayed(host: &Host) -> u64 {
    summary(host, "datagrams dropped so far", "replayed")
}

#[test]
fn with_keys_normal_operation_counts_nothing_as_replayed() {
    let key = KeyFile::new("normal", KEY, 0o600);
    let opt = key.opt();
    let net = Net::new();
    let a = Node::A.start(&net, &[&opt]);
    let b = Node::B.start(&net, &[&opt]);
    // Announcements go to both groups, queries and replies both ways.
    resolves_by_every_kind(&a, Node::A, Node::B);
    resolves_by_every_kind(&b, Node::B, Node::A);
    b.restart(&Node::B.next_generation().config(&[&opt]));
    poll_until_resolved(
        &a,
        &["-c", "-f", "i", "-d", "10.0.0.2"],
        &Node::B.next_generation().gid(),
    );
    sleep(Duration::from_secs(3));
    for h in [&a, &b] {
        assert_eq!(replayed(h), 0, "{}", h.diagnostics());
    }
}

#[test]
fn with_keys_a_captured_announcement_of_an_old_gid_is_refused() {
    let key = KeyFile::new("replay", KEY, 0o600);
    let opt = key.opt();
    let net = Net::new();
    let a = Node::A.start(&net, &[&opt]);
    let c = Node::C.start(&net, &[&opt]);
    let f = Forger::start(&net, FORGER_IP, DISCOVERY_PORT);
    resolves_by_every_kind(&a, Node::A, Node::C);
    // The attacker records C's announcements (it reads the group), then C
    // comes back with a new GID.
    c.restart(&Node::C.config(&[&opt]));
    let mut captured = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Some((from, data)) = f.recv(Duration::from_millis(50)) {
            if from.ip() == IpAddr::V4(v4(Node::C)) {
                captured.push(data);
            }
        }
    }
    assert!(!captured.is_empty(), "no announcement captured");
    let new = Node::C.next_generation();
    c.restart(&new.config(&[&opt]));
    // A restarts too, so it has no memory of the captured datagrams
    // themselves, and learns C's new GID by asking.
    a.restart(&Node::A.config(&[&opt]));
    resolve_node(&a, Node::A, new, &["-f", "i", "-d", "10.0.0.3"]);
    let before = replayed(&a);
    let rolled_back = format!("is now {}", Node::C.gid());
    let rollbacks = a.log_count(&rolled_back);
    // Replayed within the 30 s window, in C's name.
    for data in &captured {
        f.send(at(v4(Node::C)), at(v4(Node::A)), data);
    }
    settle();
    assert_eq!(
        a.log_count(&rolled_back),
        rollbacks,
        "rolled back:\n{}",
        a.log()
    );
    resolve_node(&a, Node::A, new, &["-c", "-f", "i", "-d", "10.0.0.3"]);
    let deadline = Instant::now() + Duration::from_secs(12);
    while replayed(&a) < before + captured.len() as u64 {
        assert!(
            Instant::now() < deadline,
            "the replays were not all refused as replayed ({} before)\n{}",
            before,
            a.diagnostics()
        );
        sleep(Duration::from_millis(200));
    }
}
