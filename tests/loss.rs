//! A lossy network, end to end: datagrams dropped at random, replies
//! truncated, oversized, duplicated and reordered, and a peer that never
//! answers at all. Discovery runs over UDP, so the provider's retries and
//! timeouts are all that stands between a lost datagram and a client that
//! waits forever or gets a wrong path; these tests hold them to their
//! bounds. Needs root and `cargo build --workspace`.

use std::io::Write;
use std::thread::sleep;
use std::time::Duration;
use urdma_harness::drops::{drops_from, expect_drops};
use urdma_harness::fake_peer::{Asked, FakePeer};
use urdma_harness::load::{resolve_all, verbose_dgids};
use urdma_harness::nodes::{
    add_silent_neighbour, b_with_addresses, resolve, resolve_fails, timed, Node,
};
use urdma_harness::Net;

/// nftables in the bridge's namespace: 30% of the discovery datagrams
/// between the hosts dropped (each way), and counters of what passed.
const LOSS_RULES: &str = "
table bridge loss {
  chain between {
    type filter hook forward priority 0; policy accept;
    udp dport 6126 numgen random mod 10 < 3 counter drop
    udp sport 6126 udp dport != 6126 numgen random mod 10 < 3 counter drop
    udp dport 6126 counter
    udp sport 6126 udp dport != 6126 counter
  }
}
";

/// `(dropped, passed)` packets from the counters of `LOSS_RULES`.
fn loss_counters(net: &Net) -> (u64, u64) {
    let out = std::process::Command::new("ip")
        .args([
            "netns", "exec", &net.netns, "nft", "list", "table", "bridge", "loss",
        ])
        .output()
        .expect("nft list");
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut dropped, mut passed) = (0, 0);
    for l in text.lines().filter(|l| l.contains("counter packets")) {
        let packets: u64 = l
            .split_whitespace()
            .skip_while(|w| *w != "packets")
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no packet count in `{l}`"));
        if l.trim_end().ends_with("drop") {
            dropped += packets;
        } else {
            passed += packets;
        }
    }
    (dropped, passed)
}

