//! Name hints: names asked of the host that announced them.

use super::*;

#[test]
fn a_name_its_host_announced_is_asked_of_that_host_alone() {
    let mut f = fixture(segment_only());
    let t0 = f.t0;
    heard_on_group(&mut f, peer_record(PEER), peer(), t0);
    let later = f.t0 + hints::SETTLE;
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, later),
        None
    );
    let fx = polled(&mut f.e);
    let (q, to) = sent_query(&fx);
    assert_eq!(to, Some(peer()), "by unicast, to the announcer: {fx:?}");
    assert_eq!(q.target().address(), &node_b());
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&q, Answer::Found(peer_record(PEER))),
        later,
    );
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
    assert_eq!(f.e.discovery().counts().traffic.group_queries, 0);
}

#[test]
fn a_hint_is_not_used_before_its_holder_could_contradict_it() {
    let mut f = fixture(segment_only());
    // Only the forger was heard (this host started after the holder).
    let t0 = f.t0;
    heard_on_group(
        &mut f,
        holding(ATTACKER, [10, 0, 0, 66], "node-b"),
        attacker(),
        t0,
    );
    let t = f.t0 + hints::SETTLE / 2;
    assert_eq!(f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t), None);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, None, "too fresh: the groups are asked");
}

#[test]
fn a_name_announced_by_two_endpoints_is_asked_of_the_groups() {
    let mut f = fixture(segment_only());
    let t0 = f.t0;
    heard_on_group(&mut f, peer_record(PEER), peer(), t0);
    let forged = holding(ATTACKER, [10, 0, 0, 66], "node-b");
    let t0 = f.t0;
    heard_on_group(&mut f, forged.clone(), attacker(), t0);
    // Nor does the holder's next announcement settle it.
    let later = f.t0 + hints::SETTLE * 3;
    heard_on_group(&mut f, peer_record(PEER), peer(), later);
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, later),
        None
    );
    let (g, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, None);
    assert_eq!(f.e.discovery().counts().disputed_names, 1, "counted once");
    // Two claimants are known to exist: the whole try is heard, not only
    // the claim window of a name nobody disputes.
    claimed(&mut f, &g, peer(), peer_record(PEER), later);
    let timeout = Duration::from_millis(u64::from(Config::default().timeout_ms));
    f.e.input(Input::Timers, later + timeout / 2);
    assert!(polled(&mut f.e).replies.is_empty());
    f.e.input(Input::Timers, later + timeout);
    assert_eq!(
        dgid(&polled(&mut f.e).replies[0].msg),
        PEER.parse().unwrap()
    );
    // Announced to this host alone, or naming another address than its
    // source: no hint at all.
    let mut g = fixture(segment_only());
    let a = Message::from(Announce::new(vec![peer_record(PEER)], false).unwrap()).encode();
    g.e.on_datagram(peer(), Some(own_ip()), &a, g.t0);
    let t0 = g.t0;
    heard_on_group(&mut g, peer_record(PEER), attacker(), t0);
    let t = g.t0 + hints::SETTLE;
    assert_eq!(g.e.resolve_at(g.addr, &by_name("node-b", 1), 1, t), None);
    let (_, to) = sent_query(&polled(&mut g.e));
    assert_eq!(to, None);
    assert_eq!(
        g.e.discovery().counts().disputed_names,
        0,
        "nothing disputed"
    );
}

/// A host joins at `t`: it may have heard the forger just before it said
/// so, and would settle on it within a second. Answered again at once, and
/// the forger's next announcement too.
fn a_newcomer_is_defended_against_the_forger(f: &mut Fixture, t: Instant) {
    let newcomer = holding("fe80::77", [10, 0, 0, 77], "node-n");
    let start = Message::from(Query::new(
        std::num::NonZeroU64::new(5).unwrap(),
        WireAddress::new(Address::name("node-n").unwrap()).unwrap(),
        newcomer,
    ))
    .encode();
    let at = SocketAddr::new(IpAddr::V4([10, 0, 0, 77].into()), 6126);
    f.e.on_datagram(at, Some(group()), &start, t);
    f.e.input(Input::Timers, t);
    assert_eq!(
        sent_announcements(&polled(&mut f.e)).len(),
        1,
        "for the newcomer"
    );
    let t = t + hints::DEFEND_DELAY;
    heard_on_group(
        f,
        holding(ATTACKER, [10, 0, 0, 66], "node-a"),
        attacker(),
        t,
    );
    f.e.input(Input::Timers, t + hints::DEFEND_DELAY);
    assert_eq!(
        sent_announcements(&polled(&mut f.e)).len(),
        1,
        "again since"
    );
}

