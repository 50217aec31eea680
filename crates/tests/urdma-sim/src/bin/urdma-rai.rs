//! `urdma-rai [-s SRC] [--numeric] [--route-only] [--family 4|6] DST`
//!
//! Calls the real librdmacm `rdma_getaddrinfo(DST, NULL, hints)` and prints
//! what came back, so tests can check what an RDMA application would get
//! from ibacm (and so from the provider):
//!
//! ```text
//! addrinfo family=inet flags=0x0 src=10.0.0.1 dst=10.0.0.2 route_len=72
//! route flags=0x2b sgid=fe80::1 dgid=fe80::2 pkey=0xffff mtu=4 rate=16 slid=0 dlid=0 reversible=1
//! ```
//! (`no route` instead of route lines when `ai_route` is empty.) Exit 0, or
//! 1 with the error when the call fails, 2 on bad usage.
//!
//! What librdmacm (rdma-core 44) needs on a host without RDMA, all met by
//! preloading `liburdma_sim.so` and giving the process a `/run` holding the
//! daemon's sockets:
//! * `ucma_init()` must succeed or `rdma_getaddrinfo` fails with EPERM /
//!   ENODEV. Its ABI check asks the RDMA netlink for the `rdma_cm` chardev,
//!   then reads `/sys/class/misc/rdma_cm/abi_version`; when neither exists it
//!   assumes the newest ABI, so nothing has to be faked. It then needs a
//!   non-empty `ibv_get_device_list()` (the sim's devices) and calls
//!   `ibv_get_device_guid` and `ibv_get_device_index` on each (the real
//!   `ibv_get_device_index` dereferences provider-private data and crashes on
//!   a simulated device, hence the sim defines it). Its AF_IB probe opens
//!   `/dev/infiniband/rdma_cm`, fails quietly, and AF_IB stays off, so no
//!   AF_IB `rdma_addrinfo` is prepended to the answer.
//! * The daemon is reached through `/run/ibacm.sock` (or TCP if
//!   `/run/ibacm.port` exists) — fixed paths, hence a private mount
//!   namespace whose `/run` is the daemon's run directory. A failed connect
//!   is silent and permanent for the process: the result then simply has no
//!   route.

use acm_prov_sys::{ibv_path_data, ibv_path_record};
use std::ffi::{c_char, c_int, c_void, CString};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;

/// Private to librdmacm (`cma.h`), not in the installed header.
const RAI_ROUTEONLY: c_int = 0x0100_0000;
const RAI_NUMERICHOST: c_int = 0x2;
const RDMA_PS_TCP: c_int = 0x0106;
const IBV_QPT_RC: c_int = 2;
const AF_IB: c_int = 27;

/// `struct rdma_addrinfo` from `<rdma/rdma_cma.h>`.
#[repr(C)]
struct RdmaAddrinfo {
    ai_flags: c_int,
    ai_family: c_int,
    ai_qp_type: c_int,
    ai_port_space: c_int,
    ai_src_len: libc::socklen_t,
    ai_dst_len: libc::socklen_t,
    ai_src_addr: *mut libc::sockaddr,
    ai_dst_addr: *mut libc::sockaddr,
    ai_src_canonname: *mut c_char,
    ai_dst_canonname: *mut c_char,
    ai_route_len: usize,
    ai_route: *mut c_void,
    ai_connect_len: usize,
    ai_connect: *mut c_void,
    ai_next: *mut RdmaAddrinfo,
}

/// Owned copy of one result, so the printing code needs no pointers.
struct Info {
    family: c_int,
    flags: c_int,
    src: Option<String>,
    dst: Option<String>,
    routes: Vec<ibv_path_data>,
    route_len: usize,
}

mod ffi {
    use super::*;

    #[link(name = "rdmacm")]
    extern "C" {
        fn rdma_getaddrinfo(
            node: *const c_char,
            service: *const c_char,
            hints: *const RdmaAddrinfo,
            res: *mut *mut RdmaAddrinfo,
        ) -> c_int;
        fn rdma_freeaddrinfo(res: *mut RdmaAddrinfo);
    }

