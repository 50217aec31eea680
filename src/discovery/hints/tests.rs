//! The hints' own tests: settling, disputes, bounds.

use super::*;

fn name(s: &str) -> Address {
    Address::Name(s.into())
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const A: Gid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
const B: Gid = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);

#[test]
fn a_name_is_asked_of_its_announcer_once_the_hint_settled() {
    let t = Instant::now();
    let mut h = Hints::new(16, None);
    h.heard(&name("x"), A, ip("10.0.0.1"), t);
    h.heard(&name("x"), A, ip("fd00::1"), t);
    assert_eq!(h.whom(&name("x"), t + SETTLE / 2), None);
    assert_eq!(h.whom(&name("x"), t + SETTLE), Some(ip("10.0.0.1")));
    assert_eq!(h.whom(&name("y"), t + SETTLE), None);
}

#[test]
fn an_address_names_were_announced_from_is_a_hosts_once_settled() {
    let t = Instant::now();
    let mut h = Hints::new(16, Some(Duration::from_secs(60)));
    let (v4, v6) = (ip("10.0.0.1"), ip("fd00::1"));
    h.heard(&name("x"), A, v4, t);
    h.heard(&name("x"), A, v6, t);
    assert!(!h.heard_from(v4, t + SETTLE / 2));
    assert!(h.heard_from(v4, t + SETTLE) && h.heard_from(v6, t + SETTLE));
    assert!(!h.heard_from(ip("10.0.0.2"), t + SETTLE));
    // Back with other hardware at the same address: still a host's.
    h.heard(&name("x"), B, v4, t + SETTLE * 2);
    assert!(h.heard_from(v4, t + SETTLE * 2));
    // Forgotten with its names.
    assert!(!h.heard_from(v4, t + SETTLE * 2 + Duration::from_secs(60)));
    h.forget(&name("x"));
    assert!(!h.heard_from(v4, t + SETTLE * 3));
}

#[test]
fn two_endpoints_announcing_one_name_send_it_to_the_groups() {
    let t = Instant::now();
    let mut h = Hints::new(16, None);
    assert!(!h.heard(&name("x"), A, ip("10.0.0.1"), t));
    assert!(h.heard(&name("x"), B, ip("10.0.0.66"), t + SETTLE / 2));
    assert_eq!(h.whom(&name("x"), t + SETTLE * 2), None);
    // The first one again does not settle it, nor count it again.
    assert!(!h.heard(&name("x"), A, ip("10.0.0.1"), t + SETTLE * 2));
    assert_eq!(h.whom(&name("x"), t + SETTLE * 4), None);
}

#[test]
fn a_new_gid_from_a_known_address_is_the_same_host() {
    let t = Instant::now();
    let mut h = Hints::new(16, None);
    h.heard(&name("x"), A, ip("10.0.0.1"), t);
    h.heard(&name("x"), A, ip("fd00::1"), t);
    h.heard(&name("x"), B, ip("fd00::1"), t + SETTLE);
    assert_eq!(h.whom(&name("x"), t + SETTLE), Some(ip("fd00::1")));
    // A withdrawal of the old GID no longer applies; of the new one does.
    h.withdrawn(&name("x"), A);
    assert!(h.whom(&name("x"), t + SETTLE).is_some());
    h.withdrawn(&name("x"), B);
    assert_eq!(h.whom(&name("x"), t + SETTLE), None);
}

#[test]
fn hints_expire_and_stay_bounded() {
    let t = Instant::now();
    let mut h = Hints::new(2, Some(Duration::from_secs(60)));
    let gid = |i: u8| Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i]);
    let hear = |h: &mut Hints, i: usize, n: &str, at: Instant| {
        h.heard(
            &name(n),
            gid(i as u8 + 1),
            ip(&format!("10.0.0.{}", i + 1)),
            at,
        )
    };
    for (i, n) in ["x", "y", "z"].iter().enumerate() {
        hear(&mut h, i, n, t);
    }
    // Full, the newest name is the one not kept: a flood of new names
    // cannot push out what the table holds.
    assert_eq!((h.sizes().names, h.refused), (2, 1));
    assert_eq!(
        h.endpoints_heard(),
        2,
        "the refused name's endpoint is not kept"
    );
    assert_eq!(h.whom(&name("x"), t + SETTLE), Some(ip("10.0.0.1")));
    assert_eq!(h.whom(&name("z"), t + SETTLE), None);
    // Heard again, a name is kept a lifetime from then; the others go.
    hear(&mut h, 1, "y", t + Duration::from_secs(30));
    assert_eq!(h.sweep_due(), Some(t + Duration::from_secs(60)));
    h.sweep(t + Duration::from_secs(60));
    assert_eq!((h.sizes().names, h.endpoints_heard()), (1, 1));
    assert_eq!(
        h.whom(&name("y"), t + Duration::from_secs(89)),
        Some(ip("10.0.0.2"))
    );
    assert_eq!(h.whom(&name("y"), t + Duration::from_secs(90)), None);
    assert!(
        h.endpoint_heard(gid(2), t + Duration::from_secs(90)),
        "new again"
    );
    // An expired name makes room for a new one without a sweep.
    let later = t + Duration::from_secs(200);
    hear(&mut h, 0, "x", later);
    hear(&mut h, 2, "z", later);
    assert_eq!((h.sizes().names, h.refused), (2, 1));
    assert_eq!(h.whom(&name("z"), later + SETTLE), Some(ip("10.0.0.3")));
}

