//! What a forger, a moved host or a second claimant can and cannot change.

use super::*;

/// What a forger puts in its datagrams: its own GID for the peer's
/// addresses.
fn forged_record() -> EndpointRecord {
    peer_record(ATTACKER)
}

#[test]
fn a_forged_query_never_changes_a_binding() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    // From B's address, the attacker's GID as sender record.
    query_from_peer(
        &mut f.e,
        Address::Ip4([10, 0, 0, 1].into()),
        forged_record(),
        own_ip(),
        f.t0,
    );
    let fx = polled(&mut f.e);
    assert_eq!(bound_gid(&f.e, &peer_ip()), Some(PEER.parse().unwrap()));
    // It is a hint: B is asked at its own address, with a fresh txid.
    let checks: Vec<_> = sent_queries(&fx);
    assert_eq!(checks.len(), 1, "{fx:?}");
    let (check, to) = &checks[0];
    assert_eq!((*to, check.target().address()), (Some(peer()), &peer_ip()));
    // The attacker, who cannot see that query, answers a guess.
    let guess = Query::new(
        std::num::NonZeroU64::new(check.txid().get() ^ 0x5a5a).unwrap(),
        check.target().clone(),
        forged_record(),
    );
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&guess, Answer::Found(forged_record())),
        f.t0,
    );
    assert_eq!(f.e.discovery().counts().drops.unsolicited, 1);
    assert_eq!(bound_gid(&f.e, &peer_ip()), Some(PEER.parse().unwrap()));
    // B's own answer keeps its binding.
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(check, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let r =
        f.e.resolve_at(
            f.addr,
            &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 2),
            2,
            Instant::now(),
        )
        .unwrap();
    assert_eq!(dgid(&r), PEER.parse().unwrap());
    // More forgeries soon after ask B nothing more.
    for _ in 0..100 {
        query_from_peer(
            &mut f.e,
            Address::Ip4([10, 0, 0, 1].into()),
            forged_record(),
            own_ip(),
            f.t0,
        );
    }
    assert_eq!(
        sent_queries(&polled(&mut f.e)).len(),
        0,
        "checked at most once per holdoff"
    );
}

#[test]
fn a_forged_announcement_never_moves_a_hosts_names() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    learn_peer_name(&mut f, 2);
    let forged = Message::from(Announce::new(vec![forged_record()], false).unwrap()).encode();
    f.e.on_datagram(peer(), None, &forged, f.t0);
    let fx = polled(&mut f.e);
    for a in [peer_ip(), node_b()] {
        assert_eq!(bound_gid(&f.e, &a), Some(PEER.parse().unwrap()), "{a}");
    }
    // Each binding it contradicts is checked where it was confirmed:
    // B's address, for the address and for the name.
    let checks = sent_queries(&fx);
    let mut asked: Vec<(String, Option<SocketAddr>)> = checks
        .iter()
        .map(|(q, to)| (q.target().address().to_string(), *to))
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        [
            ("10.0.0.2".to_string(), Some(peer())),
            ("node-b".to_string(), Some(peer()))
        ]
    );
    for (q, _) in &checks {
        f.e.on_datagram(
            peer(),
            None,
            &reply_bytes(q, Answer::Found(peer_record(PEER))),
            f.t0,
        );
    }
    for a in [peer_ip(), node_b()] {
        assert_eq!(bound_gid(&f.e, &a), Some(PEER.parse().unwrap()), "{a}");
    }
    // A forged withdrawal, later: checked too, and B still holds both.
    let later = f.t0 + CHECK_HOLDOFF * 2;
    let withdrawal = Message::from(Announce::new(vec![peer_record(PEER)], true).unwrap()).encode();
    let elsewhere = SocketAddr::new(IpAddr::V4([10, 0, 0, 66].into()), 6126);
    f.e.on_datagram(elsewhere, None, &withdrawal, later);
    for (q, to) in sent_queries(&polled(&mut f.e)) {
        assert_eq!(to, Some(peer()));
        f.e.on_datagram(
            peer(),
            None,
            &reply_bytes(&q, Answer::Found(peer_record(PEER))),
            later,
        );
    }
    for a in [peer_ip(), node_b()] {
        assert_eq!(bound_gid(&f.e, &a), Some(PEER.parse().unwrap()), "{a}");
    }
    // Addresses this host never asked about are not learned either.
    let stranger = EndpointRecord::new(
        "fe80::d".parse().unwrap(),
        0,
        5,
        16,
        vec![0xffff],
        vec![WireAddress::from(Ipv4Addr::new(10, 0, 0, 4))],
    )
    .unwrap();
    let from4 = SocketAddr::new(IpAddr::V4([10, 0, 0, 4].into()), 6126);
    f.e.on_datagram(
        from4,
        None,
        &Message::from(Announce::new(vec![stranger], false).unwrap()).encode(),
        later,
    );
    assert!(polled(&mut f.e).work.datagrams.is_empty());
    assert_eq!(
        f.e.discovery()
            .state()
            .binding(&Address::Ip4([10, 0, 0, 4].into())),
        None
    );
}

