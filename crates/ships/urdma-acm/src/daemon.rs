//! The daemon's own reading of the options file and of its provider
//! directory (rdma-core 44 `ibacm`), as far as they decide which provider
//! serves a port: `provider_lib_path`, and the `provider NAME default` and
//! `provider NAME PREFIX` lines.

use acm_proto::options;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

pub const DEFAULT_OPTS_FILE: &str = "/etc/rdma/ibacm_opts.cfg";
pub const DEFAULT_ADDR_FILE: &str = "/etc/rdma/ibacm_addr.cfg";
/// The daemon's compiled-in `provider_lib_path`: Debian's and Ubuntu's
/// (under the architecture's multiarch name), and RPM distributions'.
#[cfg(target_arch = "aarch64")]
pub const DEFAULT_PROVIDER_DIR: &str = "/usr/lib/aarch64-linux-gnu/ibacm";
#[cfg(not(target_arch = "aarch64"))]
pub const DEFAULT_PROVIDER_DIR: &str = "/usr/lib/x86_64-linux-gnu/ibacm";
pub const DEFAULT_PROVIDER_DIR_RPM: &str = "/usr/lib64/ibacm";
/// The daemon's executable, whose bytes hold its compiled-in directory.
pub const IBACM: &str = "/usr/sbin/ibacm";
/// The daemon's built-in default provider name.
pub const BUILTIN_DEFAULT: &str = "ibacmp";
/// Our provider's name and the file name it is installed under.
pub const URDMA: &str = "urdma";
pub const URDMA_FILE: &str = "libibacm_urdma.so";

/// A `provider NAME PREFIX` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subnet {
    pub provider: String,
    pub prefix: u64,
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub provider_dir: PathBuf,
    /// The line of the `provider_lib_path` in force; `None`: the daemon's
    /// compiled-in directory (`provider_dir` then holds Debian's).
    pub provider_dir_line: Option<usize>,
    /// The last `provider NAME default` line: name and line number.
    pub default: Option<(String, usize)>,
    pub subnets: Vec<Subnet>,
    /// Line numbers of `provider` lines the daemon misreads because they
    /// hold a tab (it splits them on spaces only).
    pub tabbed: Vec<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            provider_dir: PathBuf::from(DEFAULT_PROVIDER_DIR),
            provider_dir_line: None,
            default: None,
            subnets: Vec::new(),
            tabbed: Vec::new(),
        }
    }
}

/// `strtoull(s, NULL, 0)`: the longest numeric prefix in base 16 (`0x`),
/// 8 (leading `0`) or 10; 0 when there is none.
fn strtoull(s: &str) -> u64 {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.starts_with('0') {
        (s, 8)
    } else {
        (s, 10)
    };
    digits
        .chars()
        .map_while(|c| c.to_digit(radix))
        .fold(0u64, |n, d| {
            n.wrapping_mul(u64::from(radix)).wrapping_add(u64::from(d))
        })
}

impl Options {
    /// Reads the options text with the daemon's rules: `#` in column 0 is a
    /// comment; ordinary keys are the first two blank-separated tokens,
    /// case-insensitive, the last line winning; a line whose first token
    /// merely starts with `provider` is a provider line, split on spaces.
    /// Bytes, line by line, as the daemon reads them: a byte that is not
    /// UTF-8 (a Latin-1 comment) spoils its own line at most, never the file.
    pub fn parse(bytes: impl AsRef<[u8]>) -> Options {
        let mut o = Options::default();
        for setting in options::settings(bytes.as_ref()) {
            if setting.is("provider_lib_path") {
                if let Some(value) = setting.value {
                    o.provider_dir = PathBuf::from(OsStr::from_bytes(value));
                    o.provider_dir_line = Some(setting.line);
                }
            }
            let line = String::from_utf8_lossy(setting.raw);
            let mut tokens = line.split(' ').filter(|t| !t.is_empty());
            let Some(first) = tokens.next() else { continue };
            let is_provider = first
                .get(..8)
                .is_some_and(|p| p.eq_ignore_ascii_case("provider"));
            if !is_provider {
                continue;
            }
            if line.contains('\t') {
                o.tabbed.push(setting.line);
            }
            let (Some(name), Some(arg)) = (tokens.next(), tokens.next()) else {
                continue;
            };
            let is_default = arg
                .get(..7)
                .is_some_and(|p| p.eq_ignore_ascii_case("default"));
            if is_default {
                o.default = Some((name.to_string(), setting.line));
            } else {
                o.subnets.push(Subnet {
                    provider: name.to_string(),
                    prefix: strtoull(arg),
                    line: setting.line,
                });
            }
        }
        o
    }
}

/// Which provider the daemon gives a port, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub provider: Option<String>,
    pub why: String,
}