#[test]
fn names_announced_and_withdrawn_over_and_over_cost_no_memory() {
    let t = Instant::now();
    let mut h = Hints::new(65_536, None);
    for i in 0..100_000u32 {
        let at = t + Duration::from_millis(u64::from(i));
        let n = name(&format!("n{}", i % 15));
        h.endpoint_heard(A, at);
        h.heard(&n, A, ip("10.0.0.66"), at);
        h.withdrawn(&n, A);
    }
    let HintSizes {
        names,
        queue: queued,
        endpoints,
        endpoint_queue,
    } = h.sizes();
    assert_eq!(names, 0);
    assert!(
        queued <= ORDER_SLACK + 1,
        "{queued} places queued for no name"
    );
    assert_eq!(endpoints, 1, "A announced itself: no newcomer");
    assert!(
        endpoint_queue <= 2 + 64 + 1,
        "{endpoint_queue} places queued for one GID"
    );
    // Names kept keep their places.
    h.heard(&name("kept"), B, ip("10.0.0.2"), t);
    for i in 0..1_000u32 {
        let n = name(&format!("m{i}"));
        h.heard(&n, A, ip("10.0.0.66"), t);
        h.withdrawn(&n, A);
    }
    assert!(h.sizes().queue <= 2 + ORDER_SLACK);
    assert_eq!(h.whom(&name("kept"), t + SETTLE), Some(ip("10.0.0.2")));
}

#[test]
fn a_name_keeps_its_place_whatever_its_endpoint_does() {
    // Many names of one endpoint, a withdrawal of one, a name moved to
    // the endpoint's new GID: the endpoint's slot lives as long as one
    // of its names, and a new endpoint reuses a freed slot.
    let t = Instant::now();
    let mut h = Hints::new(16, None);
    h.heard(&name("x"), A, ip("10.0.0.1"), t);
    h.heard(&name("y"), A, ip("10.0.0.1"), t);
    h.withdrawn(&name("x"), A);
    assert!(h.endpoints.holds(A), "y keeps it");
    h.heard(&name("y"), B, ip("10.0.0.1"), t);
    assert!(!h.endpoints.holds(A), "its last name moved to B");
    assert_eq!(h.endpoints_heard(), 1);
    assert_eq!(h.whom(&name("y"), t + SETTLE), Some(ip("10.0.0.1")));
    h.forget(&name("y"));
    assert_eq!((h.sizes().names, h.endpoints_heard()), (0, 0));
    h.heard(&name("w"), A, ip("10.0.0.9"), t);
    assert_eq!(h.endpoints.len(), 2, "a freed slot reused");
    assert_eq!(h.whom(&name("w"), t + SETTLE), Some(ip("10.0.0.9")));
}

#[test]
fn an_endpoint_heard_again_is_no_newcomer_though_none_of_its_names_is_kept() {
    // Two hosts whose tables are full (a flood filled them) must not
    // take each other's announcements for a newcomer's, or each
    // welcome would call for the other's.
    let t = Instant::now();
    let mut h = Hints::new(1, Some(Duration::from_secs(60)));
    h.heard(&name("x"), A, ip("10.0.0.1"), t);
    assert!(h.endpoint_heard(B, t), "new");
    assert!(!h.heard(&name("y"), B, ip("10.0.0.2"), t));
    assert_eq!(h.refused, 1, "not kept");
    assert!(!h.endpoint_heard(B, t + SETTLE), "heard before");
    assert!(
        h.endpoint_heard(B, t + Duration::from_secs(62)),
        "a lifetime later"
    );
}

#[test]
fn a_gid_announced_from_two_addresses_of_one_family_is_asked_of_the_groups() {
    // A forger announces a name of its own with B's GID, from its own
    // address, before B is heard: B's own names must not be asked of
    // the forger's address.
    let t = Instant::now();
    let mut h = Hints::new(16, None);
    assert!(!h.heard(&name("bait"), B, ip("10.0.0.66"), t));
    assert!(
        h.heard(&name("node-b"), B, ip("10.0.0.2"), t),
        "counted disputed"
    );
    assert!(
        !h.heard(&name("node-b2"), B, ip("10.0.0.2"), t),
        "counted once"
    );
    for n in ["bait", "node-b", "node-b2"] {
        assert_eq!(h.whom(&name(n), t + SETTLE * 2), None, "{n}");
        assert!(h.disputed(&name(n), t + SETTLE * 2), "{n}");
    }
    assert!(!h.heard_from(ip("10.0.0.2"), t + SETTLE * 2));
    // Its IPv6 address is its own family's first: no clash.
    h.heard(&name("x"), A, ip("10.0.0.1"), t);
    h.heard(&name("x"), A, ip("fd00::1"), t);
    assert_eq!(h.whom(&name("x"), t + SETTLE), Some(ip("10.0.0.1")));
}

