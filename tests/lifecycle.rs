//! The daemon's life, end to end: ports going down and coming back,
//! clients that hang up before their reply, and the daemon stopped and
//! restarted. These are what an operator's machine does every day, so
//! what must hold through them is that nothing is left behind: every
//! request answered once, no client slot or descriptor leaked, memory
//! growing no more than the daemon's own, and the provider serving again
//! afterwards. Needs root and `cargo build --workspace`.

use std::thread::sleep;
use std::time::{Duration, Instant};
use urdma_harness::load::{load_ok, load_summary};
use urdma_harness::nodes::{resolve_node, resolves_by_every_kind, timed, Node, WAIT};
use urdma_harness::{scaled, Artifacts, Host, HostConfig, Net};

/// Waits until the host's port 1 endpoint is back after a `port_active`,
/// i.e. its name has been added for the `count`-th time.
fn expect_endpoint_back(host: &Host, name: &str, count: usize) {
    let added = format!("urdma: endpoint pkey 0xffff: address {name}");
    if !host.wait_log_count(&added, count, WAIT) {
        panic!("port 1 did not come back\n{}", host.diagnostics());
    }
}

// A fake peer -----------------------------------------------------------------

#[test]
fn a_port_going_down_answers_every_pending_request_once_and_comes_back() {
    const PENDING: usize = 100;
    const TIMEOUT_MS: u64 = 8000;
    let net = Net::new();
    let opts = [
        format!("urdma_timeout {TIMEOUT_MS}"),
        "urdma_retries 0".into(),
    ];
    let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
    let a = Node::A.start(&net, &opts);
    let _b = Node::B.start(&net, &[]);

    // 100 names nobody holds, each on its own connection: all wait for
    // discovery, which would give up only after 8 s.
    let n = PENDING.to_string();
    std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            timed(|| {
                a.load(
                    &[
                        "-s", "node-a", "-f", "n", "--range", "ghost-", &n, "-c", &n, "-n", &n,
                    ],
                    Duration::from_secs(60),
                )
            })
        });
        if !a.wait_log_count("urdma: lookup ghost-", PENDING, WAIT) {
            panic!("not all lookups started\n{}", a.diagnostics());
        }
        a.inject("event urdma0 1 port_err");
        let ((code, out), took) = waiting.join().unwrap();
        let sum = load_summary(&out);
        assert_eq!(code, 0, "{out}\n{}", a.diagnostics());
        for (k, v) in [
            ("requests", n.as_str()),
            ("replies", &n),
            ("status_5", &n),
            ("missing", "0"),
            ("duplicates", "0"),
        ] {
            assert_eq!(sum[k], v, "`{k}` in {sum:?}");
        }
        assert!(
            took < Duration::from_millis(TIMEOUT_MS),
            "answered only after {took:?}: by the timeout, not the port going down"
        );
    });
    a.expect_log("acm_port_down: urdma0 1 is down", WAIT);

    a.inject("event urdma0 1 port_active");
    expect_endpoint_back(&a, "node-a", 2);
    resolves_by_every_kind(&a, Node::A, Node::B);
    assert!(a.daemon_alive(), "{}", a.diagnostics());
}

#[test]
fn two_thousand_clients_that_hang_up_before_their_reply_leak_no_client_slot() {
    const CLIENTS: usize = 2000;
    let net = Net::new();
    // Short lookups, and no memory of failures, so every request waits
    // for the network and is answered after its client has gone.
    let a = Node::A.start(
        &net,
        &[
            "urdma_timeout 100",
            "urdma_retries 0",
            "urdma_negative_timeout 0",
        ],
    );
    let _b = Node::B.start(&net, &[]);
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", "10.0.0.2"]);
    let fds_before = a.daemon_fds();

    // In batches: a request waiting on the network holds its client's slot
    // until it is answered, whether the client is there or not, and the
    // daemon has 1,023 slots. All 2,000 at once would be refused by the
    // daemon itself ("all connections busy") whenever they arrive faster
    // than their lookups fail.
    for round in 1..=CLIENTS / BATCH {
        abandon_a_batch(&a, round, fds_before);
    }
    assert!(a.daemon_alive(), "{}", a.diagnostics());

    // 900 clients at once (of the daemon's 1023 slots) are all served.
    load_ok(
        &a,
        &["-d", "10.0.0.2", "-c", "900", "-n", "1800"],
        Duration::from_secs(120),
        &[
            ("requests", "1800"),
            ("ok", "1800"),
            ("connect_errors", "0"),
            ("disconnects", "0"),
        ],
    );
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", "node-a", "-d", "node-b"],
    );
}

/// Clients that hang up in each batch, and the names they ask for.
const BATCH: usize = 500;
const NAMES: usize = 200;

