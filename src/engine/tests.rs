use super::*;
use crate::addr::Gid;
use crate::config::Lifetime;
use crate::daemon::{Counter, FakeDaemon};
use crate::discovery::Families;
use crate::handle::{AddressId, DeviceId, EndpointId, Handle, PortId};
use crate::request::msg::tests::{addr_entry, request};
use crate::request::msg::{Entry, MsgBuf};
use crate::request::path::PathRecord;
use acm_prov_sys::{
    ACM_ADDRESS_IP, ACM_ADDRESS_IP6, ACM_ADDRESS_NAME, ACM_EP_FLAG_DEST, ACM_EP_FLAG_SOURCE,
    ACM_EP_INFO_PATH, ACM_FLAGS_NODELAY, ACM_FLAGS_QUERY_SA, ACM_STATUS_EINVAL, ACM_STATUS_ENODATA,
    ACM_STATUS_ENOMEM, ACM_STATUS_ESRCADDR,
};
use std::time::Duration;

const GID0: &str = "fe80::5054:ff:fe12:3456";
const GID1: &str = "fe80::5054:ff:fe12:3457";
const REMOTE: &str = "fe80::5054:ff:fe12:9999";

fn port(gid: &str) -> PortInfo {
    PortInfo::infiniband(1, gid.parse().unwrap())
}

struct Fixture {
    e: Engine<FakeDaemon>,
    /// Address contexts of 10.0.0.1 and node1 on urdma0.
    ip: AddressId,
    name: AddressId,
    ep: EndpointId,
    port: PortId,
}

fn fixture_with(cfg: Config, port0: PortInfo) -> Fixture {
    let hosts = "node3 fe80::5054:ff:fe12:9999 lid=9\n10.0.0.3 fe80::5054:ff:fe12:9999\nfd00::3 fe80::5054:ff:fe12:9999\n";
    let (hosts, d) = Hosts::parse(hosts, "hosts");
    assert!(d.is_empty());
    let mut e = Engine::new(FakeDaemon::default(), cfg, hosts);
    // As the runtime's worker and the simulation do.
    e.input(Input::TimersRun, Instant::now());
    let dev = e.open_device(0x505400fffe123456);
    let port0 = e.open_port(dev, port0).unwrap();
    let ep = e.open_endpoint(port0, 0xffff).unwrap();
    let ip = e
        .add_address(ep, Address::Ip4([10, 0, 0, 1].into()))
        .unwrap();
    let name = e.add_address(ep, Address::name("node1").unwrap()).unwrap();
    let dev1 = e.open_device(0x505400fffe123457);
    let port1 = e.open_port(dev1, port(GID1)).unwrap();
    let ep1 = e.open_endpoint(port1, 0xffff).unwrap();
    e.add_address(ep1, Address::Ip4([10, 0, 1, 1].into()))
        .unwrap();
    Fixture {
        e,
        ip,
        name,
        ep,
        port: port0,
    }
}

fn fixture() -> Fixture {
    fixture_with(Config::default(), port(GID0))
}

fn dest(kind: u16, bytes: &[u8]) -> Entry {
    addr_entry(ACM_EP_FLAG_DEST, kind, bytes)
}

fn path_req(path: PathRecord, flags: u32) -> MsgBuf {
    let mut info = [0; 64];
    info.copy_from_slice(&path.encode());
    request(
        &[Entry {
            flags,
            kind: ACM_EP_INFO_PATH as u16,
            info,
        }],
        false,
        5,
    )
}

/// A resolve that must be answered at once (no lookup involved).
fn res(e: &mut Engine<FakeDaemon>, addr: AddressId, req: &MsgBuf) -> Response {
    Response(
        e.resolve_at(addr, req, 1, Instant::now())
            .expect("answered at once"),
    )
}

fn reply_path(r: &Response) -> PathRecord {
    assert_eq!(r.0.status(), 0, "status");
    assert_eq!(r.0.entry(0).flags, 0x2B);
    PathRecord::decode(r.0.entry(0).info.first_chunk().unwrap())
}

