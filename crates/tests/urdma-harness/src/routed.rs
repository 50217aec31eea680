//! Two subnets joined by a router that forwards IPv4 and IPv6, and a real
//! DNS server (dnsmasq) on the router: hosts of the far subnet are reached
//! by unicast through the router, and named only in DNS, since the
//! discovery groups (link-scoped multicast) do not cross it.

use crate::nodes::Node;
use crate::{Host, HostConfig, Net};
use std::fs;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The router's addresses on the near subnet (10.0.0.0/24, fd00::/64)
/// and on the far one (10.0.1.0/24, fd01::/64).
pub const ROUTER_NEAR: [&str; 2] = ["10.0.0.254", "fd00::fe"];
pub const ROUTER_FAR: [&str; 2] = ["10.0.1.254", "fd01::fe"];
/// Where a DNS server listens that never answers.
pub const SILENT_DNS: &str = "10.0.0.253";

pub struct Routed {
    pub near: Net,
    pub far: Net,
    pub router: Host,
    servers: Vec<Child>,
}

impl Routed {
    /// The two subnets and the router, with dnsmasq answering for
    /// `records` (`--host-record` values: `NAME,ADDRESS[,ADDRESS]`) on the
    /// router's near address, and a DNS server that never answers on
    /// [`SILENT_DNS`].
    pub fn new(records: &[&str]) -> Routed {
        let (near, far) = (Net::new(), Net::new());
        let router = Host::bare();
        near.attach(
            &router,
            "near",
            &[
                &format!("{}/24", ROUTER_NEAR[0]),
                &format!("{}/64", ROUTER_NEAR[1]),
                &format!("{SILENT_DNS}/24"),
            ],
        );
        far.attach(
            &router,
            "far",
            &[
                &format!("{}/24", ROUTER_FAR[0]),
                &format!("{}/64", ROUTER_FAR[1]),
            ],
        );
        for key in ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"] {
            let (code, out) = router.exec(&["sysctl", "-qw", key]);
            assert_eq!(code, 0, "sysctl {key}: {out}");
        }
        let mut routed = Routed {
            near,
            far,
            router,
            servers: Vec::new(),
        };
        let mut dnsmasq = vec![
            "dnsmasq".to_string(),
            "--keep-in-foreground".into(),
            "--conf-file=/dev/null".into(),
            "--no-resolv".into(),
            "--no-hosts".into(),
            // Authoritative for the tests' domain, as a site's DNS is: a
            // name it has no record of does not exist (NXDOMAIN).
            "--local=/test/".into(),
            "--bind-interfaces".into(),
            format!("--listen-address={}", ROUTER_NEAR[0]),
            "--user=root".into(),
            "--log-facility=-".into(),
            format!("--pid-file={}", routed.router.path("dnsmasq.pid").display()),
        ];
        dnsmasq.extend(records.iter().map(|r| format!("--host-record={r}")));
        let silent = format!(
            "import socket, time\n\
             s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
             s.bind(('{SILENT_DNS}', 53))\n\
             time.sleep(3600)\n"
        );
        let silent = vec!["python3".to_string(), "-c".into(), silent];
        for argv in [dnsmasq, silent] {
            let child = Command::new("ip")
                .args(["netns", "exec", &routed.router.netns])
                .args(&argv)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", argv[0]));
            routed.servers.push(child);
        }
        routed.wait_for_dns(records);
        routed
    }

    /// Waits until the DNS server answers for the first record.
    fn wait_for_dns(&self, records: &[&str]) {
        let Some(name) = records.first().and_then(|r| r.split(',').next()) else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let probe = format!("import socket\nsocket.getaddrinfo('{name}', 0)\n");
        let resolv = self.router.path("run/resolv.conf");
        fs::write(&resolv, format!("nameserver {}\n", ROUTER_NEAR[0])).expect("resolv.conf");
        loop {
            let (code, _) = self.router.exec(&["python3", "-c", &probe]);
            if code == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "dnsmasq does not answer for {name}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts `node` on the near subnet (`far`: on the far one, with its
    /// addresses in 10.0.1.0/24 and fd01::/64), routed through the router,
    /// asking the DNS server at `nameserver`, with `opts`.
    pub fn start(&self, node: Node, far: bool, nameserver: &str, opts: &[&str]) -> Host {
        let mut cfg = node.config(opts);
        let router = if far { ROUTER_FAR } else { ROUTER_NEAR };
        if far {
            cfg = on_far_subnet(cfg);
        }
        let host = Host::bare();
        let net = if far { &self.far } else { &self.near };
        let addrs: Vec<&str> = cfg.ip_addrs.iter().map(String::as_str).collect();
        net.attach(&host, "eth0", &addrs);
        for (family, via) in [("-4", router[0]), ("-6", router[1])] {
            let (code, out) = host.exec(&["ip", family, "route", "add", "default", "via", via]);
            assert_eq!(code, 0, "default route via {via}: {out}");
        }
        // A datagram to the router from each address, so the router knows
        // the host's link-layer address before it forwards the first query
        // (IPv6 neighbour discovery would otherwise hold it for a second).
        let prime = format!(
            "import socket\n\
             for fam, to in ((socket.AF_INET, '{}'), (socket.AF_INET6, '{}')):\n\
             \x20   socket.socket(fam, socket.SOCK_DGRAM).sendto(b'x', (to, 9))\n",
            router[0], router[1]
        );
        let (code, out) = host.exec(&["python3", "-c", &prime]);
        assert_eq!(code, 0, "priming the router: {out}");
        let resolv = format!("nameserver {nameserver}\noptions timeout:5 attempts:2\n");
        fs::write(host.path("run/resolv.conf"), resolv).expect("resolv.conf");
        host.launch(&cfg);
        host
    }
}

/// `cfg` with the near subnet's addresses moved to the far subnet.
fn on_far_subnet(mut cfg: HostConfig) -> HostConfig {
    let far = |s: &String| s.replace("10.0.0.", "10.0.1.").replace("fd00::", "fd01::");
    cfg.ip_addrs = cfg.ip_addrs.iter().map(far).collect();
    cfg.addr_lines = cfg.addr_lines.iter().map(far).collect();
    cfg
}

impl Drop for Routed {
    fn drop(&mut self) {
        for child in &mut self.servers {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
