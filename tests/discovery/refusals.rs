//! What a host drops: garbage on the discovery port, and with a shared key
//! everything from hosts without it; each drop counted and never answered.

use std::net::UdpSocket;
use std::time::{Duration, Instant};
use urdma_harness::nodes::{
    resolve_fails, resolve_node, resolves_by_address_and_name, Node, DISCOVERY_PORT, WAIT,
};
use urdma_harness::{Host, KeyFile, Net};

// 8 ------------------------------------------------------------------------

/// A REPLY (type 2) REFUSED for IPv4 `target`, transaction id `txid`: a
/// well-formed message (docs/protocol.md) that answers no query.
fn refused_reply(txid: u64, target: [u8; 4]) -> Vec<u8> {
    let mut m = b"URDD".to_vec();
    m.extend_from_slice(&[1, 2, 0, 0]);
    m.extend_from_slice(&txid.to_be_bytes());
    m.push(2);
    m.extend_from_slice(&[2, 4]);
    m.extend_from_slice(&target);
    assert_eq!(m.len(), 23);
    m
}

#[test]
fn garbage_on_the_discovery_port_is_dropped_counted_and_never_answered() {
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let _b = Node::B.start(&net, &[]);
    let d = Host::bare();
    net.attach(&d, "eth0", &["10.0.0.4/24"]);

    // Deterministic noise that is not a message (xorshift).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..200)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let datagrams: Vec<(&str, Vec<u8>)> = vec![
        ("malformed", noise),
        ("malformed", b"URDD\x01\x02\x00\x00\x00\x00".to_vec()),
        (
            "no query with that transaction id",
            refused_reply(0x0123_4567_89ab_cdef, [10, 0, 0, 2]),
        ),
    ];
    let a_addr = format!("{}:{DISCOVERY_PORT}", Node::A.ip4());
    let (port, answered) = d.in_netns(|| {
        let s = UdpSocket::bind("0.0.0.0:0").expect("bind");
        for (_, bytes) in &datagrams {
            s.send_to(bytes, &a_addr).expect("send");
        }
        // The protocol never answers anything that is not a query.
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 2048];
        let answered = s.recv_from(&mut buf).ok();
        (s.local_addr().unwrap().port(), answered)
    });
    assert_eq!(answered, None, "A answered garbage");

    let from = format!("discovery: dropped a datagram from 10.0.0.4:{port}: ");
    if !a.wait_log_count(&from, datagrams.len(), WAIT) {
        panic!(
            "A did not log {} drops\n{}",
            datagrams.len(),
            a.diagnostics()
        );
    }
    let drops: Vec<String> = a
        .log()
        .lines()
        .filter(|l| l.contains(&from))
        .map(String::from)
        .collect();
    let mut last = 0;
    for ((why, _), line) in datagrams.iter().zip(&drops) {
        assert!(line.contains(why), "expected `{why}`: {line}");
        let total: usize = line
            .rsplit_once('(')
            .and_then(|(_, t)| t.strip_suffix(" dropped so far)"))
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no count in {line}"));
        assert!(total > last, "the count should grow: {drops:?}");
        last = total;
    }

    // A is unharmed: it still resolves a peer and its own name.
    assert!(a.daemon_alive(), "{}", a.diagnostics());
    resolves_by_address_and_name(&a, Node::A, Node::B);
}

// 11 -----------------------------------------------------------------------

/// The cumulative counts of A's latest drop summary in the log.
fn drop_summary(host: &Host) -> Option<String> {
    host.log()
        .lines()
        .rev()
        .find_map(|l| l.split_once("datagrams dropped so far: "))
        .map(|(_, counts)| counts.to_string())
}

#[test]
fn with_a_shared_key_only_key_holders_take_part() {
    let shared = KeyFile::new("shared", "5 00112233445566778899aabbccddeeff\n", 0o600);
    let other = KeyFile::new("other", "5 ffeeddccbbaa99887766554433221100\n", 0o600);
    // Names asked of the segment only: its silence is what is checked.
    let quick = [
        "urdma_timeout 200",
        "urdma_retries 1",
        "urdma_name_lookup segment",
    ];
    let net = Net::new();
    let (shared_opt, other_opt) = (shared.opt(), other.opt());
    fn with<'a>(quick: [&'a str; 3], key: &'a str) -> [&'a str; 4] {
        [quick[0], quick[1], quick[2], key]
    }
    let a = Node::A.start(&net, &with(quick, &shared_opt));
    let b = Node::B.start(&net, &with(quick, &shared_opt));
    // C signs with another key under the same id; D has no key at all.
    let c = Node::C.start(&net, &with(quick, &other_opt));
    let d = Node::new(4).start(&net, &quick);
    a.expect_log("discovery: authenticated, signing with key 5 of 1", WAIT);

    // Key holders find each other by address and by name, both ways.
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", &Node::B.ip4()]);
    resolve_node(
        &b,
        Node::B,
        Node::A,
        &["-f", "n", "-s", "node-b", "-d", "node-a"],
    );
    // A host with the wrong key, or none, neither answers nor is answered.
    for (asker, target) in [(&a, "10.0.0.3"), (&a, "10.0.0.4"), (&c, "10.0.0.1")] {
        resolve_fails(asker, &["-f", "i", "-d", target], "Connection timed out");
    }
    resolve_fails(&d, &["-f", "i", "-d", "10.0.0.2"], "Connection timed out");
    resolve_fails(
        &a,
        &["-f", "n", "-s", "node-a", "-d", "node-c"],
        "Connection timed out",
    );

    // Every refusal is counted, and an operator sees why in the log at the
    // daemon's default level.
    for h in [&a, &c] {
        let summary = || drop_summary(h).unwrap_or_default();
        let deadline = Instant::now() + WAIT + Duration::from_secs(10);
        while !summary().contains("unauthenticated") || summary().contains("unauthenticated 0,") {
            assert!(
                Instant::now() < deadline,
                "no unauthenticated drops logged\n{}",
                h.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // D, without a key, drops what the others send (the AUTH flag is not
    // something it can check) and says so.
    assert!(
        d.wait_log("authenticated message, but no urdma_auth_key_file", WAIT),
        "{}",
        d.diagnostics()
    );
    for h in [&a, &b, &c, &d] {
        assert!(h.daemon_alive(), "{}", h.diagnostics());
    }
}

#[test]
fn a_key_file_others_can_read_turns_discovery_off_with_a_clear_error() {
    let key = KeyFile::new("open", "5 00112233445566778899aabbccddeeff\n", 0o644);
    let net = Net::new();
    let a = Node::A.start(&net, &[&key.opt()]);
    let _b = Node::B.start(&net, &[]);
    a.expect_log(
        &format!(
            "{}:0: urdma_auth_key_file: mode 0644 lets other users read or change the key; refused",
            key.0.display()
        ),
        WAIT,
    );
    a.expect_log("discovery off until the key file is mended", WAIT);
    // Never unauthenticated discovery instead: B is not asked ...
    resolve_fails(&a, &["-f", "i", "-d", "10.0.0.2"], "No data available");
    // ... while what A knows by itself still resolves.
    resolve_node(
        &a,
        Node::A,
        Node::A,
        &["-f", "n", "-s", "node-a", "-d", "node-a"],
    );
    assert!(a.daemon_alive(), "{}", a.diagnostics());
}
