//! Lookups of addresses and names: tries, timeouts, refusals, derivations, and what a lookup leaves behind.

use super::*;

#[test]
fn a_miss_asks_the_address_once_and_answers_every_waiter_once() {
    let mut f = fixture(Config::default());
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now()),
        None,
        "waits for the peer"
    );
    let fx = polled(&mut f.e);
    assert!(
        fx.deadline.is_some(),
        "the worker must learn of the new deadline"
    );
    let (q, to) = sent_query(&fx);
    assert_eq!(to, Some(peer()));
    assert_eq!(q.target().address(), &peer_ip());
    assert_eq!(
        q.sender().gid(),
        OWN.parse().unwrap(),
        "the query carries the asker's record"
    );
    let [Datagram::Unicast { from, .. }] = &fx.datagrams[..] else {
        panic!("{fx:?}")
    };
    assert_eq!(
        *from,
        Some(IpAddr::V4([10, 0, 0, 1].into())),
        "sent from the asking endpoint's own address"
    );
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 12, Instant::now()),
        None
    );
    assert!(
        polled(&mut f.e).datagrams.is_empty(),
        "a second request joins the lookup"
    );

    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&q, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let fx = polled(&mut f.e);
    let mut ids: Vec<u64> = fx.replies.iter().map(|r| r.id).collect();
    ids.sort();
    assert_eq!(ids, [11, 12]);
    for r in &fx.replies {
        assert_eq!(dgid(&r.msg), PEER.parse().unwrap());
        let path = PathRecord::decode(r.msg.entry(0).info.first_chunk().unwrap());
        assert_eq!(
            (path.mtu, path.rate),
            (4, 7),
            "the peer's MTU and rate bound the path"
        );
    }
    // Learned: the address asked about and the peer's GID; not the
    // other address its record lists, which nobody confirmed.
    assert_eq!(bound_gid(&f.e, &peer_ip()), Some(PEER.parse().unwrap()));
    assert_eq!(
        bound_gid(&f.e, &Address::Gid(PEER.parse().unwrap())),
        Some(PEER.parse().unwrap())
    );
    assert_eq!(bound_gid(&f.e, &node_b()), None);
    assert_eq!(f.e.discovery().status().lookups, 0);
    // A second reply to the same query (its retry answered too) is
    // dropped as late, not as unsolicited: normal traffic raises no alarm.
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
    assert!(polled(&mut f.e).replies.is_empty());
    let d = &f.e.discovery().counts().drops;
    assert_eq!((d.late, d.unsolicited), (1, 0));
    // Once no try of it can still be answered, a reply to it is one
    // nobody asked for.
    let stage = Duration::from_millis(u64::from(Config::default().timeout_ms))
        * (Config::default().retries + 1);
    let after = f.t0 + stage + Duration::from_millis(1);
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), after);
    let d = &f.e.discovery().counts().drops;
    assert_eq!((d.late, d.unsolicited), (1, 1));
}

#[test]
fn replies_from_elsewhere_or_unknown_transactions_are_dropped() {
    let mut f = fixture(Config::default());
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now());
    let (q, _) = sent_query(&polled(&mut f.e));
    let found = reply_bytes(&q, Answer::Found(peer_record("fe80::666")));
    let impostor = SocketAddr::new(
        IpAddr::V4([10, 0, 0, 66].into()),
        crate::config::DEFAULT_DISCOVERY_PORT,
    );
    f.e.on_datagram(impostor, None, &found, f.t0);
    let other_port = SocketAddr::new(IpAddr::V4(PEER_IP.into()), 4444);
    f.e.on_datagram(other_port, None, &found, f.t0);
    assert_eq!(f.e.discovery().counts().drops.wrong_source, 2);
    let stranger = Query::new(
        std::num::NonZeroU64::new(q.txid().get() ^ 1).unwrap(),
        q.target().clone(),
        peer_record(PEER),
    );
    f.e.on_datagram(peer(), None, &reply_bytes(&stranger, Answer::Refused), f.t0);
    assert_eq!(f.e.discovery().counts().drops.unsolicited, 1);
    f.e.on_datagram(peer(), None, b"garbage", f.t0);
    assert_eq!(f.e.discovery().counts().drops.malformed, 1);
    assert!(
        polled(&mut f.e).replies.is_empty(),
        "nothing answered the client"
    );
    assert_eq!(
        f.e.discovery().status().lookups,
        1,
        "the lookup still waits for its real answer"
    );
}