#[test]
fn thirty_percent_packet_loss_is_overcome_by_retries_within_the_bound() {
    const LOOKUPS: usize = 40;
    const TIMEOUT_MS: u64 = 200;
    // Each try gets through both ways with p = 0.7 * 0.7 = 0.49; with the
    // most retries the provider allows (10) a lookup fails with p = 0.51^11
    // = 6e-4, so of 40 at most one fails but with p < 3e-4.
    const RETRIES: u64 = 10;
    let net = Net::new();
    let opts = [
        format!("urdma_timeout {TIMEOUT_MS}"),
        format!("urdma_retries {RETRIES}"),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let a = Node::A.start(&net, &opts);
    let (_b, ips) = b_with_addresses(&net, LOOKUPS, &[]);
    let mut nft = std::process::Command::new("ip")
        .args(["netns", "exec", &net.netns, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("nft");
    nft.stdin
        .take()
        .unwrap()
        .write_all(LOSS_RULES.as_bytes())
        .unwrap();
    assert!(nft.wait().unwrap().success(), "nft rejected the rules");

    let bound = Duration::from_millis(TIMEOUT_MS * (RETRIES + 1));
    let n = LOOKUPS.to_string();
    let (out, sum) = resolve_all(&a, &ips, &[("replies", &n)]);
    let failed: u64 = sum["status_6"].parse().unwrap();
    assert!(failed <= 1, "{failed} lookups timed out:\n{out}");
    assert_eq!(
        sum["ok"].parse::<u64>().unwrap() + failed,
        LOOKUPS as u64,
        "{sum:?}"
    );
    for (dest, dgids) in verbose_dgids(&out) {
        assert!(
            dgids == [Node::B.gid()] || dgids == ["-"],
            "{dest}: {dgids:?}\n{out}"
        );
    }
    let max_us: u64 = sum["max_us"].parse().unwrap();
    assert!(
        Duration::from_micros(max_us) < bound + Duration::from_millis(500),
        "slowest lookup {max_us} us, beyond {RETRIES} retries of {TIMEOUT_MS} ms"
    );
    // The loss was real and the provider retried through it.
    let (dropped, passed) = loss_counters(&net);
    let share = dropped as f64 / (dropped + passed) as f64;
    assert!(
        (0.15..0.45).contains(&share),
        "{dropped} of {} datagrams dropped",
        dropped + passed
    );
    let retried = a.log_count("timed out, asking again");
    assert!(retried > 0, "no retry in\n{}", a.diagnostics());
    eprintln!(
        "{LOOKUPS} lookups under loss: {dropped}/{} datagrams dropped ({:.0}%), {retried} retries, \
         slowest {max_us} us (bound {bound:?})",
        dropped + passed,
        share * 100.0
    );
}

#[test]
fn truncated_oversized_duplicated_and_reordered_replies_leave_the_answers_right() {
    const PEERS: usize = 6;
    let net = Net::new();
    // No retry while the fake peer collects every query.
    let a = Node::A.start(&net, &["urdma_timeout 5000", "urdma_retries 0"]);
    let fake = FakePeer::start(&net, PEERS);
    let dests: Vec<String> = (0..PEERS).map(|i| FakePeer::ip(i).to_string()).collect();
    let n = PEERS.to_string();
    std::thread::scope(|s| {
        let load = s.spawn(|| resolve_all(&a, &dests, &[("ok", &n)]));
        let mut asked: Vec<Asked> = (0..PEERS).map(|_| fake.expect_query(&a)).collect();
        // Answered last-asked first, each answer preceded by a cut-off
        // copy and an oversized one (valid, with bytes after the end) and
        // followed by a duplicate.
        asked.sort_by_key(|q| q.index);
        for q in asked.iter().rev() {
            let reply = FakePeer::found(&q.query, q.index, 0);
            let mut oversized = reply.clone();
            oversized.resize(1400, 0);
            for bytes in [&reply[..reply.len() / 2], &oversized, &reply, &reply] {
                fake.send(q.index, q.from, bytes);
            }
        }
        let (out, _) = load.join().unwrap();
        for (i, dest) in dests.iter().enumerate() {
            assert_eq!(
                verbose_dgids(&out).get(dest),
                Some(&vec![FakePeer::gid(i, 0).to_string()]),
                "{dest}:\n{out}"
            );
        }
    });
    for i in 0..PEERS {
        let from = FakePeer::source(i);
        expect_drops(&a, &from, "malformed", 2);
        expect_drops(&a, &from, "no query with that transaction id", 1);
        assert_eq!(drops_from(&a, &from).values().sum::<usize>(), 3, "{from}");
    }
    // Cached: answered from what the real replies taught.
    for (i, dest) in dests.iter().enumerate() {
        resolve(
            &a,
            &["-c", "-f", "i", "-d", dest],
            &FakePeer::gid(i, 0).to_string(),
            &Node::A.gid(),
        );
    }
    assert!(a.daemon_alive(), "{}", a.diagnostics());
    drop(fake.host);
}

/// Regression: a lookup started while the worker slept was retried and
/// failed only at the worker's next idle wake-up, up to 1 s late.
#[test]
fn a_lookup_times_out_on_time_when_nothing_else_happens() {
    const TIMEOUT_MS: u64 = 100;
    const TRIES: usize = 8;
    let net = Net::new();
    let a = Node::A.start(
        &net,
        &[
            &format!("urdma_timeout {TIMEOUT_MS}"),
            "urdma_retries 0",
            "urdma_negative_timeout 0",
        ],
    );
    // A host that never answers.
    add_silent_neighbour(&a, "10.0.0.99");
    // The worker sleeps up to 1 s when it has nothing to do; if a new
    // lookup's deadline does not wake it, each lookup fails somewhere in
    // that second instead of after 100 ms, and 8 in a row all within
    // 400 ms of their deadline would be luck (p < 1%).
    let mut took_all = Vec::new();
    for _ in 0..TRIES {
        sleep(Duration::from_millis(300));
        let (_, took) =
            timed(|| resolve_fails(&a, &["-f", "i", "-d", "10.0.0.99"], "Connection timed out"));
        took_all.push(took);
    }
    let bound = Duration::from_millis(TIMEOUT_MS + 400);
    assert!(
        took_all.iter().all(|t| *t < bound),
        "a {TIMEOUT_MS} ms lookup failed after {took_all:?}\n{}",
        a.diagnostics()
    );
}
