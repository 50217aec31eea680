//! The static hosts file: acmp's `ibacm_hosts.data` format, so existing
//! files work, with optional `key=value` fields after the GID.
//!
//! ```text
//! # ADDRESS             GID                        [lid=N]
//! node2                 fe80::5054:ff:fe12:3457    lid=7
//! 10.0.0.2              fe80::5054:ff:fe12:3457
//! fd00::2               fe80::5054:ff:fe12:3457
//! ```

use crate::addr::{Address, Gid};
use crate::config::Diagnostic;
use crate::fastmap::Map;

/// Where a remote destination is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    pub gid: Gid,
    pub lid: u16,
}

/// Every address the file names, plus each GID (and LID) it mentions, so
/// GID and LID destinations of the same hosts resolve too.
#[derive(Default, Debug)]
pub struct Hosts {
    map: Map<Address, Remote>,
}

impl Hosts {
    pub fn lookup(&self, a: &Address) -> Option<Remote> {
        self.map.get(a).copied()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn parse(text: &str, file: &str) -> (Hosts, Vec<Diagnostic>) {
        let mut hosts = Hosts::default();
        let mut diags = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("");
            let mut tokens = line.split_whitespace();
            let Some(addr) = tokens.next() else { continue };
            let diag = |message: String| Diagnostic {
                file: file.to_string(),
                line: n + 1,
                message,
            };
            match parse_line(addr, tokens) {
                Ok((address, remote)) => {
                    if let Some(old) = hosts.map.insert(address.clone(), remote) {
                        if old != remote {
                            diags
                                .push(diag(format!("{address} listed again; the later line wins")));
                        }
                    }
                    hosts.map.entry(Address::Gid(remote.gid)).or_insert(remote);
                    if remote.lid != 0 {
                        hosts.map.entry(Address::Lid(remote.lid)).or_insert(remote);
                    }
                }
                Err(message) => diags.push(diag(format!("{message}; line skipped"))),
            }
        }
        // A LID belongs to the host, not to one of its names: lines of the
        // same GID without `lid=` share the one given elsewhere.
        let lids: Map<Gid, u16> = hosts
            .map
            .values()
            .filter(|r| r.lid != 0)
            .map(|r| (r.gid, r.lid))
            .collect();
        for r in hosts.map.values_mut().filter(|r| r.lid == 0) {
            r.lid = lids.get(&r.gid).copied().unwrap_or(0);
        }
        (hosts, diags)
    }
}

fn parse_line<'a>(
    addr: &str,
    mut rest: impl Iterator<Item = &'a str>,
) -> Result<(Address, Remote), String> {
    let address = Address::parse_host(addr).ok_or_else(|| {
        format!("'{addr}' is not an IPv4/IPv6 address or a host name of at most 63 characters")
    })?;
    let gid_text = rest
        .next()
        .ok_or_else(|| format!("no GID after '{addr}'"))?;
    let gid: Gid = gid_text.parse()?;
    if gid.is_zero() {
        return Err(format!("GID {gid_text} is zero"));
    }
    let mut remote = Remote { gid, lid: 0 };
    for field in rest {
        match field.split_once('=') {
            Some(("lid", v)) => {
                remote.lid = match v.parse::<u16>() {
                    Ok(l) if (1..0xc000).contains(&l) => l,
                    _ => return Err(format!("'{v}' is not a unicast LID (1-49151)")),
                }
            }
            _ => return Err(format!("unknown field '{field}' (expected lid=N)")),
        }
    }
    Ok((address, remote))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_acmp_files_and_extra_fields() {
        let text = "\
# comment line
node2 fe80::5054:ff:fe12:3457 lid=7
10.0.0.2\tfe80::5054:ff:fe12:3457   # trailing comment
fd00::2 fe80::5054:ff:fe12:3457

NODE3 fe80::3
";
        let (h, d) = Hosts::parse(text, "hosts");
        assert!(d.is_empty(), "{d:?}");
        let r2 = Remote {
            gid: "fe80::5054:ff:fe12:3457".parse().unwrap(),
            lid: 7,
        };
        assert_eq!(h.lookup(&Address::name("node2").unwrap()), Some(r2));
        assert_eq!(h.lookup(&Address::Lid(7)), Some(r2));
        assert_eq!(h.lookup(&Address::Gid(r2.gid)), Some(r2));
        assert_eq!(
            h.lookup(&Address::Ip4([10, 0, 0, 2].into())),
            Some(r2),
            "the host's LID is shared"
        );
        assert!(h.lookup(&Address::parse_host("fd00::2").unwrap()).is_some());
        assert!(
            h.lookup(&Address::name("node3").unwrap()).is_some(),
            "names are case-insensitive"
        );
        assert!(h.lookup(&Address::name("node4").unwrap()).is_none());
    }

    #[test]
    fn bad_lines_are_skipped_and_good_ones_kept() {
        let text = "good fe80::1\nbad-gid fe80::zz\nlonely\n10.0.0.9 ::\nx fe80::2 lid=0\ny fe80::2 color=red\ngood2 fe80::3\n";
        let (h, d) = Hosts::parse(text, "/etc/rdma/h");
        let lines: Vec<String> = d.iter().map(|d| d.to_string()).collect();
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert!(lines[0].starts_with("/etc/rdma/h:2: 'fe80::zz' is not a GID"));
        assert!(lines[1].starts_with("/etc/rdma/h:3: no GID after 'lonely'"));
        assert!(lines[2].starts_with("/etc/rdma/h:4: GID :: is zero"));
        assert!(lines[3].starts_with("/etc/rdma/h:5: '0' is not a unicast LID"));
        assert!(lines[4].starts_with("/etc/rdma/h:6: unknown field 'color=red'"));
        assert!(lines.iter().all(|l| l.ends_with("line skipped")));
        assert!(h.lookup(&Address::name("good").unwrap()).is_some());
        assert!(h.lookup(&Address::name("good2").unwrap()).is_some());
        assert!(h.lookup(&Address::name("x").unwrap()).is_none());
    }
}
