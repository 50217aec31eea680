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
}

impl Net {
    pub fn new() -> Net {
        require_root();
        crate::interrupt::clean_up_on_signals();
        let net = Net {
            netns: unique("urdma-e2e-net"),
            ports: AtomicUsize::new(0),
        };
        run(&["ip", "netns", "add", &net.netns]);
        net.ip(&["link", "add", "br0", "type", "bridge"]);
        net.ip(&["link", "set", "br0", "up"]);
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
