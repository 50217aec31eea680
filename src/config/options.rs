//! The `urdma_*` keys, each spelled once: [`OPTIONS`] says how a key's
//! value is read into a [`Config`], how the file would spell the value in
//! force, and what a line for it that cannot be used does to discovery.
//! Adding a key is adding one entry; the unknown-key message, the
//! documentation tests and the daemon's debug log follow from the table.

use super::{Config, Derivation, Lifetime, NameLookup};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a key's value is read. A setter's error is the reason alone;
/// `Config::apply` adds the value and the key, the same way for every key.
#[derive(Clone, Copy)]
pub(super) enum Parse {
    /// The value must be UTF-8 text.
    Text(fn(&mut Config, &str) -> Result<(), String>),
    /// A path: any bytes but NUL, as Unix allows, so not judged as text.
    Path(fn(&mut Config, &Path) -> Result<(), String>),
}

pub(super) struct Opt {
    pub key: &'static str,
    pub parse: Parse,
    /// The value in force, as the file would spell it.
    pub describe: fn(&Config) -> String,
    /// The value decides whether discovery runs, where, or how it is
    /// secured. A line for such a key that cannot be used must not leave
    /// discovery running on defaults (unauthenticated, on the default
    /// port): discovery stays off instead, and the problem says so.
    pub guards_discovery: bool,
}

use Parse::{Path as P, Text as T};

/// Every `urdma_` key, in the order messages list them.
pub(super) const OPTIONS: &[Opt] = &[
    Opt {
        key: "urdma_hosts_file",
        parse: P(|c, p| {
            c.hosts_file = p.to_path_buf();
            Ok(())
        }),
        describe: |c| c.hosts_file.display().to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_addr_timeout",
        parse: T(|c, v| {
            c.addr_timeout = lifetime(v)?;
            Ok(())
        }),
        describe: |c| c.addr_timeout.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_route_timeout",
        parse: T(|c, v| {
            c.route_timeout = lifetime(v)?;
            Ok(())
        }),
        describe: |c| c.route_timeout.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_mtu",
        parse: T(|c, v| {
            c.mtu = match parse_int::<u32>(v) {
                Some(m) if crate::ib::mtu_enum(m).is_some() => m,
                _ => return Err("expected 256, 512, 1024, 2048 or 4096".into()),
            };
            Ok(())
        }),
        describe: |c| c.mtu.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_rate",
        parse: T(|c, v| {
            c.rate_gbps = match parse_int::<u32>(v) {
                Some(g) if g <= 1200 && crate::ib::rate_enum_x10(g * 10).is_some() => g,
                _ => {
                    return Err(
                        "expected an IB link rate in Gb/s (e.g. 10, 25, 40, 56, 100, 200, 400)"
                            .into(),
                    )
                }
            };
            Ok(())
        }),
        describe: |c| c.rate_gbps.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_sl",
        parse: T(|c, v| {
            c.sl = ranged(v, 0, 15)? as u8;
            Ok(())
        }),
        describe: |c| c.sl.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_packet_lifetime",
        parse: T(|c, v| {
            c.packet_lifetime = ranged(v, 0, 63)? as u8;
            Ok(())
        }),
        describe: |c| c.packet_lifetime.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_hop_limit",
        parse: T(|c, v| {
            c.hop_limit = ranged(v, 0, 255)? as u8;
            Ok(())
        }),
        describe: |c| c.hop_limit.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_tclass",
        parse: T(|c, v| {
            c.tclass = ranged(v, 0, 255)? as u8;
            Ok(())
        }),
        describe: |c| c.tclass.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_discovery",
        parse: T(|c, v| {
            c.discovery = yes_no(v)?;
            Ok(())
        }),
        describe: |c| if c.discovery { "yes" } else { "no" }.to_string(),
        guards_discovery: true,
    },
    Opt {
        key: "urdma_discovery_port",
        parse: T(|c, v| {
            c.discovery_port = ranged(v, 1, 65535)? as u16;
            Ok(())
        }),
        describe: |c| c.discovery_port.to_string(),
        guards_discovery: true,
    },
    Opt {
        key: "urdma_timeout",
        parse: T(|c, v| {
            c.timeout_ms = ranged(v, 1, 60_000)?;
            Ok(())
        }),
        describe: |c| c.timeout_ms.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_retries",
        parse: T(|c, v| {
            c.retries = ranged(v, 0, 10)?;
            Ok(())
        }),
        describe: |c| c.retries.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_negative_timeout",
        parse: T(|c, v| {
            c.negative_timeout_ms = ranged(v, 0, 3_600_000)?;
            Ok(())
        }),
        describe: |c| c.negative_timeout_ms.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_derive",
        parse: T(|c, v| {
            c.derive = derivations(v)?;
            Ok(())
        }),
        describe: |c| match c.derive.is_empty() {
            true => "none".to_string(),
            false => names(c.derive.iter().map(|d| d.name())),
        },
        guards_discovery: false,
    },
    Opt {
        key: "urdma_name_lookup",
        parse: T(|c, v| {
            c.name_lookup = name_lookups(v)?;
            Ok(())
        }),
        describe: |c| names(c.name_lookup.iter().map(|n| n.name())),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_reconfirm",
        parse: T(|c, v| {
            c.reconfirm = match ranged(v, 0, 86_400)? {
                0 => None,
                s => Some(Duration::from_secs(u64::from(s))),
            };
            Ok(())
        }),
        describe: |c| c.reconfirm.map_or(0, |d| d.as_secs()).to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_auth_key_file",
        parse: P(|c, p| {
            c.auth_key_file = absolute_or_none(p)?;
            Ok(())
        }),
        describe: |c| path_or_none(&c.auth_key_file),
        guards_discovery: true,
    },
    Opt {
        key: "urdma_reply_rate",
        parse: T(|c, v| {
            c.reply_rate = ranged(v, 0, 1_000_000)?;
            Ok(())
        }),
        describe: |c| c.reply_rate.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_max_cached",
        parse: T(|c, v| {
            c.max_cached = ranged(v, 1, 1 << 26)? as usize;
            Ok(())
        }),
        describe: |c| c.max_cached.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_max_learned",
        parse: T(|c, v| {
            c.max_learned = ranged(v, 1, 1 << 24)? as usize;
            Ok(())
        }),
        describe: |c| c.max_learned.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_max_lookups",
        parse: T(|c, v| {
            c.max_lookups = ranged(v, 1, 1 << 20)? as usize;
            Ok(())
        }),
        describe: |c| c.max_lookups.to_string(),
        guards_discovery: false,
    },
    Opt {
        key: "urdma_metrics_file",
        parse: P(|c, p| {
            c.metrics_file = absolute_or_none(p)?;
            Ok(())
        }),
        describe: |c| path_or_none(&c.metrics_file),
        guards_discovery: false,
    },
];