#[test]
fn silence_is_retried_then_times_out_and_is_not_remembered() {
    let cfg = Config {
        timeout_ms: 100,
        retries: 2,
        ..Config::default()
    };
    let mut f = fixture(cfg);
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now());
    let (first, _) = sent_query(&polled(&mut f.e));
    for try_ in 1..=2u64 {
        f.e.on_timers(f.t0 + Duration::from_millis(101 * try_));
        let (again, _) = sent_query(&polled(&mut f.e));
        assert_eq!(again.txid(), first.txid(), "retries keep the txid");
    }
    f.e.on_timers(f.t0 + Duration::from_millis(400));
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
    // Not finding out says nothing about the destination: the next
    // request asks again.
    let t = f.t0 + Duration::from_millis(401);
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 12, t),
        None
    );
    let (again, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()));
    assert_ne!(again.txid(), first.txid(), "a new lookup");
    assert_eq!(f.e.discovery().status().failures, 0, "nothing remembered");
}

#[test]
fn a_refusal_fails_at_once_with_enodata_and_an_icmp_error_with_etimedout() {
    let mut f = fixture(Config {
        negative_timeout_ms: 0,
        ..Config::default()
    });
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now());
    let (q, _) = sent_query(&polled(&mut f.e));
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);

    // Nothing listening at the address (a daemon not started yet, a
    // neighbour not resolved): nobody said no, so not ENODATA.
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 12, Instant::now());
    let fx = polled(&mut f.e);
    let Datagram::Unicast { bytes, .. } = &fx.datagrams[0] else {
        panic!("{fx:?}")
    };
    // An ICMP error about a datagram to some other host is not ours.
    f.e.on_unreachable(
        SocketAddr::new(IpAddr::V4([10, 0, 0, 9].into()), 6126),
        bytes,
        f.t0,
    );
    assert!(polled(&mut f.e).replies.is_empty());
    // ICMPv4 quotes only the start of the query.
    f.e.on_unreachable(peer(), &bytes[..520], f.t0);
    let fx = polled(&mut f.e);
    assert_eq!(
        (fx.replies[0].id, fx.replies[0].msg.status()),
        (12, ACM_STATUS_ETIMEDOUT as u8)
    );
}

#[test]
fn derivations_follow_a_failed_discovery_in_order() {
    let cfg = Config {
        derive: vec![Derivation::Eui64, Derivation::Ipv4Mapped],
        ..Config::default()
    };
    let mut f = fixture(cfg);
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now());
    let (q, _) = sent_query(&polled(&mut f.e));
    f.e.on_unreachable(peer(), &Message::from(q).encode(), f.t0);
    let jobs = polled(&mut f.e).neighbour_jobs;
    assert_eq!(jobs.len(), 1, "eui64 comes first");
    f.e.on_neighbour(
        jobs[0].clone(),
        Some([0x52, 0x54, 0, 0xaa, 0xbb, 0xcc]),
        f.t0,
    );
    let fx = polled(&mut f.e);
    assert_eq!(
        dgid(&fx.replies[0].msg),
        "fe80::5054:ff:feaa:bbcc".parse().unwrap()
    );

    // Without a neighbour entry, eui64 gives way to ipv4-mapped at its deadline.
    let other = [10, 0, 0, 3];
    f.e.resolve_at(f.addr, &ip_request(other, 0, 2), 12, Instant::now());
    let (q, _) = sent_query(&polled(&mut f.e));
    let to = SocketAddr::new(IpAddr::V4(other.into()), 6126);
    f.e.on_unreachable(to, &Message::from(q).encode(), f.t0);
    let job = polled(&mut f.e).neighbour_jobs.remove(0);
    f.e.on_neighbour(job, None, f.t0);
    let fx = polled(&mut f.e);
    assert!(
        fx.datagrams.is_empty(),
        "the query already made the kernel resolve the neighbour"
    );
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    let fx = polled(&mut f.e);
    assert_eq!(dgid(&fx.replies[0].msg), "::ffff:10.0.0.3".parse().unwrap());
}

#[test]
fn nodelay_answers_now_and_still_starts_the_lookup() {
    let mut f = fixture(Config::default());
    let r =
        f.e.resolve_at(
            f.addr,
            &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 1),
            11,
            Instant::now(),
        )
        .unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENODATA as u8);
    let (q, _) = sent_query(&polled(&mut f.e));
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&q, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    assert!(polled(&mut f.e).replies.is_empty(), "nobody was waiting");
    let r =
        f.e.resolve_at(
            f.addr,
            &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 2),
            12,
            Instant::now(),
        )
        .unwrap();
    assert_eq!(dgid(&r), PEER.parse().unwrap());
}