#[test]
fn a_host_with_a_new_gid_is_followed_once_it_confirms_it() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    learn_peer_name(&mut f, 2);
    let cached =
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 3), 3, Instant::now())
            .unwrap();
    assert_eq!(dgid(&cached), PEER.parse().unwrap());
    // B came back with new hardware and announces it.
    let moved = Message::from(Announce::new(vec![peer_record("fe80::c")], false).unwrap()).encode();
    f.e.on_datagram(peer(), None, &moved, f.t0);
    let checks = sent_queries(&polled(&mut f.e));
    assert_eq!(checks.len(), 2);
    // Until B answers, its old GID is in doubt: requests wait for the
    // answer (one asked by address, one by name) instead of taking a GID
    // that has probably gone, and ask B nothing more.
    let by_name = request(
        &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node-b")],
        false,
        6,
    );
    for (tid, req) in [(5, ip_request(PEER_IP, 0, 5)), (6, by_name)] {
        assert_eq!(f.e.resolve_at(f.addr, &req, tid, Instant::now()), None);
    }
    let fx = polled(&mut f.e);
    assert!(
        fx.replies.is_empty() && sent_queries(&fx).is_empty(),
        "{fx:?}"
    );
    for (q, _) in &checks {
        f.e.on_datagram(
            peer(),
            None,
            &reply_bytes(q, Answer::Found(peer_record("fe80::c"))),
            f.t0,
        );
    }
    // What the replies changed reaches the cache at the next poll, which
    // the runtime makes before it lets go of the engine; the requests
    // that waited are answered then, with the GID B confirmed.
    let fx = polled(&mut f.e);
    let mut answered: Vec<(u64, Gid)> = fx.replies.iter().map(|r| (r.id, dgid(&r.msg))).collect();
    answered.sort();
    let new: Gid = "fe80::c".parse().unwrap();
    assert_eq!(answered, [(5, new), (6, new)]);
    for a in [peer_ip(), node_b()] {
        assert_eq!(bound_gid(&f.e, &a), Some("fe80::c".parse().unwrap()), "{a}");
    }
    assert_eq!(
        bound_gid(&f.e, &Address::Gid(PEER.parse().unwrap())),
        None,
        "nothing is left at the old GID"
    );
    let r =
        f.e.resolve_at(
            f.addr,
            &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 4),
            4,
            Instant::now(),
        )
        .unwrap();
    assert_eq!(
        dgid(&r),
        "fe80::c".parse().unwrap(),
        "the cached path followed"
    );
}

#[test]
fn a_forged_announcement_delays_requests_by_one_reply_and_changes_none() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    let forged = Message::from(Announce::new(vec![forged_record()], false).unwrap()).encode();
    f.e.on_datagram(attacker(), None, &forged, f.t0);
    let (check, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()), "asked of the address itself");
    // A request without NODELAY waits for B; one with it is not answered
    // with the doubted GID either.
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 2, Instant::now()),
        None
    );
    let now = f.e.resolve_at(
        f.addr,
        &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 3),
        3,
        Instant::now(),
    );
    assert_eq!(now.map(|r| r.status()), Some(ACM_STATUS_ENODATA as u8));
    assert!(
        sent_queries(&polled(&mut f.e)).is_empty(),
        "B is asked once"
    );
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&check, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(
        (fx.replies[0].id, dgid(&fx.replies[0].msg)),
        (2, PEER.parse().unwrap())
    );
    // The forger's next announcements, within the holdoff, cost nothing.
    f.e.on_datagram(attacker(), None, &forged, f.t0 + CHECK_HOLDOFF / 2);
    let hit = f.e.resolve_at(
        f.addr,
        &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 4),
        4,
        Instant::now(),
    );
    assert_eq!(hit.map(|r| dgid(&r)), Some(PEER.parse().unwrap()));
}

