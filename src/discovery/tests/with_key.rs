//! With a key: what counts, what is replayed, and when a claim is decided.

use super::*;

/// The peer's QUERY (transaction id 9) for this host's address.
fn peer_asks_for_us() -> Vec<u8> {
    Message::from(Query::new(
        std::num::NonZeroU64::new(9).unwrap(),
        WireAddress::new(Address::Ip4([10, 0, 0, 1].into())).unwrap(),
        peer_record(PEER),
    ))
    .encode()
}

#[test]
fn with_a_key_only_authenticated_fresh_messages_count() {
    let mut f = fixture(Config::default());
    f.e.reconfigure(Change::Auth(auth(KEY)));
    let peer_auth = auth(KEY);
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 1), 11, Instant::now());
    // The engine makes the message; the sender seals each copy as it
    // leaves (net.rs).
    let (q, _) = sent_query(&polled(&mut f.e));
    let found = Message::from(q.reply(Answer::Found(peer_record(PEER))).unwrap()).encode();

    // A reply that is right in every way but unsealed, or sealed with
    // another key, is dropped and does not end the lookup.
    f.e.on_datagram(peer(), None, &found, f.t0);
    let forger = auth("1 0f0e0d0c0b0a09080706050403020100");
    f.e.on_datagram(peer(), None, &forger.seal(found.clone()), f.t0);
    let other_id = auth("2 000102030405060708090a0b0c0d0e0f");
    f.e.on_datagram(peer(), None, &other_id.seal(found.clone()), f.t0);
    assert!(polled(&mut f.e).replies.is_empty());
    assert_eq!(f.e.discovery().counts().drops.unauthenticated, 3);
    assert_eq!(f.e.discovery().status().lookups, 1);

    let sealed = peer_auth.seal(found);
    assert!(
        sealed.len()
            <= crate::discovery::wire::QUERY_LEN + crate::discovery::wire::AUTH_TRAILER_LEN,
        "no larger than the sealed query"
    );
    f.e.on_datagram(peer(), None, &sealed, f.t0);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());

    // Replayed later, even to a new lookup with the same target, it is
    // caught before its transaction id is looked at.
    f.e.on_datagram(peer(), None, &sealed, f.t0);
    assert_eq!(f.e.discovery().counts().drops.replayed, 1);
    assert_eq!(f.e.discovery().counts().drops.unsolicited, 0);
}

#[test]
fn with_a_key_queries_are_answered_and_plain_or_replayed_ones_ignored() {
    let mut f = fixture(Config::default());
    f.e.reconfigure(Change::Auth(auth(KEY)));
    let peer_auth = auth(KEY);
    let q = peer_asks_for_us();
    f.e.on_datagram(peer(), Some(own_ip()), &q, f.t0);
    assert!(polled(&mut f.e).work.datagrams.is_empty());
    let sealed = peer_auth.seal(q);
    f.e.on_datagram(peer(), Some(own_ip()), &sealed, f.t0);
    let (_, _, answer) = sent_reply(&polled(&mut f.e));
    assert!(matches!(answer, Answer::Found(_)));
    f.e.on_datagram(peer(), Some(own_ip()), &sealed, f.t0);
    assert!(
        polled(&mut f.e).work.datagrams.is_empty(),
        "a replay is not answered"
    );
    assert_eq!(
        (
            f.e.discovery().counts().drops.unauthenticated,
            f.e.discovery().counts().drops.replayed
        ),
        (1, 1)
    );
}

#[test]
fn with_a_key_messages_that_overtake_each_other_all_count_and_replays_none() {
    let mut f = fixture(Config::default());
    f.e.reconfigure(Change::Auth(auth(KEY)));
    let peer_auth = auth(KEY);
    // Three tries of a query, sealed in turn, arriving last first (held
    // while the peer's kernel resolved this host's link address).
    let q = peer_asks_for_us();
    let tries: Vec<Vec<u8>> = (0..3).map(|_| peer_auth.seal(q.clone())).collect();
    for t in tries.iter().rev() {
        f.e.on_datagram(peer(), Some(own_ip()), t, f.t0);
        let (_, _, answer) = sent_reply(&polled(&mut f.e));
        assert!(matches!(answer, Answer::Found(_)));
    }
    assert_eq!(f.e.discovery().counts().drops.total(), 0, "nothing dropped");
    for t in &tries {
        f.e.on_datagram(peer(), Some(own_ip()), t, f.t0);
    }
    assert!(polled(&mut f.e).work.datagrams.is_empty());
    assert_eq!(f.e.discovery().counts().drops.replayed, 3);
}

