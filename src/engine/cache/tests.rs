use super::*;
use crate::handle::Handle;

use std::time::Duration;

fn ep(n: u64) -> EndpointId {
    EndpointId::from_raw(n)
}

#[test]
fn lifetimes_decide_between_route_address_and_miss() {
    let mut c = Cache::new(16);
    let now = Instant::now();
    let dest = Address::name("node2").unwrap();
    let path = PathRecord {
        dlid: 9,
        ..Default::default()
    };
    let to = Dest {
        gid: Default::default(),
        lid: 9,
        mtu: None,
        rate: None,
    };
    c.insert(
        ep(1),
        dest.clone(),
        CacheEntry::new(
            path,
            to,
            Some(now + Duration::from_secs(60)),
            Some(now + Duration::from_secs(10)),
        ),
        now,
    );
    assert_eq!(
        c.hit(ep(1), &dest, now).map(|e| e.wire),
        Some(path.encode())
    );
    assert!(c.hit(ep(2), &dest, now).is_none(), "keyed by endpoint");
    assert!(c.hit(ep(1), &dest, now + Duration::from_secs(11)).is_none());
    assert!(c.hit(ep(1), &dest, now + Duration::from_secs(61)).is_none());
    assert_eq!(
        c.lookup(ep(1), &dest, now),
        CacheLookup::Route(path, path.encode())
    );
    assert_eq!(
        c.lookup(ep(2), &dest, now),
        CacheLookup::Miss,
        "keyed by endpoint"
    );
    assert_eq!(
        c.lookup(ep(1), &dest, now + Duration::from_secs(11)),
        CacheLookup::Address(to)
    );
    assert_eq!(
        c.lookup(ep(1), &dest, now + Duration::from_secs(61)),
        CacheLookup::Miss
    );
    assert!(c.is_empty(), "an expired binding is dropped");
    c.insert(
        ep(1),
        dest.clone(),
        CacheEntry::new(path, to, None, None),
        now,
    );
    assert_eq!(
        c.lookup(ep(1), &dest, now + Duration::from_secs(1 << 30)),
        CacheLookup::Route(path, path.encode())
    );
    c.insert(
        ep(2),
        dest.clone(),
        CacheEntry::new(path, to, None, None),
        now,
    );
    assert_eq!(c.evict(&dest), 2);
    c.insert(
        ep(1),
        dest.clone(),
        CacheEntry::new(path, to, None, None),
        now,
    );
    assert_eq!(c.flush_endpoint(ep(1)), 1);
    assert_eq!(c.lookup(ep(1), &dest, now), CacheLookup::Miss);
}

#[test]
fn every_kind_of_address_is_a_key_of_its_own() {
    let now = Instant::now();
    let bits: [u8; 16] = "fd00::2".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let keys = [
        Address::Ip4([0, 0, 0, 2].into()),
        Address::Lid(2),
        Address::Ip6(bits.into()),
        Address::Gid(crate::addr::Gid(bits)),
        Address::name("node2").unwrap(),
    ];
    let mut c = Cache::new(16);
    c.set_reviewed(true, now);
    for (i, k) in keys.iter().enumerate() {
        let to = Dest {
            gid: Default::default(),
            lid: i as u16,
            mtu: None,
            rate: None,
        };
        c.insert(
            ep(1),
            k.clone(),
            CacheEntry::new(PathRecord::default(), to, None, None),
            now,
        );
    }
    assert_eq!(c.len(), keys.len());
    let wire = |kind: u16, bytes: &[u8]| {
        let mut info = [0; crate::addr::ADDR_LEN];
        info[..bytes.len()].copy_from_slice(bytes);
        (kind, info)
    };
    let entries = [
        wire(acm_prov_sys::ACM_ADDRESS_IP, &[0, 0, 0, 2]),
        wire(acm_prov_sys::ACM_ADDRESS_LID, &[0, 2]),
        wire(acm_prov_sys::ACM_ADDRESS_IP6, &bits),
        wire(acm_prov_sys::ACM_ADDRESS_GID, &bits),
        wire(acm_prov_sys::ACM_ADDRESS_NAME, b"NODE2"),
    ];
    for (i, (k, (kind, info))) in keys.iter().zip(&entries).enumerate() {
        assert_eq!(c.hit(ep(1), k, now).map(|e| e.dest.lid), Some(i as u16));
        let e = EntryAddress::check(*kind, info).unwrap();
        assert_eq!(
            c.hit_entry(ep(1), e, || unreachable!("fresh"))
                .map(|e| e.dest.lid),
            Some(i as u16)
        );
        assert!(
            c.hit_entry(ep(2), e, || unreachable!("absent")).is_none(),
            "keyed by endpoint"
        );
    }
    let (kind, info) = wire(acm_prov_sys::ACM_ADDRESS_NAME, b"node3");
    let other = EntryAddress::check(kind, &info).unwrap();
    assert!(c
        .hit_entry(ep(1), other, || unreachable!("absent"))
        .is_none());
    assert_eq!(c.evict(&Address::name("NODE2").unwrap()), 1);
    assert_eq!(c.evict(&keys[3]), 1);
    assert_eq!(c.len(), 3);
    assert!(c.hit(ep(1), &keys[3], now).is_none());
    assert_eq!(c.hit(ep(1), &keys[2], now).map(|e| e.dest.lid), Some(2));
}

