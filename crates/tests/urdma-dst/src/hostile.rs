//! The hostile parts of a run: forged traffic, and the trace that explains
//! a failing seed.

use crate::sim::{gid, Event, Sim, IMPOSTOR_IP, PORT};
use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::discovery::wire::{
    Announce, Answer, EndpointRecord, Message, Query, Reply, WireAddress,
};
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU64;

/// The impostor's record for a name it steals.
fn impostor_record(name: &Address) -> Option<EndpointRecord> {
    let addrs = vec![
        WireAddress::from(IMPOSTOR_IP),
        WireAddress::new(name.clone()).ok()?,
    ];
    EndpointRecord::new(attacker_gid(), 0, 5, 16, vec![0xffff], addrs).ok()
}

/// What the forger wants clients to use for other hosts.
pub fn attacker_gid() -> Gid {
    let mut g = gid(0, 0xbad).0;
    g[12..16].copy_from_slice(&[0xba, 0xd0, 0xba, 0xd0]);
    Gid(g)
}

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

    /// An impostor on the segment answers, from then on, every query for
    /// `claimed`'s name it receives (to the groups: a claim; to its
    /// address: a confirmation) with the attacker's GID, and, if it
    /// `announces`, first announces the name as its own on the group, from
    /// its own address. It has no key.
    pub(crate) fn impersonate(&mut self, claimed: usize, announces: bool) {
        let Some(name) = Address::name(&self.hosts[claimed].name) else {
            return;
        };
        let Some(record) = impostor_record(&name) else {
            return;
        };
        self.stolen.push(name);
        if !announces {
            return;
        }
        let Ok(a) = Announce::new(vec![record], false) else {
            return;
        };
        let bytes = Message::from(a).encode();
        let from = SocketAddr::new(IpAddr::V4(IMPOSTOR_IP), PORT);
        let group = IpAddr::V4(ibacm_urdma::discovery::wire::V4_GROUP);
        self.send_to_group(None, from, group, &bytes);
    }

    /// A datagram the impostor received, from `from`: a query for a name
    /// it steals is answered FOUND with the attacker's GID.
    pub(crate) fn impostor_hears(&mut self, from: SocketAddr, bytes: &[u8]) {
        let Ok(Message::Query(q)) = Message::decode(bytes) else {
            return;
        };
        let target = q.target().address();
        if !self.stolen.contains(target) {
            return;
        }
        let Some(record) = impostor_record(target) else {
            return;
        };
        if let Ok(r) = q.reply(Answer::Found(record)) {
            let src = SocketAddr::new(IpAddr::V4(IMPOSTOR_IP), PORT);
            self.route(None, src, from, Message::from(r).encode());
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
                    self.next_id
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
