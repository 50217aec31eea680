//! The provider's `urdma_*` keys in the daemon's shared options file.
//!
//! The file has no sections: every reader scans all of it and ignores the
//! keys of others. Lines are read the daemon's way: the first two
//! whitespace-separated tokens, `#` in column 0 is a comment, keys compare
//! case-insensitively, and a later line wins.

pub mod hosts;
pub mod keyfile;
mod options;
pub mod reload;

use acm_proto::options as file;
use acm_proto::text;
pub use acm_proto::text::Diagnostic;
use options::{parse_int, Parse, OPTIONS};
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The discovery protocol's UDP port unless `urdma_discovery_port` says
/// otherwise. Not IANA-registered.
pub const DEFAULT_DISCOVERY_PORT: u16 = 6126;

/// A lifetime in minutes where -1 means "never expires".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    Never,
    Minutes(u32),
}

impl Lifetime {
    pub fn duration(self) -> Option<Duration> {
        match self {
            Lifetime::Never => None,
            Lifetime::Minutes(m) => Some(Duration::from_secs(u64::from(m) * 60)),
        }
    }
}

impl fmt::Display for Lifetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lifetime::Never => f.write_str("-1"),
            Lifetime::Minutes(m) => write!(f, "{m}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Static `ADDRESS GID` table.
    pub hosts_file: PathBuf,
    pub addr_timeout: Lifetime,
    pub route_timeout: Lifetime,
    /// Largest path MTU in bytes; the port's active MTU caps it further.
    pub mtu: u32,
    /// Path rate in Gb/s for ports that report no width/speed (urdma ports
    /// report zero for both).
    pub rate_gbps: u32,
    pub sl: u8,
    pub packet_lifetime: u8,
    pub hop_limit: u8,
    pub tclass: u8,
    /// Ask other hosts running this provider (docs/protocol.md).
    pub discovery: bool,
    pub discovery_port: u16,
    /// Wait for one discovery try, in milliseconds.
    pub timeout_ms: u32,
    /// Tries after the first before a lookup fails with ETIMEDOUT.
    pub retries: u32,
    /// How long a failed lookup is remembered, in milliseconds.
    pub negative_timeout_ms: u32,
    /// Fallbacks for peers that do not run the provider, tried in order
    /// after discovery fails.
    pub derive: Vec<Derivation>,
    /// How long a binding learned by discovery is used before its holder
    /// is asked again (`None`: until `addr_timeout`).
    pub reconfirm: Option<Duration>,
    /// How long claims to an undisputed name are heard, without
    /// authentication, if not a share of `urdma_timeout` (docs/protocol.md,
    /// *Trust*). Not an option of the file: for simulations that measure
    /// what the window buys (`urdma-dst claim-window`).
    pub claim_window: Option<Duration>,
    /// How names that are neither local nor in the hosts file are asked,
    /// in order.
    pub name_lookup: Vec<NameLookup>,
    /// Where the metrics are written (`None`: nowhere).
    pub metrics_file: Option<PathBuf>,
    /// Pre-shared keys that authenticate discovery (`None`: unauthenticated).
    pub auth_key_file: Option<PathBuf>,
    /// Discovery replies per second to one source (0: no limit).
    pub reply_rate: u32,
    /// Entries of the destination cache, all endpoints together.
    pub max_cached: usize,
    /// Bindings learned through discovery (and, as many, remembered
    /// failures).
    pub max_learned: usize,
    /// Lookups in flight; a miss beyond them fails at once.
    pub max_lookups: usize,
    /// The daemon's own `log_level`: decides what the log bridge formats.
    pub daemon_log_level: u8,
}

/// Ways to compute a GID from an IP address without asking its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Derivation {
    /// `fe80::` + EUI-64 of the neighbour's MAC, as urdma forms port GIDs.
    Eui64,
    /// `::ffff:a.b.c.d`, the RoCEv2 convention for IPv4.
    Ipv4Mapped,
}

impl Derivation {
    fn name(self) -> &'static str {
        match self {
            Derivation::Eui64 => "eui64",
            Derivation::Ipv4Mapped => "ipv4-mapped",
        }
    }
}

/// Ways to find the host of a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameLookup {
    /// Ask the discovery groups of the local segment.
    Segment,
    /// Ask the system's resolver (NSS: /etc/hosts, DNS), then ask the
    /// addresses it gives by unicast, as for an IP destination: names on
    /// other subnets.
    Nss,
}

impl NameLookup {
    fn name(self) -> &'static str {
        match self {
            NameLookup::Segment => "segment",
            NameLookup::Nss => "nss",
        }
    }
}

