//! Lookups of addresses and names: tries, timeouts, refusals, derivations, and what a lookup leaves behind.

use super::*;

/// The query of a lookup of the peer's address, as it must leave: by
/// unicast to the peer from the asking endpoint's own address, with a
/// deadline for the worker.
fn asked_of_the_peer(fx: &Effects) -> Query {
    assert!(
        fx.deadline.is_some(),
        "the worker must learn of the new deadline"
    );
    let (q, to) = sent_query(fx);
    assert_eq!(to, Some(peer()));
    assert_eq!(q.target().address(), &peer_ip());
    assert_eq!(
        q.sender().gid(),
        OWN.parse().unwrap(),
        "the query carries the asker's record"
    );
    let [Datagram::Unicast { from, .. }] = &fx.work.datagrams[..] else {
        panic!("{fx:?}")
    };
    assert_eq!(
        *from,
        Some(IpAddr::V4([10, 0, 0, 1].into())),
        "sent from the asking endpoint's own address"
    );
    q
}

#[test]
fn a_miss_asks_the_address_once_and_answers_every_waiter_once() {
    let mut f = fixture(Config::default());
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now()),
        None,
        "waits for the peer"
    );
    let q = asked_of_the_peer(&polled(&mut f.e));
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 12, Instant::now()),
        None
    );
    assert!(
        polled(&mut f.e).work.datagrams.is_empty(),
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
    // Once no try of it can still be answered, even at the longest try
    // (`rto.rs`), a reply to it is one nobody asked for.
    let stage = Duration::from_millis(u64::from(Config::default().timeout_ms))
        * crate::discovery::RETRY_CEILING
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
    let mut txids = vec![first.txid()];
    // Each try waits twice as long as the one before: 100, 200, 400 ms.
    for (quiet, sent) in [(99, 101), (299, 302)] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(quiet));
        assert!(sent_queries(&polled(&mut f.e)).is_empty(), "at {quiet} ms");
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(sent));
        let (again, _) = sent_query(&polled(&mut f.e));
        assert_eq!(again.target(), first.target());
        assert!(!txids.contains(&again.txid()), "every try has its own txid");
        txids.push(again.txid());
    }
    f.e.input(Input::Timers, f.t0 + Duration::from_millis(690));
    assert!(
        polled(&mut f.e).replies.is_empty(),
        "the last try is waited for"
    );
    f.e.input(Input::Timers, f.t0 + Duration::from_millis(710));
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
    // Not finding out says nothing about the destination: the next
    // request asks again.
    let t = f.t0 + Duration::from_millis(711);
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
    let Datagram::Unicast { bytes, .. } = &fx.work.datagrams[0] else {
        panic!("{fx:?}")
    };
    // An ICMP error about a datagram to some other host is not ours.
    f.e.input(
        Input::Unreachable(
            SocketAddr::new(IpAddr::V4([10, 0, 0, 9].into()), 6126),
            bytes,
        ),
        f.t0,
    );
    assert!(polled(&mut f.e).replies.is_empty());
    // ICMPv4 quotes only the start of the query.
    f.e.input(Input::Unreachable(peer(), &bytes[..520]), f.t0);
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
    f.e.input(Input::Unreachable(peer(), &Message::from(q).encode()), f.t0);
    let jobs = polled(&mut f.e).work.neighbour_jobs;
    assert_eq!(jobs.len(), 1, "eui64 comes first");
    f.e.input(
        Input::Neighbour(jobs[0].clone(), Some([0x52, 0x54, 0, 0xaa, 0xbb, 0xcc])),
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
    f.e.input(Input::Unreachable(to, &Message::from(q).encode()), f.t0);
    let job = polled(&mut f.e).work.neighbour_jobs.remove(0);
    f.e.input(Input::Neighbour(job, None), f.t0);
    let fx = polled(&mut f.e);
    assert!(
        fx.work.datagrams.is_empty(),
        "the query already made the kernel resolve the neighbour"
    );
    f.e.input(Input::Timers, f.t0 + Duration::from_secs(1));
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
    f.e.change(Topology::CloseEndpoint(f.ep));
    let mut fx = polled(&mut f.e);
    assert!(
        fx.deadline.is_some() && fx.work.datagrams.is_empty(),
        "withdrawals wait to leave together"
    );
    // The wake's timer counts their time; a later one sends them.
    f.e.input(Input::Timers, f.t0);
    assert!(polled(&mut f.e).work.datagrams.is_empty());
    f.e.input(Input::Timers, f.t0 + Duration::from_secs(1));
    fx.work.datagrams = polled(&mut f.e).work.datagrams;
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENOTCONN as u8);
    assert_eq!(f.e.discovery().status().lookups, 0);
    let withdrawn: Vec<_> = fx
        .work
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
    f.e.input(Input::DiscoveryUp(Families::NONE), f.t0);
    polled(&mut f.e);
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now()),
        None
    );
    let job = polled(&mut f.e).work.neighbour_jobs.remove(0);
    f.e.input(Input::Neighbour(job, None), f.t0);
    let fx = polled(&mut f.e);
    assert!(
        matches!(&fx.work.datagrams[..], [Datagram::Unicast { to, .. }] if *to == SocketAddr::new(IpAddr::V4(PEER_IP.into()), 9)),
        "no query went out, so the kernel is made to resolve the neighbour: {fx:?}"
    );
    f.e.input(Input::Timers, f.t0 + Duration::from_secs(1));
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
    for ms in (100..=3_400).step_by(100) {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    assert!(
        polled(&mut f.e).replies.is_empty(),
        "its last try waited for"
    );
    for ms in (3_500..=4_000).step_by(100) {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
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
    assert!(polled(&mut f.e).work.datagrams.is_empty(), "nothing asked");

    let other = [10, 0, 0, 3];
    let to = SocketAddr::new(IpAddr::V4(other.into()), 6126);
    for tid in 3..=4 {
        assert_eq!(
            f.e.resolve_at(f.addr, &ip_request(other, 0, tid), tid, Instant::now()),
            None
        );
        let (q, _) = sent_query(&polled(&mut f.e));
        f.e.input(Input::Unreachable(to, &Message::from(q).encode()), f.t0);
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
    let job = polled(&mut f.e).work.neighbour_jobs.remove(0);
    f.e.input(Input::Neighbour(job, None), f.t0);
    f.e.input(Input::Timers, f.t0 + Duration::from_secs(1));
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

/// Host `i` of a segment: its IPv4 address, where it listens, its record.
fn host(i: u8) -> ([u8; 4], SocketAddr, EndpointRecord) {
    let ip = [10, 0, 1, i];
    let gid = format!("fe80::1:{i}");
    let addrs = vec![WireAddress::from(Ipv4Addr::from(ip))];
    let record = EndpointRecord::new(gid.parse().unwrap(), 0, 4, 7, vec![0xffff], addrs).unwrap();
    let at = SocketAddr::new(IpAddr::V4(ip.into()), crate::config::DEFAULT_DISCOVERY_PORT);
    (ip, at, record)
}

/// Asks for host `i`'s address at `t`, and has the host answer `after`
/// later (never, if `None`), running the timers every 10 ms meanwhile:
/// how many times the query was sent, the answer's status, and when it
/// came.
fn ask_slow_host(
    f: &mut Fixture,
    i: u8,
    t: Instant,
    after: Option<Duration>,
) -> (usize, u8, Duration) {
    let (ip, at, record) = host(i);
    let tid = u64::from(i);
    f.e.resolve_at(f.addr, &ip_request(ip, 0, tid), tid, t);
    let (query, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(at));
    let mut sends = 1;
    for step in 1..=1_000u64 {
        let elapsed = Duration::from_millis(10 * step);
        if after.is_some_and(|a| elapsed >= a) {
            let found = reply_bytes(&query, Answer::Found(record.clone()));
            f.e.on_datagram(at, None, &found, t + elapsed);
        } else {
            f.e.input(Input::Timers, t + elapsed);
        }
        let fx = polled(&mut f.e);
        sends += sent_queries(&fx).len();
        if let [reply] = &fx.replies[..] {
            return (sends, reply.msg.status(), elapsed);
        }
    }
    panic!("host {i}: no answer in 10 s");
}

#[test]
fn a_reply_to_an_earlier_try_still_answers_and_one_to_a_retry_too() {
    let mut f = fixture(Config::default());
    let ms = Duration::from_millis;
    // The retry answered first: a short sample, the try stays at 500 ms
    // for the second round, where the first try is answered.
    for (i, answered) in [(1, 1), (2, 0)] {
        let (ip, at, record) = host(i);
        let t = f.t0 + ms(10_000 * u64::from(i));
        f.e.input(Input::Timers, t);
        polled(&mut f.e);
        f.e.resolve_at(f.addr, &ip_request(ip, 0, 1), 11, t);
        let mut tries = vec![sent_query(&polled(&mut f.e)).0];
        for step in 1..=50 {
            f.e.input(Input::Timers, t + ms(10 * step));
            tries.extend(sent_queries(&polled(&mut f.e)).into_iter().map(|(q, _)| q));
        }
        assert_eq!(tries.len(), 2, "{tries:?}");
        let found = reply_bytes(&tries[answered], Answer::Found(record.clone()));
        f.e.on_datagram(at, None, &found, t + ms(520));
        let fx = polled(&mut f.e);
        assert_eq!(
            dgid(&fx.replies[0].msg),
            format!("fe80::1:{i}").parse().unwrap()
        );
        // The other try's reply, after: late, not unsolicited.
        let other = reply_bytes(&tries[1 - answered], Answer::Found(record));
        f.e.on_datagram(at, None, &other, t + ms(700));
        let d = &f.e.discovery().counts().drops;
        assert_eq!((d.late, d.unsolicited), (u64::from(i), 0));
    }
}

#[test]
fn a_segment_whose_replies_come_late_is_waited_for_not_asked_again() {
    // Replies that take 700 ms (hundreds of daemons on a few cores) and
    // tries of 500 ms: the first queries go twice, and each is answered;
    // the try then grows past what the replies take, and a query goes
    // once. Replies back to a millisecond bring the try back to 500 ms.
    let mut f = fixture(Config::default());
    let ms = Duration::from_millis;
    let mut t = f.t0;
    let mut sends = Vec::new();
    for i in 1..=12 {
        let (n, status, _) = ask_slow_host(&mut f, i, t, Some(ms(700)));
        assert_eq!(status, 0, "host {i} answered, and its answer taken");
        sends.push(n);
        t += ms(1_000);
    }
    assert_eq!(sends[0], 2, "{sends:?}");
    assert!(sends[6..].iter().all(|&n| n == 1), "{sends:?}");
    for i in 13..=40 {
        let (n, status, _) = ask_slow_host(&mut f, i, t, Some(ms(1)));
        assert_eq!((n, status), (1, 0));
        t += ms(1_000);
    }
    // Silence is asked again after the configured 500 ms, then after
    // twice that, three times in all, and fails after 500 + 1,000 + 2,000
    // ms.
    let (n, status, took) = ask_slow_host(&mut f, 100, t, None);
    assert_eq!((n, status), (3, ACM_STATUS_ETIMEDOUT as u8));
    assert_eq!(took, ms(3_500));
}

#[test]
fn a_lookup_under_way_when_replies_turn_slow_gets_its_tries_at_the_longer_time() {
    // Two lookups at once, tries of 500 ms: host 1 answers after 700 ms,
    // which lengthens the try; host 2 answers after 2 s, past the three
    // tries' 1.5 s the stage was planned with, but within its tries at the
    // longer time.
    let mut f = fixture(Config::default());
    let ms = Duration::from_millis;
    let t = f.t0;
    let (ip1, at1, record1) = host(1);
    let (ip2, at2, record2) = host(2);
    f.e.resolve_at(f.addr, &ip_request(ip1, 0, 1), 1, t);
    let q1 = sent_query(&polled(&mut f.e)).0;
    f.e.resolve_at(f.addr, &ip_request(ip2, 0, 2), 2, t);
    let q2 = sent_query(&polled(&mut f.e)).0;
    let mut answered = Vec::new();
    for step in 1..=300u64 {
        let now = t + ms(10 * step);
        if now == t + ms(700) {
            let found = reply_bytes(&q1, Answer::Found(record1.clone()));
            f.e.on_datagram(at1, None, &found, now);
        }
        if now == t + ms(2_000) {
            let found = reply_bytes(&q2, Answer::Found(record2.clone()));
            f.e.on_datagram(at2, None, &found, now);
        }
        f.e.input(Input::Timers, now);
        let fx = polled(&mut f.e);
        answered.extend(fx.replies.iter().map(|r| (r.id, r.msg.status(), now - t)));
    }
    assert_eq!(answered, [(1, 0, ms(700)), (2, 0, ms(2_000))]);
}
