//! The discovery sockets: one UDP socket per address family on the
//! discovery port, the multicast groups on every interface, and ICMP errors
//! read from the sockets' error queues so an unreachable peer fails a lookup
//! at once. Safe Rust over `std` and `nix`.

use crate::discovery::seal::Sealing;
use crate::discovery::wire::{RECV_BUF_LEN, V4_GROUP, V6_GROUP};
use crate::discovery::{Datagram, Families, Family};
use nix::ifaddrs::getifaddrs;
use nix::net::if_::{if_nametoindex, InterfaceFlags};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    bind, recvmsg, sendmsg, setsockopt, socket, sockopt, AddressFamily, ControlMessage,
    ControlMessageOwned, MsgFlags, SockFlag, SockProtocol, SockType, SockaddrIn, SockaddrIn6,
    SockaddrStorage,
};
use std::collections::HashSet;
use std::io::{self, IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `SO_EE_ORIGIN_ICMP` / `SO_EE_ORIGIN_ICMP6`: the error came from the
/// network, not from the local stack.
const ORIGIN_ICMP: u8 = 2;
const ORIGIN_ICMP6: u8 = 3;
/// Interfaces are listed again at most this often (new addresses, links).
const IFACE_REFRESH: Duration = Duration::from_secs(1);
/// Datagrams read per socket per wake-up, so one busy socket cannot starve
/// the timers.
const READ_BATCH: usize = 256;

/// Something that arrived on the discovery sockets.
#[derive(Debug)]
pub enum NetEvent {
    Datagram {
        from: SocketAddr,
        /// The address the datagram was sent to.
        to: Option<IpAddr>,
        bytes: Vec<u8>,
    },
    /// An ICMP error for a datagram this host sent to `dest`.
    Unreachable { dest: SocketAddr, payload: Vec<u8> },
}

#[derive(Default)]
struct Interfaces {
    listed: Option<Instant>,
    /// (index, IPv4 addresses, has IPv6)
    list: Vec<(u32, Vec<Ipv4Addr>, bool)>,
    joined_v4: HashSet<Ipv4Addr>,
    joined_v6: HashSet<u32>,
}

pub struct Net {
    v4: UdpSocket,
    v6: Option<UdpSocket>,
    port: u16,
    /// Seals each datagram as it leaves (authentication on): each copy of
    /// a multicast datagram on its own, so a receiver that gets two (one
    /// per group) never takes the second for a replay.
    /// How datagrams leave: set at open, or once later, when a key file
    /// refused at start was mended.
    sealing: std::sync::OnceLock<Sealing>,
    wake_tx: UnixDatagram,
    wake_rx: UnixDatagram,
    interfaces: Mutex<Interfaces>,
}

/// Receive buffer of each discovery socket: at a job start every host asks
/// this one at once, each query 640 bytes, about 2.3 kB of socket memory
/// with its overhead. The kernel's default (212,992 bytes) holds about 90
/// of them, and the rest of a 256-host burst was dropped and asked again
/// 500 ms later; 4 MiB holds about 1,800.
const RECV_BUFFER: usize = 4 << 20;

fn udp_socket(family: AddressFamily, port: u16) -> io::Result<UdpSocket> {
    let fd: OwnedFd = socket(
        family,
        SockType::Datagram,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        SockProtocol::Udp,
    )?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    // The daemon runs as root, so past net.core.rmem_max; else up to it.
    if setsockopt(&fd, sockopt::RcvBufForce, &RECV_BUFFER).is_err() {
        setsockopt(&fd, sockopt::RcvBuf, &RECV_BUFFER)?;
    }
    if family == AddressFamily::Inet {
        setsockopt(&fd, sockopt::Ipv4PacketInfo, &true)?;
        setsockopt(&fd, sockopt::Ipv4RecvErr, &true)?;
        setsockopt(&fd, sockopt::IpMulticastTtl, &1)?;
        setsockopt(&fd, sockopt::IpMulticastLoop, &false)?;
        bind(
            fd.as_raw_fd(),
            &SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)),
        )?;
    } else {
        // Separate sockets per family, so IPv4 never arrives v4-mapped.
        setsockopt(&fd, sockopt::Ipv6V6Only, &true)?;
        setsockopt(&fd, sockopt::Ipv6RecvPacketInfo, &true)?;
        setsockopt(&fd, sockopt::Ipv6RecvErr, &true)?;
        setsockopt(&fd, sockopt::Ipv6MulticastHops, &1)?;
        bind(
            fd.as_raw_fd(),
            &SockaddrIn6::from(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0)),
        )?;
    }
    let s = UdpSocket::from(fd);
    if family == AddressFamily::Inet6 {
        s.set_multicast_loop_v6(false)?;
    }
    Ok(s)
}