/// The daemon's choice for a port whose GID 0 has `prefix` (host order):
/// the first loaded provider with a matching `provider NAME PREFIX` line,
/// else the `provider NAME default` one if it loaded, else a loaded
/// `ibacmp`, else none.
pub fn assign(opts: &Options, loaded: &[&str], prefix: Option<u64>) -> Assignment {
    if let Some(prefix) = prefix {
        for name in loaded {
            if let Some(s) = opts
                .subnets
                .iter()
                .find(|s| s.provider.eq_ignore_ascii_case(name) && s.prefix == prefix)
            {
                return Assignment {
                    provider: Some(name.to_string()),
                    why: format!("subnet prefix {prefix:#018x}, options line {}", s.line),
                };
            }
        }
    }
    let loaded_named = |want: &str| loaded.iter().find(|n| n.eq_ignore_ascii_case(want));
    if let Some((want, line)) = &opts.default {
        if let Some(name) = loaded_named(want) {
            return Assignment {
                provider: Some(name.to_string()),
                why: format!("default provider, options line {line}"),
            };
        }
    }
    let not_loaded = match &opts.default {
        Some((want, line)) => {
            format!("`provider {want} default` (line {line}) names no loaded provider; ")
        }
        None => String::new(),
    };
    match loaded_named(BUILTIN_DEFAULT) {
        Some(name) => Assignment {
            provider: Some(name.to_string()),
            why: format!("{not_loaded}the daemon's built-in default"),
        },
        None => Assignment {
            provider: None,
            why: format!("{not_loaded}no default provider is loaded"),
        },
    }
}

/// Lines of the address file (`NAME DEVICE PORT PKEY`) for a device port.
pub fn addresses_for(addr_text: &str, device: &str, port: u8) -> usize {
    addr_text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            let mut w = l.split_whitespace().skip(1);
            w.next().is_some_and(|d| d.eq_ignore_ascii_case(device))
                && w.next().and_then(|p| p.parse::<u8>().ok()) == Some(port)
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_lines_are_read_the_daemons_way() {
        let o = Options::parse(
            "# provider x default\n\
             provider_lib_path /opt/prov\n\
             provider ibacmp 0xfe80000000000000\n\
             PROVIDER urdma Default\n\
             provider\turdma 0x1\n\
             providers urdma 0x10\n\
             provider lonely\n",
        );
        assert_eq!(o.provider_dir, PathBuf::from("/opt/prov"));
        assert_eq!(o.provider_dir_line, Some(2));
        assert_eq!(o.default, Some(("urdma".to_string(), 4)));
        assert_eq!(o.tabbed, vec![5]);
        let subnets: Vec<(&str, u64, usize)> = o
            .subnets
            .iter()
            .map(|s| (s.provider.as_str(), s.prefix, s.line))
            .collect();
        assert_eq!(
            subnets,
            vec![("ibacmp", 0xfe80_0000_0000_0000, 3), ("urdma", 0x10, 6)]
        );
    }

    #[test]
    fn a_byte_that_is_not_utf8_spoils_no_other_line() {
        let mut bytes = b"# caf\xe9 (Latin-1)\nprovider_lib_path /opt/prov\n".to_vec();
        bytes.extend_from_slice(b"provider urdma default\n");
        let o = Options::parse(&bytes);
        assert_eq!(o.provider_dir, PathBuf::from("/opt/prov"));
        assert_eq!(o.default, Some(("urdma".to_string(), 3)));
    }

    #[test]
    fn assignment_follows_prefix_then_default_then_ibacmp() {
        let o = Options::parse("provider urdma default\nprovider ibacmp 0xfe80000000000000\n");
        let both = ["urdma", "ibacmp"];
        let a = assign(&o, &both, Some(0xfe80_0000_0000_0000));
        assert_eq!(a.provider.as_deref(), Some("ibacmp"), "{a:?}");
        let a = assign(&o, &both, Some(0xfec0_0000_0000_0000));
        assert_eq!(a.provider.as_deref(), Some("urdma"), "{a:?}");
        let a = assign(&o, &["ibacmp"], Some(1));
        assert_eq!(a.provider.as_deref(), Some("ibacmp"));
        assert!(a.why.contains("names no loaded provider"), "{a:?}");
        let a = assign(&Options::default(), &["urdma"], Some(1));
        assert_eq!(a.provider, None, "{a:?}");
    }

    #[test]
    fn strtoull_takes_the_numeric_prefix() {
        assert_eq!(strtoull("0xfe80000000000000"), 0xfe80_0000_0000_0000);
        assert_eq!(strtoull("010"), 8);
        assert_eq!(strtoull("12abc"), 12);
        assert_eq!(strtoull("abc"), 0);
    }
}
