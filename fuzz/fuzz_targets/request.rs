//! Any bytes as the `struct acm_msg` the daemon hands to `resolve` and
//! `query`, through a real engine (one port, a hosts file, a cache): the
//! engine answers at once (discovery is off), and every reply it builds
//! keeps the request's tid and fits the message.
#![no_main]

use ibacm_urdma::addr::Address;
use ibacm_urdma::config::hosts::Hosts;
use ibacm_urdma::config::Config;
use ibacm_urdma::daemon::NullDaemon;
use ibacm_urdma::engine::{Engine, Input};
use ibacm_urdma::handle::AddressId;
use ibacm_urdma::local::PortInfo;
use ibacm_urdma::request::msg::MsgBuf;
use libfuzzer_sys::fuzz_target;
use std::sync::{Mutex, OnceLock};

fn engine() -> &'static Mutex<(Engine<NullDaemon>, AddressId)> {
    static E: OnceLock<Mutex<(Engine<NullDaemon>, AddressId)>> = OnceLock::new();
    E.get_or_init(|| {
        let (hosts, _) = Hosts::parse(
            "node2 fe80::2 lid=7\n10.0.0.2 fe80::2\nfd00::2 fe80::2\n",
            "fuzz",
        );
        let mut e = Engine::new(NullDaemon, Config::default(), hosts);
        // Hits then take the way the daemon's thread takes them.
        e.input(Input::TimersRun, std::time::Instant::now());
        let dev = e.open_device(1);
        let info = PortInfo::infiniband(1, "fe80::1".parse().unwrap());
        let port = e.open_port(dev, info).unwrap();
        let ep = e.open_endpoint(port, 0xffff).unwrap();
        let addr = e
            .add_address(ep, Address::Ip4([10, 0, 0, 1].into()))
            .unwrap();
        // Discovery stays off: a miss is answered at once, so nothing
        // accumulates across runs (tests/fuzz_targets/wire.rs covers it).
        Mutex::new((e, addr))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut msg = MsgBuf::default();
    let n = data.len().min(msg.0.len());
    msg.0[..n].copy_from_slice(&data[..n]);
    let tid = msg.tid();
    let mut guard = engine().lock().unwrap();
    let (e, addr) = &mut *guard;
    let mut reply = msg.clone();
    let now = std::time::Instant::now();
    assert!(
        e.resolve_in_place(*addr, &mut reply, 1, || now),
        "answered at once"
    );
    {
        assert_eq!(reply.tid(), tid, "a reply keeps the request's tid");
        let len = usize::from(reply.length());
        assert!(
            (16..=592).contains(&len) && (len - 16) % 72 == 0,
            "reply length {len}"
        );
    }
    let q = e.query_at(*addr, &msg, now).0;
    assert_eq!(q.tid(), tid);
});
