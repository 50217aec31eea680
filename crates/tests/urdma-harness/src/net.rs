//! One Ethernet segment for several hosts: a bridge in a namespace of its
//! own, each host joined to it by a veth pair.
//!
//! The provider discovers its peers over IP multicast and unicast, so the
//! multi-host scenarios need a real segment between real network stacks.
//! Keeping the bridge out of the root namespace leaves the machine's own
//! network untouched, and makes the whole segment one namespace to delete.

use crate::env::{require_root, unique};
use crate::process::{ip_in, run};
use crate::Host;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Joins hosts with veth pairs on a bridge that lives in a namespace of its
/// own, so several daemons can reach each other over IP (for providers that
/// talk over IP) without touching the root namespace.
pub struct Net {
    pub netns: String,
    ports: AtomicUsize,
    answers_arp: bool,
}

impl Net {
    pub fn new() -> Net {
        require_root();
        crate::interrupt::clean_up_on_signals();
        let net = Net {
            netns: unique("urdma-e2e-net"),
            ports: AtomicUsize::new(0),
            answers_arp: false,
        };
        run(&["ip", "netns", "add", &net.netns]);
        net.ip(&["link", "add", "br0", "type", "bridge"]);
        net.ip(&["link", "set", "br0", "up"]);
        net
    }

    /// A segment whose bridge answers ARP requests for the hosts attached
    /// to it instead of flooding them to every port, as a fabric with ARP
    /// suppression (EVPN, 802.11 proxy ARP) does. Hosts still resolve
    /// each other, one request and one reply; what goes is each request
    /// reaching every host, which a fleet of namespaces pays on the same
    /// cores (256 hosts resolving each other: 65,280 requests, each
    /// received 256 times) and a cluster pays on each host's own.
    pub fn answering_arp() -> Net {
        let mut net = Net::new();
        net.answers_arp = true;
        // A bridge takes the lowest MAC address of its ports unless given
        // one, and a change of its address flushes its neighbour entries,
        // permanent ones too: each host attached would risk the answers
        // for those before it.
        net.ip(&["link", "set", "br0", "address", "02:00:00:00:00:01"]);
        net
    }

    /// Gives `host` an interface `ifname` on the bridge with `addrs`.
    pub fn attach(&self, host: &Host, ifname: &str, addrs: &[&str]) {
        self.attach_with_mac(host, ifname, None, addrs);
    }

    /// `attach`, with the host's end of the link given MAC address `mac`
    /// (`None`: a random one).
    pub fn attach_with_mac(&self, host: &Host, ifname: &str, mac: Option<&str>, addrs: &[&str]) {
        let peer = format!("p{}", self.ports.fetch_add(1, Ordering::Relaxed));
        // Created inside the host namespace, the peer is moved straight into
        // the bridge namespace; names only need to be unique per namespace.
        host.ip(&[
            "link",
            "add",
            ifname,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "netns",
            &self.netns,
        ]);
        if let Some(mac) = mac {
            host.ip(&["link", "set", ifname, "address", mac]);
        }
        self.ip(&["link", "set", &peer, "master", "br0"]);
        self.ip(&["link", "set", &peer, "up"]);
        for a in addrs {
            let mut args = vec!["addr", "add", *a, "dev", ifname];
            if a.contains(':') {
                args.push("nodad");
            }
            host.ip(&args);
        }
        host.ip(&["link", "set", ifname, "up"]);
        if self.answers_arp {
            self.answer_arp_for(host, ifname, &peer, addrs);
        }
    }

    /// The bridge answers ARP requests for `addrs` with the MAC address of
    /// `host`'s `ifname`, reached through bridge port `peer`.
    fn answer_arp_for(&self, host: &Host, ifname: &str, peer: &str, addrs: &[&str]) {
        let out = Command::new("ip")
            .args(["-n", &host.netns, "-o", "link", "show", ifname])
            .output()
            .expect("ip link show");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut words = text.split_whitespace();
        words.find(|w| *w == "link/ether");
        let mac = words
            .next()
            .unwrap_or_else(|| panic!("no MAC address on {ifname}: {text}"));
        for a in addrs.iter().filter(|a| !a.contains(':')) {
            let ip = a.split('/').next().unwrap_or(a);
            self.ip(&[
                "neigh",
                "replace",
                ip,
                "lladdr",
                mac,
                "dev",
                "br0",
                "nud",
                "permanent",
            ]);
        }
        self.ip(&[
            "link",
            "set",
            "dev",
            peer,
            "type",
            "bridge_slave",
            "proxy_arp_wifi",
            "on",
        ]);
    }

    fn ip(&self, args: &[&str]) {
        ip_in(&self.netns, args);
    }
}

impl Default for Net {
    fn default() -> Self {
        Net::new()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting the namespace destroys the bridge and the peer ends,
        // which takes the hosts' veth ends with them.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
    }
}