fn std_addr(s: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(a) = s.as_sockaddr_in() {
        Some(SocketAddr::V4(SocketAddrV4::from(*a)))
    } else {
        s.as_sockaddr_in6()
            .map(|a| SocketAddr::V6(SocketAddrV6::from(*a)))
    }
}

impl Net {
    /// Seals what leaves from now on with `sealing`; false if it already
    /// was sealed (a key in force is changed through the keyring).
    pub fn seal_with(&self, sealing: Sealing) -> bool {
        self.sealing.set(sealing).is_ok()
    }

    fn seal<'a>(&self, bytes: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        match self.sealing.get() {
            Some(s) => s.copy(bytes),
            None => bytes.into(),
        }
    }

    pub fn open(port: u16, sealing: Sealing) -> io::Result<Net> {
        let v4 = udp_socket(AddressFamily::Inet, port)?;
        let v6 = match udp_socket(AddressFamily::Inet6, port) {
            Ok(s) => Some(s),
            Err(e) => {
                log::warn!("discovery: no IPv6 socket on port {port}: {e}; IPv4 only");
                None
            }
        };
        let (wake_tx, wake_rx) = UnixDatagram::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        let net = Net {
            v4,
            v6,
            port,
            sealing: {
                let cell = std::sync::OnceLock::new();
                if sealing.on() {
                    let _ = cell.set(sealing);
                }
                cell
            },
            wake_tx,
            wake_rx,
            interfaces: Mutex::default(),
        };
        net.refresh_interfaces(true);
        Ok(net)
    }

    /// The families this host can send discovery datagrams on.
    pub fn families(&self) -> Families {
        Families {
            v4: true,
            v6: self.v6.is_some(),
        }
    }

    /// Makes a `poll` in progress return.
    pub fn wake(&self) {
        let _ = self.wake_tx.send(&[1]);
    }

    /// Lists interfaces and joins the discovery groups on new ones.
    fn refresh_interfaces(&self, force: bool) {
        let mut ifs = self.interfaces.lock().unwrap_or_else(|p| p.into_inner());
        if !force && ifs.listed.is_some_and(|t| t.elapsed() < IFACE_REFRESH) {
            return;
        }
        ifs.listed = Some(Instant::now());
        let Ok(addrs) = getifaddrs() else { return };
        let mut list: Vec<(u32, Vec<Ipv4Addr>, bool)> = Vec::new();
        for a in addrs {
            let usable = a.flags.contains(InterfaceFlags::IFF_UP)
                && a.flags.contains(InterfaceFlags::IFF_MULTICAST)
                && !a.flags.contains(InterfaceFlags::IFF_LOOPBACK);
            let Some(addr) = a.address.as_ref().and_then(std_addr).filter(|_| usable) else {
                continue;
            };
            let Ok(index) = if_nametoindex(a.interface_name.as_str()) else {
                continue;
            };
            let pos = match list.iter().position(|(i, _, _)| *i == index) {
                Some(p) => p,
                None => {
                    list.push((index, Vec::new(), false));
                    list.len() - 1
                }
            };
            match addr.ip() {
                IpAddr::V4(v4) => list[pos].1.push(v4),
                IpAddr::V6(_) => list[pos].2 = true,
            }
        }
        for (index, v4s, has_v6) in &list {
            if let Some(first) = v4s.first() {
                if ifs.joined_v4.insert(*first) {
                    if let Err(e) = self.v4.join_multicast_v4(&V4_GROUP, first) {
                        log::debug!("discovery: cannot join {V4_GROUP} on {first}: {e}");
                    }
                }
            }
            if let (true, Some(v6)) = (*has_v6, &self.v6) {
                if ifs.joined_v6.insert(*index) {
                    if let Err(e) = v6.join_multicast_v6(&V6_GROUP, *index) {
                        log::debug!("discovery: cannot join {V6_GROUP} on interface {index}: {e}");
                    }
                }
            }
        }
        ifs.list = list;
    }

    fn socket_for(&self, ip: IpAddr) -> Option<&UdpSocket> {
        match ip {
            IpAddr::V4(_) => Some(&self.v4),
            IpAddr::V6(_) => self.v6.as_ref(),
        }
    }

    /// Sends one datagram; failures are logged, never fatal: the lookup's
    /// retries and timeout cover a lost send.
    pub fn send(&self, d: &Datagram) {
        let result = match d {
            Datagram::Unicast { to, from, bytes } => {
                let bytes = self.seal(bytes);
                let pinned = from.map(|src| self.send_from(*to, src, &bytes));
                match pinned {
                    Some(Ok(())) => Ok(()),
                    // Not an address of this host (an address file can
                    // list one no interface has): the kernel's choice.
                    Some(Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => {
                        self.send_to(*to, &bytes)
                    }
                    Some(Err(e)) => Err(e),
                    None => self.send_to(*to, &bytes),
                }
            }
            Datagram::Multicast { family, bytes } => {
                self.send_multicast(*family, bytes);
                Ok(())
            }
        };
        if let Err(e) = result {
            log::trace!("discovery: send failed: {e}");
        }
    }

    fn send_to(&self, to: SocketAddr, bytes: &[u8]) -> io::Result<()> {
        match self.socket_for(to.ip()) {
            Some(s) => s.send_to(bytes, to).map(|_| ()),
            None => Err(io::ErrorKind::Unsupported.into()),
        }
    }

    fn send_from(&self, to: SocketAddr, src: IpAddr, bytes: &[u8]) -> io::Result<()> {
        let iov = [IoSlice::new(bytes)];
        match (to, src) {
            (SocketAddr::V4(dst), IpAddr::V4(s)) => {
                let info = libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from(s).to_be(),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                let cmsg = [ControlMessage::Ipv4PacketInfo(&info)];
                sendmsg(
                    self.v4.as_raw_fd(),
                    &iov,
                    &cmsg,
                    MsgFlags::empty(),
                    Some(&SockaddrIn::from(dst)),
                )?;
            }
            (SocketAddr::V6(dst), IpAddr::V6(s)) => {
                let v6 = self.v6.as_ref().ok_or(io::ErrorKind::Unsupported)?;
                let info = libc::in6_pktinfo {
                    ipi6_addr: libc::in6_addr {
                        s6_addr: s.octets(),
                    },
                    ipi6_ifindex: 0,
                };
                let cmsg = [ControlMessage::Ipv6PacketInfo(&info)];
                sendmsg(
                    v6.as_raw_fd(),
                    &iov,
                    &cmsg,
                    MsgFlags::empty(),
                    Some(&SockaddrIn6::from(dst)),
                )?;
            }
            _ => return Err(io::ErrorKind::InvalidInput.into()),
        }
        Ok(())
    }

    /// To both groups on every interface: the link scope keeps each copy on
    /// its own segment, so every segment must get one.
    fn send_multicast(&self, family: Family, bytes: &[u8]) {
        self.refresh_interfaces(false);
        let list = self
            .interfaces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .list
            .clone();
        for (index, v4s, has_v6) in list {
            if let (Family::V4, Some(src)) = (family, v4s.first()) {
                let copy = self.seal(bytes);
                let iov = [IoSlice::new(&copy)];
                let info = libc::in_pktinfo {
                    ipi_ifindex: index as i32,
                    ipi_spec_dst: libc::in_addr {
                        s_addr: u32::from(*src).to_be(),
                    },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                let group = SockaddrIn::from(SocketAddrV4::new(V4_GROUP, self.port));
                let cmsg = [ControlMessage::Ipv4PacketInfo(&info)];
                if let Err(e) = sendmsg(
                    self.v4.as_raw_fd(),
                    &iov,
                    &cmsg,
                    MsgFlags::empty(),
                    Some(&group),
                ) {
                    log::trace!("discovery: multicast on interface {index} failed: {e}");
                }
            }
            if let (Family::V6, true, Some(v6)) = (family, has_v6, &self.v6) {
                let group = SocketAddrV6::new(V6_GROUP, self.port, 0, index);
                if let Err(e) = v6.send_to(&self.seal(bytes), group) {
                    log::trace!("discovery: multicast on interface {index} failed: {e}");
                }
            }
        }
    }

    /// Waits up to `timeout` for traffic (or a wake-up) and returns what
    /// arrived.
    pub fn poll(&self, timeout: Duration) -> Vec<NetEvent> {
        let mut sockets: Vec<&UdpSocket> = vec![&self.v4];
        sockets.extend(self.v6.as_ref());
        let mut fds: Vec<PollFd> = sockets
            .iter()
            .map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN))
            .chain(std::iter::once(PollFd::new(
                self.wake_rx.as_fd(),
                PollFlags::POLLIN,
            )))
            .collect();
        let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
        if poll(&mut fds, timeout).is_err() {
            return Vec::new();
        }
        let ready: Vec<PollFlags> = fds
            .iter()
            .map(|f| f.revents().unwrap_or(PollFlags::empty()))
            .collect();
        drop(fds);
        let mut events = Vec::new();
        for (s, r) in sockets.iter().zip(&ready) {
            if r.contains(PollFlags::POLLERR) {
                read_errors(s, &mut events);
            }
            if r.contains(PollFlags::POLLIN) {
                read_datagrams(s, &mut events);
            }
        }
        if ready.last().is_some_and(|r| r.contains(PollFlags::POLLIN)) {
            let mut b = [0u8; 64];
            while self.wake_rx.recv(&mut b).is_ok() {}
        }
        events
    }
}

