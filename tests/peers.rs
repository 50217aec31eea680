//! Peers that misbehave, end to end: a host flooding the discovery port
//! with garbage, a peer answering slowly, late or twice, and replies
//! replayed, forged or sent from the wrong address. Anyone on the segment
//! can send the provider anything, so none of it may change an answer a
//! client gets, slow the others down or grow the daemon; each refusal is
//! counted in the daemon's log, which is how the tests see it. The peers
//! are `FakePeer`s (see the harness). Needs root and
//! `cargo build --workspace`.

use ibacm_urdma::discovery::wire::{Announce, Answer, Message, Query};
use std::net::{SocketAddr, UdpSocket};
use std::num::NonZeroU64;
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::drops::{drops_from, expect_drops, expect_stale_drops, total_drops};
use urdma_harness::fake_peer::{Asked, FakePeer};
use urdma_harness::load::{load_ok, verbose_dgids};
use urdma_harness::nodes::{
    b_with_addresses, resolve, resolve_fails, resolve_node, timed, Node, DISCOVERY_PORT, WAIT,
};
use urdma_harness::{scaled, Host, Net};

/// Datagrams a noisy host throws at the discovery port: random bytes of
/// every length up to beyond the largest message, and as many that start
/// like a message (magic, version, a type) and go wrong later.
fn garbage(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..count)
        .map(|i| {
            let len = (next() % 1500) as usize;
            let mut d: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if i % 2 == 0 && len >= 16 {
                d[..4].copy_from_slice(b"URDD");
                d[4] = 1;
                d[5] = 1 + (next() % 3) as u8;
                d[6] = 0;
                d[7] = 0;
            }
            d
        })
        .collect()
}

/// How long the garbage flood lasts.
const FLOOD: Duration = Duration::from_secs(8);

#[test]
fn a_garbage_flood_while_resolving_changes_no_answer_and_no_memory() {
    // What the daemon may grow by under the flood: its allocator's arenas
    // and the log's stdio buffer settle in the warm-up; one drop costs
    // nothing that stays.
    const RSS_BOUND_KB: u64 = 1024;
    let net = Net::new();
    let a = Node::A.start(&net, &[]);
    let (_b, ips) = b_with_addresses(&net, 20, &[]);
    let d = Host::bare();
    net.attach(&d, "eth0", &["10.0.0.4/24"]);
    let dests = a.path("dests.txt");
    std::fs::write(&dests, ips.join("\n")).unwrap();
    // Warm-up: learn B, and run the daemon's request path and a few
    // hundred drops, so that what is allocated once is allocated.
    mixed_load(&a, &dests, "2", "4");
    let a_addr = format!("{}:{DISCOVERY_PORT}", Node::A.ip4());
    let warm_garbage = garbage(1, 500);
    d.in_netns(|| {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for g in &warm_garbage {
            let _ = s.send_to(g, &a_addr);
        }
    });
    sleep(Duration::from_secs(1));
    let rss_warm = a.daemon_rss_kb();
    let drops_warm = total_drops(&a);

    let flood = garbage(0x9e37_79b9_7f4a_7c15, 4096);
    let (sent, (requests, samples)) = std::thread::scope(|s| {
        let flooder = s.spawn(|| flood_from(&d, &a_addr, &flood));
        let sampler = s.spawn(|| rss_every_second(&a));
        let requests = mixed_load(&a, &dests, &FLOOD.as_secs().to_string(), "4");
        (flooder.join().unwrap(), (requests, sampler.join().unwrap()))
    });
    sleep(Duration::from_secs(1));
    let rss_after = a.daemon_rss_kb();
    let dropped = total_drops(&a) - drops_warm;
    eprintln!(
        "flood: {sent} datagrams sent, {dropped} dropped by the daemon, {requests} requests \
         answered meanwhile; RSS warm {rss_warm} kB, during {samples:?}, after {rss_after} kB"
    );
    assert!(
        dropped > 0 && dropped <= sent,
        "{dropped} drops of {sent} sent"
    );
    for rss in samples.iter().chain([&rss_after]) {
        assert!(
            *rss <= rss_warm + RSS_BOUND_KB,
            "RSS grew from {rss_warm} kB to {rss} kB under the flood ({samples:?})"
        );
    }
    // Never answered: nothing in the flood is a query from a real host.
    assert!(!a.log().contains("asked for"), "{}", a.diagnostics());
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", "node-a", "-d", "node-b"],
    );
    assert!(a.daemon_alive(), "{}", a.diagnostics());
}