#[test]
fn a_host_that_hears_its_name_announced_by_another_announces_itself() {
    let mut f = fixture(Config::default());
    // Its own announcements at start-up are out.
    for ms in [0, 50, 1_000, 3_000] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    polled(&mut f.e);
    let t0 = f.t0 + Duration::from_secs(4);
    let fx = heard_on_group(
        &mut f,
        holding(ATTACKER, [10, 0, 0, 66], "node-a"),
        attacker(),
        t0,
    );
    assert!(
        sent_announcements(&fx).is_empty(),
        "not from the datagram's handler"
    );
    f.e.input(Input::Timers, t0);
    let ours = sent_announcements(&polled(&mut f.e));
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].records()[0].gid(), OWN.parse().unwrap());
    assert!(!ours[0].withdrawn());
    let names: Vec<String> = ours[0].records()[0]
        .addresses()
        .iter()
        .map(|w| w.address().to_string())
        .collect();
    assert!(names.contains(&"node-a".to_string()), "{names:?}");
    // Another one: answered too, but paced.
    let t = t0 + Duration::from_millis(50);
    let other = SocketAddr::new(IpAddr::V4([10, 0, 0, 67].into()), 6126);
    heard_on_group(
        &mut f,
        holding("fe80::bad:0:0:67", [10, 0, 0, 67], "node-a"),
        other,
        t,
    );
    f.e.input(Input::Timers, t);
    assert!(sent_announcements(&polled(&mut f.e)).is_empty(), "paced");
    f.e.input(Input::Timers, t0 + hints::DEFEND_DELAY);
    let fx = polled(&mut f.e);
    assert_eq!(sent_announcements(&fx).len(), 1, "{fx:?}");
    // The first one again: answered again, as an endpoint joined since
    // (the second forger), but then once a minute at most.
    let mut t = t0 + hints::DEFEND_DELAY * 2;
    for answered in [1, 0] {
        heard_on_group(
            &mut f,
            holding(ATTACKER, [10, 0, 0, 66], "node-a"),
            attacker(),
            t,
        );
        f.e.input(Input::Timers, t + hints::DEFEND_DELAY);
        assert_eq!(sent_announcements(&polled(&mut f.e)).len(), answered);
        t += hints::DEFEND_DELAY * 2;
    }
    a_newcomer_is_defended_against_the_forger(&mut f, t0 + Duration::from_secs(5));
}

#[test]
fn a_host_that_hears_its_own_gid_announced_from_another_address_announces_itself() {
    // A forger announces a name with this host's GID, from its own
    // address: whoever heard it would ask that address for the name. The
    // holder drops its own announcements, but not this one.
    let mut f = fixture(Config::default());
    for ms in [0, 50, 1_000, 3_000] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    polled(&mut f.e);
    let t0 = f.t0 + Duration::from_secs(4);
    heard_on_group(&mut f, holding(OWN, [10, 0, 0, 66], "bait"), attacker(), t0);
    f.e.input(Input::Timers, t0 + hints::DEFEND_DELAY);
    let ours = sent_announcements(&polled(&mut f.e));
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].records()[0].gid(), OWN.parse().unwrap());
    // From its own address, it is its own announcement come back.
    let t = t0 + Duration::from_secs(120);
    let own = SocketAddr::new(own_ip(), 6126);
    heard_on_group(&mut f, holding(OWN, [10, 0, 0, 1], "node-a"), own, t);
    f.e.input(Input::Timers, t + hints::DEFEND_DELAY);
    assert!(sent_announcements(&polled(&mut f.e)).is_empty());
}

