//! Addresses as the daemon and clients name them: the key of every lookup.

use acm_prov_sys::{
    ACM_ADDRESS_GID, ACM_ADDRESS_IP, ACM_ADDRESS_IP6, ACM_ADDRESS_LID, ACM_ADDRESS_NAME,
    ACM_MAX_ADDRESS,
};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The 64-byte address field of `acm_ep_addr_data` / `acm_address`.
pub const ADDR_LEN: usize = ACM_MAX_ADDRESS as usize;

/// A 128-bit GID in network byte order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    pub fn subnet_prefix(&self) -> [u8; 8] {
        let mut p = [0; 8];
        p.copy_from_slice(&self.0[..8]);
        p
    }

    pub fn interface_id(&self) -> [u8; 8] {
        let mut p = [0; 8];
        p.copy_from_slice(&self.0[8..]);
        p
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // GIDs are conventionally written like IPv6 addresses; the
        // compressed form is what ib_acme prints, so logs match its output.
        Ipv6Addr::from(self.0).fmt(f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

impl std::str::FromStr for Gid {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.parse::<Ipv6Addr>()
            .map(|a| Gid(a.octets()))
            .map_err(|_| format!("'{s}' is not a GID (expected IPv6 notation, e.g. fe80::1)"))
    }
}

/// A resolvable address. Names compare case-insensitively, as the daemon
/// matches them, so they are stored lower-cased. Ordered only so that
/// tables can sort by it.
#[derive(Clone, PartialEq, Eq, Debug, PartialOrd, Ord)]
pub enum Address {
    Name(Box<str>),
    Ip4(Ipv4Addr),
    Ip6(Ipv6Addr),
    Gid(Gid),
    Lid(u16),
}

// Hashing the destination is on every cache hit. The derived hash feeds
// the variant, then every field through the slice path (a length, then
// the bytes); one word for the fixed-size variants costs a fraction of
// that, and keeps the hash small enough to be inlined into the lookup
// (names, hashed byte by byte anyway, are hashed out of line). Equal
// addresses still hash equally, which is all `Eq` needs; an IPv6 address
// and a GID of the same 128 bits hash alike, and are told apart by `Eq`.
impl std::hash::Hash for Address {
    #[inline(always)]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let word = match self {
            Address::Name(n) => return hash_name(n, state),
            Address::Ip4(a) => 1 << 32 | u128::from(u32::from(*a)),
            Address::Ip6(a) => u128::from(*a),
            Address::Gid(g) => u128::from_be_bytes(g.0),
            Address::Lid(l) => 4 << 32 | u128::from(*l),
        };
        state.write_u128(word);
    }
}

#[inline(never)]
fn hash_name<H: std::hash::Hasher>(name: &str, state: &mut H) {
    state.write_u8(0);
    std::hash::Hash::hash(name, state);
}

impl From<std::net::IpAddr> for Address {
    fn from(ip: std::net::IpAddr) -> Address {
        match ip {
            std::net::IpAddr::V4(v4) => Address::Ip4(v4),
            std::net::IpAddr::V6(v6) => Address::Ip6(v6),
        }
    }
}

/// Why a binary address could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddrError {
    UnknownType(u16),
    BadName,
}

impl Address {
    /// Decodes the `(type, 64-byte info)` pair of a resolve entry or of an
    /// `acm_address`. IP addresses and GIDs are network order; a LID is a
    /// big-endian u16; a name is NUL-padded.
    #[inline]
    pub fn from_wire(kind: u16, info: &[u8; ADDR_LEN]) -> Result<Address, AddrError> {
        EntryAddress::check(kind, info).map(EntryAddress::to_address)
    }

    /// A host name as the daemon would carry it: non-empty, printable, no
    /// blanks, and short enough to leave a NUL in the 64-byte field.
    pub fn name(s: &str) -> Option<Address> {
        let ok = !s.is_empty() && s.len() < ADDR_LEN && s.bytes().all(|b| b.is_ascii_graphic());
        ok.then(|| Address::Name(s.to_ascii_lowercase().into_boxed_str()))
    }

    /// Parses the textual form used by the hosts file: IPv4, IPv6, or a name.
    pub fn parse_host(s: &str) -> Option<Address> {
        if let Ok(v4) = s.parse::<Ipv4Addr>() {
            Some(Address::Ip4(v4))
        } else if let Ok(v6) = s.parse::<Ipv6Addr>() {
            Some(Address::Ip6(v6))
        } else {
            Address::name(s)
        }
    }

    /// The bits of an address of fixed size, in network order (what an
    /// entry carries, read as one big-endian number); `None` for a name.
    #[inline]
    pub fn fixed_bits(&self) -> Option<u128> {
        match self {
            Address::Name(_) => None,
            Address::Ip4(a) => Some(u32::from(*a).into()),
            Address::Ip6(a) => Some(u128::from(*a)),
            Address::Gid(g) => Some(u128::from_be_bytes(g.0)),
            Address::Lid(l) => Some((*l).into()),
        }
    }

