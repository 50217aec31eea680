//! The provider's control socket (`/run/ibacm-urdma.sock`): what
//! `urdma-acm show`, `forget` and `health` ask a running provider, and
//! what it answers. One codec for both sides, as for the metrics: the
//! provider encodes ([`Answer::encode`]), the tool decodes
//! ([`Answer::decode`]) into the same types and prints them as text or
//! JSON.
//!
//! A request is one line: `show`, `show ADDRESS`, `forget ADDRESS`,
//! `forget --all` or `health`. The answer is lines of tab-separated fields,
//! the first naming the record, ended by the connection's close. Fields
//! are escaped (`\t`, `\n`, `\\`), so a name of any bytes the daemon
//! passed cannot break a record.

use crate::addr::{Address, Gid};
use std::fmt::Write as _;

/// Where the provider listens: root only (mode 0600), beside the daemon's
/// own socket, never in place of it.
pub const SOCKET: &str = "/run/ibacm-urdma.sock";
/// Longest request line read; anything longer is refused.
pub const MAX_REQUEST: usize = 256;

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Everything the provider knows, or what it knows about one address.
    Show(Option<Address>),
    /// Drops what it learned about one address, or about every one.
    Forget(Option<Address>),
    Health,
}

/// An address as an operator writes it: a name, an IPv4 or IPv6 address,
/// or `gid:` and a GID.
pub fn parse_address(s: &str) -> Result<Address, String> {
    if let Some(g) = s.strip_prefix("gid:") {
        let ip: std::net::Ipv6Addr = g.parse().map_err(|_| format!("bad GID '{g}'"))?;
        return Ok(Address::Gid(Gid(ip.octets())));
    }
    Address::parse_host(s).ok_or_else(|| format!("'{s}' is not a name, an IP address or gid:GID"))
}

/// How an address is written in a request and in answers.
pub fn show_address(a: &Address) -> String {
    match a {
        Address::Gid(g) => format!("gid:{g}"),
        a => a.to_string(),
    }
}

impl Request {
    pub fn parse(line: &str) -> Result<Request, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["show"] => Ok(Request::Show(None)),
            ["show", a] => Ok(Request::Show(Some(parse_address(a)?))),
            ["forget", "--all"] => Ok(Request::Forget(None)),
            ["forget", a] => Ok(Request::Forget(Some(parse_address(a)?))),
            ["health"] => Ok(Request::Health),
            _ => Err(format!(
                "unknown request '{}' (show [ADDRESS], forget ADDRESS|--all, health)",
                line.trim()
            )),
        }
    }

    pub fn line(&self) -> String {
        match self {
            Request::Show(None) => "show\n".into(),
            Request::Show(Some(a)) => format!("show {}\n", show_address(a)),
            Request::Forget(None) => "forget --all\n".into(),
            Request::Forget(Some(a)) => format!("forget {}\n", show_address(a)),
            Request::Health => "health\n".into(),
        }
    }
}

/// An address bound to a GID, and where that came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Binding {
    pub address: String,
    pub gid: String,
    /// `local`, `hosts`, `discovery`, `dns` or `derived`.
    pub source: String,
    /// Who confirmed it (discovery, dns), as ADDRESS:PORT.
    pub via: Option<String>,
    /// Seconds since it was last confirmed, when that is known.
    pub age: Option<f64>,
    /// Seconds until it must be confirmed again; `None`: never.
    pub expires_in: Option<f64>,
}

/// What announcements said: for one name (its holder, or `disputed`), or
/// an endpoint heard announcing names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hint {
    /// The name; empty for an endpoint's entry (names are kept as digests,
    /// so only a name asked for can be shown).
    pub name: String,
    /// Its announcer's GID, or `disputed`.
    pub gid: String,
    /// The addresses it announced from.
    pub from: Vec<String>,
    /// Names it announced that are kept (an endpoint's entry).
    pub names: u32,
    /// Seconds since last heard.
    pub age: f64,
    /// Seconds until it is dropped; `None`: never.
    pub expires_in: Option<f64>,
    /// Heard with its GID from two addresses of one family: its names are
    /// asked of the groups.
    pub conflicted: bool,
}

/// A lookup that failed and is remembered (`urdma_negative_timeout`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Failure {
    pub address: String,
    /// `ENODATA`, `ETIMEDOUT` or the status number.
    pub status: String,
    pub expires_in: Option<f64>,
}

/// Whether the provider serves, and why not fully.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    /// `serving` or `degraded`.
    pub state: String,
    pub ports: u64,
    /// `on`, `off` (urdma_discovery 0), or `down` (configured on, not
    /// running: the reason is in `problems`).
    pub discovery: String,
    pub authenticated: bool,
    pub problems: Vec<String>,
}

/// Everything one answer holds; a request fills what it asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    pub bindings: Vec<Binding>,
    pub hints: Vec<Hint>,
    pub failures: Vec<Failure>,
    /// The hosts file and how many addresses it holds (`show` without an
    /// address lists none of them: there may be a million).
    pub hosts_file: Option<(String, u64)>,
    /// What `forget` dropped.
    pub forgotten: Option<u64>,
    pub health: Option<Health>,
    /// A request refused, and why.
    pub error: Option<String>,
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => {}
            },
            (c, false) => out.push(c),
        }
    }
    out
}