    pub fn getaddrinfo(
        node: &str,
        flags: c_int,
        family: c_int,
        src: Option<IpAddr>,
    ) -> Result<Vec<Info>, String> {
        let node = CString::new(node).map_err(|e| e.to_string())?;
        let mut src_storage: libc::sockaddr_storage = zeroed_storage();
        let src_len = src.map(|ip| fill_sockaddr(&mut src_storage, ip));
        let hints = RdmaAddrinfo {
            ai_flags: flags,
            ai_family: family,
            ai_qp_type: IBV_QPT_RC,
            ai_port_space: RDMA_PS_TCP,
            ai_src_len: src_len.unwrap_or(0),
            ai_dst_len: 0,
            ai_src_addr: if src_len.is_some() {
                (&mut src_storage as *mut libc::sockaddr_storage).cast()
            } else {
                std::ptr::null_mut()
            },
            ai_dst_addr: std::ptr::null_mut(),
            ai_src_canonname: std::ptr::null_mut(),
            ai_dst_canonname: std::ptr::null_mut(),
            ai_route_len: 0,
            ai_route: std::ptr::null_mut(),
            ai_connect_len: 0,
            ai_connect: std::ptr::null_mut(),
            ai_next: std::ptr::null_mut(),
        };
        let mut res: *mut RdmaAddrinfo = std::ptr::null_mut();
        // SAFETY: `node` and `hints` (and the sockaddr it points to) outlive
        // the call; `res` is a valid out-pointer.
        let rc = unsafe { rdma_getaddrinfo(node.as_ptr(), std::ptr::null(), &hints, &mut res) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let mut out = Vec::new();
        let mut cur = res;
        while !cur.is_null() {
            // SAFETY: `cur` is a node of the list librdmacm returned, alive
            // until rdma_freeaddrinfo below.
            let ai = unsafe { &*cur };
            let count = ai.ai_route_len / std::mem::size_of::<ibv_path_data>();
            let routes = if ai.ai_route.is_null() || count == 0 {
                Vec::new()
            } else {
                // SAFETY: librdmacm stores `ai_route_len` bytes of
                // `struct ibv_path_data` at `ai_route`; read_unaligned
                // copies each out without assuming alignment.
                (0..count)
                    .map(|i| unsafe { ai.ai_route.cast::<ibv_path_data>().add(i).read_unaligned() })
                    .collect()
            };
            out.push(Info {
                family: ai.ai_family,
                flags: ai.ai_flags,
                // SAFETY: librdmacm sets each address pointer together with
                // its length; sockaddr_text checks the length it reads.
                src: unsafe { sockaddr_text(ai.ai_src_addr, ai.ai_src_len) },
                // SAFETY: as above.
                dst: unsafe { sockaddr_text(ai.ai_dst_addr, ai.ai_dst_len) },
                routes,
                route_len: ai.ai_route_len,
            });
            cur = ai.ai_next;
        }
        // SAFETY: `res` came from a successful rdma_getaddrinfo and is freed once.
        unsafe { rdma_freeaddrinfo(res) };
        Ok(out)
    }

    pub fn gid_raw(gid: &acm_prov_sys::ibv_gid) -> [u8; 16] {
        // SAFETY: the union is 16 plain bytes; any bit pattern is a valid
        // [u8; 16].
        unsafe { gid.raw }
    }

    fn zeroed_storage() -> libc::sockaddr_storage {
        // SAFETY: sockaddr_storage is plain bytes; all-zero is valid.
        unsafe { std::mem::zeroed() }
    }

    fn fill_sockaddr(storage: &mut libc::sockaddr_storage, ip: IpAddr) -> libc::socklen_t {
        match ip {
            IpAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: 0,
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is large and aligned enough for
                // any sockaddr type.
                unsafe {
                    std::ptr::from_mut(storage)
                        .cast::<libc::sockaddr_in>()
                        .write(sin)
                };
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
            }
            IpAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: 0,
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.octets(),
                    },
                    sin6_scope_id: 0,
                };
                // SAFETY: as above.
                unsafe {
                    std::ptr::from_mut(storage)
                        .cast::<libc::sockaddr_in6>()
                        .write(sin6)
                };
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
            }
        }
    }

    /// # Safety
    /// `addr` is NULL or points to at least `len` readable bytes.
    unsafe fn sockaddr_text(addr: *const libc::sockaddr, len: libc::socklen_t) -> Option<String> {
        let len = len as usize;
        if addr.is_null() || len < std::mem::size_of::<libc::sa_family_t>() {
            return None;
        }
        let family = c_int::from(addr.read_unaligned().sa_family);
        Some(match family {
            libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
                let sin = addr.cast::<libc::sockaddr_in>().read_unaligned();
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()).to_string()
            }
            libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
                let sin6 = addr.cast::<libc::sockaddr_in6>().read_unaligned();
                Ipv6Addr::from(sin6.sin6_addr.s6_addr).to_string()
            }
            // sockaddr_ib: family(2) pkey(2) flowinfo(4) then the 16-byte GID.
            AF_IB if len >= 24 => {
                let gid = addr.cast::<u8>().add(8).cast::<[u8; 16]>().read_unaligned();
                format!("ib:{}", Ipv6Addr::from(gid))
            }
            other => format!("family{other}"),
        })
    }
}

