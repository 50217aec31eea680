//! The impostor (`Event::Impostor`): a host of the segment without a key
//! that claims other hosts' names. Sans-IO: it says what it sends, the
//! segment routes it (`hostile.rs`).

use super::{gid, IMPOSTOR_IP};
use ibacm_urdma::addr::{Address, Gid};
use ibacm_urdma::discovery::wire::{Announce, Answer, EndpointRecord, Message, WireAddress};

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

/// An impostor on the segment (`Event::Impostor`): from then on it
/// answers every query for the names it steals it receives (to the groups:
/// a claim; to its address: a confirmation) with the attacker's GID. It
/// has no key.
#[derive(Default)]
pub(crate) struct Impostor {
    stolen: Vec<Address>,
}

impl Impostor {
    /// Whether it steals host name `name`.
    pub(crate) fn steals(&self, name: &str) -> bool {
        self.stolen.iter().any(|a| a.to_string() == name)
    }

    /// It steals host name `name`: the announcement of it as its own to
    /// send to the group from its own address, if it `announces`.
    pub(crate) fn steal(&mut self, name: &str, announces: bool) -> Option<Vec<u8>> {
        let name = Address::name(name)?;
        let record = impostor_record(&name)?;
        self.stolen.push(name);
        if !announces {
            return None;
        }
        let a = Announce::new(vec![record], false).ok()?;
        Some(Message::from(a).encode())
    }

    /// What it answers a datagram it received: a query for a name it
    /// steals gets FOUND with the attacker's GID.
    pub(crate) fn answer(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        if self.stolen.is_empty() {
            return None;
        }
        let Ok(Message::Query(q)) = Message::decode(bytes) else {
            return None;
        };
        let target = q.target().address();
        if !self.stolen.contains(target) {
            return None;
        }
        let record = impostor_record(target)?;
        let r = q.reply(Answer::Found(record)).ok()?;
        Some(Message::from(r).encode())
    }
}
