//! Names beyond the local segment (`urdma_name_lookup segment,nss`), with
//! the real daemon, a real DNS server (dnsmasq) and two subnets joined by a
//! router: a name on the far subnet is not on the segment, so the
//! provider asks the system's resolver, then the addresses it gives by
//! unicast through the router. Needs root and `cargo build --workspace`.

use std::time::Duration;
use urdma_harness::nodes::{resolve_fails, resolve_node, timed, Node};
use urdma_harness::routed::{Routed, ROUTER_NEAR, SILENT_DNS};

/// Three tries from 300 ms, each twice the one before: a stage takes at
/// most 2.1 s, a name (segment, then the system's resolver) 4.2 s.
const QUICK: [&str; 2] = ["urdma_timeout 300", "urdma_retries 2"];
const STAGE: Duration = Duration::from_millis(300 + 600 + 1200);
/// Starting `nsenter` and `ib_acme` on a loaded 2-core machine.
const MARGIN: Duration = Duration::from_millis(1200);

fn far_c() -> [&'static str; 3] {
    [
        "node-c.far.test,10.0.1.3,fd01::3",
        "v4only-c.far.test,10.0.1.3",
        "v6only-c.far.test,fd01::3",
    ]
}

#[test]
fn names_on_a_far_subnet_resolve_through_dns_by_ipv4_and_by_ipv6() {
    let mut records = far_c().to_vec();
    records.push("node-a.near.test,10.0.0.1,fd00::1");
    let routed = Routed::new(&records);
    let dns = ROUTER_NEAR[0];
    let a = routed.start(Node::A, false, dns, &QUICK);
    let c = routed.start(Node::C, true, dns, &QUICK);

    for name in ["node-c.far.test", "v4only-c.far.test", "v6only-c.far.test"] {
        let args = ["-f", "n", "-s", "node-a", "-d", name];
        let (_, took) = timed(|| resolve_node(&a, Node::A, Node::C, &args));
        assert!(took < 2 * STAGE + MARGIN, "{name} took {took:?}");
    }
    // The far host's addresses are asked through the router as well, and
    // the far host finds the near one by its DNS name.
    resolve_node(&a, Node::A, Node::C, &["-f", "i", "-d", "10.0.1.3"]);
    resolve_node(&a, Node::A, Node::C, &["-f", "i", "-d", "fd01::3"]);
    resolve_node(
        &c,
        Node::C,
        Node::A,
        &["-f", "n", "-s", "node-c", "-d", "node-a.near.test"],
    );
}

#[test]
fn a_name_neither_the_segment_nor_dns_knows_fails_within_the_bound() {
    let routed = Routed::new(&far_c());
    // The segment answers a name only where it is held: its silence
    // (maybe an overloaded segment's) is not a no, so the name times out
    // though DNS says it does not exist.
    let a = routed.start(Node::A, false, ROUTER_NEAR[0], &QUICK);
    let (_, took) = timed(|| {
        resolve_fails(
            &a,
            &["-f", "n", "-s", "node-a", "-d", "nobody.far.test"],
            "Connection timed out",
        )
    });
    assert!(took < 2 * STAGE + MARGIN, "took {took:?}");
    // Asked of DNS alone, its NXDOMAIN is the answer.
    let mut opts = QUICK.to_vec();
    opts.push("urdma_name_lookup nss");
    let b = routed.start(Node::B, false, ROUTER_NEAR[0], &opts);
    let (_, took) = timed(|| {
        resolve_fails(
            &b,
            &["-f", "n", "-s", "node-b", "-d", "nobody.far.test"],
            "No data available",
        )
    });
    assert!(took < STAGE + MARGIN, "took {took:?}");
}

#[test]
fn a_dns_server_that_never_answers_delays_nothing_else() {
    let routed = Routed::new(&far_c());
    let a = routed.start(Node::A, false, SILENT_DNS, &QUICK);
    let _b = routed.start(Node::B, false, SILENT_DNS, &QUICK);
    std::thread::scope(|s| {
        // A name stuck in the system's resolver (which waits 5 s per try)...
        let stuck = s.spawn(|| {
            timed(|| {
                resolve_fails(
                    &a,
                    &["-f", "n", "-s", "node-a", "-d", "node-c.far.test"],
                    "Connection timed out",
                )
            })
        });
        std::thread::sleep(Duration::from_millis(500));
        // ...while the segment's addresses and names resolve as ever.
        for args in [
            &["-f", "i", "-d", "10.0.0.2"][..],
            &["-f", "n", "-s", "node-a", "-d", "node-b"],
        ] {
            let (_, took) = timed(|| resolve_node(&a, Node::A, Node::B, args));
            assert!(took < STAGE + MARGIN, "{args:?} took {took:?}");
        }
        // And the stuck name fails at its stages' deadline, not the
        // resolver's.
        let (_, took) = stuck.join().unwrap();
        assert!(took < 2 * STAGE + MARGIN, "took {took:?}");
    });
}