#[test]
fn closing_an_endpoint_answers_its_waiters() {
    let mut f = fixture(Config::default());
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now());
    polled(&mut f.e);
    f.e.close_endpoint(f.ep);
    let mut fx = polled(&mut f.e);
    assert!(
        fx.deadline.is_some() && fx.datagrams.is_empty(),
        "withdrawals wait to leave together"
    );
    // The wake's timer counts their time; a later one sends them.
    f.e.on_timers(f.t0);
    assert!(polled(&mut f.e).datagrams.is_empty());
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    fx.datagrams = polled(&mut f.e).datagrams;
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENOTCONN as u8);
    assert_eq!(f.e.discovery().status().lookups, 0);
    let withdrawn: Vec<_> = fx
        .datagrams
        .iter()
        .filter_map(|d| match d {
            Datagram::Multicast { bytes, .. } => match Message::decode(bytes) {
                Ok(Message::Announce(a)) if a.withdrawn() => Some(a),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(withdrawn.len(), 1, "one withdrawal for the whole endpoint");
    let addrs = withdrawn[0].records()[0].addresses();
    assert_eq!(
        addrs.len(),
        2,
        "its name travels with its IP address: {addrs:?}"
    );
}

#[test]
fn without_discovery_only_derivations_run() {
    let cfg = Config {
        discovery: false,
        derive: vec![Derivation::Eui64, Derivation::Ipv4Mapped],
        ..Config::default()
    };
    let mut f = fixture(cfg);
    f.e.set_discovery_up(Families::NONE, f.t0);
    polled(&mut f.e);
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now()),
        None
    );
    let job = polled(&mut f.e).neighbour_jobs.remove(0);
    f.e.on_neighbour(job, None, f.t0);
    let fx = polled(&mut f.e);
    assert!(
        matches!(&fx.datagrams[..], [Datagram::Unicast { to, .. }] if *to == SocketAddr::new(IpAddr::V4(PEER_IP.into()), 9)),
        "no query went out, so the kernel is made to resolve the neighbour: {fx:?}"
    );
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(dgid(&fx.replies[0].msg), "::ffff:10.0.0.2".parse().unwrap());
    let by_name = request(
        &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node-b")],
        false,
        3,
    );
    let r = f.e.resolve_at(f.addr, &by_name, 2, Instant::now()).unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENODATA as u8, "names need discovery");
}

#[test]
fn a_claim_its_host_never_confirms_times_out() {
    let mut f = fixture(segment_only());
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, Instant::now()),
        None
    );
    let (g, _) = sent_query(&polled(&mut f.e));
    let claim = reply_bytes(&g, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &claim, f.t0);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()));
    // The confirmation and its tries are lost.
    for ms in (100..=2_000).step_by(100) {
        f.e.on_timers(f.t0 + Duration::from_millis(ms));
    }
    assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().status().failures, 0);
}

#[test]
fn a_refusal_is_remembered_and_an_icmp_error_is_not() {
    let mut f = fixture(Config::default());
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 1, Instant::now());
    let (q, _) = sent_query(&polled(&mut f.e));
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
    assert_eq!(one_status(&mut f), ACM_STATUS_ENODATA as u8);
    let r =
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 2, Instant::now())
            .unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENODATA as u8, "remembered");
    assert!(polled(&mut f.e).datagrams.is_empty(), "nothing asked");

    let other = [10, 0, 0, 3];
    let to = SocketAddr::new(IpAddr::V4(other.into()), 6126);
    for tid in 3..=4 {
        assert_eq!(
            f.e.resolve_at(f.addr, &ip_request(other, 0, tid), tid, Instant::now()),
            None
        );
        let (q, _) = sent_query(&polled(&mut f.e));
        f.e.on_unreachable(to, &Message::from(q).encode(), f.t0);
        assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    }
}

#[test]
fn a_derivation_that_times_out_after_a_refusal_times_out_the_lookup() {
    let mut f = fixture(Config {
        derive: vec![Derivation::Eui64],
        ..Config::default()
    });
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 1, Instant::now());
    let (q, _) = sent_query(&polled(&mut f.e));
    f.e.on_datagram(peer(), None, &reply_bytes(&q, Answer::Refused), f.t0);
    let job = polled(&mut f.e).neighbour_jobs.remove(0);
    f.e.on_neighbour(job, None, f.t0);
    f.e.on_timers(f.t0 + Duration::from_secs(1));
    assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().status().failures, 0);
}

#[test]
fn a_full_lookup_table_is_no_answer_and_not_remembered() {
    let mut f = fixture(Config {
        max_lookups: 1,
        ..Config::default()
    });
    f.e.resolve_at(f.addr, &ip_request([10, 0, 0, 7], 0, 1), 1, Instant::now());
    polled(&mut f.e);
    let r =
        f.e.resolve_at(f.addr, &by_name("node-b", 2), 2, Instant::now())
            .unwrap();
    assert_eq!(r.status(), ACM_STATUS_ENOMEM as u8);
    assert_eq!(f.e.discovery().status().failures, 0);
}

#[test]
fn a_binding_the_tables_bound_evicts_at_once_still_answers_its_lookup() {
    // Bound to the address and to the GID: with room for one, the GID's
    // binding evicts the address's before the waiting request is answered.
    let mut f = fixture(Config {
        max_learned: 1,
        ..Config::default()
    });
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 1, Instant::now());
    let (q, _) = sent_query(&polled(&mut f.e));
    let found = reply_bytes(&q, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &found, f.t0);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
}
