//! What a host is made of, apart from the daemon's own defaults: one value
//! a test builds and the harness turns into the daemon's files. Scenarios
//! differ by a line or two, so a default host plus builder calls keeps
//! each test's set-up down to what that test is about.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the daemon may take to create its socket, before `scaled`.
const START_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// The daemon's `log_level`. 2 by default, so that a failing test's
    /// diagnostics show every request; a load measured at level 2 would
    /// measure the logging.
    pub log_level: u8,
    /// Extra `ibacm_opts.cfg` lines, e.g. `urdma_...` keys.
    pub extra_opts: Vec<String>,
    /// `provider NAME default` line; `None` leaves it out.
    pub provider_name: Option<String>,
    /// Provider library to copy in, under its own file name; `None` =
    /// `Artifacts::provider`, as `libibacm_urdma.so` whatever its name.
    pub provider_so: Option<PathBuf>,
    /// The urdma hosts file, named by a `urdma_hosts_file` line placed
    /// before `extra_opts`. `None`: no such line.
    pub hosts_file: Option<HostsFile>,
    /// Bytes appended to `ibacm_opts.cfg` as they are (any bytes, e.g.
    /// Latin-1), after every other line.
    pub raw_opts: Vec<u8>,
    /// A command the daemon runs under, e.g. `valgrind --tool=callgrind
    /// ...`: its argv, the daemon's follows. It must exec the daemon (as
    /// valgrind does), so that `Host::daemon_pid` stays the daemon's. It
    /// replaces the memcheck of `URDMA_TEST_VALGRIND`: valgrind cannot run
    /// under valgrind. Empty: none.
    pub wrapper: Vec<String>,
    /// Whether the simulator in the daemon opens its control FIFO (see
    /// `Host::inject`). Off, the daemon has no reader thread that only a
    /// test uses, e.g. for a profile of the daemon alone.
    pub sim_control: bool,
    /// How long the daemon may take to create its socket (stretched by
    /// `scaled`); a wrapper such as callgrind needs minutes.
    pub start_timeout: Duration,
}

/// Where the urdma hosts file comes from.
#[derive(Clone, Debug)]
pub enum HostsFile {
    /// These contents, written as `Host::hosts_path`.
    Text(String),
    /// A file that exists already, e.g. one shared by several hosts, too
    /// big to write again for each.
    At(PathBuf),
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
            log_level: 2,
            extra_opts: Vec::new(),
            provider_name: Some("urdma".into()),
            provider_so: None,
            hosts_file: None,
            raw_opts: Vec::new(),
            wrapper: Vec::new(),
            sim_control: true,
            start_timeout: START_TIMEOUT,
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

    pub fn log_level(mut self, level: u8) -> Self {
        self.log_level = level;
        self
    }

    /// Appends `bytes` to the options file as they are.
    pub fn raw_opts(mut self, bytes: &[u8]) -> Self {
        self.raw_opts.extend_from_slice(bytes);
        self
    }

    /// A hosts file with `text` in it; `Host::hosts_path` is where it goes.
    pub fn hosts_file(mut self, text: &str) -> Self {
        self.hosts_file = Some(HostsFile::Text(text.into()));
        self
    }

    /// The hosts file `path`, used where it is.
    pub fn hosts_file_at(mut self, path: &Path) -> Self {
        self.hosts_file = Some(HostsFile::At(path.into()));
        self
    }

    /// The default provider `name`, from the library `so` (e.g. the null
    /// provider, `libibacm_null.so`, to compare with).
    pub fn provider(mut self, name: &str, so: &Path) -> Self {
        self.provider_name = Some(name.into());
        self.provider_so = Some(so.into());
        self
    }

    /// See `HostConfig::wrapper`.
    pub fn wrapper(mut self, argv: &[&str]) -> Self {
        self.wrapper = argv.iter().map(|s| s.to_string()).collect();
        self
    }

    /// See `HostConfig::sim_control`.
    pub fn sim_control(mut self, on: bool) -> Self {
        self.sim_control = on;
        self
    }

    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }
}