#[test]
fn own_address_resolves_locally_with_sgid_equal_dgid() {
    let mut f = fixture();
    let r = res(
        &mut f.e,
        f.ip,
        &request(&[dest(ACM_ADDRESS_NAME, b"NODE1")], false, 9),
    );
    let p = reply_path(&r);
    assert_eq!(r.0.tid(), 9);
    assert_eq!(p.sgid, GID0.parse().unwrap());
    assert_eq!(p.dgid, p.sgid);
    assert_eq!(
        (p.pkey, p.mtu, p.rate, p.packet_lifetime),
        (0xffff, 5, 16, 18)
    );
    assert!(p.reversible);
}

#[test]
fn another_local_port_is_reached_at_its_own_gid() {
    let mut f = fixture();
    let r = res(
        &mut f.e,
        f.ip,
        &request(&[dest(ACM_ADDRESS_IP, &[10, 0, 1, 1])], false, 1),
    );
    let p = reply_path(&r);
    assert_eq!(
        (p.sgid, p.dgid),
        (GID0.parse().unwrap(), GID1.parse().unwrap())
    );
}

#[test]
fn hosts_file_destinations_of_every_type() {
    let mut f = fixture();
    let remote: Gid = REMOTE.parse().unwrap();
    for req in [
        request(&[dest(ACM_ADDRESS_IP, &[10, 0, 0, 3])], false, 1),
        request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1),
        request(
            &[dest(
                ACM_ADDRESS_IP6,
                &"fd00::3".parse::<std::net::Ipv6Addr>().unwrap().octets(),
            )],
            false,
            1,
        ),
        path_req(
            PathRecord {
                dgid: remote,
                ..Default::default()
            },
            ACM_EP_FLAG_DEST,
        ),
        path_req(
            PathRecord {
                dlid: 9,
                ..Default::default()
            },
            ACM_EP_FLAG_DEST,
        ),
    ] {
        let p = reply_path(&res(&mut f.e, f.ip, &req));
        assert_eq!(p.dgid, remote);
        assert_eq!(p.dlid, 9, "the LID from the hosts file");
    }
}

#[test]
fn kernel_path_requests_keep_service_id_and_tclass() {
    let mut f = fixture();
    let want = PathRecord {
        service_id: 0x1_0000_0106,
        dgid: REMOTE.parse().unwrap(),
        tclass: 32,
        ..Default::default()
    };
    let p = reply_path(&res(&mut f.e, f.ip, &path_req(want, ACM_EP_FLAG_DEST)));
    assert_eq!((p.service_id, p.tclass), (0x1_0000_0106, 32));
}

#[test]
fn unknown_destination_is_enodata_at_once_and_counted() {
    let mut f = fixture();
    let r = res(
        &mut f.e,
        f.ip,
        &request(&[dest(ACM_ADDRESS_IP, &[10, 9, 9, 9])], false, 3),
    );
    assert_eq!((r.0.status(), r.0.length(), r.0.tid()), (3, 16, 3));
    let c = f.e.counters(f.ep).unwrap();
    assert_eq!(
        (
            c[Counter::Resolve as usize],
            c[Counter::NoData as usize],
            c[Counter::Error as usize]
        ),
        (1, 1, 0)
    );
    let lid = path_req(
        PathRecord {
            dlid: 77,
            ..Default::default()
        },
        ACM_EP_FLAG_DEST,
    );
    assert_eq!(res(&mut f.e, f.ip, &lid).0.status(), 3);
}

#[test]
fn nodelay_answers_from_static_data_without_waiting() {
    let mut f = fixture();
    let r = res(
        &mut f.e,
        f.ip,
        &request(
            &[addr_entry(
                ACM_EP_FLAG_DEST | ACM_FLAGS_NODELAY,
                ACM_ADDRESS_NAME,
                b"node3",
            )],
            false,
            1,
        ),
    );
    assert_eq!(reply_path(&r).dgid, REMOTE.parse().unwrap());
    let r = res(
        &mut f.e,
        f.ip,
        &request(
            &[addr_entry(
                ACM_EP_FLAG_DEST | ACM_FLAGS_NODELAY,
                ACM_ADDRESS_NAME,
                b"nobody",
            )],
            false,
            1,
        ),
    );
    assert_eq!(r.0.status(), 3);
}