#[test]
fn a_request_waiting_for_a_check_that_fails_fails_as_its_lookup_would() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    let moved = Message::from(Announce::new(vec![peer_record("fe80::c")], false).unwrap()).encode();
    f.e.on_datagram(peer(), None, &moved, f.t0);
    let (check, _) = sent_query(&polled(&mut f.e));
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 2, Instant::now()),
        None
    );
    // The address's holder says it no longer holds it: the request is
    // told so, as a lookup of it would have been.
    f.e.on_datagram(peer(), None, &reply_bytes(&check, Answer::Refused), f.t0);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    assert_eq!(bound_gid(&f.e, &peer_ip()), None);
}

#[test]
fn a_withdrawal_forgets_what_its_holder_no_longer_confirms() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    learn_peer_name(&mut f, 2);
    let withdrawal = Message::from(Announce::new(vec![peer_record(PEER)], true).unwrap()).encode();
    f.e.on_datagram(peer(), None, &withdrawal, f.t0);
    let checks = sent_queries(&polled(&mut f.e));
    assert_eq!(checks.len(), 2);
    let (first, second) = (&checks[0].0, &checks[1].0);
    f.e.on_datagram(peer(), None, &reply_bytes(first, Answer::Refused), f.t0);
    assert_eq!(bound_gid(&f.e, first.target().address()), None);
    // No answer at all (after the check's tries, each twice as long as
    // the one before) keeps what its holder confirmed last: a forger can
    // silence a holder (a flood in the asker's name drains the holder's
    // reply allowance), and a holder gone takes its GID with it.
    let cfg_timeout = Duration::from_millis(u64::from(f.e.config().timeout_ms));
    for i in [1, 3, 7] {
        f.e.input(
            Input::Timers,
            f.t0 + cfg_timeout * i + Duration::from_millis(1),
        );
    }
    polled(&mut f.e);
    assert_eq!(
        bound_gid(&f.e, second.target().address()),
        Some(PEER.parse().unwrap())
    );
    assert_eq!(f.e.discovery().counts().checks_unanswered, 1);
    let r =
        f.e.resolve_at(
            f.addr,
            &ip_request(PEER_IP, ACM_FLAGS_NODELAY, 3),
            3,
            Instant::now(),
        )
        .unwrap();
    assert_eq!(
        r.status(),
        ACM_STATUS_ENODATA as u8,
        "not served from the cache"
    );
}

#[test]
fn a_claim_counts_only_once_its_host_confirms_it() {
    let mut f = fixture(segment_only());
    let by_name = |name: &[u8], tid| {
        request(
            &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, name)],
            false,
            tid,
        )
    };
    // The attacker reads the group query and answers first, in B's
    // name, with its own GID: B is asked, and B's answer counts.
    f.e.resolve_at(f.addr, &by_name(b"node-b", 1), 1, Instant::now());
    let (g, _) = sent_query(&polled(&mut f.e));
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&g, Answer::Found(forged_record())),
        f.t0,
    );
    let (confirm, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()));
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&confirm, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let fx = after_claims(&mut f);
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());

    // A name B does not hold, claimed in B's name: B refuses, and the
    // lookup fails once its group query's time is up. B said no only for
    // itself: a holder whose answer was lost may exist, so not ENODATA.
    f.e.resolve_at(f.addr, &by_name(b"node-c", 2), 2, Instant::now());
    let (g, _) = sent_query(&polled(&mut f.e));
    let c_record = EndpointRecord::new(
        ATTACKER.parse().unwrap(),
        0,
        5,
        16,
        vec![0xffff],
        vec![WireAddress::new(Address::name("node-c").unwrap()).unwrap()],
    )
    .unwrap();
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&g, Answer::Found(c_record)),
        f.t0,
    );
    let (confirm, _) = sent_query(&polled(&mut f.e));
    f.e.on_datagram(peer(), None, &reply_bytes(&confirm, Answer::Refused), f.t0);
    f.e.input(Input::Timers, f.t0 + Duration::from_secs(2));
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(bound_gid(&f.e, &Address::name("node-c").unwrap()), None);
}