#[test]
fn a_host_that_refuses_its_hint_or_stays_silent_sends_the_name_to_the_groups() {
    let mut f = fixture(segment_only());
    let t0 = f.t0;
    heard_on_group(&mut f, peer_record(PEER), peer(), t0);
    let t = f.t0 + hints::SETTLE;
    f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t);
    let (q, _) = sent_query(&polled(&mut f.e));
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), t);
    let fx = polled(&mut f.e);
    assert!(fx.replies.is_empty(), "a moved name is not a no: {fx:?}");
    let (group_query, to) = sent_query(&fx);
    assert_eq!(to, None);
    // Its new holder claims and confirms it.
    let c = SocketAddr::new(IpAddr::V4([10, 0, 0, 3].into()), 6126);
    let moved = holding("fe80::c", [10, 0, 0, 3], "node-b");
    let claim = reply_bytes(&group_query, Answer::Found(moved.clone()));
    f.e.on_datagram(c, None, &claim, t);
    let (confirm, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(c));
    f.e.on_datagram(c, None, &reply_bytes(&confirm, Answer::Found(moved)), t);
    f.e.input(Input::Timers, t + Duration::from_millis(500));
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), "fe80::c".parse().unwrap());

    // A hinted host that never answers: the groups are asked when one try
    // is left, within the one stage's time.
    let mut g = fixture(segment_only());
    let t0 = g.t0;
    heard_on_group(&mut g, peer_record(PEER), peer(), t0);
    let t = g.t0 + hints::SETTLE;
    g.e.resolve_at(g.addr, &by_name("node-b", 1), 1, t);
    let (_, to) = sent_query(&polled(&mut g.e));
    assert_eq!(to, Some(peer()));
    let (mut group_at, mut answered_at) = (None, None);
    for ms in (100..=5_000).step_by(100) {
        let now = t + Duration::from_millis(ms);
        g.e.input(Input::Timers, now);
        let fx = polled(&mut g.e);
        if sent_queries(&fx).iter().any(|(_, to)| to.is_none()) {
            group_at.get_or_insert(ms);
        }
        if !fx.replies.is_empty() {
            assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
            assert_eq!(answered_at.replace(ms), None, "answered once");
        }
    }
    // Tries of 500, 1,000 and 2,000 ms: the last from 1.5 s on.
    assert_eq!(group_at, Some(1_500));
    assert_eq!(answered_at, Some(3_500), "at the stage's end");
}

#[test]
fn every_name_of_a_host_with_many_is_asked_of_it() {
    // Its announcements list its address in their first record only (an
    // address appears once per announcement); the names of the second
    // record are its too.
    let mut a = fixture(Config::default());
    for i in 0..20 {
        a.e.add_address(a.ep, Address::name(&format!("n{i}")).unwrap())
            .unwrap();
    }
    polled(&mut a.e);
    a.e.input(Input::DiscoveryUp(Families::V4), a.t0);
    a.e.input(Input::Timers, a.t0);
    a.e.input(Input::Timers, a.t0 + Duration::from_millis(50));
    let announced: Vec<Vec<u8>> = without_start_queries(&polled(&mut a.e))
        .into_iter()
        .filter_map(|d| match d {
            Datagram::Multicast { bytes, .. } => Some(bytes),
            _ => None,
        })
        .collect();
    assert!(announced.len() >= 2, "{}", announced.len());
    let mut b = fixture_with_gid(segment_only(), PEER);
    let from = SocketAddr::new(own_ip(), 6126);
    for bytes in &announced {
        b.e.on_datagram(from, Some(group()), bytes, b.t0);
    }
    let t = b.t0 + hints::SETTLE;
    for i in 0..20 {
        let tid = 100 + i;
        b.e.resolve_at(b.addr, &by_name(&format!("n{i}"), tid), tid, t);
        let (_, to) = sent_query(&polled(&mut b.e));
        assert_eq!(to, Some(from), "n{i}");
    }
}