#[test]
fn the_source_the_daemon_chose_is_echoed() {
    let mut f = fixture();
    let req = request(
        &[
            dest(ACM_ADDRESS_IP, &[10, 0, 0, 3]),
            addr_entry(ACM_EP_FLAG_SOURCE, ACM_ADDRESS_IP, &[10, 0, 0, 1]),
        ],
        true,
        1,
    );
    let r = res(&mut f.e, f.ip, &req);
    assert_eq!(r.0.length(), 16 + 2 * 72);
    assert_eq!(
        (r.0.entry(1).flags, r.0.entry(1).kind),
        (ACM_EP_FLAG_SOURCE, ACM_ADDRESS_IP)
    );
    assert_eq!(&r.0.entry(1).info[..4], &[10, 0, 0, 1]);
    // A client that named its source does not get it back.
    let mut quiet = req.clone();
    quiet.0[3] = 0;
    assert_eq!(res(&mut f.e, f.ip, &quiet).0.length(), 16 + 72);
}

#[test]
fn counters_follow_cache_hits_and_reach_the_daemon() {
    let mut f = fixture();
    let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
    res(&mut f.e, f.name, &req);
    res(&mut f.e, f.name, &req);
    res(&mut f.e, f.name, &req);
    let c = f.e.counters(f.ep).unwrap();
    assert_eq!(c, [0, 3, 0, 1, 0, 1, 2]);
    assert_eq!(
        *f.e.daemon().counters.lock().unwrap(),
        vec![
            Counter::AddrQuery,
            Counter::RouteQuery,
            Counter::RouteCache,
            Counter::RouteCache
        ]
    );
    assert_eq!(f.e.tables().cached, 1);
}

#[test]
fn lifetimes_from_the_configuration() {
    let cfg = Config {
        addr_timeout: Lifetime::Never,
        route_timeout: Lifetime::Minutes(0),
        ..Config::default()
    };
    let mut f = fixture_with(cfg, port(GID0));
    let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
    res(&mut f.e, f.ip, &req);
    res(&mut f.e, f.ip, &req);
    // The route expires at once, the address never: one address query,
    // then address-cache hits that rebuild the route.
    assert_eq!(f.e.counters(f.ep).unwrap(), [0, 2, 0, 1, 1, 2, 0]);
}

#[test]
fn mtu_and_rate_come_from_the_port_when_it_reports_them() {
    let cfg = Config {
        mtu: 2048,
        ..Config::default()
    };
    let mut p = port(GID0);
    (p.active_mtu, p.active_width, p.active_speed) = (5, 2, 128); // 4096, 4x NDR
    let mut f = fixture_with(cfg, p);
    let r = res(
        &mut f.e,
        f.ip,
        &request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1),
    );
    let path = reply_path(&r);
    assert_eq!(
        (path.mtu, path.rate),
        (4, 21),
        "MTU capped by urdma_mtu; 400 Gb/s"
    );
    let cfg = Config {
        rate_gbps: 25,
        ..Config::default()
    };
    let mut p = port(GID0);
    p.active_mtu = 3;
    let mut f = fixture_with(cfg, p);
    let path = reply_path(&res(
        &mut f.e,
        f.ip,
        &request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1),
    ));
    assert_eq!(
        (path.mtu, path.rate),
        (3, 15),
        "port MTU 1024; configured 25 Gb/s"
    );
}

#[test]
fn devices_are_idempotent_and_bad_ports_refused() {
    let mut f = fixture();
    let dev = f.e.open_device(0x505400fffe123456);
    assert_eq!(dev, f.e.open_device(0x505400fffe123456));
    let mut eth = port(GID0);
    (eth.link_layer_ib, eth.link_layer) = (false, "Ethernet");
    assert_eq!(
        f.e.open_port(dev, eth),
        Err(Refused::NotInfiniband("Ethernet"))
    );
    assert_eq!(f.e.open_port(dev, port("::")), Err(Refused::NoGid));
    assert_eq!(
        f.e.open_port(DeviceId::from_raw(999), port(GID0)),
        Err(Refused::UnknownDevice)
    );
}

