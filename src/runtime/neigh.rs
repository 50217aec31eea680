//! The kernel's neighbour table, read over rtnetlink: the MAC behind an IP
//! address, for the `eui64` derivation.
//!
//! One entry is asked for, not the table: the kernel's route to the address
//! names the interface, and the neighbour entry of the address on that
//! interface is read alone (`ip neigh get`), so a lookup costs the same on
//! a segment of ten hosts or of ten thousand. Kernels older than 4.20 have
//! no single-entry read; there the table is dumped and searched, as before.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;
use std::net::IpAddr;

/// The link-layer address the kernel has for `ip`, if it has a usable one.
pub fn mac_of(ip: IpAddr) -> io::Result<Option<[u8; 6]>> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    match one_entry(&socket, ip) {
        // No single-entry read (before Linux 4.20).
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => whole_table(&socket, ip),
        found => found,
    }
}

fn family(ip: IpAddr) -> AddressFamily {
    match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    }
}

/// The entry of `ip` on the interface the kernel routes it through.
fn one_entry(socket: &Socket, ip: IpAddr) -> io::Result<Option<[u8; 6]>> {
    let mut route = RouteMessage::default();
    route.header.address_family = family(ip);
    route.header.destination_prefix_length = if ip.is_ipv4() { 32 } else { 128 };
    route
        .attributes
        .push(RouteAttribute::Destination(RouteAddress::from(ip)));
    let oif = ask(
        socket,
        NLM_F_REQUEST,
        RouteNetlinkMessage::GetRoute(route),
        |m| match m {
            RouteNetlinkMessage::NewRoute(r) => r.attributes.iter().find_map(|a| match a {
                RouteAttribute::Oif(i) => Some(*i),
                _ => None,
            }),
            _ => None,
        },
    );
    let oif = match oif {
        Ok(Some(i)) => i,
        // No route there: no neighbour either.
        Ok(None) => return Ok(None),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENETUNREACH | libc::EHOSTUNREACH)
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let mut msg = NeighbourMessage::default();
    msg.header.family = family(ip);
    msg.header.ifindex = oif;
    msg.attributes
        .push(NeighbourAttribute::Destination(match ip {
            IpAddr::V4(v4) => NeighbourAddress::Inet(v4),
            IpAddr::V6(v6) => NeighbourAddress::Inet6(v6),
        }));
    let found = ask(
        socket,
        NLM_F_REQUEST,
        RouteNetlinkMessage::GetNeighbour(msg),
        |m| usable_mac(&m, ip),
    );
    match found {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        found => found,
    }
}

/// Every entry of the table, searched for `ip`.
fn whole_table(socket: &Socket, ip: IpAddr) -> io::Result<Option<[u8; 6]>> {
    let mut msg = NeighbourMessage::default();
    msg.header.family = family(ip);
    let dump = RouteNetlinkMessage::GetNeighbour(msg);
    ask(socket, NLM_F_DUMP | NLM_F_REQUEST, dump, |m| {
        usable_mac(&m, ip)
    })
}

/// The MAC of a neighbour entry of `ip` the kernel can use.
fn usable_mac(m: &RouteNetlinkMessage, ip: IpAddr) -> Option<[u8; 6]> {
    let RouteNetlinkMessage::NewNeighbour(n) = m else {
        return None;
    };
    let usable = !matches!(
        n.header.state,
        NeighbourState::Incomplete | NeighbourState::Failed | NeighbourState::Noarp
    );
    let dest = n.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
        NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
        _ => None,
    });
    let mac = n.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => <[u8; 6]>::try_from(&l[..]).ok(),
        _ => None,
    });
    mac.filter(|_| usable && dest == Some(ip))
}

/// Sends one request and reads its answer: the first message `pick` takes
/// (a single-entry request has one), or, for a dump, none up to its end.
/// The kernel's refusal is an error with its errno.
fn ask<T>(
    socket: &Socket,
    flags: u16,
    request: RouteNetlinkMessage,
    mut pick: impl FnMut(RouteNetlinkMessage) -> Option<T>,
) -> io::Result<Option<T>> {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    let mut req = NetlinkMessage::new(header, NetlinkPayload::from(request));
    req.finalize();
    let mut buf = vec![0; req.header.length as usize];
    req.serialize(&mut buf[..]);
    socket.send(&buf[..], 0)?;
    let dump = flags & NLM_F_DUMP != 0;
    let mut found = None;
    let mut rx = vec![0u8; 16384];
    loop {
        let size = socket.recv(&mut &mut rx[..], 0)?;
        let mut offset = 0;
        while offset < size {
            let msg: NetlinkMessage<RouteNetlinkMessage> =
                NetlinkMessage::deserialize(&rx[offset..size])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            let len = msg.header.length as usize;
            match msg.payload {
                NetlinkPayload::Done(_) => return Ok(found),
                NetlinkPayload::Error(e) if e.code.is_some() => return Err(e.to_io()),
                NetlinkPayload::InnerMessage(m) => {
                    if found.is_none() {
                        found = pick(m);
                    }
                    if !dump {
                        return Ok(found);
                    }
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            offset += len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_without_a_neighbour_entry_has_no_mac() {
        // Routed through lo, which keeps no neighbour entries: the kernel
        // says so, which is no MAC, not an error.
        assert_eq!(mac_of(IpAddr::from([127, 0, 0, 1])).unwrap(), None);
        // Nowhere to route to: no neighbour either.
        assert_eq!(
            mac_of(IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1])).unwrap(),
            None
        );
    }
}
