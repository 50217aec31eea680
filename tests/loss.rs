//! A lossy network, end to end: datagrams dropped at random, replies
//! truncated, oversized, duplicated and reordered, and a peer that never
//! answers at all. Discovery runs over UDP, so the provider's retries and
//! timeouts are all that stands between a lost datagram and a client that
//! waits forever or gets a wrong path; these tests hold them to their
//! bounds. Needs root and `cargo build --workspace`.

use std::io::Write;
use std::thread::sleep;
use std::time::Duration;
use urdma_harness::drops::{drops_from, expect_drops, expect_stale_drops};
use urdma_harness::fake_peer::{Asked, FakePeer};
use urdma_harness::load::{load_ok, resolve_all, verbose_dgids};
use urdma_harness::nodes::{
    add_silent_neighbour, b_with_addresses, resolve, resolve_fails, timed, Node, WAIT,
};
use urdma_harness::{Host, Net};

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

/// nftables in the bridge's namespace: an overloaded segment, where 90%
/// of the group datagrams (the name queries, to the IPv4 and the IPv6
/// group) are dropped; unicast passes.
const GROUP_LOSS_RULES: &str = "
table bridge loss {
  chain between {
    type filter hook forward priority 0; policy accept;
    ip daddr 239.255.65.67 udp dport 6126 numgen random mod 10 < 9 counter drop
    ip6 daddr ff12::1:6126 udp dport 6126 numgen random mod 10 < 9 counter drop
    ip daddr 239.255.65.67 udp dport 6126 counter
    ip6 daddr ff12::1:6126 udp dport 6126 counter
  }
}
";

fn load_rules(net: &Net, rules: &str) {
    let mut nft = std::process::Command::new("ip")
        .args(["netns", "exec", &net.netns, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("nft");
    nft.stdin
        .take()
        .unwrap()
        .write_all(rules.as_bytes())
        .unwrap();
    assert!(nft.wait().unwrap().success(), "nft rejected the rules");
}

/// `(dropped, passed)` packets from the counters of the `loss` table.
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
    load_rules(&net, LOSS_RULES);

    // Each try twice as long as the one before, up to the ceiling.
    let first = Duration::from_millis(TIMEOUT_MS);
    let bound = ibacm_urdma::discovery::stage_time(
        first,
        RETRIES as u32 + 1,
        first * ibacm_urdma::discovery::RETRY_CEILING,
    );
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
        "slowest lookup {max_us} us, beyond {RETRIES} retries from {TIMEOUT_MS} ms"
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
        // The duplicate: late, or unsolicited if it came after a stage.
        expect_stale_drops(&a, &from, 1);
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

/// The 256 daemons, small: when the segment drops most name
/// queries, a name the segment could not find in time (and the system's
/// resolver does not know: names only in ibacm_addr.cfg) is ETIMEDOUT,
/// never ENODATA, and is not remembered: asked again, more are found.
#[test]
fn names_an_overloaded_segment_cannot_find_in_time_time_out_and_never_say_no_such_host() {
    const NAMES: usize = 40;
    let net = Net::new();
    let a = Node::A.start(&net, &["urdma_timeout 100", "urdma_retries 2"]);
    let mut cfg = Node::B.config(&[]);
    let names: Vec<String> = (0..NAMES).map(|i| format!("bname{i}")).collect();
    for n in &names {
        cfg.addr_lines.push(format!("{n} urdma0 1 default"));
    }
    let b = Host::start_on(&net, "eth0", cfg);
    b.expect_log(
        &format!("urdma: endpoint pkey 0xffff: address {}", names[NAMES - 1]),
        WAIT,
    );
    load_rules(&net, GROUP_LOSS_RULES);

    let file = a.path("names.txt");
    std::fs::write(&file, names.join("\n")).unwrap();
    let n = NAMES.to_string();
    let args = [
        "-f",
        "n",
        "-s",
        "node-a",
        "--dest-file",
        file.to_str().unwrap(),
        "-c",
        &n,
        "-n",
        &n,
        "--verbose",
    ];
    let mut resolved = Vec::new();
    // The second round comes well within urdma_negative_timeout (5 s).
    for round in 1..=2 {
        let (out, sum) = load_ok(&a, &args, Duration::from_secs(60), &[("requests", &n)]);
        let count = |k: &str| sum[k].parse::<u64>().unwrap();
        assert_eq!(count("status_3"), 0, "ENODATA for names B holds:\n{out}");
        assert_eq!(count("ok") + count("status_6"), NAMES as u64, "{sum:?}");
        for (dest, dgids) in verbose_dgids(&out) {
            assert!(
                dgids == [Node::B.gid()] || dgids == ["-"],
                "{dest}: {dgids:?}\n{out}"
            );
        }
        eprintln!(
            "round {round}: {} of {NAMES} names resolved, {} timed out",
            sum["ok"], sum["status_6"]
        );
        resolved.push(count("ok"));
    }
    // The overload was real, and what timed out was asked again.
    assert!(resolved[0] < NAMES as u64, "{resolved:?}");
    assert!(resolved[1] > resolved[0], "{resolved:?}");
    let (dropped, passed) = loss_counters(&net);
    assert!(dropped > 4 * passed, "{dropped} dropped, {passed} passed");
}
