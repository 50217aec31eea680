//! What a host is made of, apart from the daemon's own defaults: one value
//! a test builds and the harness turns into the daemon's files. Scenarios
//! differ by a line or two, so a default host plus builder calls keeps
//! each test's set-up down to what that test is about.

use std::path::PathBuf;

/// What one simulated host looks like. `Default` gives a host with both
/// default sim devices, 10.0.0.1/24 + fd00::1/64 on a local link, and the
/// addresses plus the name `node1` on urdma0 port 1.
#[derive(Clone, Debug)]
pub struct HostConfig {
    /// Addresses (with prefix) put on the host's local link `e0`, a veth
    /// whose peer stays in the namespace: the daemon picks a source by
    /// `connect()` + `getsockname()`, which needs a route. (The kernel here
    /// has no `dummy` module, hence the veth.) Empty: no local link.
    pub ip_addrs: Vec<String>,
    /// Lines of `ibacm_addr.cfg`: `NAME DEVICE PORT PKEY`.
    pub addr_lines: Vec<String>,
    /// Contents of the simulator config; `None` = the sim's built-in default.
    pub sim_config: Option<String>,
    /// Extra `ibacm_opts.cfg` lines, e.g. `urdma_...` keys.
    pub extra_opts: Vec<String>,
    /// `provider NAME default` line; `None` leaves it out.
    pub provider_name: Option<String>,
    /// Provider library to copy in; `None` = `Artifacts::provider`.
    pub provider_so: Option<PathBuf>,
    /// Contents of a urdma hosts file: written as `hosts.data` in the
    /// host's temp dir and named by a `urdma_hosts_file` line placed before
    /// `extra_opts`. `None`: neither.
    pub hosts_file: Option<String>,
    /// Bytes appended to `ibacm_opts.cfg` as they are (any bytes, e.g.
    /// Latin-1), after every other line.
    pub raw_opts: Vec<u8>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            ip_addrs: vec!["10.0.0.1/24".into(), "fd00::1/64".into()],
            addr_lines: vec![
                "10.0.0.1 urdma0 1 default".into(),
                "fd00::1 urdma0 1 default".into(),
                "node1 urdma0 1 default".into(),
            ],
            sim_config: None,
            extra_opts: Vec::new(),
            provider_name: Some("urdma".into()),
            provider_so: None,
            hosts_file: None,
            raw_opts: Vec::new(),
        }
    }
}

impl HostConfig {
    pub fn opt(mut self, line: &str) -> Self {
        self.extra_opts.push(line.into());
        self
    }

    pub fn sim_config(mut self, text: &str) -> Self {
        self.sim_config = Some(text.into());
        self
    }

    pub fn addr_lines(mut self, lines: &[&str]) -> Self {
        self.addr_lines = lines.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn ip_addrs(mut self, addrs: &[&str]) -> Self {
        self.ip_addrs = addrs.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Appends `bytes` to the options file as they are.
    pub fn raw_opts(mut self, bytes: &[u8]) -> Self {
        self.raw_opts.extend_from_slice(bytes);
        self
    }

    /// See `HostConfig::hosts_file`; `Host::hosts_path` is where it goes.
    pub fn hosts_file(mut self, text: &str) -> Self {
        self.hosts_file = Some(text.into());
        self
    }
}