/// Reads up to a batch of datagrams, from the socket's queue or (with
/// `MSG_ERRQUEUE`) its error queue, handing each one's address, control
/// messages and bytes to `event`.
fn drain(
    s: &UdpSocket,
    flags: MsgFlags,
    events: &mut Vec<NetEvent>,
    mut event: impl FnMut(SocketAddr, &[ControlMessageOwned], &[u8]) -> Option<NetEvent>,
) {
    let mut buf = [0u8; RECV_BUF_LEN];
    for _ in 0..READ_BATCH {
        // Room for every control message either queue carries at once: an
        // error comes with the packet info too (too small a buffer makes
        // the kernel cut them all, MSG_CTRUNC).
        let mut cmsg = nix::cmsg_space!(
            libc::in6_pktinfo,
            libc::in_pktinfo,
            libc::sock_extended_err,
            libc::sockaddr_in6
        );
        let mut iov = [IoSliceMut::new(&mut buf)];
        let Ok(m) = recvmsg::<SockaddrStorage>(
            s.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            flags | MsgFlags::MSG_DONTWAIT,
        ) else {
            return;
        };
        let addr = m.address.as_ref().and_then(std_addr);
        let cmsgs: Vec<ControlMessageOwned> = m.cmsgs().map(|c| c.collect()).unwrap_or_default();
        let len = m.bytes;
        if let Some(e) = addr.and_then(|a| event(a, &cmsgs, &buf[..len])) {
            events.push(e);
        }
    }
}

