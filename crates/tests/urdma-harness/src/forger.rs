//! The attacker of the threat model (docs/protocol.md, Trust): a host on
//! the segment that forges the source address of the datagrams it sends
//! and reads the discovery groups, but cannot see unicast between two
//! other hosts.
//!
//! Forged IPv4 datagrams are built whole (IP and UDP headers) and sent on a
//! raw socket, so any source address works without the forger holding it.
//! The forger never answers ARP for an address it forges: the hosts'
//! unicast keeps going where it belongs.

use crate::{Host, Net};
use ibacm_urdma::addr::Address;
use ibacm_urdma::discovery::wire::{Message, Query};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

pub const GROUP_V4: Ipv4Addr = Ipv4Addr::new(239, 255, 65, 67);

pub struct Forger {
    pub host: Host,
    pub ip: Ipv4Addr,
    raw: OwnedFd,
    /// Bound to the discovery port on all addresses and joined to the
    /// IPv4 group: what the forger reads of the segment's multicast, and
    /// unicast sent to its own address.
    pub listener: UdpSocket,
}

impl Forger {
    /// A host at `ip`/24 on `net`, with `port` (the discovery port) open
    /// for reading.
    #[allow(unsafe_code)] // a raw socket, which std does not make
    pub fn start(net: &Net, ip: Ipv4Addr, port: u16) -> Forger {
        let host = Host::bare();
        net.attach(&host, "eth0", &[&format!("{ip}/24")]);
        // Group traffic goes out of its one link.
        let (code, out) = host.exec(&["ip", "route", "add", "224.0.0.0/4", "dev", "eth0"]);
        assert_eq!(code, 0, "ip route: {out}");
        // ARP requests it makes carry its own address, never one it forges.
        for conf in ["all", "eth0"] {
            let (code, out) = host.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv4.conf.{conf}.arp_announce=2"),
            ]);
            assert_eq!(code, 0, "sysctl: {out}");
        }
        let (raw, listener) = host.in_netns(|| {
            // SAFETY: plain socket(2); the descriptor is owned at once.
            let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
            assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
            // SAFETY: a fresh descriptor nobody else owns.
            let raw = unsafe { OwnedFd::from_raw_fd(fd) };
            let listener = UdpSocket::bind(("0.0.0.0", port)).expect("bind the forger's listener");
            // Whether a datagram came to a group or to one address is what
            // tells a host's welcome or query to the forger alone from one
            // to everyone (`recv_to`).
            let on: libc::c_int = 1;
            // SAFETY: an int option of the stated size on an open socket.
            let rc = unsafe {
                libc::setsockopt(
                    listener.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_PKTINFO,
                    std::ptr::addr_of!(on).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            assert_eq!(rc, 0, "IP_PKTINFO: {}", std::io::Error::last_os_error());
            listener
                .join_multicast_v4(&GROUP_V4, &ip)
                .expect("join the discovery group");
            listener
                .set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            (raw, listener)
        });
        Forger {
            host,
            ip,
            raw,
            listener,
        }
    }

    /// Sends `payload` in a UDP datagram from `src` to `dst`, whatever
    /// `src` is.
    #[allow(unsafe_code)] // sendto(2) on the raw socket
    pub fn send(&self, src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) {
        let packet = udp_packet(src, dst, payload);
        let to = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(*dst.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: a valid buffer and address of the stated lengths.
        let n = unsafe {
            libc::sendto(
                self.raw.as_raw_fd(),
                packet.as_ptr().cast(),
                packet.len(),
                0,
                std::ptr::addr_of!(to).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        assert_eq!(
            n as usize,
            packet.len(),
            "raw send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The next discovery QUERY read on the listener within `timeout` (for
    /// `target`, if given), and its source; other datagrams are skipped,
    /// and so are start queries (a host's query for its own address, on
    /// the groups, when its discovery starts).
    pub fn recv_query(
        &self,
        target: Option<&Address>,
        timeout: Duration,
    ) -> Option<(SocketAddr, Query)> {
        let deadline = Instant::now() + timeout;
        while let Some((from, data)) = self.recv(deadline.saturating_duration_since(Instant::now()))
        {
            if let Ok(Message::Query(q)) = Message::decode(&data) {
                let start = q.sender().addresses().contains(q.target());
                if !start && target.is_none_or(|t| q.target().address() == t) {
                    return Some((from, q));
                }
            }
        }
        None
    }

    /// The next start query read on the listener within `timeout` (a
    /// group query for an address its asker's record lists, which a host
    /// sends when its discovery starts), and its source.
    pub fn recv_start_query(&self, timeout: Duration) -> Option<(SocketAddr, Query)> {
        let deadline = Instant::now() + timeout;
        while let Some((from, data)) = self.recv(deadline.saturating_duration_since(Instant::now()))
        {
            if let Ok(Message::Query(q)) = Message::decode(&data) {
                if q.sender().addresses().contains(q.target()) {
                    return Some((from, q));
                }
            }
        }
        None
    }

    /// The next datagram read on the listener within `timeout`: its
    /// source, the address it was sent to (a group, or one of the
    /// forger's own) and its bytes.
    #[allow(unsafe_code)] // recvmsg(2), for the destination (IP_PKTINFO)
    pub fn recv_to(&self, timeout: Duration) -> Option<(SocketAddr, Ipv4Addr, Vec<u8>)> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 2048];
        // u64s: a control buffer aligned for `cmsghdr`.
        let mut control = [0u64; 16];
        while Instant::now() < deadline {
            // SAFETY: plain data, for which all zeroes is a valid value.
            let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: as above.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = std::ptr::addr_of_mut!(from).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            // SAFETY: `msg` points at buffers of the lengths it states,
            // all alive for the call.
            let n = unsafe { libc::recvmsg(self.listener.as_raw_fd(), &mut msg, 0) };
            if n < 0 {
                // The listener's read timeout: look at the deadline again.
                continue;
            }
            let mut to = None;
            // SAFETY: `msg` as filled by recvmsg; each header the macros
            // return lies inside its control buffer.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_PKTINFO {
                        let info: libc::in_pktinfo =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                        to = Some(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr)));
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            let source = SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)),
                u16::from_be(from.sin_port),
            );
            let to = to.expect("IP_PKTINFO gives every datagram's destination");
            return Some((source.into(), to, buf[..n as usize].to_vec()));
        }
        None
    }

    /// The next datagram read on the listener within `timeout`: its
    /// source and bytes.
    pub fn recv(&self, timeout: Duration) -> Option<(SocketAddr, Vec<u8>)> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 2048];
        while Instant::now() < deadline {
            if let Ok((n, from)) = self.listener.recv_from(&mut buf) {
                return Some((from, buf[..n].to_vec()));
            }
        }
        None
    }
}

/// An IPv4 header (checksum and length left for the kernel to fill) and a
/// UDP header without checksum (0: none, allowed over IPv4), then
/// `payload`. Multicast leaves with TTL 1, as the hosts send it.
fn udp_packet(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut p = Vec::with_capacity(20 + udp_len);
    let ttl = if dst.ip().is_multicast() { 1 } else { 64 };
    p.extend_from_slice(&[0x45, 0]);
    p.extend_from_slice(&((20 + udp_len) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0x40, 0, ttl, 17, 0, 0]);
    p.extend_from_slice(&src.ip().octets());
    p.extend_from_slice(&dst.ip().octets());
    p.extend_from_slice(&src.port().to_be_bytes());
    p.extend_from_slice(&dst.port().to_be_bytes());
    p.extend_from_slice(&(udp_len as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(payload);
    p
}
