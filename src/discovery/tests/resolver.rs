//! Names off the segment, through the system's resolver.

use super::*;

/// The record of a host with GID `gid` that holds `ip`.
fn record_of(gid: &str, ip: IpAddr) -> EndpointRecord {
    let addrs = vec![WireAddress::new(Address::from(ip)).unwrap()];
    EndpointRecord::new(gid.parse().unwrap(), 0, 4, 7, vec![0xffff], addrs).unwrap()
}

/// Asks for `name`, lets the segment stage time out silently, and returns
/// the job the system's resolver gets and when it was made.
fn to_the_resolver(f: &mut Fixture, name: &str, tid: u64) -> (NssJob, Instant) {
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name(name, tid), tid, Instant::now()),
        None
    );
    let fx = polled(&mut f.e);
    let (_, to) = sent_query(&fx);
    assert_eq!(to, None, "the segment is asked first");
    assert!(fx.work.resolver_jobs.is_empty(), "not yet");
    // The group query's tries, each timing out silently, then its stage.
    let start = Instant::now();
    let mut t = start;
    let mut jobs = Vec::new();
    while jobs.is_empty() {
        t += Duration::from_millis(100);
        assert!(
            t < start + Duration::from_secs(4),
            "the segment stage ends in time"
        );
        f.e.input(Input::Timers, t);
        let fx = polled(&mut f.e);
        assert!(fx.replies.is_empty(), "{fx:?}");
        jobs = fx.work.resolver_jobs;
    }
    let segment_over = t;
    assert_eq!(jobs.len(), 1, "then the system's resolver");
    assert_eq!(jobs[0].name, name);
    assert_eq!(jobs[0].deadline, segment_over + Duration::from_millis(3500));
    (jobs.into_iter().next().unwrap(), segment_over)
}

fn nss_only() -> Config {
    Config {
        name_lookup: vec![NameLookup::Nss],
        ..Config::default()
    }
}

#[test]
fn a_name_off_the_segment_is_found_through_the_system_resolver_and_asked_by_unicast() {
    let mut f = fixture(Config::default());
    let (job, t) = to_the_resolver(&mut f, "node-far", 1);
    let far: IpAddr = IpAddr::V4([10, 0, 1, 2].into());
    let far_v6: IpAddr = "fd01::2".parse().unwrap();
    f.e.input(Input::Nss(&job.key, Ok(vec![far_v6, far])), t);
    let asked = sent_queries(&polled(&mut f.e));
    assert_eq!(asked.len(), 2, "each address it gave, by unicast");
    let far_gid = "fe80::f";
    for (q, to) in &asked {
        let to = to.expect("unicast");
        assert!([far, far_v6].contains(&to.ip()));
        assert_eq!(
            *q.target().address(),
            Address::from(to.ip()),
            "asked for itself"
        );
        // A reply from anywhere else is no answer.
        let elsewhere = SocketAddr::new(IpAddr::V4([10, 0, 1, 66].into()), to.port());
        let forged = record_of(ATTACKER, to.ip());
        f.e.on_datagram(elsewhere, None, &reply_bytes(q, Answer::Found(forged)), t);
    }
    assert!(polled(&mut f.e).replies.is_empty());
    assert_eq!(f.e.discovery().counts().drops.wrong_source, 2);
    for (q, to) in &asked {
        let record = record_of(far_gid, to.unwrap().ip());
        f.e.on_datagram(to.unwrap(), None, &reply_bytes(q, Answer::Found(record)), t);
    }
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1, "answered once: {fx:?}");
    assert_eq!(dgid(&fx.replies[0].msg), far_gid.parse().unwrap());
    let name = Address::name("node-far").unwrap();
    assert_eq!(bound_gid(&f.e, &name), Some(far_gid.parse().unwrap()));
    assert_eq!(
        bound_gid(&f.e, &Address::from(far)),
        Some(far_gid.parse().unwrap()),
        "the address is bound too: it answered by unicast"
    );
}

#[test]
fn a_name_the_resolver_does_not_know_fails_at_once_and_is_remembered() {
    let mut f = fixture(Config {
        name_lookup: vec![NameLookup::Nss],
        ..Config::default()
    });
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("nobody", 1), 1, Instant::now()),
        None
    );
    let job = polled(&mut f.e).work.resolver_jobs.remove(0);
    let no = NssError::NoSuchName("Name or service not known".into());
    f.e.input(Input::Nss(&job.key, Err(no)), f.t0);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    let again =
        f.e.resolve_at(f.addr, &by_name("nobody", 2), 2, Instant::now())
            .unwrap();
    assert_eq!(
        again.status(),
        ACM_STATUS_ENODATA as u8,
        "from the failure memory"
    );
    assert!(polled(&mut f.e).work.resolver_jobs.is_empty());
}

