//! The daemon's rdma-core release, and the rule it implies for which
//! provider files it loads by name: the one fact about the daemon that
//! changes what `loading` checks (names containing `.so` up to 28, ending
//! in `.so` from 29).

use std::process::Command;

/// The last rdma-core release that loads every name containing `.so`.
pub const LAST_CONTAINS_RELEASE: u32 = 28;

/// The rdma-core release of the daemon, and where that came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonVersion {
    /// E.g. `ibacm 44.0-2 (dpkg-query)`, `--daemon-version 28`, or why it
    /// is unknown.
    pub source: String,
    /// The upstream major version; `None`: unknown.
    pub major: Option<u32>,
}

/// How a release picks files by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// 28 and older: the name contains `.so`.
    Contains,
    /// 29 and later: the name ends in `.so`.
    EndsWith,
    /// The release is unknown: either (warn about both).
    Unknown,
}

/// The upstream major version of an rdma-core package version: `33.2-1`,
/// `1:44.0-2` (an epoch), `65.0-1.1`, `48.0-1.el8`, or a bare `28`.
pub fn parse_major(version: &str) -> Option<u32> {
    let v = version.trim();
    let v = v.split_once(':').map_or(v, |(_, rest)| rest);
    let end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let rest = &v[end..];
    if end == 0 || !(rest.is_empty() || rest.starts_with(['.', '-', '+', '~'])) {
        return None;
    }
    v[..end].parse().ok()
}

/// The installed `ibacm` package's version by `dpkg-query`, else `rpm -q`.
fn installed() -> Option<(String, &'static str)> {
    let run = |program: &str, args: &[&str]| -> Option<String> {
        let out = Command::new(program).args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    // A removed package whose files remain is "config-files", not installed.
    if let Some(out) = run(
        "dpkg-query",
        &["-W", "-f", "${db:Status-Status} ${Version}\n", "ibacm"],
    ) {
        if let Some(v) = out.lines().find_map(|l| l.strip_prefix("installed ")) {
            return Some((v.trim().to_string(), "dpkg-query"));
        }
    }
    let out = run("rpm", &["-q", "--qf", "%{VERSION}-%{RELEASE}\n", "ibacm"])?;
    let v = out.lines().next()?.trim();
    (!v.is_empty()).then(|| (v.to_string(), "rpm"))
}

impl DaemonVersion {
    /// `given` (`--daemon-version`), else the installed package's.
    pub fn detect(given: Option<&str>) -> DaemonVersion {
        if let Some(v) = given {
            return DaemonVersion {
                source: format!("--daemon-version {v}"),
                major: parse_major(v),
            };
        }
        match installed() {
            Some((v, tool)) => DaemonVersion {
                source: format!("ibacm {v} ({tool})"),
                major: parse_major(&v),
            },
            None => DaemonVersion {
                source: "neither dpkg-query nor rpm knows the ibacm package".into(),
                major: None,
            },
        }
    }

    pub fn rule(&self) -> Rule {
        match self.major {
            Some(m) if m <= LAST_CONTAINS_RELEASE => Rule::Contains,
            Some(_) => Rule::EndsWith,
            None => Rule::Unknown,
        }
    }

    /// The report's line about the daemon.
    pub fn describe(&self) -> String {
        match self.major {
            Some(m) if m <= LAST_CONTAINS_RELEASE => format!(
                "daemon: {}, rdma-core {m}: loads the regular files whose name contains .so",
                self.source
            ),
            Some(m) => format!(
                "daemon: {}, rdma-core {m}: loads the regular files whose name ends in .so",
                self.source
            ),
            None => format!(
                "daemon: version unknown ({}): checking by the rules of every release \
                 (ibacm 28 and older load the regular files whose name contains .so, \
                 29 and later those whose name ends in .so); see --daemon-version",
                self.source
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_major_version_of_every_packaging() {
        for (v, want) in [
            ("33.2-1", Some(33)),
            ("44.0-2", Some(44)),
            ("56.1-1", Some(56)),
            ("65.0-1.1", Some(65)),
            ("48.0-1.el8", Some(48)),
            ("28.0-1ubuntu1", Some(28)),
            ("1:44.0-2", Some(44)),
            ("28", Some(28)),
            (" 29\n", Some(29)),
            ("", None),
            ("v44", None),
            ("44a", None),
        ] {
            assert_eq!(parse_major(v), want, "{v:?}");
        }
    }

    #[test]
    fn the_naming_rule_changes_after_28() {
        let v = |m| DaemonVersion {
            source: String::new(),
            major: m,
        };
        assert_eq!(v(Some(22)).rule(), Rule::Contains);
        assert_eq!(v(Some(28)).rule(), Rule::Contains);
        assert_eq!(v(Some(29)).rule(), Rule::EndsWith);
        assert_eq!(v(Some(44)).rule(), Rule::EndsWith);
        assert_eq!(v(None).rule(), Rule::Unknown);
        assert!(v(None).describe().contains("version unknown"));
    }
}
