//! Any datagram at the discovery port: the decoder accepts exactly what the
//! encoder produces, and the engine's handlers take anything without
//! panicking, answering at most with one datagram no larger than the query.
//! The same bytes, sealed with the key of an authenticating engine, reach
//! its decoder and handlers through the authentication layer too.
#![no_main]

use ibacm_urdma::addr::Address;
use ibacm_urdma::config::hosts::Hosts;
use ibacm_urdma::config::keyfile::KeyFile;
use ibacm_urdma::config::Config;
use ibacm_urdma::daemon::NullDaemon;
use ibacm_urdma::discovery::auth::Auth;
use ibacm_urdma::discovery::seal::{Keyring, WallClock};
use ibacm_urdma::discovery::wire::{Message, QUERY_LEN};
use ibacm_urdma::discovery::{Datagram, Families};
use ibacm_urdma::engine::reconfigure::Change;
use ibacm_urdma::engine::{Engine, Input};
use ibacm_urdma::local::PortInfo;
use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

const KEY: &str = "1 000102030405060708090a0b0c0d0e0f";

fn keyed() -> Auth {
    let ring = Keyring::new(&KeyFile::parse(KEY, "key").unwrap());
    Auth::new(ring, WallClock::system())
}

fn engine(authenticated: bool) -> &'static Mutex<Engine<NullDaemon>> {
    static PLAIN: OnceLock<Mutex<Engine<NullDaemon>>> = OnceLock::new();
    static SEALED: OnceLock<Mutex<Engine<NullDaemon>>> = OnceLock::new();
    let cell = if authenticated { &SEALED } else { &PLAIN };
    cell.get_or_init(|| {
        // No reply limit: every query should reach the reply path.
        let cfg = Config {
            reply_rate: 0,
            ..Config::default()
        };
        let mut e = Engine::new(NullDaemon, cfg, Hosts::default());
        if authenticated {
            e.reconfigure(Change::Auth(keyed()));
        }
        let dev = e.open_device(1);
        let info = PortInfo::infiniband(1, "fe80::1".parse().unwrap());
        let port = e.open_port(dev, info).unwrap();
        let ep = e.open_endpoint(port, 0xffff).unwrap();
        e.add_address(ep, Address::Ip4([10, 0, 0, 1].into()))
            .unwrap();
        e.add_address(ep, Address::name("node1").unwrap()).unwrap();
        e.input(Input::DiscoveryUp(Families::V4), Instant::now());
        e.poll();
        Mutex::new(e)
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::decode(data) {
        let again = m.encode();
        assert_eq!(again, data, "decode accepts only what encode produces");
    }
    let _ = Message::query_txid(data);
    deliver(engine(false), data);
    if data.len() >= 16 {
        static SEALER: OnceLock<Auth> = OnceLock::new();
        let sealed = SEALER.get_or_init(keyed).seal(data.to_vec());
        deliver(engine(true), &sealed);
    }
});

fn deliver(engine: &Mutex<Engine<NullDaemon>>, data: &[u8]) {
    let mut e = engine.lock().unwrap();
    let from: SocketAddr = "10.0.0.2:6126".parse().unwrap();
    e.on_datagram(
        from,
        Some("10.0.0.1".parse().unwrap()),
        data,
        Instant::now(),
    );
    e.input(Input::Unreachable(from, data), Instant::now());
    let fx = e.poll().unwrap_or_default();
    assert!(fx.replies.is_empty(), "no client is waiting");
    assert!(fx.work.datagrams.len() <= 1, "one answer at most");
    for d in &fx.work.datagrams {
        if let Datagram::Unicast { bytes, .. } = d {
            assert!(
                bytes.len() <= QUERY_LEN && bytes.len() <= data.len(),
                "no amplification"
            );
        }
    }
}