pub const DEFAULT_HOSTS_FILE: &str = "/etc/rdma/ibacm_urdma_hosts.data";
/// Under /run: written every second, gone with the machine, and writable
/// for the daemon under systemd's ProtectSystem=full.
pub const DEFAULT_METRICS_FILE: &str = "/run/ibacm-urdma.prom";
/// The textfile directory of Debian's and Ubuntu's node exporter
/// (`prometheus-node-exporter`): with it installed, the metrics are
/// scraped with no path edited.
pub const NODE_EXPORTER_DIR: &str = "/var/lib/prometheus/node-exporter";
/// The file's name in a textfile directory (the collector reads `*.prom`).
pub const METRICS_FILE_NAME: &str = "ibacm-urdma.prom";

/// Where the metrics go when the options file does not say: the node
/// exporter's textfile directory when it exists, else `/run`.
pub fn default_metrics_file() -> PathBuf {
    let dir = Path::new(NODE_EXPORTER_DIR);
    if dir.is_dir() {
        dir.join(METRICS_FILE_NAME)
    } else {
        PathBuf::from(DEFAULT_METRICS_FILE)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hosts_file: PathBuf::from(DEFAULT_HOSTS_FILE),
            addr_timeout: Lifetime::Minutes(1440),
            route_timeout: Lifetime::Never,
            mtu: 4096,
            rate_gbps: 100,
            sl: 0,
            packet_lifetime: 18,
            hop_limit: 0,
            tclass: 0,
            discovery: true,
            discovery_port: DEFAULT_DISCOVERY_PORT,
            timeout_ms: 500,
            retries: 2,
            negative_timeout_ms: 5000,
            derive: Vec::new(),
            name_lookup: vec![NameLookup::Segment, NameLookup::Nss],
            reconfirm: Some(Duration::from_secs(30)),
            claim_window: None,
            metrics_file: Some(PathBuf::from(DEFAULT_METRICS_FILE)),
            auth_key_file: None,
            reply_rate: 5000,
            max_cached: 1 << 16,
            max_learned: 1 << 16,
            max_lookups: 1 << 12,
            daemon_log_level: 0,
        }
    }
}

/// Every `urdma_` key, for the unknown-key message and the documentation
/// tests: the names of the options table, in its order.
pub const KEYS: [&str; OPTIONS.len()] = {
    let mut out = [""; OPTIONS.len()];
    let mut i = 0;
    while i < OPTIONS.len() {
        out[i] = OPTIONS[i].key;
        i += 1;
    }
    out
};

/// What the diagnostic of a line that turned discovery off adds.
const STAYS_OFF: &str = "discovery stays off until this line is fixed";

