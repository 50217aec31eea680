//! `urdma-acm show`, `forget` and `health`: the running provider asked
//! over its own control socket (`ibacm_urdma::control`), never the
//! daemon's, so none of them starts a daemon that systemd activates by
//! its socket.

use ibacm_urdma::control::{self, Answer, Binding, Failure, Health, Hint, Request};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The provider answers from a table walk under its lock; a provider that
/// does not answer in this time is stuck.
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug)]
pub struct Common {
    /// The provider's control socket.
    #[arg(short = 'C', long = "control", value_name = "PATH", default_value = control::SOCKET)]
    pub control: PathBuf,
    /// The answer as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Bindings: this host's addresses (local), the hosts file's (hosts; only the
one asked for, with ADDRESS), and what lookups found: from the name's or
address's holder (discovery), the address the system's resolver gave
(dns), or a derivation (derived); with who confirmed it (VIA), how long
ago (AGE) and how long it is kept (EXPIRES, - for as long as its source).
Hints: what announcements said. Without ADDRESS, the endpoints heard
announcing names (names are kept as digests); with it, that name's
announcer, or 'disputed'. Failures: lookups that failed and are remembered
(urdma_negative_timeout).")]
pub struct ShowArgs {
    /// One address: a name, an IPv4 or IPv6 address, or gid:GID.
    #[arg(value_name = "ADDRESS")]
    pub address: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Drops what lookups and announcements taught the provider about ADDRESS
(its binding, a failure remembered, its hint) and the paths cached for it,
so that the next request asks the network. This host's addresses and the
hosts file's are not learned and are refused. Logged in the daemon's log.")]
pub struct ForgetArgs {
    /// A name, an IPv4 or IPv6 address, or gid:GID.
    #[arg(
        value_name = "ADDRESS",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub address: Option<String>,
    /// Everything learned, and every cached path.
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Exit status: 0 serving; 1 degraded (no port served, or discovery configured
on and not running: a key file refused, a socket that could not be
opened); 2 not running (nothing answers on the control socket). It never
starts the daemon.")]
pub struct HealthArgs {
    #[command(flatten)]
    pub common: Common,
}

/// Asks the provider at `socket`.
fn ask(socket: &Path, request: &Request) -> Result<Answer, String> {
    let mut s = UnixStream::connect(socket).map_err(|e| {
        format!(
            "no provider answers at {}: {e} (is ibacm running with urdma? see --control)",
            socket.display()
        )
    })?;
    let io = |e: std::io::Error| format!("talking to the provider: {e}");
    s.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    s.write_all(request.line().as_bytes()).map_err(io)?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(io)?;
    Answer::decode(&text)
}

fn address(s: &str) -> Result<ibacm_urdma::addr::Address, String> {
    control::parse_address(s)
}

/// Seconds as people read them: `850ms`, `42s`, `3m20s`, `23h59m`.
fn duration(s: Option<f64>) -> String {
    let Some(s) = s else {
        return "-".into();
    };
    let whole = s as u64;
    match whole {
        _ if s < 1.0 => format!("{}ms", (s * 1000.0) as u64),
        0..60 => format!("{whole}s"),
        60..3600 => format!("{}m{}s", whole / 60, whole % 60),
        _ => format!("{}h{}m", whole / 3600, whole % 3600 / 60),
    }
}

/// Rows with aligned columns, under a heading.
fn table(heading: &str, header: &[&str], rows: Vec<Vec<String>>) -> String {
    if rows.is_empty() {
        return format!("{heading}: none\n");
    }
    let mut all = vec![header.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    all.extend(rows);
    let mut out = format!("{heading}:\n");
    for line in crate::stats::aligned(&all) {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

fn binding_json(b: &Binding) -> Value {
    json!({"address": b.address, "gid": b.gid, "source": b.source, "via": b.via,
           "age_seconds": b.age, "expires_in_seconds": b.expires_in})
}

fn hint_json(h: &Hint) -> Value {
    json!({"name": (!h.name.is_empty()).then_some(&h.name), "gid": h.gid, "from": h.from,
           "names": h.names, "age_seconds": h.age, "expires_in_seconds": h.expires_in,
           "conflicted": h.conflicted})
}

fn failure_json(f: &Failure) -> Value {
    json!({"address": f.address, "status": f.status, "expires_in_seconds": f.expires_in})
}

/// `show` as text.
fn show_text(a: &Answer) -> String {
    let bindings = a
        .bindings
        .iter()
        .map(|b| {
            vec![
                b.address.clone(),
                b.gid.clone(),
                b.source.clone(),
                b.via.clone().unwrap_or_else(|| "-".into()),
                duration(b.age),
                duration(b.expires_in),
            ]
        })
        .collect();
    let hints = a
        .hints
        .iter()
        .map(|h| {
            let name = if h.name.is_empty() { "-" } else { &h.name };
            let gid = match h.conflicted {
                true => format!("{} (conflicted)", h.gid),
                false => h.gid.clone(),
            };
            vec![
                name.to_string(),
                gid,
                h.from.join(","),
                h.names.to_string(),
                duration(Some(h.age)),
                duration(h.expires_in),
            ]
        })
        .collect();
    let failures = a
        .failures
        .iter()
        .map(|f| vec![f.address.clone(), f.status.clone(), duration(f.expires_in)])
        .collect();
    let mut out = table(
        "bindings",
        &["ADDRESS", "GID", "SOURCE", "VIA", "AGE", "EXPIRES"],
        bindings,
    );
    out += &table(
        "hints",
        &["NAME", "GID", "FROM", "NAMES", "HEARD", "EXPIRES"],
        hints,
    );
    out += &table("failures", &["ADDRESS", "STATUS", "EXPIRES"], failures);
    if let Some((path, n)) = &a.hosts_file {
        out += &format!("hosts file {path}: {n} addresses\n");
    }
    out
}

fn health_json(h: &Health) -> Value {
    json!({"state": h.state, "ports": h.ports, "discovery": h.discovery,
           "authenticated": h.authenticated, "problems": h.problems})
}

/// Prints `value` as JSON or `text`; a refusal is an error either way.
fn print(a: &Answer, json: bool, value: Value, text: String) -> ExitCode {
    if let Some(e) = &a.error {
        if json {
            println!("{}", json!({ "error": e }));
        }
        eprintln!("urdma-acm: {e}");
        return ExitCode::FAILURE;
    }
    if json {
        println!("{value}");
    } else {
        print!("{text}");
    }
    ExitCode::SUCCESS
}

fn failed(json: bool, e: &str, code: u8) -> ExitCode {
    if json {
        println!("{}", json!({ "error": e }));
    }
    eprintln!("urdma-acm: {e}");
    ExitCode::from(code)
}

pub fn show(args: &ShowArgs) -> ExitCode {
    let json = args.common.json;
    let only = match args.address.as_deref().map(address).transpose() {
        Ok(a) => a,
        Err(e) => return failed(json, &e, 2),
    };
    match ask(&args.common.control, &Request::Show(only)) {
        Ok(a) => {
            let value = json!({
                "bindings": a.bindings.iter().map(binding_json).collect::<Vec<_>>(),
                "hints": a.hints.iter().map(hint_json).collect::<Vec<_>>(),
                "failures": a.failures.iter().map(failure_json).collect::<Vec<_>>(),
                "hosts_file": a.hosts_file.as_ref().map(|(p, n)| json!({"path": p, "addresses": n})),
            });
            print(&a, json, value, show_text(&a))
        }
        Err(e) => failed(json, &e, 1),
    }
}

pub fn forget(args: &ForgetArgs) -> ExitCode {
    let json = args.common.json;
    let which = match args.address.as_deref().map(address).transpose() {
        Ok(a) => a,
        Err(e) => return failed(json, &e, 2),
    };
    match ask(&args.common.control, &Request::Forget(which)) {
        Ok(a) => {
            let n = a.forgotten.unwrap_or(0);
            let what = args.address.as_deref().unwrap_or("everything learned");
            let text = format!("{what}: {n} entries forgotten\n");
            print(&a, json, json!({ "forgotten": n }), text)
        }
        Err(e) => failed(json, &e, 1),
    }
}

pub fn health(args: &HealthArgs) -> ExitCode {
    let json = args.common.json;
    let h = match ask(&args.common.control, &Request::Health) {
        Ok(Answer {
            health: Some(h), ..
        }) => h,
        Ok(a) => {
            let e = a
                .error
                .unwrap_or_else(|| "the provider said nothing of its health".into());
            return failed(json, &e, 2);
        }
        Err(e) => {
            let value = json!({"state": "not running", "problems": [e]});
            if json {
                println!("{value}");
            }
            eprintln!("urdma-acm: {e}");
            return ExitCode::from(2);
        }
    };
    if json {
        println!("{}", health_json(&h));
    } else {
        let auth = if h.authenticated {
            ", authenticated"
        } else {
            ""
        };
        println!(
            "{}: {} port(s), discovery {}{auth}",
            h.state, h.ports, h.discovery
        );
        for p in &h.problems {
            println!("  {p}");
        }
    }
    ExitCode::from(u8::from(h.state != "serving"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_say_them() {
        let shown: Vec<String> = [None, Some(0.25), Some(42.0), Some(200.0), Some(86_340.0)]
            .into_iter()
            .map(duration)
            .collect();
        assert_eq!(shown, ["-", "250ms", "42s", "3m20s", "23h59m"]);
    }

    #[test]
    fn show_lists_each_kind_under_its_heading() {
        let a = Answer {
            bindings: vec![Binding {
                address: "node-b".into(),
                gid: "fe80::2".into(),
                source: "discovery".into(),
                via: Some("10.0.0.2:6126".into()),
                age: Some(3.0),
                expires_in: Some(120.0),
            }],
            hosts_file: Some(("/etc/rdma/urdma_hosts".into(), 0)),
            ..Answer::default()
        };
        assert_eq!(
            show_text(&a),
            "bindings:\n  \
             ADDRESS  GID      SOURCE     VIA            AGE  EXPIRES\n  \
             node-b   fe80::2  discovery  10.0.0.2:6126  3s   2m0s\n\
             hints: none\nfailures: none\nhosts file /etc/rdma/urdma_hosts: 0 addresses\n"
        );
    }
}