#[test]
fn with_a_key_a_name_asked_of_the_groups_is_decided_at_its_first_confirmation() {
    let mut f = fixture(segment_only());
    f.e.reconfigure(Change::Auth(auth(KEY)));
    let peer_auth = auth(KEY);
    let t = Instant::now();
    let g = group_asked(&mut f, "node-b", 1, t);
    let claim = reply_bytes(&g, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &peer_auth.seal(claim), t);
    let (confirm, _) = sent_query(&polled(&mut f.e));
    let found = reply_bytes(&confirm, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &peer_auth.seal(found), t);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "at once: only key holders claim");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());
}

#[test]
fn a_peer_whose_clock_is_off_counts_as_stale_not_as_replayed() {
    let mut f = fixture(Config::default());
    f.e.reconfigure(Change::Auth(auth(KEY)));
    let ahead = Auth::new(
        Keyring::new(&KeyFile::parse(KEY, "key").unwrap()),
        WallClock::new(|| crate::discovery::seal::wall_micros() + 60_000_000),
    );
    f.e.on_datagram(
        peer(),
        Some(own_ip()),
        &ahead.seal(peer_asks_for_us()),
        f.t0,
    );
    assert!(polled(&mut f.e).work.datagrams.is_empty(), "not answered");
    let drops = &f.e.discovery().counts().drops;
    assert_eq!(
        (drops.stale, drops.replayed, drops.unauthenticated),
        (1, 0, 0)
    );
    assert_eq!(drops.replay_window(), 1);
}

/// What a key holder gone rogue can still do, so that the documentation
/// can say it plainly (docs/protocol.md, trust table): name its own
/// address for another host's name in a welcome to a host that just
/// started, and confirm it.
#[test]
fn a_key_holder_gone_rogue_can_plant_a_name_at_a_host_that_just_started() {
    let mut f = keyed(fixture(segment_only()));
    for ms in [0, 50] {
        f.e.input(Input::Timers, f.t0 + Duration::from_millis(ms));
    }
    polled(&mut f.e);
    let rogue = holding(ATTACKER, [10, 0, 0, 66], "node-b");
    let welcome = Message::from(Announce::new(vec![rogue.clone()], false).unwrap()).encode();
    let t = f.t0 + Duration::from_millis(60);
    deliver(&mut f, attacker(), Some(own_ip()), &welcome, t);
    let t = t + hints::SETTLE;
    f.e.resolve_at(f.addr, &by_name("node-b", 1), 1, t);
    let (q, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(attacker()), "asked of the rogue alone");
    let found = reply_bytes(&q, Answer::Found(rogue));
    deliver(&mut f, attacker(), None, &found, t);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), ATTACKER.parse().unwrap());
}

/// A key holder gone rogue that claims a name and confirms it 3.4 s late,
/// over and over, slows only the queries asked of it.
#[test]
fn a_key_holder_gone_rogue_that_answers_slowly_slows_only_its_own_queries() {
    let mut f = keyed(fixture(segment_only()));
    let mut t = f.t0 + Duration::from_secs(10);
    for tid in 1..=20u64 {
        let name = format!("ghost-{tid}");
        assert_eq!(f.e.resolve_at(f.addr, &by_name(&name, tid), tid, t), None);
        let (group, _) = sent_query(&polled(&mut f.e));
        let record = holding(ATTACKER, [10, 0, 0, 66], &name);
        let claim = reply_bytes(&group, Answer::Found(record.clone()));
        deliver(&mut f, attacker(), None, &claim, t);
        let (confirm, to) = sent_query(&polled(&mut f.e));
        assert_eq!(to, Some(attacker()));
        let late = t + Duration::from_millis(3_400);
        let found = reply_bytes(&confirm, Answer::Found(record));
        f.e.input(Input::Timers, late);
        deliver(&mut f, attacker(), None, &found, late);
        polled(&mut f.e);
        t = late + Duration::from_secs(1);
    }
    let status = f.e.discovery().status();
    assert_eq!(status.try_time, Duration::from_millis(500), "the segment's");
    // A lookup of the peer still waits the configured try before asking
    // again.
    f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, 99), 99, t);
    let (first, to) = sent_query(&polled(&mut f.e));
    assert_eq!(to, Some(peer()));
    f.e.input(Input::Timers, t + Duration::from_millis(501));
    let (second, _) = sent_query(&polled(&mut f.e));
    assert_ne!(first.txid(), second.txid(), "asked again after 500 ms");
}
