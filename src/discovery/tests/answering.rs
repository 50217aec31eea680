//! Queries this host answers: which, how often, and to whom.

use super::*;

#[test]
fn queries_are_answered_by_the_owner_only_and_group_queries_never_refused() {
    let mut f = fixture(Config::default());
    query_from_peer(
        &mut f.e,
        Address::Ip4([10, 0, 0, 1].into()),
        peer_record(PEER),
        own_ip(),
        f.t0,
    );
    let (to, from, answer) = sent_reply(&polled(&mut f.e));
    assert_eq!(
        (to, from),
        (peer(), Some(own_ip())),
        "answered from the queried address"
    );
    assert!(matches!(answer, Answer::Found(rec) if rec.gid() == OWN.parse().unwrap()));
    // The asker's record binds nothing: nobody confirmed it.
    assert_eq!(bound_gid(&f.e, &peer_ip()), None);
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 1, Instant::now()),
        None,
        "asked like any"
    );
    polled(&mut f.e);

    // By unicast, what this host does not hold is refused, names too;
    // but not while it starts (its addresses may be on their way): it
    // stays silent, and the asker's next try gets the answer.
    let settled = f.t0 + crate::discovery::STARTING;
    for target in [
        Address::Ip4([10, 0, 0, 50].into()),
        Address::name("node-z").unwrap(),
    ] {
        let at = settled - Duration::from_millis(1);
        query_from_peer(&mut f.e, target.clone(), peer_record(PEER), own_ip(), at);
        assert!(
            polled(&mut f.e).work.datagrams.is_empty(),
            "starting: silence"
        );
        query_from_peer(&mut f.e, target, peer_record(PEER), own_ip(), settled);
        let (_, from, answer) = sent_reply(&polled(&mut f.e));
        assert_eq!(from, Some(own_ip()));
        assert!(matches!(answer, Answer::Refused));
    }
    // A group query reaches every host: only the holder answers, or
    // one forged query would bring a reply from each.
    for to in [group(), IpAddr::V6(crate::discovery::wire::V6_GROUP)] {
        for target in [
            Address::Ip4([10, 0, 0, 50].into()),
            Address::name("node-z").unwrap(),
        ] {
            query_from_peer(&mut f.e, target, peer_record(PEER), to, f.t0);
            assert!(polled(&mut f.e).work.datagrams.is_empty(), "silence");
        }
    }
    query_from_peer(
        &mut f.e,
        Address::name("node-a").unwrap(),
        peer_record(PEER),
        group(),
        f.t0,
    );
    let (_, from, answer) = sent_reply(&polled(&mut f.e));
    assert_eq!(
        from, None,
        "a group's reply leaves from the kernel's choice"
    );
    assert!(matches!(answer, Answer::Found(_)));

    let mine = Message::from(Query::new(
        std::num::NonZeroU64::new(7).unwrap(),
        WireAddress::new(Address::name("node-a").unwrap()).unwrap(),
        record_for(f.e.local(), f.ep, None).unwrap(),
    ))
    .encode();
    f.e.on_datagram(peer(), Some(group()), &mine, f.t0);
    assert!(
        polled(&mut f.e).work.datagrams.is_empty(),
        "our own multicast, looped back"
    );
    assert_eq!(f.e.discovery().counts().drops.own, 1);
}

#[test]
fn a_group_query_that_arrives_through_both_families_is_answered_once() {
    let mut f = fixture(Config::default());
    let v6_group = IpAddr::V6(crate::discovery::wire::V6_GROUP);
    let node_a = || Address::name("node-a").unwrap();
    query_from_peer(&mut f.e, node_a(), peer_record(PEER), group(), f.t0);
    sent_reply(&polled(&mut f.e));
    let copy = f.t0 + Duration::from_millis(1);
    query_from_peer(&mut f.e, node_a(), peer_record(PEER), v6_group, copy);
    assert!(
        polled(&mut f.e).work.datagrams.is_empty(),
        "the IPv6 copy of the same query: one claim is enough"
    );
    // A try sent again, a timeout later, is answered again.
    let retry = f.t0 + Duration::from_millis(500);
    query_from_peer(&mut f.e, node_a(), peer_record(PEER), group(), retry);
    sent_reply(&polled(&mut f.e));
}

#[test]
fn replies_to_one_source_are_rate_limited() {
    let mut f = fixture(Config {
        reply_rate: 10,
        ..Config::default()
    });
    let ask = |txid: u64| {
        Message::from(Query::new(
            std::num::NonZeroU64::new(txid).unwrap(),
            WireAddress::new(Address::Ip4([10, 0, 0, 9].into())).unwrap(),
            peer_record(PEER),
        ))
        .encode()
    };
    let answered = |e: &mut Engine<FakeDaemon>, from: SocketAddr, n: u64, t: Instant| {
        (1..=n)
            .filter(|&txid| {
                e.on_datagram(from, Some(own_ip()), &ask(txid), t);
                !polled(e).work.datagrams.is_empty()
            })
            .count()
    };
    // Past the start, when what it does not hold is refused.
    let t0 = f.t0 + crate::discovery::STARTING;
    assert_eq!(answered(&mut f.e, peer(), 100, t0), 40, "a 4 s burst");
    assert_eq!(f.e.discovery().counts().drops.rate_limited, 60);
    let other = SocketAddr::new(IpAddr::V4([10, 0, 0, 3].into()), 6126);
    assert_eq!(answered(&mut f.e, other, 5, t0), 5);
    let later = t0 + Duration::from_secs(1);
    assert_eq!(answered(&mut f.e, peer(), 100, later), 10, "then 10/s");
}

#[test]
fn group_queries_are_answered_whatever_queries_in_the_askers_name_spent() {
    // Queries forged from the peer's address drain its allowance here;
    // the peer's own group query for this host's name is still answered,
    // or a liar claiming the name would be heard alone.
    let mut f = fixture(Config {
        reply_rate: 10,
        ..Config::default()
    });
    let t0 = f.t0 + crate::discovery::STARTING;
    for txid in 1..=100u64 {
        let q = Query::new(
            std::num::NonZeroU64::new(txid).unwrap(),
            WireAddress::new(Address::Ip4([10, 0, 0, 9].into())).unwrap(),
            peer_record(PEER),
        );
        f.e.on_datagram(peer(), Some(own_ip()), &Message::from(q).encode(), t0);
    }
    polled(&mut f.e);
    assert_eq!(f.e.discovery().counts().drops.rate_limited, 60);
    query_from_peer(&mut f.e, node_a(), peer_record(PEER), group(), t0);
    sent_reply(&polled(&mut f.e));
}