fn family_name(family: c_int) -> String {
    match family {
        libc::AF_INET => "inet".into(),
        libc::AF_INET6 => "inet6".into(),
        AF_IB => "ib".into(),
        other => other.to_string(),
    }
}

fn route_line(route: &ibv_path_data) -> String {
    let path: &ibv_path_record = &route.path;
    let sgid = Ipv6Addr::from(ffi::gid_raw(&path.sgid));
    let dgid = Ipv6Addr::from(ffi::gid_raw(&path.dgid));
    format!(
        "route flags={:#x} sgid={sgid} dgid={dgid} pkey={:#06x} mtu={} rate={} slid={} dlid={} reversible={}",
        route.flags,
        u16::from_be(path.pkey),
        path.mtu & 0x3f,
        path.rate & 0x3f,
        u16::from_be(path.slid),
        u16::from_be(path.dlid),
        path.reversible_numpath >> 7,
    )
}

struct Args {
    dst: String,
    src: Option<IpAddr>,
    flags: c_int,
    family: c_int,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut dst = None;
    let mut src = None;
    let mut flags = 0;
    let mut family = 0;
    while let Some(a) = args.next() {
        match a.as_str() {
            "-s" => {
                let v = args.next().ok_or("-s needs an address")?;
                src = Some(v.parse().map_err(|_| format!("bad source address `{v}`"))?);
            }
            "--numeric" => flags |= RAI_NUMERICHOST,
            "--route-only" => flags |= RAI_ROUTEONLY,
            "--family" => {
                family = match args.next().as_deref() {
                    Some("4") => libc::AF_INET,
                    Some("6") => libc::AF_INET6,
                    _ => return Err("--family takes 4 or 6".into()),
                }
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown option `{s}`")),
            _ if dst.is_some() => return Err("only one destination".into()),
            _ => dst = Some(a),
        }
    }
    Ok(Args {
        dst: dst.ok_or("missing destination")?,
        src,
        flags,
        family,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("urdma-rai: {e}");
            }
            eprintln!("usage: urdma-rai [-s SRC] [--numeric] [--route-only] [--family 4|6] DST");
            return ExitCode::from(2);
        }
    };
    match ffi::getaddrinfo(&args.dst, args.flags, args.family, args.src) {
        Ok(infos) => {
            for info in &infos {
                println!(
                    "addrinfo family={} flags={:#x} src={} dst={} route_len={}",
                    family_name(info.family),
                    info.flags,
                    info.src.as_deref().unwrap_or("-"),
                    info.dst.as_deref().unwrap_or("-"),
                    info.route_len,
                );
                if info.routes.is_empty() {
                    println!("no route");
                }
                for r in &info.routes {
                    println!("{}", route_line(r));
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("rdma_getaddrinfo failed: {e}");
            ExitCode::from(1)
        }
    }
}