#[test]
fn close_port_and_reregister_flush_the_cache() {
    let mut f = fixture();
    let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
    res(&mut f.e, f.ip, &req);
    assert_eq!(f.e.tables().cached, 1);
    f.e.change(Topology::PortEvent {
        port: f.port,
        event: 10,
    });
    assert_eq!(f.e.tables().cached, 1, "other events keep the cache");
    f.e.change(Topology::PortEvent {
        port: f.port,
        event: EVENT_CLIENT_REREGISTER,
    });
    assert_eq!(f.e.tables().cached, 0);
    res(&mut f.e, f.ip, &req);
    f.e.change(Topology::ClosePort(f.port));
    assert_eq!(f.e.tables().cached, 0);
    assert_eq!(f.e.counters(f.ep), None, "the port's endpoints are gone");
    let r = res(&mut f.e, f.ip, &req);
    assert_eq!(
        r.0.status(),
        ACM_STATUS_ESRCADDR as u8,
        "a stale context still gets one reply"
    );
}

#[test]
fn query_verifies_against_the_path_this_provider_builds() {
    let mut f = fixture();
    let ours = reply_path(&res(
        &mut f.e,
        f.ip,
        &request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1),
    ));
    let ok =
        f.e.query_at(f.ip, &path_req(ours, ACM_FLAGS_QUERY_SA), Instant::now());
    assert_eq!((ok.0.opcode(), ok.0.status(), ok.0.length()), (0x81, 0, 88));
    assert_eq!(
        PathRecord::decode(ok.0.entry(0).info.first_chunk().unwrap()),
        ours
    );
    let wrong = f.e.query_at(
        f.ip,
        &path_req(PathRecord { mtu: 1, ..ours }, ACM_FLAGS_QUERY_SA),
        Instant::now(),
    );
    assert_eq!(wrong.0.status(), ACM_STATUS_EINVAL as u8);
    let unknown = f.e.query_at(
        f.ip,
        &path_req(
            PathRecord {
                dgid: "fe80::77".parse().unwrap(),
                ..ours
            },
            ACM_FLAGS_QUERY_SA,
        ),
        Instant::now(),
    );
    assert_eq!(unknown.0.status(), ACM_STATUS_ENODATA as u8);
    let not_query = f.e.query_at(f.ip, &path_req(ours, 0), Instant::now());
    assert_eq!(not_query.0.status(), ACM_STATUS_EINVAL as u8);
    assert_eq!(f.e.counters(f.ep).unwrap()[Counter::Error as usize], 2);
}

#[test]
fn malformed_requests_get_one_error_reply() {
    let mut f = fixture();
    let mut m = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 42);
    m.0[6] = 17;
    let r = res(&mut f.e, f.ip, &m);
    assert_eq!((r.0.status(), r.0.tid()), (ACM_STATUS_EINVAL as u8, 42));
    assert_eq!(f.e.counters(f.ep).unwrap()[Counter::Error as usize], 1);
}
#[test]
fn requests_follow_their_source_address_as_it_comes_and_goes() {
    let mut f = fixture();
    let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
    // The endpoint opened last.
    let ep1 = f.e.local().endpoint_ids().max().unwrap();
    let other =
        f.e.add_address(ep1, Address::Ip6("fd00::1".parse().unwrap()));
    let other = other.unwrap();
    for _ in 0..2 {
        assert_eq!(res(&mut f.e, other, &req).0.status(), 0);
        assert_eq!(res(&mut f.e, f.ip, &req).0.status(), 0);
        assert_eq!(res(&mut f.e, f.ip, &req).0.status(), 0);
    }
    assert_eq!(f.e.counters(f.ep).unwrap()[Counter::Resolve as usize], 4);
    assert_eq!(f.e.counters(ep1).unwrap()[Counter::Resolve as usize], 2);
    // Its endpoint's counters move when an endpoint before it closes
    // (one without addresses left, so no address is removed with it).
    f.e.change(Topology::RemoveAddress(f.ip));
    f.e.change(Topology::RemoveAddress(f.name));
    assert_eq!(res(&mut f.e, other, &req).0.status(), 0);
    f.e.change(Topology::CloseEndpoint(f.ep));
    assert_eq!(res(&mut f.e, other, &req).0.status(), 0);
    assert_eq!(f.e.counters(ep1).unwrap()[Counter::Resolve as usize], 4);
    // A removed address is unknown from then on.
    f.e.change(Topology::RemoveAddress(other));
    let r = res(&mut f.e, other, &req);
    assert_eq!(r.0.status(), ACM_STATUS_ESRCADDR as u8);
    assert_eq!(f.e.counters(ep1).unwrap()[Counter::Resolve as usize], 4);
}

