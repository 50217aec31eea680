//! The kernel's neighbour table, read over rtnetlink: the MAC behind an IP
//! address, for the `eui64` derivation.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;
use std::net::IpAddr;

/// The link-layer address the kernel has for `ip`, if it has a usable one.
pub fn mac_of(ip: IpAddr) -> io::Result<Option<[u8; 6]>> {
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_DUMP | NLM_F_REQUEST;
    let mut msg = NeighbourMessage::default();
    msg.header.family = match ip {
        IpAddr::V4(_) => AddressFamily::Inet,
        IpAddr::V6(_) => AddressFamily::Inet6,
    };
    let mut req = NetlinkMessage::new(
        header,
        NetlinkPayload::from(RouteNetlinkMessage::GetNeighbour(msg)),
    );
    req.finalize();
    let mut buf = vec![0; req.header.length as usize];
    req.serialize(&mut buf[..]);
    socket.send(&buf[..], 0)?;

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
                NetlinkPayload::Error(e) => {
                    return Err(io::Error::other(format!("neighbour dump failed: {e:?}")))
                }
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewNeighbour(n)) => {
                    let usable = !matches!(
                        n.header.state,
                        NeighbourState::Incomplete | NeighbourState::Failed | NeighbourState::Noarp
                    );
                    let dest = n.attributes.iter().find_map(|a| match a {
                        NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                            Some(IpAddr::V4(*v4))
                        }
                        NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                            Some(IpAddr::V6(*v6))
                        }
                        _ => None,
                    });
                    let mac = n.attributes.iter().find_map(|a| match a {
                        NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => {
                            <[u8; 6]>::try_from(&l[..]).ok()
                        }
                        _ => None,
                    });
                    if usable && dest == Some(ip) {
                        found = found.or(mac);
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