#[test]
fn a_name_two_hosts_confirm_with_different_gids_gets_no_answer() {
    let mut f = fixture(segment_only());
    let by_name = request(
        &[addr_entry(ACM_EP_FLAG_DEST, ACM_ADDRESS_NAME, b"node-b")],
        false,
        1,
    );
    f.e.resolve_at(f.addr, &by_name, 1, Instant::now());
    let (g, _) = sent_query(&polled(&mut f.e));
    // The attacker claims the name from its own address too.
    let attacker = SocketAddr::new(IpAddr::V4([10, 0, 0, 66].into()), 6126);
    f.e.on_datagram(
        attacker,
        None,
        &reply_bytes(&g, Answer::Found(forged_record())),
        f.t0,
    );
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(&g, Answer::Found(peer_record(PEER))),
        f.t0,
    );
    let confirms = sent_queries(&polled(&mut f.e));
    assert_eq!(confirms.len(), 2);
    for (q, to) in &confirms {
        let (from, record) = match *to == Some(attacker) {
            true => (attacker, forged_record()),
            false => (peer(), peer_record(PEER)),
        };
        f.e.on_datagram(from, None, &reply_bytes(q, Answer::Found(record)), f.t0);
    }
    let fx = after_claims(&mut f);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    assert_eq!(bound_gid(&f.e, &node_b()), None);
    assert_eq!(f.e.discovery().counts().conflicts, 1);
}

#[test]
fn names_are_asked_of_the_groups_and_this_host_announces_itself() {
    let mut f = fixture(Config::default());
    learn_peer_name(&mut f, 3);
    // Learned: the name, confirmed where the peer answered.
    assert_eq!(
        f.e.discovery().state().binding(&node_b()).unwrap().via,
        Some(peer())
    );
    assert_eq!(bound_gid(&f.e, &peer_ip()), None, "only the name was asked");

    // Counted from the next timer, which is due at once.
    f.e.input(Input::DiscoveryUp(Families::V4), f.t0);
    assert!(polled(&mut f.e).deadline.is_some());
    f.e.input(Input::Timers, f.t0);
    assert!(polled(&mut f.e).deadline.unwrap() <= f.t0 + Duration::from_millis(50));
    f.e.input(Input::Timers, f.t0 + Duration::from_millis(60));
    let fx = polled(&mut f.e);
    let [Datagram::Multicast { bytes, .. }] = &without_start_queries(&fx)[..] else {
        panic!("{fx:?}")
    };
    let Ok(Message::Announce(a)) = Message::decode(bytes) else {
        panic!()
    };
    assert!(!a.withdrawn());
    assert_eq!(a.records()[0].gid(), OWN.parse().unwrap());
    assert_eq!(a.records()[0].addresses().len(), 2);
    assert_eq!(
        f.e.discovery().footprint().announcer.scheduled,
        2,
        "repeated twice more"
    );
}

