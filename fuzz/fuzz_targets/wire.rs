//! Any datagram at the discovery port: the decoder accepts exactly what the
//! encoder produces, and the engine's handlers take anything without
//! panicking, answering at most with one datagram no larger than the query.
#![no_main]

use ibacm_urdma::addr::Address;
use ibacm_urdma::config::Config;
use ibacm_urdma::engine::{Datagram, Engine, PortInfo};
use ibacm_urdma::host::NullHost;
use ibacm_urdma::hosts::Hosts;
use ibacm_urdma::wire::{Message, QUERY_LEN};
use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

fn engine() -> &'static Mutex<Engine<NullHost>> {
    static E: OnceLock<Mutex<Engine<NullHost>>> = OnceLock::new();
    E.get_or_init(|| {
        let mut e = Engine::new(NullHost, Config::default(), Hosts::default());
        let dev = e.open_device(1);
        let info = PortInfo {
            port_num: 1,
            link_layer_ib: true,
            link_layer: "InfiniBand",
            gids: vec!["fe80::1".parse().unwrap()],
            ..Default::default()
        };
        let port = e.open_port(dev, info).unwrap();
        let ep = e.open_endpoint(port, 0xffff).unwrap();
        e.add_address(ep, Address::Ip4([10, 0, 0, 1].into()))
            .unwrap();
        e.add_address(ep, Address::name("node1").unwrap()).unwrap();
        e.set_discovery_up(true);
        e.take_effects();
        Mutex::new(e)
    })
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::decode(data) {
        let again = m.encode();
        assert_eq!(again, data, "decode accepts only what encode produces");
    }
    let _ = Message::query_txid(data);
    let mut e = engine().lock().unwrap();
    let from: SocketAddr = "10.0.0.2:6126".parse().unwrap();
    e.on_datagram(
        from,
        Some("10.0.0.1".parse().unwrap()),
        data,
        Instant::now(),
    );
    e.on_unreachable(from, data, Instant::now());
    let fx = e.take_effects();
    assert!(fx.replies.is_empty(), "no client is waiting");
    assert!(fx.datagrams.len() <= 1, "one answer at most");
    for d in &fx.datagrams {
        if let Datagram::Unicast { bytes, .. } = d {
            assert!(
                bytes.len() <= QUERY_LEN && bytes.len() <= data.len(),
                "no amplification"
            );
        }
    }
});