#[test]
fn a_resolver_that_never_answers_fails_the_name_at_the_stage_deadline_and_nothing_else() {
    let mut f = fixture(Config::default());
    let (job, t) = to_the_resolver(&mut f, "node-slow", 1);
    // Meanwhile an IP lookup runs its course as usual.
    learn_peer(&mut f, 2);
    f.e.input(Input::Timers, job.deadline - Duration::from_millis(1));
    assert!(polled(&mut f.e).replies.is_empty());
    f.e.input(Input::Timers, job.deadline);
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().status().lookups, 0);
    // The answer that comes late changes nothing and sends nothing.
    f.e.input(
        Input::Nss(&job.key, Ok(vec![IpAddr::V4([10, 0, 1, 2].into())])),
        t,
    );
    assert!(polled(&mut f.e).is_empty());
}

#[test]
fn addresses_of_different_hosts_for_one_name_get_no_answer() {
    let mut f = fixture(Config {
        name_lookup: vec![NameLookup::Nss],
        ..Config::default()
    });
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("node-rr", 1), 1, Instant::now()),
        None
    );
    let mut fx = polled(&mut f.e);
    assert!(sent_queries(&fx).is_empty(), "no segment stage");
    let job = fx.work.resolver_jobs.remove(0);
    let ips = [
        IpAddr::V4([10, 0, 1, 2].into()),
        IpAddr::V4([10, 0, 1, 3].into()),
    ];
    f.e.input(Input::Nss(&job.key, Ok(ips.to_vec())), f.t0);
    for (q, to) in &sent_queries(&polled(&mut f.e)) {
        let gid = ["fe80::2", "fe80::3"][usize::from(to.unwrap().ip() == ips[1])];
        let record = record_of(gid, to.unwrap().ip());
        f.e.on_datagram(
            to.unwrap(),
            None,
            &reply_bytes(q, Answer::Found(record)),
            f.t0,
        );
    }
    let fx = polled(&mut f.e);
    assert_eq!(fx.replies.len(), 1);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENODATA as u8);
    assert_eq!(f.e.discovery().counts().conflicts, 1);
}

#[test]
fn a_name_the_segment_could_not_find_and_the_resolver_does_not_know_times_out() {
    // A cluster whose names are only in ibacm_addr.cfg: DNS never knows
    // them, and an overloaded segment did not answer in time. The segment
    // could have known, so this is not a no.
    let mut f = fixture(Config::default());
    let (job, t) = to_the_resolver(&mut f, "node-b", 1);
    let no = NssError::NoSuchName("Name or service not known".into());
    f.e.input(Input::Nss(&job.key, Err(no)), t);
    assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().status().failures, 0, "not remembered");
    // The next request asks the segment again, where the name is found.
    learn_peer_name(&mut f, 2);
}

#[test]
fn a_resolver_that_could_not_find_out_is_no_answer() {
    let mut f = fixture(nss_only());
    for tid in 1..=2 {
        assert_eq!(
            f.e.resolve_at(f.addr, &by_name("node-far", tid), tid, Instant::now()),
            None
        );
        let job = polled(&mut f.e).work.resolver_jobs.remove(0);
        let again = NssError::Failed("Temporary failure in name resolution".into());
        f.e.input(Input::Nss(&job.key, Err(again)), f.t0);
        assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
        assert_eq!(f.e.discovery().status().failures, 0, "asked again: {tid}");
    }
}

#[test]
fn addresses_the_resolver_gave_say_no_only_if_every_one_refuses() {
    let mut f = fixture(nss_only());
    let ips = [
        IpAddr::V4([10, 0, 1, 2].into()),
        IpAddr::V4([10, 0, 1, 3].into()),
    ];
    // One with nothing listening (an ICMP error), then one that refuses:
    // the refusal coming last does not make it a no.
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("node-rr", 1), 1, Instant::now()),
        None
    );
    let job = polled(&mut f.e).work.resolver_jobs.remove(0);
    f.e.input(Input::Nss(&job.key, Ok(ips.to_vec())), f.t0);
    let asked = sent_queries(&polled(&mut f.e));
    assert_eq!(asked.len(), 2);
    let (q, to) = &asked[0];
    f.e.input(
        Input::Unreachable(to.unwrap(), &Message::from(q.clone()).encode()),
        f.t0,
    );
    assert!(polled(&mut f.e).replies.is_empty(), "the other may bind");
    let (q, to) = &asked[1];
    f.e.on_datagram(to.unwrap(), None, &reply_bytes(q, Answer::Refused), f.t0);
    assert_eq!(one_status(&mut f), ACM_STATUS_ETIMEDOUT as u8);
    assert_eq!(f.e.discovery().status().failures, 0);

    // Both refuse: the name leads to no destination.
    assert_eq!(
        f.e.resolve_at(f.addr, &by_name("node-rr", 2), 2, Instant::now()),
        None
    );
    let job = polled(&mut f.e).work.resolver_jobs.remove(0);
    f.e.input(Input::Nss(&job.key, Ok(ips.to_vec())), f.t0);
    for (q, to) in &sent_queries(&polled(&mut f.e)) {
        f.e.on_datagram(to.unwrap(), None, &reply_bytes(q, Answer::Refused), f.t0);
    }
    assert_eq!(one_status(&mut f), ACM_STATUS_ENODATA as u8);
    assert_eq!(f.e.discovery().status().failures, 1, "a no is remembered");
}