#[test]
fn the_cache_is_bounded_and_swept() {
    let now = Instant::now();
    let to = Dest {
        gid: Default::default(),
        lid: 9,
        mtu: None,
        rate: None,
    };
    let entry = |secs: u64| {
        CacheEntry::new(
            PathRecord::default(),
            to,
            Some(now + Duration::from_secs(secs)),
            None,
        )
    };
    let mut c = Cache::new(3);
    for i in 0..5u8 {
        c.insert(
            ep(1),
            Address::Ip4([10, 0, 0, i].into()),
            entry(u64::from(i) + 1),
            now,
        );
    }
    assert_eq!((c.len(), c.evicted), (3, 2), "the two oldest made room");
    assert_eq!(
        c.lookup(ep(1), &Address::Ip4([10, 0, 0, 0].into()), now),
        CacheLookup::Miss
    );
    c.sweep(now + Duration::from_millis(3500));
    assert_eq!((c.len(), c.expired), (2, 1), "10.0.0.2 expired at 3 s");
    c.evict(&Address::Ip4([10, 0, 0, 3].into()));
    c.sweep(now + Duration::from_secs(60));
    assert_eq!((c.len(), c.expired), (0, 2));
    // Replacing one destination again and again keeps the order small.
    for _ in 0..10_000 {
        c.insert(ep(2), Address::Lid(5), entry(1000), now);
    }
    assert!(c.bookkeeping().order <= 2 * c.len() + 65);
}

#[test]
fn entries_filled_over_seconds_are_reviewed_a_few_times_a_second() {
    // 200 entries whose lifetimes end 50 ms apart, over 10 s: the
    // timers wake for their reviews at most twice a second, not 200
    // times, and no entry stays fresh past its review.
    let now = Instant::now();
    let mut c = Cache::new(1000);
    c.set_reviewed(true, now);
    let to = Dest {
        gid: Default::default(),
        lid: 1,
        mtu: None,
        rate: None,
    };
    for i in 0..200u32 {
        let ends = now + Duration::from_secs(2) + Duration::from_millis(u64::from(i) * 50);
        let e = CacheEntry::new(PathRecord::default(), to, Some(ends), None);
        c.insert(ep(1), Address::Lid(i as u16 + 1), e, now);
    }
    let mut wakes = 0;
    while let Some(t) = c.next_review() {
        c.review(t);
        wakes += 1;
        for i in 0..200u32 {
            let a = Address::Lid(i as u16 + 1);
            let review = now + Duration::from_secs(1) + Duration::from_millis(u64::from(i) * 50);
            let fresh = fresh(&c, &a).is_some();
            assert!(!fresh || review > t, "entry {i} fresh past its review");
        }
    }
    assert!((10..=21).contains(&wakes), "{wakes}");
}