    #[inline]
    pub fn wire_type(&self) -> u16 {
        match self {
            Address::Name(_) => ACM_ADDRESS_NAME,
            Address::Ip4(_) => ACM_ADDRESS_IP,
            Address::Ip6(_) => ACM_ADDRESS_IP6,
            Address::Gid(_) => ACM_ADDRESS_GID,
            Address::Lid(_) => ACM_ADDRESS_LID,
        }
    }
}

/// The `(type, 64-byte info)` pair of a request entry, checked as
/// [`Address::from_wire`] checks it but read in place: a cache hit is found
/// by these bytes, and only what misses builds its [`Address`] (which, for
/// a name, allocates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryAddress<'a> {
    info: &'a [u8; ADDR_LEN],
    /// The `ACM_ADDRESS_*` type in the low 16 bits, the length of a name
    /// above them. One integer: as two narrow fields the hit path stored
    /// them apart and read them back as one word, a load the CPU cannot
    /// take from its store buffer, and a hit took twice the time.
    kind_len: u32,
}

impl<'a> EntryAddress<'a> {
    #[inline]
    pub fn check(kind: u16, info: &'a [u8; ADDR_LEN]) -> Result<EntryAddress<'a>, AddrError> {
        let name_len = match kind {
            ACM_ADDRESS_IP | ACM_ADDRESS_IP6 | ACM_ADDRESS_GID | ACM_ADDRESS_LID => 0,
            ACM_ADDRESS_NAME => name_len(info).ok_or(AddrError::BadName)?,
            other => return Err(AddrError::UnknownType(other)),
        };
        Ok(EntryAddress {
            info,
            kind_len: u32::from(kind) | u32::from(name_len) << 16,
        })
    }

    /// The `ACM_ADDRESS_*` type, as [`Address::wire_type`].
    #[inline]
    pub fn kind(&self) -> u16 {
        self.kind_len as u16
    }

    #[inline]
    fn name_len(&self) -> usize {
        (self.kind_len >> 16) as usize
    }

    /// The bits of an address of fixed size, in network order as
    /// [`Address::fixed_bits`] gives them; `None` for a name.
    #[inline]
    pub fn fixed_bits(&self) -> Option<u128> {
        let info = self.info;
        match self.kind() {
            ACM_ADDRESS_IP => Some(u32::from_be_bytes(*info.first_chunk().expect("4")).into()),
            ACM_ADDRESS_IP6 | ACM_ADDRESS_GID => {
                Some(u128::from_be_bytes(*info.first_chunk().expect("16")))
            }
            ACM_ADDRESS_LID => Some(u16::from_be_bytes([info[0], info[1]]).into()),
            _ => None,
        }
    }

    /// A name as carried, before it is lower-cased (`None`: not a name).
    pub fn name_bytes(&self) -> Option<&'a [u8]> {
        (self.kind() == ACM_ADDRESS_NAME).then(|| &self.info[..self.name_len()])
    }

    pub fn to_address(self) -> Address {
        let info = self.info;
        let b16 = || -> [u8; 16] { *info.first_chunk().expect("16 of 64 bytes") };
        match self.kind() {
            ACM_ADDRESS_IP => Address::Ip4(Ipv4Addr::new(info[0], info[1], info[2], info[3])),
            ACM_ADDRESS_IP6 => Address::Ip6(Ipv6Addr::from(b16())),
            ACM_ADDRESS_GID => Address::Gid(Gid(b16())),
            ACM_ADDRESS_LID => Address::Lid(u16::from_be_bytes([info[0], info[1]])),
            // Checked: a name of 1 to 63 printable ASCII bytes.
            _ => Address::Name(
                String::from_utf8_lossy(&info[..self.name_len()])
                    .to_ascii_lowercase()
                    .into_boxed_str(),
            ),
        }
    }
}