impl Config {
    /// How long one try of a query waits: `urdma_timeout`.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.timeout_ms))
    }

    /// Applies one `key value`. `Ok(false)` means the key is not ours.
    fn apply(&mut self, key: &str, value: Option<&[u8]>) -> Result<bool, String> {
        if key == "log_level" {
            // The daemon's key: read, never judged (the daemon reports it).
            if let Some(l) = value
                .and_then(|v| std::str::from_utf8(v).ok())
                .and_then(parse_int::<u8>)
            {
                self.daemon_log_level = l;
            }
            return Ok(false);
        }
        if !key.starts_with("urdma_") {
            return Ok(false);
        }
        let Some(opt) = options::option(key) else {
            return Err(format!("unknown key '{key}' (known: {})", KEYS.join(", ")));
        };
        let raw = value.ok_or_else(|| format!("'{key}' has no value"))?;
        match opt.parse {
            Parse::Path(set) => {
                let path = Path::new(OsStr::from_bytes(raw));
                set(self, path)
                    .map_err(|e| format!("bad value '{}' for {key}: {e}", path.display()))?;
            }
            Parse::Text(set) => {
                let v = text::text(raw).map_err(|e| format!("bad value for {key}: {e}"))?;
                set(self, v).map_err(|e| format!("bad value '{v}' for {key}: {e}"))?;
            }
        }
        Ok(true)
    }

    /// Reads the options file the daemon's way, as bytes: the first two
    /// tokens of a line, `#` in column 0 a comment (of any bytes), keys
    /// case-insensitive, the last value winning. Every bad `urdma_` line
    /// yields a diagnostic naming what stays in force. A bad line that may
    /// be about discovery itself (one that guards discovery, a key this
    /// provider does not know, a key that is not text) turns discovery
    /// off: running it on defaults could be what the line meant to prevent.
    pub fn parse(bytes: impl AsRef<[u8]>, file: &str) -> (Config, Vec<Diagnostic>) {
        let mut cfg = Config::default();
        let mut diags = Vec::new();
        let mut veto = false;
        let mut metrics_set = false;
        for setting in file::settings(bytes.as_ref()) {
            let n = setting.line;
            let key = setting.key.to_ascii_lowercase();
            if !key.starts_with(b"urdma_") && key != b"log_level" {
                continue;
            }
            let key = match text::text(&key) {
                Ok(k) => k,
                Err(e) if key.starts_with(b"urdma_") => {
                    veto = true;
                    diags.push(Diagnostic::new(
                        file,
                        n,
                        format!("key {e}; line ignored, and {STAYS_OFF}"),
                    ));
                    continue;
                }
                Err(_) => continue,
            };
            let before = cfg.describe(key);
            metrics_set |= key == "urdma_metrics_file";
            if let Err(message) = cfg.apply(key, setting.value) {
                let guards = options::option(key).is_none_or(|o| o.guards_discovery);
                veto |= guards;
                let message = match (guards, before) {
                    (true, _) => format!("{message}; {STAYS_OFF}"),
                    (false, Some(kept)) => format!("{message}; keeping {key} {kept}"),
                    (false, None) => format!("{message}; ignored"),
                };
                diags.push(Diagnostic::new(file, n, message));
            }
        }
        if veto {
            cfg.discovery = false;
        }
        // What the daemon reads from the options file is the operator's
        // word; a relative hosts file can only mean beside that file, not
        // wherever the reader (the daemon, urdma-acm) was started.
        if cfg.hosts_file.is_relative() {
            if let Some(dir) = Path::new(file).parent() {
                cfg.hosts_file = dir.join(&cfg.hosts_file);
            }
        }
        if !metrics_set {
            cfg.metrics_file = Some(default_metrics_file());
        }
        (cfg, diags)
    }

    /// Reads the options file at `path`. A file that does not exist means
    /// every default, as for the daemon; one that exists but cannot be
    /// read might have configured discovery, so discovery stays off.
    pub fn load(path: &Path) -> (Config, Vec<Diagnostic>) {
        let shown = path.display().to_string();
        match text::read(path) {
            Ok(Some(bytes)) => Config::parse(bytes, &shown),
            Ok(None) => (
                Config {
                    metrics_file: Some(default_metrics_file()),
                    ..Config::default()
                },
                Vec::new(),
            ),
            Err(e) => {
                let cfg = Config {
                    discovery: false,
                    ..Config::default()
                };
                let d = Diagnostic::new(
                    &shown,
                    0,
                    format!("cannot read: {e}; discovery stays off until it can be read"),
                );
                (cfg, vec![d])
            }
        }
    }

    /// The current value of a key, as the file would spell it.
    pub fn describe(&self, key: &str) -> Option<String> {
        options::option(key).map(|o| (o.describe)(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_keys_the_daemon_way() {
        let text = "\
# urdma_mtu 256 is a comment
 log_level 2
URDMA_MTU 2048 trailing tokens are ignored
urdma_mtu   1024
provider urdma default
timeout 3000
urdma_addr_timeout -1
urdma_route_timeout 0x10
urdma_hosts_file /tmp/hosts
urdma_rate 200
urdma_discovery No
urdma_derive ipv4-mapped,eui64
urdma_timeout 250
";
        let (c, d) = Config::parse(text, "opts.cfg");
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(c.mtu, 1024, "last value wins, keys are case-insensitive");
        assert_eq!(c.daemon_log_level, 2);
        assert_eq!(c.addr_timeout, Lifetime::Never);
        assert_eq!(c.route_timeout, Lifetime::Minutes(16));
        assert_eq!(c.hosts_file, PathBuf::from("/tmp/hosts"));
        assert_eq!(c.rate_gbps, 200);
        assert_eq!(c.sl, 0);
        assert!(!c.discovery);
        assert_eq!(c.derive, vec![Derivation::Ipv4Mapped, Derivation::Eui64]);
        assert_eq!(c.timeout_ms, 250);
        assert_eq!(c.describe("urdma_derive").unwrap(), "ipv4-mapped,eui64");
    }

    #[test]
    fn bad_lines_are_located_and_keep_the_default() {
        let text =
            "urdma_mtu 4097\nurdma_sl 16\nurdma_addr_timeout -5\nurdma_tclass\nurdma_rate 33\n\
                    urdma_derive eui64,arp\nurdma_retries 11\n";
        let (c, d) = Config::parse(text, "/etc/rdma/ibacm_opts.cfg");
        assert_eq!(c, Config::default());
        let lines: Vec<String> = d.iter().map(|d| d.to_string()).collect();
        assert_eq!(lines.len(), 7, "{lines:?}");
        assert!(lines[0].starts_with("/etc/rdma/ibacm_opts.cfg:1: bad value '4097' for urdma_mtu"));
        assert!(lines[0].ends_with("keeping urdma_mtu 4096"), "{}", lines[0]);
        assert!(lines[1].contains(":2:") && lines[1].ends_with("keeping urdma_sl 0"));
        assert!(lines[2].contains(":3:") && lines[2].ends_with("keeping urdma_addr_timeout 1440"));
        assert!(lines[3].contains(":4: 'urdma_tclass' has no value"));
        assert!(lines[4].contains(":5:") && lines[4].ends_with("keeping urdma_rate 100"));
        assert!(
            lines[5].contains("'arp' is not eui64")
                && lines[5].ends_with("keeping urdma_derive none")
        );
        assert!(lines[6].ends_with("keeping urdma_retries 2"));
    }

    /// (line, what its report says): each of these may be what keeps
    /// discovery off, on another port, or authenticated, so discovery
    /// stays off rather than run on defaults.
    const CLOSES_DISCOVERY: &[(&[u8], &str)] = &[
        (
            b"urdma_discovery maybe",
            "bad value 'maybe' for urdma_discovery",
        ),
        (
            b"urdma_discovery_port 0",
            "bad value '0' for urdma_discovery_port",
        ),
        (b"urdma_discovery_port 70000", "bad value '70000'"),
        (
            b"urdma_discovery_port",
            "'urdma_discovery_port' has no value",
        ),
        (b"urdma_auth_key_file", "'urdma_auth_key_file' has no value"),
        (
            b"urdma_auth_key_file key.txt",
            "expected an absolute path or none",
        ),
        (
            b"urdma_discovery n\xf6",
            "bad value for urdma_discovery: not valid UTF-8 text (byte 0xf6 at column 2)",
        ),
        (b"urdma_colour blue", "unknown key 'urdma_colour'"),
        (
            b"urdma_auth_key_fil\xe9 /k",
            "key not valid UTF-8 text (byte 0xe9 at column 19); line ignored",
        ),
        (b"URDMA_AUTH_KEYFILE /k", "unknown key 'urdma_auth_keyfile'"),
    ];

    #[test]
    fn a_bad_line_that_may_be_about_discovery_turns_it_off() {
        for (line, want) in CLOSES_DISCOVERY {
            let mut text = b"# options\nurdma_discovery yes\n".to_vec();
            text.extend_from_slice(line);
            text.extend_from_slice(b"\nurdma_discovery yes\nurdma_mtu 1024\n");
            let (c, d) = Config::parse(&text, "opts");
            let shown = String::from_utf8_lossy(line);
            assert_eq!(d.len(), 1, "{shown}: {d:?}");
            let msg = d[0].to_string();
            assert!(msg.starts_with("opts:3: "), "{shown}: {msg}");
            assert!(msg.contains(want), "{shown}: {msg}");
            assert!(
                msg.ends_with("discovery stays off until this line is fixed"),
                "{shown}: {msg}"
            );
            assert!(!c.discovery, "{shown}: a later 'yes' does not undo it");
            assert_eq!(c.mtu, 1024, "{shown}: the rest of the file applies");
        }
    }

    #[test]
    fn the_file_is_read_as_bytes_and_comments_hold_any() {
        let text = b"# caf\xe9 cr\xe8me: Latin-1 in a comment\n\
urdma_auth_key_file /etc/rdma/cl\xe9\n\
urdma_hosts_file /srv/h\xf4tes\n\
urdma_discovery_port 7000\r\n\
provider_lib_path /opt/\xff\n\
\xffnot-ours 1\n";
        let (c, d) = Config::parse(text, "opts");
        assert!(d.is_empty(), "{d:?}");
        assert!(c.discovery);
        assert_eq!(c.discovery_port, 7000, "CRLF line ends are fine");
        assert_eq!(
            c.auth_key_file.as_deref().map(|p| p.as_os_str().as_bytes()),
            Some(&b"/etc/rdma/cl\xe9"[..]),
            "a path is bytes, as Unix has it"
        );
        assert_eq!(c.hosts_file.as_os_str().as_bytes(), b"/srv/h\xf4tes");
    }

    #[test]
    fn an_unreadable_file_keeps_discovery_off_and_a_missing_one_is_defaults() {
        let dir = std::env::temp_dir().join(format!("urdma-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, d) = Config::load(&dir.join("absent"));
        assert_eq!((c, d), (Config::default(), Vec::new()));
        let (c, d) = Config::load(&dir);
        assert!(!c.discovery);
        assert_eq!(d.len(), 1);
        assert!(
            d[0].to_string()
                .ends_with("discovery stays off until it can be read"),
            "{d:?}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