/// Batch `round` of `BATCH` clients on `a` that each ask for a name nobody
/// holds and hang up before the answer. Every abandoned request is
/// answered (to nobody) once its lookup fails, and its descriptor is
/// closed: back to the `fds_before` the daemon held before any came.
fn abandon_a_batch(a: &Host, round: usize, fds_before: usize) {
    let (batch, names) = (BATCH.to_string(), NAMES.to_string());
    load_ok(
        a,
        &[
            "--abandon",
            "-s",
            "node-a",
            "-f",
            "n",
            "--range",
            "gone-",
            &names,
            "-c",
            "8",
            "-n",
            &batch,
        ],
        Duration::from_secs(120),
        &[
            ("requests", &batch),
            ("abandoned", &batch),
            ("connect_errors", "0"),
        ],
    );
    let deadline = Instant::now() + scaled(WAIT);
    while a.log_count(": failed with status") < NAMES * round || a.daemon_fds() > fds_before {
        assert!(
            Instant::now() < deadline,
            "after {} clients the daemon holds {} descriptors, {fds_before} before they came\n{}",
            BATCH * round,
            a.daemon_fds(),
            a.diagnostics()
        );
        sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigterm_stops_the_daemon_and_a_restart_serves_again() {
    let net = Net::new();
    let a_cfg = Node::A.config(&["urdma_timeout 10000", "urdma_retries 0"]);
    let a = Host::start_on(&net, "eth0", a_cfg.clone());
    let b = Node::B.start(&net, &[]);
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", "10.0.0.2"]);

    std::thread::scope(|s| {
        // Clients waiting on lookups when the daemon is stopped are not left
        // hanging: their connections close.
        let waiting = s.spawn(|| {
            a.load(
                &[
                    "-s", "node-a", "-f", "n", "--range", "ghost-", "20", "-c", "20",
                ],
                Duration::from_secs(60),
            )
        });
        if !a.wait_log_count("urdma: lookup ghost-", 20, WAIT) {
            panic!("lookups did not start\n{}", a.diagnostics());
        }
        let (status, took) = timed(|| a.terminate_daemon(Duration::from_secs(5)));
        let status = status.unwrap_or_else(|| panic!("ibacm ignored SIGTERM\n{}", a.diagnostics()));
        eprintln!("ibacm stopped by SIGTERM after {took:?}: {status:?}");
        let (code, out) = waiting.join().unwrap();
        let sum = load_summary(&out);
        assert_ne!(code, 0, "{out}");
        assert_eq!(sum["replies"], "0", "{sum:?}");
        assert_eq!(sum["lost"], "20", "{sum:?}");
        assert_eq!(sum["timeouts"], "0", "{sum:?}");
    });

    // The restarted daemon (same namespaces, stale socket and lock file
    // left behind) serves again: what A knew is gone with the process and
    // is asked anew, and it answers B.
    a.restart(&a_cfg);
    resolve_node(&a, Node::A, Node::B, &["-f", "i", "-d", "10.0.0.2"]);
    a.expect_log("urdma: lookup 10.0.0.2: started", WAIT);
    resolve_node(
        &a,
        Node::A,
        Node::B,
        &["-f", "n", "-s", "node-a", "-d", "node-b"],
    );
    resolve_node(&b, Node::B, Node::A, &["-f", "i", "-d", "10.0.0.1"]);
    assert!(a.daemon_alive() && b.daemon_alive(), "{}", a.diagnostics());
}

/// The daemon's RSS after `cycles` port down/up events, minus before, with
/// `provider` (`null` or `urdma`) serving the port.
fn rss_growth_over_port_cycles(provider: &str, cycles: usize) -> i64 {
    let cfg = HostConfig::default().opt("urdma_discovery no").provider(
        provider,
        &Artifacts::profile_dir().join(format!("libibacm_{provider}.so")),
    );
    let h = Host::start(cfg);
    // Cycle `n` (from 1): each event handled by the daemon before the next
    // is injected, so that every cycle is a whole one and events never
    // queue up behind a daemon that is slow on a loaded machine.
    let cycle = |n: usize| {
        for (event, done, count) in [
            ("port_err", "acm_port_down: urdma0 1 is down", n),
            // Assigned once at start, then once per cycle.
            ("port_active", "acm_assign_ep_names: assigning node1", n + 1),
        ] {
            h.inject(&format!("event urdma0 1 {event}"));
            if !h.wait_log_count(done, count, WAIT) {
                panic!("cycle {n}: {event} was not handled\n{}", h.diagnostics());
            }
        }
    };
    // One cycle first, so that what is allocated once is not counted.
    cycle(1);
    sleep(Duration::from_millis(300));
    let before = h.daemon_rss_kb() as i64;
    for n in 2..=cycles + 1 {
        cycle(n);
    }
    sleep(Duration::from_millis(300));
    assert!(h.daemon_alive(), "{}", h.diagnostics());
    h.daemon_rss_kb() as i64 - before
}

/// The soak's RSS steps with port cycles: the daemon (ibacm 44) itself
/// grows by a few kB per port cycle whatever the provider, and urdma adds
/// nothing measurable to that.
#[test]
fn port_cycles_grow_the_daemon_no_more_with_urdma_than_with_the_null_provider() {
    const CYCLES: usize = 200;
    let null = rss_growth_over_port_cycles("null", CYCLES);
    let urdma = rss_growth_over_port_cycles("urdma", CYCLES);
    eprintln!("RSS growth over {CYCLES} port cycles: null {null} kB, urdma {urdma} kB");
    assert!(
        urdma <= null + 256,
        "urdma grew the daemon by {urdma} kB over {CYCLES} port cycles, null by {null} kB"
    );
}
