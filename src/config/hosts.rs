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
use crate::fastmap::Map;
use acm_proto::text::{self, Diagnostic};

/// Lines whose address types size the tables.
const SAMPLE: usize = 256;

/// Where a remote destination is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    pub gid: Gid,
    pub lid: u16,
}

/// Every address the file names, each GID it mentions and each LID, so GID
/// and LID destinations of the same hosts resolve too.
///
/// Built for a million lines: one `Remote` per distinct GID (a host's LID
/// is shared by all its lines), and per address type a map from the
/// address to that host's index, so a line costs about one small map slot
/// plus, for a new host, 18 bytes and a GID slot.
#[derive(Default, Debug)]
pub struct Hosts {
    remotes: Vec<Remote>,
    v4: Map<[u8; 4], u32>,
    v6: Map<[u8; 16], u32>,
    names: Map<Box<str>, u32>,
    gids: Map<Gid, u32>,
    lids: Map<u16, u32>,
}

impl Hosts {
    pub fn lookup(&self, a: &Address) -> Option<Remote> {
        let index = match a {
            Address::Ip4(v4) => self.v4.get(&v4.octets()),
            Address::Ip6(v6) => self.v6.get(&v6.octets()),
            Address::Name(n) => self.names.get(n),
            Address::Gid(g) => self.gids.get(g),
            Address::Lid(l) => self.lids.get(l),
        }?;
        self.remotes.get(*index as usize).copied()
    }

    /// Addresses (names, IPv4, IPv6) the file binds.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len() + self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The destinations whose answer differs between two versions of the
    /// file: bound in one and not the other, or bound to another GID or
    /// LID. What a reload must take out of the caches.
    pub fn changes(old: &Hosts, new: &Hosts) -> Vec<Address> {
        let mut out = Vec::new();
        diff(
            old,
            new,
            &old.v4,
            &new.v4,
            |k| Address::Ip4((*k).into()),
            &mut out,
        );
        diff(
            old,
            new,
            &old.v6,
            &new.v6,
            |k| Address::Ip6((*k).into()),
            &mut out,
        );
        diff(
            old,
            new,
            &old.names,
            &new.names,
            |k| Address::Name(k.clone()),
            &mut out,
        );
        diff(
            old,
            new,
            &old.gids,
            &new.gids,
            |k| Address::Gid(*k),
            &mut out,
        );
        diff(
            old,
            new,
            &old.lids,
            &new.lids,
            |k| Address::Lid(*k),
            &mut out,
        );
        out
    }

    /// The host of `remote`, created at its first line; a LID given on any
    /// line of the host applies to all of them.
    fn host(&mut self, remote: Remote) -> Result<u32, String> {
        let next = u32::try_from(self.remotes.len()).map_err(|_| "too many hosts".to_string())?;
        let index = *self.gids.entry(remote.gid).or_insert(next);
        if index == next {
            self.remotes.push(Remote {
                gid: remote.gid,
                lid: 0,
            });
        }
        let host = &mut self.remotes[index as usize];
        if remote.lid != 0 && host.lid != remote.lid {
            if host.lid != 0 {
                self.lids.remove(&host.lid);
            }
            host.lid = remote.lid;
            self.lids.insert(remote.lid, index);
        }
        Ok(index)
    }

    /// Binds `address` to host `index`; the previous host, if another.
    fn bind(&mut self, address: &Address, index: u32) -> Option<u32> {
        match address {
            Address::Ip4(v4) => self.v4.insert(v4.octets(), index),
            Address::Ip6(v6) => self.v6.insert(v6.octets(), index),
            Address::Name(n) => self.names.insert(n.clone(), index),
            Address::Gid(_) | Address::Lid(_) => None,
        }
        .filter(|&old| old != index)
    }