/// `urdma-load` on `a` for `duration` seconds on `conns` connections: B's
/// address and the addresses listed in `dests`, each answered with B's
/// GID. Returns how many requests were made.
fn mixed_load(a: &Host, dests: &Path, duration: &str, conns: &str) -> u64 {
    let (out, sum) = load_ok(
        a,
        &[
            "-s",
            "10.0.0.1",
            "-f",
            "i",
            "--dest-file",
            dests.to_str().unwrap(),
            "-d",
            "10.0.0.2",
            "-c",
            conns,
            "--duration",
            duration,
            "--verbose",
        ],
        Duration::from_secs(60),
        &[],
    );
    assert_eq!(sum["ok"], sum["requests"], "{sum:?}");
    for (dest, dgids) in verbose_dgids(&out) {
        assert!(
            dgids.iter().all(|g| *g == Node::B.gid()),
            "{dest}: {dgids:?}"
        );
    }
    sum["requests"].parse::<u64>().unwrap()
}

/// From host `d`, `flood` sent to `to` over and over for `FLOOD`. Returns
/// how many datagrams left.
fn flood_from(d: &Host, to: &str, flood: &[Vec<u8>]) -> u64 {
    d.in_netns(|| {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        let started = Instant::now();
        let mut sent = 0u64;
        while started.elapsed() < FLOOD {
            for g in flood {
                if s.send_to(g, to).is_ok() {
                    sent += 1;
                }
            }
        }
        sent
    })
}

/// The daemon's RSS on `a`, read every second for `FLOOD`.
fn rss_every_second(a: &Host) -> Vec<u64> {
    let mut samples = Vec::new();
    let started = Instant::now();
    while started.elapsed() < FLOOD {
        sleep(Duration::from_secs(1));
        samples.push(a.daemon_rss_kb());
    }
    samples
}

/// The fake peer's addresses, each answering its first query its own way:
/// slowly (`delay`), at once and then again with another GID (`TWICE`),
/// or after the lookup has given up (`LATE`).
const SLOW: usize = 0;
const SLOWER: usize = 1;
const SLOWEST: usize = 2;
const TWICE: usize = 3;
const LATE: usize = 4;

/// How long each address waits before answering its first query.
fn delay(i: usize) -> Duration {
    match i {
        SLOW => Duration::from_millis(250),
        SLOWER => Duration::from_millis(600),
        SLOWEST => Duration::from_millis(1200),
        LATE => Duration::from_millis(3600),
        _ => Duration::ZERO,
    }
}

fn ip(i: usize) -> String {
    FakePeer::ip(i).to_string()
}

fn gid(i: usize, g: u16) -> String {
    FakePeer::gid(i, g).to_string()
}

#[test]
fn a_peer_that_answers_slowly_late_or_twice() {
    const TIMEOUT_MS: u64 = 400;
    // Two tries: a lookup gives up after 800 ms while replies are fast,
    // and after at most 3.2 s (tries four times as long) once they have
    // been slow.
    let net = Net::new();
    let a = Node::A.start(
        &net,
        &[
            &format!("urdma_timeout {TIMEOUT_MS}"),
            "urdma_retries 1",
            "urdma_negative_timeout 1000",
        ],
    );
    let fake = FakePeer::start(&net, 5);

    std::thread::scope(|s| {
        let peer = s.spawn(|| answer_each_first_query_after_its_delay(&fake));
        resolves_after_its_delay(&a, SLOW);
        // Answered after the first try's timeout: the tries' transaction
        // ids all stay valid, so the late answer to the first try counts.
        resolves_after_its_delay(&a, SLOWER);
        // Replies that took 250 and 600 ms made a try longer than the
        // 400 ms configured: a peer that answers in 1.2 s, after the two
        // tries' 800 ms, is waited for rather than timed out.
        resolves_after_its_delay(&a, SLOWEST);
        // After the last try, at the longest: the client has its ETIMEDOUT
        // when the answer comes, which is then dropped.
        let (out, took) =
            timed(|| resolve_fails(&a, &["-f", "i", "-d", &ip(LATE)], "Connection timed out"));
        assert!(took < delay(LATE), "{took:?}:\n{out}");
        assert_the_timeout_is_explained(&a);
        resolve(
            &a,
            &["-f", "i", "-d", &ip(TWICE)],
            &gid(TWICE, 0),
            &Node::A.gid(),
        );
        peer.join().unwrap();
    });
    // Both dropped: as late while a reply to the ended lookup could still
    // be on its way, as unsolicited after.
    expect_stale_drops(&a, &FakePeer::source(LATE), 1);
    expect_drops(&a, &FakePeer::source(TWICE), "a reply no longer awaited", 1);
    // The late answer taught nothing (and the timeout was not remembered):
    // a request that may not wait still finds no path.
    sleep(Duration::from_millis(1200));
    resolve_fails(&a, &["-c", "-f", "i", "-d", &ip(LATE)], "No data available");
    // The second answer changed nothing.
    resolve(
        &a,
        &["-c", "-f", "i", "-d", &ip(TWICE)],
        &gid(TWICE, 0),
        &Node::A.gid(),
    );
    resolve(
        &a,
        &["-c", "-f", "i", "-d", &ip(SLOWER)],
        &gid(SLOWER, 0),
        &Node::A.gid(),
    );
    drop(fake.host);
}

