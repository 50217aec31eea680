//! The hostile parts of a run: forged traffic, and the trace that explains
//! a failing seed.

use crate::sim::{Event, Sim, IMPOSTOR_IP, PORT};
use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::{
    Announce, Answer, EndpointRecord, Message, Query, Reply, WireAddress,
};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU64;

pub use crate::sim::impostor::attacker_gid;

impl Sim {
    /// Forged datagrams at `victim`, from `claimed`'s address, each saying
    /// the attacker's GID is `claimed`'s: an announcement, a reply to a
    /// query never sent, and a query whose sender record lies.
    pub(crate) fn forge(&mut self, victim: usize, claimed: usize) {
        let c = &self.hosts[claimed];
        let (ip, name) = (c.ip, c.name.clone());
        let addrs = vec![
            WireAddress::from(ip),
            WireAddress::new(Address::name(&name).expect("name")).expect("fits"),
        ];
        let record =
            EndpointRecord::new(attacker_gid(), 0, 5, 16, vec![0xffff], addrs).expect("record");
        let from = SocketAddr::new(IpAddr::V4(ip), PORT);
        let to = SocketAddr::new(IpAddr::V4(self.hosts[victim].ip), PORT);
        let txid = NonZeroU64::new(self.rng.next_u64() | 1).expect("odd");
        let target = WireAddress::from(ip);
        let mut datagrams = Vec::new();
        if let Ok(a) = Announce::new(vec![record.clone()], false) {
            datagrams.push(Message::from(a).encode());
        }
        if let Ok(r) = Reply::new(txid, target, Answer::Found(record.clone())) {
            datagrams.push(Message::from(r).encode());
        }
        let asked = WireAddress::from(self.hosts[victim].ip);
        datagrams.push(Message::from(Query::new(txid, asked, record)).encode());
        for bytes in datagrams {
            self.route(None, from, to, bytes);
        }
    }

    /// A datagram the impostor received, from `from`: what it answers is
    /// routed back.
    pub(crate) fn impostor_hears(&mut self, from: SocketAddr, bytes: &[u8]) {
        if let Some(reply) = self.impostor.answer(bytes) {
            let src = SocketAddr::new(IpAddr::V4(IMPOSTOR_IP), PORT);
            self.route(None, src, from, reply);
        }
    }

    /// Prints `ev` if it concerns only traced hosts (`URDMA_DST_TRACE=a,b`):
    /// how a failing seed is read.
    pub(crate) fn trace_event(&self, hosts: &[usize], ev: &Event) {
        let t = self.now / 1000;
        match ev {
            Event::Deliver {
                to, from, bytes, ..
            } if hosts.contains(to)
                && self
                    .by_ip
                    .get(&from.ip())
                    .is_some_and(|f| hosts.contains(f)) =>
            {
                eprintln!(
                    "{t} us: deliver to {to} from {from}: {:?}",
                    Message::decode(bytes)
                        .map(|m| format!("{m:?}").chars().take(160).collect::<String>())
                );
            }
            Event::GroupDeliver { batch, next }
                if hosts.contains(&batch.to[*next].1)
                    && (self
                        .by_ip
                        .get(&batch.from.ip())
                        .is_some_and(|f| hosts.contains(f))
                        || !self.by_ip.contains_key(&batch.from.ip())) =>
            {
                eprintln!(
                    "{t} us: group deliver to {} from {}: {:?}",
                    batch.to[*next].1,
                    batch.from,
                    Message::decode(&batch.bytes)
                        .map(|m| format!("{m:?}").chars().take(260).collect::<String>())
                );
            }
            Event::Crash { host, .. } | Event::Start { host } if hosts.contains(host) => {
                eprintln!(
                    "{t} us: {} host {host} (gen {})",
                    if matches!(ev, Event::Crash { .. }) {
                        "crash"
                    } else {
                        "start"
                    },
                    self.hosts[*host].generation
                );
            }
            Event::Request {
                host,
                dest,
                by_name,
            } if hosts.contains(host) && hosts.contains(dest) => {
                eprintln!(
                    "{t} us: request {} from {host} for {dest} by_name {by_name}",
                    self.checker.next_id()
                );
            }
            Event::Forge { victim, claimed }
                if hosts.contains(victim) && hosts.contains(claimed) =>
            {
                eprintln!("{t} us: forge at {victim} claiming {claimed}");
            }
            _ => {}
        }
    }
}