    /// Reads the file's bytes: `#` starts a comment anywhere on a line,
    /// and comments may hold any bytes; a line that is not valid text, or
    /// not a valid binding, is reported at `file:line` and skipped.
    pub fn parse(bytes: impl AsRef<[u8]>, file: &str) -> (Hosts, Vec<Diagnostic>) {
        let bytes = bytes.as_ref();
        // Every table is sized once, from the line count and the mix of
        // address types in a sample: growing a table of a million entries
        // rehashes it again and again, and a second pass over the text
        // would cost as much as the growth.
        let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
        let (mut v4, mut v6, mut names) = (0usize, 0usize, 0usize);
        for (_, line) in text::lines(bytes).take(SAMPLE) {
            match text::tokens(line).next() {
                None => {}
                Some(t) if t.starts_with(b"#") => {}
                Some(t) if t.contains(&b':') => v6 += 1,
                Some(t) if t.iter().all(|b| b.is_ascii_digit() || *b == b'.') => v4 += 1,
                Some(_) => names += 1,
            }
        }
        let sampled = lines.clamp(1, SAMPLE);
        let scale = |k: usize| k * lines / sampled;
        let (v4, v6, names) = (scale(v4), scale(v6), scale(names));
        let hosts_max = v4 + v6 + names;
        let mut hosts = Hosts {
            remotes: Vec::with_capacity(hosts_max),
            v4: Map::with_capacity_and_hasher(v4, Default::default()),
            v6: Map::with_capacity_and_hasher(v6, Default::default()),
            names: Map::with_capacity_and_hasher(names, Default::default()),
            gids: Map::with_capacity_and_hasher(hosts_max, Default::default()),
            lids: Map::default(),
        };
        let mut diags = Vec::new();
        for (n, line) in text::lines(bytes) {
            let line = match line.iter().position(|&b| b == b'#') {
                Some(i) => &line[..i],
                None => line,
            };
            let diag = |message: String| Diagnostic::new(file, n, message);
            let line = match text::text(line) {
                Ok(l) => l,
                Err(e) => {
                    diags.push(diag(format!("{e}; line skipped")));
                    continue;
                }
            };
            let mut tokens = line.split_ascii_whitespace();
            let Some(addr) = tokens.next() else { continue };
            match parse_line(addr, tokens).and_then(|(a, r)| Ok((a, hosts.host(r)?))) {
                Ok((address, index)) => {
                    if hosts.bind(&address, index).is_some() {
                        diags.push(diag(format!("{address} listed again; the later line wins")));
                    }
                }
                Err(message) => diags.push(diag(format!("{message}; line skipped"))),
            }
        }
        hosts.remotes.shrink_to_fit();
        (hosts, diags)
    }
}

/// One table's part of [`Hosts::changes`].
fn diff<K: std::hash::Hash + Eq>(
    old: &Hosts,
    new: &Hosts,
    old_map: &Map<K, u32>,
    new_map: &Map<K, u32>,
    address: impl Fn(&K) -> Address,
    out: &mut Vec<Address>,
) {
    let remote = |h: &Hosts, i: &u32| h.remotes.get(*i as usize).copied();
    for (k, i) in old_map {
        if new_map.get(k).and_then(|j| remote(new, j)) != remote(old, i) {
            out.push(address(k));
        }
    }
    out.extend(
        new_map
            .keys()
            .filter(|k| !old_map.contains_key(*k))
            .map(&address),
    );
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

    #[test]
    fn changes_name_what_was_added_removed_or_moved() {
        let (old, _) = Hosts::parse(
            "a fe80::1 lid=5\n10.0.0.1 fe80::1\nb fe80::2\nc fe80::3\nfd00::4 fe80::4\n",
            "h",
        );
        let (new, _) = Hosts::parse(
            "a fe80::1 lid=6\n10.0.0.1 fe80::1\nb fe80::2\nc fe80::33\nd fe80::2\n",
            "h",
        );
        let mut changed: Vec<String> = Hosts::changes(&old, &new)
            .iter()
            .map(|a| a.to_string())
            .collect();
        changed.sort();
        let mut expected: Vec<String> = [
            // fe80::1's LID changed: all its addresses, its GID, both LIDs.
            Address::name("a").unwrap(),
            Address::Ip4([10, 0, 0, 1].into()),
            Address::Gid("fe80::1".parse().unwrap()),
            Address::Lid(5),
            Address::Lid(6),
            // Moved to another GID.
            Address::name("c").unwrap(),
            Address::Gid("fe80::3".parse().unwrap()),
            Address::Gid("fe80::33".parse().unwrap()),
            // Removed, with its host.
            Address::parse_host("fd00::4").unwrap(),
            Address::Gid("fe80::4".parse().unwrap()),
            // Added to a known host.
            Address::name("d").unwrap(),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        expected.sort();
        assert_eq!(changed, expected);
        assert!(Hosts::changes(&new, &new).is_empty());
    }
}
