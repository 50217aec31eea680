//! Bindings in steady use: asked of their holder again ahead of their end
//! (`urdma_reconfirm`), so that no request waits for it, and no longer
//! given once the holder says no.

use super::*;

const S: Duration = Duration::from_secs(1);

/// 30 s bindings, as by default; the peer learned at `f.t0`.
fn learned_peer() -> Fixture {
    let mut f = fixture(Config {
        reconfirm: Some(30 * S),
        ..Config::default()
    });
    learn_peer(&mut f, 1);
    f
}

/// A request for the peer's address `secs` after `f.t0`: its answer if
/// it came at once, and the queries it sent.
fn ask_at(
    f: &mut Fixture,
    tid: u64,
    secs: u64,
) -> (Option<MsgBuf>, Vec<(Query, Option<SocketAddr>)>) {
    let t = f.t0 + Duration::from_secs(secs);
    let answer = f.e.resolve_at(f.addr, &ip_request(PEER_IP, 0, tid), tid, t);
    (answer, sent_queries(&polled(&mut f.e)))
}

#[test]
fn a_destination_in_steady_use_is_asked_again_ahead_and_no_request_waits() {
    let mut f = learned_peer();
    let (answer, asked) = ask_at(&mut f, 2, 10);
    assert_eq!(
        dgid(&answer.expect("from the cache")),
        PEER.parse().unwrap()
    );
    assert!(asked.is_empty(), "{asked:?}");
    // In the last fifth of its 30 s: answered from the binding as
    // before, and its holder asked again meanwhile.
    let (answer, asked) = ask_at(&mut f, 3, 25);
    assert_eq!(dgid(&answer.expect("at once")), PEER.parse().unwrap());
    let [(q, to)] = &asked[..] else {
        panic!("one query to the holder: {asked:?}")
    };
    assert_eq!((*to, q.target().address()), (Some(peer()), &peer_ip()));
    let (answer, asked) = ask_at(&mut f, 4, 26);
    assert!(
        answer.is_some() && asked.is_empty(),
        "asked once: {asked:?}"
    );
    let found = reply_bytes(q, Answer::Found(peer_record(PEER)));
    f.e.on_datagram(peer(), None, &found, f.t0 + 26 * S);
    assert!(polled(&mut f.e).replies.is_empty(), "nobody waited");
    // Past the 30 s the first confirmation was good for: confirmed again
    // at 26 s, so still answered at once, with nothing sent.
    for (tid, at) in [(5, 31), (6, 45)] {
        let (answer, asked) = ask_at(&mut f, tid, at);
        assert_eq!(dgid(&answer.expect("at once")), PEER.parse().unwrap());
        assert!(asked.is_empty(), "at {at} s: {asked:?}");
    }
    // And again ahead of that one's end.
    let (answer, asked) = ask_at(&mut f, 7, 51);
    assert!(answer.is_some());
    assert_eq!(asked.len(), 1, "{asked:?}");
}

#[test]
fn a_holder_that_says_no_when_asked_ahead_ends_its_binding_at_once() {
    let mut f = learned_peer();
    let (answer, asked) = ask_at(&mut f, 2, 25);
    assert!(answer.is_some());
    let [(q, _)] = &asked[..] else {
        panic!("{asked:?}")
    };
    f.e.on_datagram(
        peer(),
        None,
        &reply_bytes(q, Answer::Refused),
        f.t0 + 25 * S,
    );
    polled(&mut f.e);
    assert_eq!(bound_gid(&f.e, &peer_ip()), None);
    // Not another request with the GID its holder gave up, though the
    // binding had 5 s left.
    let (answer, _) = ask_at(&mut f, 3, 26);
    let answer = answer.expect("the refusal is remembered");
    assert_eq!(answer.status(), ACM_STATUS_ENODATA as u8);
}

#[test]
fn a_holder_silent_when_asked_ahead_keeps_its_binding_no_longer_than_before() {
    let mut f = learned_peer();
    let (answer, asked) = ask_at(&mut f, 2, 25);
    assert!(answer.is_some() && asked.len() == 1);
    // Silence is no answer: the binding serves to its end...
    f.e.on_timers(f.t0 + 27 * S);
    polled(&mut f.e);
    let (answer, _) = ask_at(&mut f, 3, 29);
    assert_eq!(dgid(&answer.expect("at once")), PEER.parse().unwrap());
    // ...and not past it: the next request waits for its holder.
    f.e.on_timers(f.t0 + 30 * S);
    polled(&mut f.e);
    let (answer, asked) = ask_at(&mut f, 4, 31);
    assert_eq!(answer, None, "waits");
    assert_eq!(asked.len(), 1, "{asked:?}");
}