/// The fake peer answers each address's first query once, after its
/// delay; TWICE answers at once and then again with another GID.
fn answer_each_first_query_after_its_delay(fake: &FakePeer) {
    let mut pending: Vec<(Instant, Asked)> = Vec::new();
    let mut answered = [false; 5];
    let started = Instant::now();
    while answered.iter().any(|a| !a) && started.elapsed() < scaled(WAIT) {
        if let Some(q) = fake.next_query(Duration::from_millis(10)) {
            if !answered[q.index] && pending.iter().all(|(_, p)| p.index != q.index) {
                pending.push((Instant::now() + delay(q.index), q));
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = pending
            .into_iter()
            .partition(|(when, _)| *when <= Instant::now());
        pending = later;
        for (_, q) in due {
            fake.send(q.index, q.from, &FakePeer::found(&q.query, q.index, 0));
            if q.index == TWICE {
                fake.send(q.index, q.from, &FakePeer::found(&q.query, q.index, 1));
            }
            answered[q.index] = true;
        }
    }
}

/// `a` resolves the fake peer's address `i` to its GID, once the peer
/// answered after its delay.
fn resolves_after_its_delay(a: &Host, i: usize) {
    let (out, took) = timed(|| resolve(a, &["-f", "i", "-d", &ip(i)], &gid(i, 0), &Node::A.gid()));
    assert!(took >= delay(i), "{took:?}:\n{out}");
}

/// The operator reads why the LATE lookup failed, at the daemon's default
/// level: whom it asked and how often.
fn assert_the_timeout_is_explained(a: &Host) {
    let failed = format!("lookup {} failed (ETIMEDOUT) after ", ip(LATE));
    assert_eq!(
        a.log_severity(&failed).as_deref(),
        Some("warning"),
        "{}",
        a.diagnostics()
    );
    let asked = format!("asked of {}, 2 tries in ", FakePeer::source(LATE));
    let line = a
        .log()
        .lines()
        .find(|l| l.contains(&failed))
        .map(str::to_string);
    assert!(
        line.as_deref().is_some_and(|l| l.contains(&asked)),
        "{line:?}"
    );
}

#[test]
fn replayed_forged_and_misaddressed_replies_are_dropped_and_counted() {
    let net = Net::new();
    let a = Node::A.start(&net, &["urdma_timeout 3000", "urdma_retries 0"]);
    let fake = FakePeer::start(&net, 2);
    let target = FakePeer::ip(0).to_string();
    let src = FakePeer::source(0);
    // A replay soon after the lookup it answered ended looks like that
    // reply arriving late (the two cannot be told apart): dropped either
    // way, counted as late or as unsolicited by when it comes.
    let (a_port, first_txid, reply) = a_valid_exchange(&a, &fake);

    // Replayed after the fact, from the right address and port: dropped.
    fake.send(0, a_port, &reply);
    expect_stale_drops(&a, &src, 1);

    // The endpoint moves to a new GID: A asks again. While that query is
    // in flight, the old reply is replayed, a reply with a wrong
    // transaction id is sent, and the right one comes from another
    // address: all dropped, and the lookup still ends with the real
    // answer.
    withdrawn_after_a_refused_check(&a, &fake, a_port, first_txid);
    std::thread::scope(|s| {
        let lookup = s.spawn(|| {
            resolve(
                &a,
                &["-f", "i", "-d", &target],
                &FakePeer::gid(0, 1).to_string(),
                &Node::A.gid(),
            )
        });
        let q = loop {
            let q = fake.expect_query(&a);
            if q.index == 0 {
                break q;
            }
        };
        assert_ne!(
            q.query.txid(),
            first_txid,
            "transaction ids must not repeat"
        );
        fake.send(0, q.from, &reply);
        expect_stale_drops(&a, &src, 2);
        send_a_wrong_txid_and_a_forgery(&a, &fake, &q);
        fake.send(0, q.from, &FakePeer::found(&q.query, 0, 1));
        lookup.join().unwrap();
        // The new answer replayed: too late as well.
        fake.send(0, q.from, &FakePeer::found(&q.query, 0, 1));
    });
    expect_stale_drops(&a, &src, 4);
    // And the first reply once more, now that a binding exists: it would
    // move the address back to the old GID if it were believed.
    fake.send(0, a_port, &reply);
    expect_stale_drops(&a, &src, 5);
    resolve(
        &a,
        &["-c", "-f", "i", "-d", &target],
        &FakePeer::gid(0, 1).to_string(),
        &Node::A.gid(),
    );
    drop(fake.host);
}

/// A valid exchange, whose reply is kept: `a` looks up the fake peer's
/// address 0, which answers. Returns where A asked from, the query's
/// transaction id and the reply.
fn a_valid_exchange(a: &Host, fake: &FakePeer) -> (SocketAddr, NonZeroU64, Vec<u8>) {
    std::thread::scope(|s| {
        let lookup = s.spawn(|| {
            resolve(
                a,
                &["-f", "i", "-d", &FakePeer::ip(0).to_string()],
                &FakePeer::gid(0, 0).to_string(),
                &Node::A.gid(),
            )
        });
        let q = fake.expect_query(a);
        let reply = FakePeer::found(&q.query, 0, 0);
        fake.send(0, q.from, &reply);
        lookup.join().unwrap();
        (q.from, q.query.txid(), reply)
    })
}

/// The fake peer's endpoint 0 withdraws its binding (to `a_port` of `a`),
/// A checks with it (a withdrawal is only a hint), the endpoint refuses,
/// and A no longer has a path to it.
fn withdrawn_after_a_refused_check(
    a: &Host,
    fake: &FakePeer,
    a_port: SocketAddr,
    first_txid: NonZeroU64,
) {
    let withdrawal = Announce::new(vec![FakePeer::record(0, 0)], true).unwrap();
    fake.send(0, a_port, &Message::from(withdrawal).encode());
    let check = fake.expect_query(a);
    assert_eq!(check.index, 0, "checked at the address itself");
    assert_ne!(check.query.txid(), first_txid);
    let refused = check.query.reply(Answer::Refused).unwrap();
    fake.send(0, check.from, &Message::from(refused).encode());
    let target = FakePeer::ip(0).to_string();
    let deadline = Instant::now() + scaled(WAIT);
    while a.acme(&["-c", "-f", "i", "-d", &target]).0 == 0 {
        assert!(
            Instant::now() < deadline,
            "not withdrawn\n{}",
            a.diagnostics()
        );
        sleep(Duration::from_millis(50));
    }
}

/// While `q` of `a` is in flight: a reply to a transaction A never had
/// (unsolicited, whenever it comes), and the right reply from the fake
/// peer's other address; each dropped and counted.
fn send_a_wrong_txid_and_a_forgery(a: &Host, fake: &FakePeer, q: &Asked) {
    let src = FakePeer::source(0);
    let unsolicited = "no query with that transaction id";
    let other = q.query.txid().get().wrapping_add(1).max(1);
    let wrong_txid = Query::new(
        other.try_into().unwrap(),
        q.query.target().clone(),
        q.query.sender().clone(),
    );
    let before = drops_from(a, &src).get(unsolicited).copied().unwrap_or(0);
    fake.send(0, q.from, &FakePeer::found(&wrong_txid, 0, 2));
    expect_drops(a, &src, unsolicited, before + 1);
    let forged = FakePeer::found(&q.query, 0, 2);
    fake.send(1, q.from, &forged);
    expect_drops(
        a,
        &FakePeer::source(1),
        "reply not from the queried address",
        1,
    );
}