/// What the other components' tests reach inside the engine for.
impl<D: Daemon> Engine<D> {
    pub(crate) fn local(&self) -> &Local {
        &self.local
    }

    pub(crate) fn discovery_mut(&mut self) -> &mut Discovery {
        &mut self.discovery
    }
}

#[test]
fn a_hit_reads_no_clock_and_no_path_outlives_its_lifetime() {
    let cfg = Config {
        addr_timeout: Lifetime::Minutes(1),
        ..Config::default()
    };
    let mut f = fixture_with(cfg, port(GID0));
    let t0 = Instant::now();
    let req = request(&[dest(ACM_ADDRESS_NAME, b"node3")], false, 1);
    let at = |e: &mut Engine<FakeDaemon>, secs: f64| {
        let mut m = req.clone();
        assert!(e.resolve_in_place(f.ip, &mut m, 1, || t0 + Duration::from_secs_f64(secs)));
        reply_path(&Response(m))
    };
    let first = at(&mut f.e, 0.0);
    let deadline = f.e.poll().and_then(|fx| fx.deadline);
    assert!(deadline.is_some_and(|d| d <= t0 + Duration::from_secs(59)));
    let blind = |e: &mut Engine<FakeDaemon>| {
        let mut m = req.clone();
        let read = std::cell::Cell::new(false);
        let answered = e.resolve_in_place(f.ip, &mut m, 1, || {
            read.set(true);
            t0 + Duration::from_secs_f64(59.5)
        });
        assert!(answered);
        assert_eq!(reply_path(&Response(m)), first);
        !read.get()
    };
    assert!(blind(&mut f.e), "a hit read the clock");
    // The review is due the lead before 60 s: timers run before it (and
    // its batch) leave the hit blind.
    f.e.input(Input::Timers, t0 + Duration::from_millis(58_400));
    assert!(blind(&mut f.e), "reviewed before the lead before 60 s");
    // The worker runs the review; from then on the clock decides.
    f.e.input(Input::Timers, t0 + Duration::from_secs(59));
    assert!(!blind(&mut f.e), "not reviewed at 59 s");
    assert_eq!(at(&mut f.e, 59.5), first, "still cached at 59.5 s");
    assert_eq!(f.e.counters(f.ep).unwrap()[Counter::AddrQuery as usize], 1);
    at(&mut f.e, 60.5);
    assert_eq!(
        f.e.counters(f.ep).unwrap()[Counter::AddrQuery as usize],
        2,
        "looked up again once the address lifetime ended"
    );
}

#[test]
fn a_failed_worker_answers_every_waiting_request_and_ends_its_lookups() {
    let mut f = fixture();
    let now = Instant::now();
    f.e.input(Input::DiscoveryUp(Families::V4), now);
    let req = request(&[dest(ACM_ADDRESS_IP, &[10, 0, 0, 9])], false, 4);
    assert_eq!(
        f.e.resolve_at(f.ip, &req, 7, now),
        None,
        "waits for a lookup"
    );
    f.e.poll();
    assert_eq!(f.e.tables().waiting, 1);
    assert_eq!(f.e.tables().discovery.lookups, 1);

    f.e.input(Input::WorkerFailed(ACM_STATUS_ENOMEM as u8), now);
    let fx = f.e.poll().expect("the waiting request is answered");
    assert_eq!(fx.replies.len(), 1, "{fx:?}");
    assert_eq!(fx.replies[0].id, 7);
    assert_eq!(fx.replies[0].msg.status(), ACM_STATUS_ENOMEM as u8);
    assert_eq!(f.e.tables().waiting, 0);
    assert_eq!(f.e.tables().discovery.lookups, 0);
    let errors = f.e.counters(f.ep).unwrap()[Counter::Error as usize];
    assert_eq!(errors, 1, "counted on its endpoint");
}
