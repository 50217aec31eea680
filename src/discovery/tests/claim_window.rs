//! The claim window of a name asked of the groups.

use super::*;

#[test]
fn a_name_asked_of_the_groups_is_decided_once_its_claim_window_is_over() {
    let mut f = fixture(segment_only());
    let timeout = Duration::from_millis(u64::from(Config::default().timeout_ms));
    let window = timeout / decide::CLAIM_WINDOW_SHARE;
    let t = f.t0;
    let g = group_asked(&mut f, "node-b", 1, t);
    claimed(
        &mut f,
        &g,
        peer(),
        peer_record(PEER),
        t + Duration::from_millis(1),
    );
    f.e.input(Input::Timers, t + window - Duration::from_millis(1));
    let fx = polled(&mut f.e);
    assert!(
        fx.replies.is_empty(),
        "not before other holders could claim"
    );
    assert_eq!(fx.deadline, Some(t + window), "{fx:?}");
    f.e.input(Input::Timers, t + window);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), PEER.parse().unwrap());

    // A second holder heard within the window: two GIDs, no answer.
    let g = group_asked(&mut f, "node-x", 2, t);
    let x = |gid: &str, ip| holding(gid, ip, "node-x");
    claimed(&mut f, &g, peer(), x(PEER, PEER_IP), t);
    let late = t + window - Duration::from_millis(1);
    claimed(&mut f, &g, attacker(), x(ATTACKER, [10, 0, 0, 66]), late);
    f.e.input(Input::Timers, t + window);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    assert_eq!(f.e.discovery().counts().conflicts, 1);

    // A claim that comes after the window is not followed: the name was
    // decided.
    let g = group_asked(&mut f, "node-y", 3, t);
    let y = |gid: &str, ip| holding(gid, ip, "node-y");
    claimed(&mut f, &g, peer(), y(PEER, PEER_IP), t);
    f.e.input(Input::Timers, t + window);
    assert_eq!(
        dgid(&polled(&mut f.e).replies[0].msg),
        PEER.parse().unwrap()
    );
    let claim = reply_bytes(&g, Answer::Found(y(ATTACKER, [10, 0, 0, 66])));
    f.e.on_datagram(attacker(), None, &claim, t + window);
    assert!(sent_queries(&polled(&mut f.e)).is_empty());
    assert_eq!(f.e.discovery().counts().drops.late, 1);
}