fn read_datagrams(s: &UdpSocket, events: &mut Vec<NetEvent>) {
    drain(s, MsgFlags::empty(), events, |from, cmsgs, bytes| {
        let to = cmsgs.iter().find_map(|c| match c {
            ControlMessageOwned::Ipv4PacketInfo(pi) => {
                Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(pi.ipi_addr.s_addr))))
            }
            ControlMessageOwned::Ipv6PacketInfo(pi) => {
                Some(IpAddr::V6(Ipv6Addr::from(pi.ipi6_addr.s6_addr)))
            }
            _ => None,
        });
        Some(NetEvent::Datagram {
            from,
            to,
            bytes: bytes.to_vec(),
        })
    });
}

/// The error queue holds the datagrams an ICMP error came back for, with
/// their destination as the address.
fn read_errors(s: &UdpSocket, events: &mut Vec<NetEvent>) {
    drain(s, MsgFlags::MSG_ERRQUEUE, events, |dest, cmsgs, payload| {
        let from_network = cmsgs.iter().any(|c| match c {
            ControlMessageOwned::Ipv4RecvErr(e, _) => e.ee_origin == ORIGIN_ICMP,
            ControlMessageOwned::Ipv6RecvErr(e, _) => e.ee_origin == ORIGIN_ICMP6,
            _ => false,
        });
        from_network.then(|| NetEvent::Unreachable {
            dest,
            payload: payload.to_vec(),
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_sockets_have_room_for_a_burst_of_queries() {
        let s = udp_socket(AddressFamily::Inet, 0).expect("socket");
        let got = nix::sys::socket::getsockopt(&s, sockopt::RcvBuf).expect("SO_RCVBUF");
        // Past the default even where rmem_max caps it (not root).
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(212_992);
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let root = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0");
        let want = if root {
            RECV_BUFFER
        } else {
            RECV_BUFFER.min(rmem_max)
        };
        assert!(got >= want, "SO_RCVBUF {got} < {want}");
    }
}
