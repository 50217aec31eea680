//! A peer that speaks the discovery protocol the way a test scripts it:
//! slowly, late, twice, mangled, replayed, from the wrong address.
//!
//! Real daemons only ever answer correctly, so the provider's handling of
//! a peer that does not can only be shown with one made to misbehave. It
//! speaks through `ibacm_urdma::discovery::wire`, the provider's own encoder, so that
//! what it sends is valid unless the test makes it otherwise.

use crate::env::scaled;
use crate::nodes::{DISCOVERY_PORT, WAIT};
use crate::{Host, Net};
use ibacm_urdma::addr::Gid;
use ibacm_urdma::discovery::wire::{Answer, EndpointRecord, Message, Query, WireAddress};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// A host on the segment that answers discovery queries for its addresses
/// the way a test scripts it. It holds 10.0.0.10, .11, ... each as an
/// endpoint of its own with GID `gid(i)`, and listens on each address's
/// discovery port, so its replies come from the queried address, as a real
/// peer's do.
pub struct FakePeer {
    pub host: Host,
    sockets: Vec<UdpSocket>,
}

/// What a fake peer received: the query and who sent it.
pub struct Asked {
    pub query: Query,
    pub from: SocketAddr,
    /// Which of the peer's addresses it was sent to.
    pub index: usize,
}

impl FakePeer {
    pub fn start(net: &Net, count: usize) -> FakePeer {
        let host = Host::bare();
        let addrs: Vec<String> = (0..count)
            .map(|i| format!("{}/24", FakePeer::ip(i)))
            .collect();
        let addrs: Vec<&str> = addrs.iter().map(String::as_str).collect();
        net.attach(&host, "eth0", &addrs);
        // Sockets keep the namespace they were made in.
        let sockets = host.in_netns(|| {
            (0..count)
                .map(|i| {
                    UdpSocket::bind((FakePeer::ip(i), DISCOVERY_PORT)).expect("bind fake peer")
                })
                .collect()
        });
        FakePeer { host, sockets }
    }

    pub fn ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, 10 + i as u8)
    }

    /// The GID of endpoint `i`, generation `g` (a moved endpoint).
    pub fn gid(i: usize, g: u16) -> Ipv6Addr {
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0x5054, 0xff, 0xfe00 + g, 0x100 + i as u16)
    }

    pub fn record(i: usize, g: u16) -> EndpointRecord {
        EndpointRecord::new(
            Gid(FakePeer::gid(i, g).octets()),
            0,
            5,
            16,
            vec![0xffff],
            vec![WireAddress::from(FakePeer::ip(i))],
        )
        .expect("a valid record")
    }

    /// A FOUND reply to `q` with endpoint `i`'s record, generation `g`.
    pub fn found(q: &Query, i: usize, g: u16) -> Vec<u8> {
        let reply = q
            .reply(Answer::Found(FakePeer::record(i, g)))
            .expect("the record holds the target");
        Message::from(reply).encode()
    }

    /// Waits up to `timeout` for one query on any address; datagrams that
    /// are not queries are ignored.
    pub fn next_query(&self, timeout: Duration) -> Option<Asked> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 2048];
        for s in &self.sockets {
            s.set_nonblocking(true).expect("nonblocking");
        }
        while Instant::now() < deadline {
            for (index, s) in self.sockets.iter().enumerate() {
                if let Ok((n, from)) = s.recv_from(&mut buf) {
                    if let Ok(Message::Query(query)) = Message::decode(&buf[..n]) {
                        return Some(Asked { query, from, index });
                    }
                }
            }
            sleep(Duration::from_millis(2));
        }
        None
    }

    /// Like `next_query`, but a missing query fails the test.
    pub fn expect_query(&self, asker: &Host) -> Asked {
        self.next_query(scaled(WAIT))
            .unwrap_or_else(|| panic!("the fake peer was never asked\n{}", asker.diagnostics()))
    }

    /// Sends `bytes` from address `i`'s discovery port to `to`.
    pub fn send(&self, i: usize, to: SocketAddr, bytes: &[u8]) {
        self.sockets[i].send_to(bytes, to).expect("fake peer send");
    }

    /// Address `i`'s log name as the asker prints a source.
    pub fn source(i: usize) -> String {
        format!("{}:{DISCOVERY_PORT}", FakePeer::ip(i))
    }
}
