//! Simulated hosts for the scenarios with several daemons: who each host
//! is, and the checks those scenarios share. One numbering for every
//! scenario, so that an address, name or GID in a failure message says
//! which host it was, whatever the test.
//!
//! Host N (1, 2, 3 = A, B, C) has 10.0.0.N, fd00::N and the name `node-x`
//! (x = a, b, c) on its urdma0 port 1, whose GID is `fe80::` + EUI-64 of
//! the sim MAC 52:54:00:00:GG:0x (GG: the generation, bumped when the host
//! restarts with new hardware).

use crate::{Host, HostConfig, Net, PathInfo};
use std::time::{Duration, Instant};

/// Generous: the daemons answer in milliseconds, CI machines can be slow.
pub const WAIT: Duration = Duration::from_secs(10);

/// The discovery port every daemon listens on.
pub const DISCOVERY_PORT: u16 = 6126;

/// One simulated host's identity.
#[derive(Clone, Copy)]
pub struct Node {
    pub n: u8,
    /// Bumped to give the host a new device (MAC, hence GID).
    pub generation: u8,
}

impl Node {
    pub const A: Node = Node::new(1);
    pub const B: Node = Node::new(2);
    pub const C: Node = Node::new(3);

    pub const fn new(n: u8) -> Node {
        Node { n, generation: 0 }
    }

    pub fn next_generation(self) -> Node {
        Node {
            generation: self.generation + 1,
            ..self
        }
    }

    pub fn ip4(&self) -> String {
        format!("10.0.0.{}", self.n)
    }

    pub fn ip6(&self) -> String {
        format!("fd00::{}", self.n)
    }

    pub fn name(&self) -> String {
        format!("node-{}", char::from(b'a' + self.n - 1))
    }

    pub fn mac(&self) -> String {
        format!("52:54:00:00:{:02x}:{:02x}", self.generation, 9 + self.n)
    }

    /// The port GID as `ib_acme` prints it (inet_ntop).
    pub fn gid(&self) -> String {
        let low = (u16::from(self.generation) << 8) | u16::from(9 + self.n);
        format!("fe80::5054:ff:fe00:{low:x}")
    }

    /// One urdma0 port 1 with this node's MAC, its addresses and name on
    /// it, the addresses also on the bridge interface, and `opts`.
    pub fn config(&self, opts: &[&str]) -> HostConfig {
        let mut cfg = HostConfig::default()
            .ip_addrs(&[&format!("{}/24", self.ip4()), &format!("{}/64", self.ip6())])
            .addr_lines(&[
                &format!("{} urdma0 1 default", self.ip4()),
                &format!("{} urdma0 1 default", self.ip6()),
                &format!("{} urdma0 1 default", self.name()),
            ])
            .sim_config(&format!(
                "device urdma0\n  mac {}\n  node_desc URDMA Virtual HCA\n  port 1\n",
                self.mac()
            ));
        for o in opts {
            cfg = cfg.opt(o);
        }
        cfg
    }

    pub fn start(&self, net: &Net, opts: &[&str]) -> Host {
        Host::start_on(net, "eth0", self.config(opts))
    }
}

/// B (node 2) with `extra` more IPv4 addresses 10.0.0.101.. on its urdma
/// endpoint, so that each is a lookup of its own for the asker. Returns
/// the host and those addresses.
pub fn b_with_addresses(net: &Net, extra: usize, opts: &[&str]) -> (Host, Vec<String>) {
    let mut cfg = Node::B.config(opts);
    let ips: Vec<String> = (0..extra).map(|i| format!("10.0.0.{}", 101 + i)).collect();
    for ip in &ips {
        cfg.ip_addrs.push(format!("{ip}/24"));
        cfg.addr_lines.push(format!("{ip} urdma0 1 default"));
    }
    let b = Host::start_on(net, "eth0", cfg);
    if let Some(last) = ips.last() {
        b.expect_log(
            &format!("urdma: endpoint pkey 0xffff: address {last}"),
            WAIT,
        );
    }
    (b, ips)
}

/// Runs `ib_acme ARGS` on `host`, which must succeed with a path from
/// `sgid` to `dgid`. Returns the output.
pub fn resolve(host: &Host, args: &[&str], dgid: &str, sgid: &str) -> String {
    let (path, out) = host.acme_path(args);
    assert_eq!(path.get("dgid"), dgid, "dgid of ib_acme {args:?}:\n{out}");
    assert_eq!(path.get("sgid"), sgid, "sgid of ib_acme {args:?}:\n{out}");
    for (field, value) in [("pkey", "0xffff"), ("reversible", "1"), ("mtu", "5")] {
        assert_eq!(
            path.get(field),
            value,
            "{field} of ib_acme {args:?}:\n{out}"
        );
    }
    out
}

/// Runs `ib_acme ARGS`, which must fail with `error` (a strerror text).
pub fn resolve_fails(host: &Host, args: &[&str], error: &str) -> String {
    let (code, out) = host.acme(args);
    assert_ne!(code, 0, "ib_acme {args:?} should fail:\n{out}");
    assert!(
        out.contains(&format!("failed: {error}")),
        "ib_acme {args:?} should fail with `{error}`:\n{out}"
    );
    assert!(!out.contains("Path information"), "{out}");
    out
}

/// Runs `f` and returns its result and how long it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let r = f();
    (r, started.elapsed())
}

/// Resolves with `args` until the path leads to `dgid`, for up to `WAIT`.
/// Returns how long that took; panics with the last output otherwise.
pub fn poll_until_resolved(host: &Host, args: &[&str], dgid: &str) -> Duration {
    let started = Instant::now();
    loop {
        let (code, out) = host.acme(args);
        if code == 0 && PathInfo::parse(&out).0.get("dgid").map(String::as_str) == Some(dgid) {
            return started.elapsed();
        }
        if started.elapsed() > WAIT {
            panic!(
                "ib_acme {args:?} did not resolve to {dgid} within {WAIT:?}; last:\n{out}\n{}",
                host.diagnostics()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `resolve` from node `from`'s host to node `to`.
pub fn resolve_node(host: &Host, from: Node, to: Node, args: &[&str]) -> String {
    resolve(host, args, &to.gid(), &from.gid())
}

/// `from`'s host resolves `to` by IPv4 address (the daemon picking the
/// source) and by name.
pub fn resolves_by_address_and_name(host: &Host, from: Node, to: Node) {
    resolve_node(host, from, to, &["-f", "i", "-d", &to.ip4()]);
    let (src, dst) = (from.name(), to.name());
    resolve_node(host, from, to, &["-f", "n", "-s", &src, "-d", &dst]);
}

/// [`resolves_by_address_and_name`], then by IPv6 address.
pub fn resolves_by_every_kind(host: &Host, from: Node, to: Node) {
    resolves_by_address_and_name(host, from, to);
    let (src, dst) = (from.ip6(), to.ip6());
    resolve_node(host, from, to, &["-f", "i", "-s", &src, "-d", &dst]);
}

/// Makes `ip` a neighbour of `host`'s `eth0` that exists (a permanent
/// entry: no ARP failure, so no ICMP error) but never answers.
pub fn add_silent_neighbour(host: &Host, ip: &str) {
    let (code, out) = host.exec(&[
        "ip",
        "neigh",
        "add",
        ip,
        "lladdr",
        "52:54:00:99:99:99",
        "nud",
        "permanent",
        "dev",
        "eth0",
    ]);
    assert_eq!(code, 0, "ip neigh add {ip}: {out}");
}