#[test]
fn a_new_gid_from_an_address_that_shared_a_gid_is_not_the_same_host() {
    // The forger announced first with B's GID from its own address,
    // then B from its own: conflicted. A new GID from the forger's
    // address must not take B's names over as "back with new
    // hardware".
    let t = Instant::now();
    let mut h = Hints::new(16, None);
    h.heard(&name("node-b"), B, ip("10.0.0.66"), t);
    h.heard(&name("node-b"), B, ip("10.0.0.2"), t);
    let forger = Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x66]);
    h.heard(&name("node-b"), forger, ip("10.0.0.66"), t + SETTLE);
    assert_eq!(h.whom(&name("node-b"), t + SETTLE * 3), None);
    assert!(h.disputed(&name("node-b"), t + SETTLE * 3));
}

#[test]
fn a_flood_of_gids_announcing_pushes_out_none_that_holds_names() {
    // A forger announcing itself under ever new GIDs fills the GIDs kept
    // without names, never more than their bound, and drops none of the
    // endpoints whose names are kept: those stay no newcomers, or every
    // flood would have the segment's hosts welcomed again.
    let t = Instant::now();
    let mut h = Hints::new(4, Some(Duration::from_secs(60)));
    for (gid, n, at) in [(A, "x", "10.0.0.1"), (B, "y", "10.0.0.2")] {
        assert!(h.endpoint_heard(gid, t), "new");
        h.heard(&name(n), gid, ip(at), t);
    }
    let forged = |i: u32| {
        let mut g = [0u8; 16];
        g[..2].copy_from_slice(&[0xfe, 0x80]);
        g[8] = 0x66;
        g[12..].copy_from_slice(&i.to_be_bytes());
        Gid(g)
    };
    for i in 0..10_000u32 {
        let at = t + Duration::from_millis(u64::from(i));
        assert!(h.endpoint_heard(forged(i), at), "forged GID {i} is new");
    }
    let later = t + Duration::from_secs(10);
    let s = h.sizes();
    assert_eq!(s.endpoints, 2 + 4, "two holders, four forged GIDs");
    assert!(s.endpoint_queue <= 2 * 4 + 64, "{s:?}");
    assert!(!h.endpoint_heard(A, later) && !h.endpoint_heard(B, later));
    assert!(!h.endpoint_heard(forged(9_999), later), "the newest kept");
    assert!(h.endpoint_heard(forged(0), later), "the oldest made room");
}

#[test]
fn forgetting_every_name_keeps_who_announced() {
    // After `urdma-acm forget --all` no host of the segment is a newcomer
    // to welcome again.
    let t = Instant::now();
    let mut h = Hints::new(16, Some(Duration::from_secs(60)));
    for (gid, n, at) in [(A, "x", "10.0.0.1"), (B, "y", "10.0.0.2")] {
        h.endpoint_heard(gid, t);
        h.heard(&name(n), gid, ip(at), t);
    }
    assert_eq!(h.clear(), 2);
    assert_eq!((h.endpoints_heard(), h.sizes().endpoints), (0, 2));
    assert!(!h.endpoint_heard(A, t + SETTLE) && !h.endpoint_heard(B, t + SETTLE));
    assert_eq!(h.whom(&name("x"), t + SETTLE), None, "its names forgotten");
}

#[test]
fn an_endpoint_whose_names_went_is_no_newcomer_until_its_announcement_expires() {
    let t = Instant::now();
    let minute = Duration::from_secs(60);
    let mut h = Hints::new(16, Some(minute));
    assert!(h.endpoint_heard(A, t));
    h.heard(&name("x"), A, ip("10.0.0.1"), t);
    h.withdrawn(&name("x"), A);
    assert_eq!((h.endpoints_heard(), h.sizes().endpoints), (0, 1));
    let half = t + minute / 2;
    assert!(
        !h.endpoint_heard(A, half),
        "announced a lifetime ago or less"
    );
    assert_eq!(
        h.sweep_due(),
        Some(t + minute),
        "queued when its names went"
    );
    h.sweep(t + minute);
    assert_eq!(h.sizes().endpoints, 1, "announced again since: kept");
    assert_eq!(h.sweep_due(), Some(half + minute));
    h.sweep(half + minute);
    assert_eq!(h.sizes().endpoints, 0, "forgotten a lifetime after");
    assert!(h.endpoint_heard(A, half + minute), "a newcomer again");
}