#[test]
fn a_replayed_renewal_changes_no_answer() {
    // Without keys: the peer renewed its announcement at one GID, came
    // back with another; an old renewal, replayed from its address, moves
    // the hint back, but the hint only says whom to ask: the peer, asked,
    // answers with its GID of now.
    let mut f = fixture(segment_only());
    let old = Message::from(Announce::new(vec![peer_record(PEER)], false).unwrap()).encode();
    let new_gid = "fe80::b2";
    let now = Message::from(Announce::new(vec![peer_record(new_gid)], false).unwrap()).encode();
    let t = f.t0;
    f.e.on_datagram(peer(), Some(group()), &old, t);
    let t = t + Duration::from_secs(30);
    f.e.on_datagram(peer(), Some(group()), &now, t);
    f.e.on_datagram(peer(), Some(group()), &old, t + Duration::from_secs(1));
    let t = t + Duration::from_secs(2);
    f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t);
    let (q, to) = sent_query(&polled(&mut f.e));
    assert_eq!(
        to,
        Some(peer()),
        "asked of the address, not answered from the hint"
    );
    let found = reply_bytes(&q, Answer::Found(peer_record(new_gid)));
    f.e.on_datagram(peer(), None, &found, t);
    let fx = polled(&mut f.e);
    assert_eq!(dgid(&fx.replies[0].msg), new_gid.parse().unwrap());

    // With a key: the captured renewal is refused as a replay, and the
    // hint stays where the peer's last announcement put it.
    let mut g = fixture(segment_only());
    g.e.reconfigure(Change::Auth(auth(KEY)));
    let peer_auth = auth(KEY);
    let t = Instant::now();
    let captured = peer_auth.seal(old.clone());
    g.e.on_datagram(peer(), Some(group()), &captured, t);
    let sealed_now = peer_auth.seal(now.clone());
    g.e.on_datagram(peer(), Some(group()), &sealed_now, t);
    g.e.on_datagram(peer(), Some(group()), &captured, t);
    assert_eq!(g.e.discovery().counts().drops.replayed, 1);
    assert_eq!(g.e.discovery().counts().disputed_names, 0);
}

#[test]
fn a_check_its_holder_never_answers_keeps_the_binding_for_the_requests_that_waited() {
    let mut f = fixture(Config::default());
    learn_peer(&mut f, 1);
    // A forged hint puts the binding in doubt: its holder is asked.
    let forged = Message::from(Announce::new(vec![peer_record(ATTACKER)], false).unwrap()).encode();
    f.e.on_datagram(attacker(), Some(group()), &forged, f.t0);
    let (check, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()));
    // A request comes meanwhile and waits for the holder.
    let t = f.t0 + Duration::from_millis(10);
    assert_eq!(
        f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 2), 2, t),
        None
    );
    // The holder never answers (its reply allowance for this host drained
    // by queries forged in this host's name): every try times out.
    let cfg_timeout = Duration::from_millis(u64::from(f.e.config().timeout_ms));
    let mut fx = Effects::default();
    for i in [1, 3, 7, 15] {
        f.e.input(
            Input::Timers,
            f.t0 + cfg_timeout * i + Duration::from_millis(1),
        );
        let p = polled(&mut f.e);
        fx.replies.extend(p.replies);
    }
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(fx.replies[0].msg.status(), 0, "answered: {fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
    assert_eq!(bound_gid(&f.e, &peer_ip()), Some(PEER.parse().unwrap()));
    // A late reply from the holder changes nothing.
    let late = reply_bytes(&check, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &late, f.t0 + cfg_timeout * 16);
    assert_eq!(bound_gid(&f.e, &peer_ip()), Some(PEER.parse().unwrap()));
}

#[test]
fn a_claimant_that_never_confirms_leaves_the_name_undecided() {
    // The holder claims the name but never confirms it (its allowance for
    // this host drained by queries forged in this host's name); a liar
    // claims and confirms: the name is not the liar's, nor remembered.
    let mut f = fixture(segment_only());
    let t = f.t0;
    let group = group_asked(&mut f, "node-x", 1, t);
    let honest = holding("fe80::c", [10, 0, 0, 3], "node-x");
    let c = SocketAddr::new(IpAddr::V4([10, 0, 0, 3].into()), 6126);
    f.e.on_datagram(c, None, &reply_bytes(&group, Answer::Found(honest)), t);
    let (_, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(c), "the holder asked to confirm");
    claimed(
        &mut f,
        &group,
        attacker(),
        holding(ATTACKER, [10, 0, 0, 66], "node-x"),
        t,
    );
    let mut replies = Vec::new();
    for ms in (50..=4_000).step_by(50) {
        f.e.input(Input::Timers, t + Duration::from_millis(ms));
        replies.extend(polled(&mut f.e).replies);
    }
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().status().failures, 0, "not remembered");
}
