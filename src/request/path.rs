//! Path records, built locally: urdma ports have no SA to ask.

use crate::addr::Gid;

/// `IBV_PATH_RECORD_REVERSIBLE` with a path count of one.
const REVERSIBLE_ONE_PATH: u8 = 0x81;
/// SA selector "exactly", in the top two bits of mtu/rate/lifetime: what an
/// SA puts in the records it returns, and what acmp's records carry.
const SELECTOR_EXACTLY: u8 = 2 << 6;
const VALUE_MASK: u8 = 0x3f;

/// Where a path leads: the remote end as far as it is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dest {
    pub gid: Gid,
    pub lid: u16,
    /// The remote port's `enum ibv_mtu` / `enum ibv_rate`, when known.
    pub mtu: Option<u8>,
    pub rate: Option<u8>,
}

/// A path record in host terms. `encode` produces the 64-byte SA wire
/// format (`struct ibv_path_record`, big-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PathRecord {
    pub service_id: u64,
    pub dgid: Gid,
    pub sgid: Gid,
    pub dlid: u16,
    pub slid: u16,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub tclass: u8,
    pub reversible: bool,
    pub pkey: u16,
    pub sl: u8,
    /// `enum ibv_mtu` value (1 = 256 .. 5 = 4096).
    pub mtu: u8,
    /// `enum ibv_rate` value.
    pub rate: u8,
    pub packet_lifetime: u8,
}

pub const PATH_RECORD_LEN: usize = 64;

impl PathRecord {
    pub fn encode(&self) -> [u8; PATH_RECORD_LEN] {
        let mut b = [0u8; PATH_RECORD_LEN];
        b[0..8].copy_from_slice(&self.service_id.to_be_bytes());
        b[8..24].copy_from_slice(&self.dgid.0);
        b[24..40].copy_from_slice(&self.sgid.0);
        b[40..42].copy_from_slice(&self.dlid.to_be_bytes());
        b[42..44].copy_from_slice(&self.slid.to_be_bytes());
        let flow_hop = ((self.flow_label & 0xf_ffff) << 8) | u32::from(self.hop_limit);
        b[44..48].copy_from_slice(&flow_hop.to_be_bytes());
        b[48] = self.tclass;
        b[49] = if self.reversible {
            REVERSIBLE_ONE_PATH
        } else {
            1
        };
        b[50..52].copy_from_slice(&self.pkey.to_be_bytes());
        b[52..54].copy_from_slice(&u16::from(self.sl & 0xf).to_be_bytes());
        b[54] = SELECTOR_EXACTLY | (self.mtu & VALUE_MASK);
        b[55] = SELECTOR_EXACTLY | (self.rate & VALUE_MASK);
        b[56] = SELECTOR_EXACTLY | (self.packet_lifetime & VALUE_MASK);
        b
    }

    /// Reads the fields a client may have set; selectors are dropped.
    pub fn decode(b: &[u8; PATH_RECORD_LEN]) -> PathRecord {
        let be16 = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let gid = |i: usize| {
            let mut g = [0; 16];
            g.copy_from_slice(&b[i..i + 16]);
            Gid(g)
        };
        let mut sid = [0; 8];
        sid.copy_from_slice(&b[0..8]);
        let flow_hop = u32::from_be_bytes([b[44], b[45], b[46], b[47]]);
        PathRecord {
            service_id: u64::from_be_bytes(sid),
            dgid: gid(8),
            sgid: gid(24),
            dlid: be16(40),
            slid: be16(42),
            flow_label: (flow_hop >> 8) & 0xf_ffff,
            hop_limit: flow_hop as u8,
            tclass: b[48],
            reversible: b[49] & 0x80 != 0,
            pkey: be16(50),
            sl: (be16(52) & 0xf) as u8,
            mtu: b[54] & VALUE_MASK,
            rate: b[55] & VALUE_MASK,
            packet_lifetime: b[56] & VALUE_MASK,
        }
    }

    /// Whether `self` (what this provider builds) satisfies a record a
    /// client wants verified: as an SA would, every field the client set
    /// (non-zero) must equal ours. The service id is the client's own.
    pub fn satisfies(&self, want: &PathRecord) -> Result<(), &'static str> {
        let checks: [(&'static str, bool, bool); 13] = [
            ("dgid", !want.dgid.is_zero(), want.dgid == self.dgid),
            ("sgid", !want.sgid.is_zero(), want.sgid == self.sgid),
            ("dlid", want.dlid != 0, want.dlid == self.dlid),
            ("slid", want.slid != 0, want.slid == self.slid),
            (
                "flow label",
                want.flow_label != 0,
                want.flow_label == self.flow_label,
            ),
            (
                "hop limit",
                want.hop_limit != 0,
                want.hop_limit == self.hop_limit,
            ),
            ("tclass", want.tclass != 0, want.tclass == self.tclass),
            (
                "pkey",
                want.pkey != 0,
                want.pkey & 0x7fff == self.pkey & 0x7fff,
            ),
            ("sl", want.sl != 0, want.sl == self.sl),
            ("mtu", want.mtu != 0, want.mtu == self.mtu),
            ("rate", want.rate != 0, want.rate == self.rate),
            (
                "packet lifetime",
                want.packet_lifetime != 0,
                want.packet_lifetime == self.packet_lifetime,
            ),
            ("reversible", want.reversible, self.reversible),
        ];
        match checks.iter().find(|(_, set, equal)| *set && !*equal) {
            Some((field, _, _)) => Err(field),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_sa_wire_format() {
        let p = PathRecord {
            service_id: 0x0102030405060708,
            dgid: "fe80::2".parse().unwrap(),
            sgid: "fe80::1".parse().unwrap(),
            dlid: 0x0019,
            slid: 0x0018,
            flow_label: 0x12345,
            hop_limit: 64,
            tclass: 7,
            reversible: true,
            pkey: 0xffff,
            sl: 3,
            mtu: 5,
            rate: 16,
            packet_lifetime: 18,
        };
        let b = p.encode();
        assert_eq!(&b[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(b[23], 2);
        assert_eq!(b[39], 1);
        assert_eq!(&b[40..44], &[0, 0x19, 0, 0x18]);
        assert_eq!(&b[44..48], &[0x01, 0x23, 0x45, 64]);
        assert_eq!((b[48], b[49]), (7, 0x81));
        assert_eq!(&b[50..54], &[0xff, 0xff, 0, 3]);
        assert_eq!((b[54], b[55], b[56], b[57]), (0x85, 0x90, 0x80 | 18, 0));
        assert_eq!(PathRecord::decode(&b), p);
    }

    #[test]
    fn verification_compares_only_what_the_client_set() {
        let ours = PathRecord {
            dgid: "fe80::2".parse().unwrap(),
            sgid: "fe80::1".parse().unwrap(),
            pkey: 0xffff,
            mtu: 5,
            rate: 16,
            reversible: true,
            ..Default::default()
        };
        assert_eq!(ours.satisfies(&PathRecord::decode(&ours.encode())), Ok(()));
        let only_dgid = PathRecord {
            dgid: ours.dgid,
            ..Default::default()
        };
        assert_eq!(ours.satisfies(&only_dgid), Ok(()));
        let wrong_mtu = PathRecord { mtu: 4, ..ours };
        assert_eq!(ours.satisfies(&wrong_mtu), Err("mtu"));
        let other_dgid = PathRecord {
            dgid: "fe80::9".parse().unwrap(),
            ..ours
        };
        assert_eq!(ours.satisfies(&other_dgid), Err("dgid"));
    }
}
