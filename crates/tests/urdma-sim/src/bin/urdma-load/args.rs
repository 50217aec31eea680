//! The command line of `urdma-load`.

use acm_proto::msg::{self, Entry};
use std::time::Duration;

pub const USAGE: &str =
    "usage: urdma-load [-S PATH] [-s SRC] (-d DEST | --dest-file FILE | --range PREFIX N)...
                  [-f i|n] [-c N] [-n COUNT | --duration SECS] [--window W] [--nodelay]
                  [--timeout SECS] [--verbose] [--abandon] [--poll] [--interval-ms MS]";

#[derive(Clone, Debug)]
pub struct Addr {
    pub text: String,
    /// Its entry in a request, flags left to the request.
    pub entry: Entry,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Format {
    Auto,
    Ip,
    Name,
}

#[derive(Debug)]
pub struct Config {
    pub socket: String,
    pub src: Option<Addr>,
    pub dests: Vec<Addr>,
    pub conns: usize,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub window: usize,
    pub nodelay: bool,
    pub timeout: Duration,
    pub verbose: bool,
    pub abandon: bool,
    pub poll: bool,
    /// Each connection sends a request at most this often.
    pub interval: Option<Duration>,
}

pub fn parse_addr(text: &str, format: Format) -> Result<Addr, String> {
    // The daemon and providers read names as C strings: a NUL after them.
    let long = || format!("name '{text}' must be 1..=63 bytes");
    let entry = match format {
        Format::Ip => msg::ip_entry(0, text)
            .ok_or_else(|| format!("'{text}' is not an IPv4 or IPv6 address (-f i)"))?,
        Format::Auto => msg::address_entry(0, text).ok_or_else(long)?,
        Format::Name => msg::name_entry(0, text).ok_or_else(long)?,
    };
    Ok(Addr {
        text: text.to_string(),
        entry,
    })
}

pub fn parse_num<T: std::str::FromStr>(opt: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{opt}: '{v}' is not a valid number"))
}

pub fn parse_secs(opt: &str, v: &str) -> Result<Duration, String> {
    let s: f64 = parse_num(opt, v)?;
    if !(s.is_finite() && s > 0.0) {
        return Err(format!("{opt}: must be a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(s))
}

/// `Ok(None)` means `--help`.
pub fn parse_args(args: &[String]) -> Result<Option<Config>, String> {
    let mut socket = "/run/ibacm-unix.sock".to_string();
    let mut src_text = None;
    // Kept as text until the end because `-f` may come after the addresses.
    let mut dest_texts: Vec<String> = Vec::new();
    let mut format = Format::Auto;
    let mut conns = 1usize;
    let mut count = None;
    let mut duration = None;
    let mut window = 1usize;
    let mut nodelay = false;
    let mut timeout = Duration::from_secs(30);
    let mut verbose = false;
    let mut abandon = false;
    let mut poll = false;
    let mut interval = None;

    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "-S" => socket = value("-S")?,
            "-s" => src_text = Some(value("-s")?),
            "-d" => dest_texts.push(value("-d")?),
            "--dest-file" => {
                let path = value("--dest-file")?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("--dest-file {path}: {e}"))?;
                dest_texts.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with('#'))
                        .map(String::from),
                );
            }
            "--range" => {
                let prefix = value("--range")?;
                let n: u64 = parse_num("--range", &value("--range")?)?;
                if n == 0 {
                    return Err("--range: N must be at least 1".into());
                }
                dest_texts.extend((1..=n).map(|i| format!("{prefix}{i}")));
            }
            "-f" => {
                format = match value("-f")?.as_str() {
                    "i" => Format::Ip,
                    "n" => Format::Name,
                    other => return Err(format!("-f: '{other}' is not i or n")),
                }
            }
            "-c" => conns = parse_num("-c", &value("-c")?)?,
            "-n" => count = Some(parse_num("-n", &value("-n")?)?),
            "--window" => window = parse_num("--window", &value("--window")?)?,
            "--nodelay" => nodelay = true,
            "--duration" => duration = Some(parse_secs("--duration", &value("--duration")?)?),
            "--timeout" => timeout = parse_secs("--timeout", &value("--timeout")?)?,
            "-v" | "--verbose" => verbose = true,
            "--abandon" => abandon = true,
            "--poll" => poll = true,
            "--interval-ms" => {
                let ms: u64 = parse_num("--interval-ms", &value("--interval-ms")?)?;
                interval = Some(Duration::from_millis(ms));
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }

    if dest_texts.is_empty() {
        return Err("no destination: give -d, --dest-file or --range".into());
    }
    if conns == 0 || window == 0 {
        return Err("-c and --window must be at least 1".into());
    }
    if count.is_some() && duration.is_some() {
        return Err("-n and --duration exclude each other".into());
    }
    if interval.is_some() && (poll || abandon) {
        return Err(
            "--interval-ms paces threaded connections: not with --poll or --abandon".into(),
        );
    }
    if count == Some(0) {
        return Err("-n must be at least 1".into());
    }
    let src = src_text.map(|s| parse_addr(&s, format)).transpose()?;
    let dests = dest_texts
        .iter()
        .map(|d| parse_addr(d, format))
        .collect::<Result<Vec<_>, _>>()?;
    if duration.is_none() && count.is_none() {
        count = Some(dests.len() as u64);
    }
    Ok(Some(Config {
        socket,
        src,
        dests,
        conns,
        count,
        duration,
        window,
        nodelay,
        timeout,
        verbose,
        abandon,
        poll,
        interval,
    }))
}