fn opt_num(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

fn opt_text(v: &Option<String>) -> String {
    v.as_deref().map_or_else(|| "-".into(), escape)
}

fn num(s: &str) -> Result<Option<f64>, String> {
    match s {
        "-" => Ok(None),
        s => s.parse().map(Some).map_err(|_| format!("bad number '{s}'")),
    }
}

fn opt_unescape(s: &str) -> Option<String> {
    (s != "-").then(|| unescape(s))
}

impl Answer {
    pub fn refused(message: impl Into<String>) -> Answer {
        Answer {
            error: Some(message.into()),
            ..Answer::default()
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        for b in &self.bindings {
            let _ = writeln!(
                out,
                "binding\t{}\t{}\t{}\t{}\t{}\t{}",
                escape(&b.address),
                escape(&b.gid),
                escape(&b.source),
                opt_text(&b.via),
                opt_num(b.age),
                opt_num(b.expires_in)
            );
        }
        for h in &self.hints {
            let _ = writeln!(
                out,
                "hint\t{}\t{}\t{}\t{}\t{:.3}\t{}\t{}",
                escape(&h.name),
                escape(&h.gid),
                escape(&h.from.join(",")),
                h.names,
                h.age,
                opt_num(h.expires_in),
                u8::from(h.conflicted)
            );
        }
        for f in &self.failures {
            let _ = writeln!(
                out,
                "failure\t{}\t{}\t{}",
                escape(&f.address),
                escape(&f.status),
                opt_num(f.expires_in)
            );
        }
        if let Some((path, n)) = &self.hosts_file {
            let _ = writeln!(out, "hosts_file\t{}\t{n}", escape(path));
        }
        if let Some(n) = self.forgotten {
            let _ = writeln!(out, "forgotten\t{n}");
        }
        if let Some(h) = &self.health {
            let problems: Vec<String> = h.problems.iter().map(|p| escape(p)).collect();
            let _ = writeln!(
                out,
                "health\t{}\t{}\t{}\t{}\t{}",
                escape(&h.state),
                h.ports,
                escape(&h.discovery),
                u8::from(h.authenticated),
                problems.join("\t")
            );
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "error\t{}", escape(e));
        }
        out.push_str("end\n");
        out
    }

    /// Reads an answer back; an answer cut short (no `end`) is an error,
    /// not a short list.
    pub fn decode(text: &str) -> Result<Answer, String> {
        let mut a = Answer::default();
        let mut ended = false;
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            let bad = || format!("malformed answer line '{line}'");
            match f.as_slice() {
                ["binding", address, gid, source, via, age, expires] => a.bindings.push(Binding {
                    address: unescape(address),
                    gid: unescape(gid),
                    source: unescape(source),
                    via: opt_unescape(via),
                    age: num(age)?,
                    expires_in: num(expires)?,
                }),
                ["hint", name, gid, from, names, age, expires, conflicted] => a.hints.push(Hint {
                    name: unescape(name),
                    gid: unescape(gid),
                    from: unescape(from)
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(String::from)
                        .collect(),
                    names: names.parse().map_err(|_| bad())?,
                    age: num(age)?.ok_or_else(bad)?,
                    expires_in: num(expires)?,
                    conflicted: *conflicted == "1",
                }),
                ["failure", address, status, expires] => a.failures.push(Failure {
                    address: unescape(address),
                    status: unescape(status),
                    expires_in: num(expires)?,
                }),
                ["hosts_file", path, n] => {
                    a.hosts_file = Some((unescape(path), n.parse().map_err(|_| bad())?))
                }
                ["forgotten", n] => a.forgotten = Some(n.parse().map_err(|_| bad())?),
                ["health", state, ports, discovery, auth, problems @ ..] => {
                    a.health = Some(Health {
                        state: unescape(state),
                        ports: ports.parse().map_err(|_| bad())?,
                        discovery: unescape(discovery),
                        authenticated: *auth == "1",
                        problems: problems
                            .iter()
                            .filter(|p| !p.is_empty())
                            .map(|p| unescape(p))
                            .collect(),
                    })
                }
                ["error", e] => a.error = Some(unescape(e)),
                ["end"] => ended = true,
                _ => return Err(bad()),
            }
        }
        if !ended {
            return Err("the answer was cut short".into());
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_read_back_whatever_the_names_hold() {
        for line in [
            "show",
            "show node-a",
            "show 10.0.0.2",
            "forget --all",
            "health",
        ] {
            let r = Request::parse(line).unwrap();
            assert_eq!(r.line().trim(), line);
        }
        let gid = Request::parse("forget gid:fe80::2").unwrap();
        assert_eq!(Request::parse(gid.line().trim()), Ok(gid));
        assert!(Request::parse("show a b").is_err());
        assert!(Request::parse("forget").is_err());
        assert!(Request::parse("show gid:nonsense").is_err());

        let a = Answer {
            bindings: vec![Binding {
                address: "we\tird\\name\n".into(),
                gid: "fe80::2".into(),
                source: "discovery".into(),
                via: Some("10.0.0.2:6126".into()),
                age: Some(1.5),
                expires_in: None,
            }],
            hints: vec![Hint {
                name: String::new(),
                gid: "fe80::3".into(),
                from: vec!["10.0.0.3".into(), "fd00::3".into()],
                names: 2,
                age: 0.25,
                expires_in: Some(60.0),
                conflicted: true,
            }],
            failures: vec![Failure {
                address: "gone".into(),
                status: "ENODATA".into(),
                expires_in: Some(9.0),
            }],
            hosts_file: Some(("/etc/rdma/urdma_hosts".into(), 3)),
            forgotten: Some(4),
            health: Some(Health {
                state: "degraded".into(),
                ports: 1,
                discovery: "down".into(),
                authenticated: false,
                problems: vec!["key file: mode 0644".into(), "x".into()],
            }),
            error: Some("no".into()),
        };
        assert_eq!(Answer::decode(&a.encode()), Ok(a.clone()));
        let cut = a.encode().replace("end\n", "");
        assert!(Answer::decode(&cut).is_err());
        assert!(Answer::decode("binding\tx\nend\n").is_err());
    }
}