/// The length of the name in a NUL-padded field, if it is one
/// [`Address::name`] takes (ASCII, so also UTF-8).
#[inline(never)]
fn name_len(info: &[u8; ADDR_LEN]) -> Option<u8> {
    let end = info.iter().position(|&b| b == 0).unwrap_or(ADDR_LEN);
    let name = &info[..end];
    (!name.is_empty() && name.len() < ADDR_LEN && name.iter().all(u8::is_ascii_graphic))
        .then_some(end as u8)
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Name(n) => f.write_str(n),
            Address::Ip4(a) => a.fmt(f),
            Address::Ip6(a) => a.fmt(f),
            Address::Gid(g) => write!(f, "GID {g}"),
            Address::Lid(l) => write!(f, "LID {l}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(bytes: &[u8]) -> [u8; ADDR_LEN] {
        let mut i = [0; ADDR_LEN];
        i[..bytes.len()].copy_from_slice(bytes);
        i
    }

    #[test]
    fn decodes_every_type_the_daemon_passes() {
        assert_eq!(
            Address::from_wire(ACM_ADDRESS_NAME, &info(b"Node1")),
            Ok(Address::Name("node1".into()))
        );
        assert_eq!(
            Address::from_wire(ACM_ADDRESS_IP, &info(&[10, 0, 0, 2])),
            Ok(Address::Ip4(Ipv4Addr::new(10, 0, 0, 2)))
        );
        let v6: Ipv6Addr = "fd00::2".parse().unwrap();
        assert_eq!(
            Address::from_wire(ACM_ADDRESS_IP6, &info(&v6.octets())),
            Ok(Address::Ip6(v6))
        );
        assert_eq!(
            Address::from_wire(ACM_ADDRESS_GID, &info(&v6.octets())),
            Ok(Address::Gid(Gid(v6.octets())))
        );
        assert_eq!(
            Address::from_wire(ACM_ADDRESS_LID, &info(&[0x12, 0x34])),
            Ok(Address::Lid(0x1234))
        );
    }

    #[test]
    fn an_entry_read_in_place_is_the_address_it_decodes_to() {
        let v6: Ipv6Addr = "fd00::2".parse().unwrap();
        for (kind, bytes) in [
            (ACM_ADDRESS_NAME, &b"Node-1.Example"[..]),
            (ACM_ADDRESS_IP, &[10, 0, 0, 2][..]),
            (ACM_ADDRESS_IP6, &v6.octets()[..]),
            (ACM_ADDRESS_GID, &v6.octets()[..]),
            (ACM_ADDRESS_LID, &[0x12, 0x34][..]),
        ] {
            let field = info(bytes);
            let e = EntryAddress::check(kind, &field).unwrap();
            let a = e.to_address();
            assert_eq!(Address::from_wire(kind, &field), Ok(a.clone()));
            assert_eq!(e.kind(), a.wire_type());
            assert_eq!(e.fixed_bits(), a.fixed_bits());
            assert_eq!(e.name_bytes().is_some(), kind == ACM_ADDRESS_NAME);
        }
        let name = info(b"Node-1.Example");
        let e = EntryAddress::check(ACM_ADDRESS_NAME, &name).unwrap();
        assert_eq!(e.name_bytes(), Some(&b"Node-1.Example"[..]));
        assert_eq!(e.to_address(), Address::name("node-1.example").unwrap());
    }

    #[test]
    fn rejects_unknown_types_and_bad_names() {
        assert_eq!(
            Address::from_wire(9, &info(b"x")),
            Err(AddrError::UnknownType(9))
        );
        assert_eq!(
            Address::from_wire(ACM_ADDRESS_NAME, &info(b"")),
            Err(AddrError::BadName)
        );
        assert_eq!(
            Address::from_wire(ACM_ADDRESS_NAME, &info(&[0xff, 0xfe])),
            Err(AddrError::BadName)
        );
        // A name filling all 64 bytes has no room for the NUL the daemon needs.
        assert_eq!(
            Address::from_wire(ACM_ADDRESS_NAME, &[b'a'; ADDR_LEN]),
            Err(AddrError::BadName)
        );
    }

    #[test]
    fn addresses_hashing_alike_are_still_distinct_keys() {
        let v6: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut m = crate::fastmap::Map::default();
        m.insert(Address::Ip6(v6), 1);
        m.insert(Address::Gid(Gid(v6.octets())), 2);
        m.insert(Address::Ip4([10, 0, 0, 2].into()), 3);
        m.insert(Address::Lid(2), 4);
        m.insert(Address::name("node2").unwrap(), 5);
        assert_eq!(m.len(), 5);
        assert_eq!(m[&Address::Ip6(v6)], 1);
        assert_eq!(m[&Address::Gid(Gid(v6.octets()))], 2);
        assert_eq!(m[&Address::Ip4([10, 0, 0, 2].into())], 3);
        assert_eq!(m[&Address::Lid(2)], 4);
        assert_eq!(m[&Address::name("NODE2").unwrap()], 5);
    }

    #[test]
    fn host_text_forms() {
        assert_eq!(
            Address::parse_host("10.1.2.3"),
            Some(Address::Ip4(Ipv4Addr::new(10, 1, 2, 3)))
        );
        assert!(matches!(
            Address::parse_host("fe80::1"),
            Some(Address::Ip6(_))
        ));
        assert_eq!(Address::parse_host("HostA"), Address::name("hosta"));
        assert_eq!(Address::parse_host("bad name"), None);
        assert_eq!(
            "fe80::5054:ff:fe12:3456"
                .parse::<Gid>()
                .unwrap()
                .to_string(),
            "fe80::5054:ff:fe12:3456"
        );
        assert!("zz".parse::<Gid>().is_err());
    }
}