/// The entry a request for `a` finds without a clock, if fresh.
fn fresh(c: &Cache, a: &Address) -> Option<u16> {
    let mut info = [0; crate::addr::ADDR_LEN];
    let kind = match a {
        Address::Ip4(ip) => {
            info[..4].copy_from_slice(&ip.octets());
            acm_prov_sys::ACM_ADDRESS_IP
        }
        Address::Lid(lid) => {
            info[..2].copy_from_slice(&lid.to_be_bytes());
            acm_prov_sys::ACM_ADDRESS_LID
        }
        _ => unreachable!("IPv4 and LIDs only here"),
    };
    let e = EntryAddress::check(kind, &info).unwrap();
    let read = std::cell::Cell::new(false);
    let far = Instant::now() + Duration::from_secs(1 << 20);
    let hit = c.hit_entry(ep(1), e, || {
        read.set(true);
        far
    });
    hit.filter(|_| !read.get()).map(|e| e.dest.lid)
}

#[test]
fn hits_skip_the_clock_only_until_a_review_near_the_end_of_a_lifetime() {
    let now = Instant::now();
    let secs = Duration::from_secs;
    let entry = |lid: u16, addr: Option<u64>, route: Option<u64>| {
        let to = Dest {
            gid: Default::default(),
            lid,
            mtu: None,
            rate: None,
        };
        CacheEntry::new(
            PathRecord::default(),
            to,
            addr.map(|s| now + secs(s)),
            route.map(|s| now + secs(s)),
        )
    };
    let ip = |n: u8| Address::Ip4([10, 0, 0, n].into());
    let mut c = Cache::new(64);
    c.insert(ep(1), ip(1), entry(1, Some(60), Some(10)), now);
    assert_eq!(fresh(&c, &ip(1)), None, "nothing runs the reviews yet");
    c.set_reviewed(true, now);
    assert_eq!(fresh(&c, &ip(1)), Some(1), "made fresh when they run");
    assert_eq!(c.next_review(), Some(now + secs(10) - REVIEW_LEAD));
    c.insert(ep(1), ip(2), entry(2, Some(3600), None), now);
    c.insert(ep(1), ip(3), entry(3, None, None), now);
    // A lifetime that ends within the lead is never answered blind.
    c.insert(ep(1), ip(4), entry(4, Some(1), None), now);
    assert_eq!(fresh(&c, &ip(4)), None);
    c.review(now + secs(8));
    assert_eq!(fresh(&c, &ip(1)), Some(1), "not due yet");
    c.review(now + secs(9));
    assert_eq!(fresh(&c, &ip(1)), None, "the route ends within the lead");
    let mut info = [0; crate::addr::ADDR_LEN];
    info[..4].copy_from_slice(&[10, 0, 0, 1]);
    let e1 = EntryAddress::check(acm_prov_sys::ACM_ADDRESS_IP, &info).unwrap();
    let at = |s: f64| now + Duration::from_secs_f64(s);
    assert!(
        c.hit_entry(ep(1), e1, || at(9.5)).is_some(),
        "the clock decides"
    );
    assert!(c.hit_entry(ep(1), e1, || at(10.0)).is_none(), "route over");
    assert_eq!(
        c.lookup(ep(1), &ip(1), now + secs(9)),
        CacheLookup::Route(PathRecord::default(), PathRecord::default().encode()),
        "still good when the clock is read"
    );
    assert_eq!(c.next_review(), Some(now + secs(3600) - REVIEW_LEAD));
    // A replaced entry is not reviewed by its predecessor's item.
    c.insert(ep(1), ip(2), entry(22, Some(7200), None), now);
    c.review(now + secs(3600));
    assert_eq!(fresh(&c, &ip(2)), Some(22));
    assert_eq!(fresh(&c, &ip(3)), Some(3), "no end, no review");
    // Replacing one entry again and again keeps the reviews few.
    for _ in 0..10_000 {
        c.insert(ep(1), ip(5), entry(5, Some(100), None), now);
    }
    assert!(c.bookkeeping().reviews <= 2 * c.len() + 65);
    c.set_reviewed(false, now);
    assert_eq!((fresh(&c, &ip(2)), fresh(&c, &ip(3))), (None, None));
    assert_eq!(c.next_review(), None);
}