/// The entry of a key, which must already be lowercase.
pub(super) fn option(key: &str) -> Option<&'static Opt> {
    OPTIONS.iter().find(|o| o.key == key)
}

fn names<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items.collect::<Vec<_>>().join(",")
}

fn absolute_or_none(p: &Path) -> Result<Option<PathBuf>, String> {
    match p {
        _ if p.as_os_str() == "none" => Ok(None),
        _ if p.is_absolute() => Ok(Some(p.to_path_buf())),
        _ => Err("expected an absolute path or none".into()),
    }
}

fn path_or_none(p: &Option<PathBuf>) -> String {
    match p {
        Some(p) => p.display().to_string(),
        None => "none".to_string(),
    }
}

/// A comma-separated list of distinct names out of `known`.
fn distinct_list<T: Copy + PartialEq>(v: &str, known: &[(&str, T)]) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for item in v.split(',') {
        let Some(&(_, x)) = known.iter().find(|(name, _)| *name == item) else {
            let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
            return Err(format!("'{item}' is not {}", names.join(" or ")));
        };
        if out.contains(&x) {
            return Err(format!("'{item}' listed twice"));
        }
        out.push(x);
    }
    Ok(out)
}

fn name_lookups(v: &str) -> Result<Vec<NameLookup>, String> {
    let known = [NameLookup::Segment, NameLookup::Nss].map(|n| (n.name(), n));
    distinct_list(v, &known)
}

fn derivations(v: &str) -> Result<Vec<Derivation>, String> {
    if v == "none" {
        return Ok(Vec::new());
    }
    let known = [Derivation::Eui64, Derivation::Ipv4Mapped].map(|d| (d.name(), d));
    distinct_list(v, &known)
}

fn yes_no(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err("expected yes or no".into()),
    }
}

pub(super) fn parse_int<T: std::str::FromStr>(v: &str) -> Option<T> {
    if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()?.to_string().parse().ok()
    } else {
        v.parse().ok()
    }
}

fn ranged(v: &str, lo: u32, hi: u32) -> Result<u32, String> {
    match parse_int::<u32>(v) {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("expected an integer from {lo} to {hi}")),
    }
}

fn lifetime(v: &str) -> Result<Lifetime, String> {
    match v {
        "-1" => Ok(Lifetime::Never),
        _ => parse_int::<u32>(v)
            .filter(|&m| m <= u32::MAX / 60)
            .map(Lifetime::Minutes)
            .ok_or_else(|| "expected minutes (0 or more) or -1 for never".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// What keeps the table whole: a key that could never match (not
    /// lowercase, not ours, listed twice), or a describe that its own
    /// parse does not read back, fails here rather than in a user's file.
    #[test]
    fn every_key_is_unique_and_its_description_reads_back() {
        let mut seen = HashSet::new();
        let defaults = Config::default();
        for o in OPTIONS {
            let key = o.key;
            assert!(seen.insert(key), "{key} is in the table twice");
            assert!(key.starts_with("urdma_"), "{key}");
            assert_eq!(key, key.to_ascii_lowercase(), "keys are matched lowercase");
            let shown = defaults.describe(key).expect("a described default");
            assert_eq!(shown, (o.describe)(&defaults));
            let mut cfg = Config::default();
            assert_eq!(cfg.apply(key, Some(shown.as_bytes())), Ok(true), "{key}");
            assert_eq!(cfg.describe(key).as_deref(), Some(shown.as_str()), "{key}");
            assert_eq!(cfg, defaults, "{key} {shown} is the default it describes");
        }
        assert_eq!(super::super::KEYS.len(), seen.len());
    }

    #[test]
    fn non_default_values_read_back_too() {
        let text = "urdma_hosts_file relative/h\nurdma_addr_timeout -1\nurdma_route_timeout 7\n\
                    urdma_derive eui64\nurdma_name_lookup nss\nurdma_reconfirm 0\n\
                    urdma_auth_key_file /k\nurdma_metrics_file none\nurdma_discovery 0\n";
        let (cfg, diags) = Config::parse(text, "opts");
        assert!(diags.is_empty(), "{diags:?}");
        assert_ne!(cfg, Config::default());
        for o in OPTIONS {
            let shown = (o.describe)(&cfg);
            let mut again = cfg.clone();
            assert_eq!(again.apply(o.key, Some(shown.as_bytes())), Ok(true));
            assert_eq!(again, cfg, "{} {shown}", o.key);
        }
    }
}
