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
    let mut given = Given::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            flag if given.set_flag(flag) => {}
            option => given.set_option(option, &mut value)?,
        }
    }
    given.check()?;
    given.into_config().map(Some)
}

/// The options as given, before they are checked together.
struct Given {
    socket: String,
    src_text: Option<String>,
    /// Kept as text until the end because `-f` may come after the addresses.
    dest_texts: Vec<String>,
    format: Format,
    conns: usize,
    count: Option<u64>,
    duration: Option<Duration>,
    window: usize,
    nodelay: bool,
    timeout: Duration,
    verbose: bool,
    abandon: bool,
    poll: bool,
    interval: Option<Duration>,
}

impl Default for Given {
    fn default() -> Self {
        Given {
            socket: "/run/ibacm-unix.sock".to_string(),
            src_text: None,
            dest_texts: Vec::new(),
            format: Format::Auto,
            conns: 1,
            count: None,
            duration: None,
            window: 1,
            nodelay: false,
            timeout: Duration::from_secs(30),
            verbose: false,
            abandon: false,
            poll: false,
            interval: None,
        }
    }
}

impl Given {
    /// Sets the option `flag` if it is one without a value.
    fn set_flag(&mut self, flag: &str) -> bool {
        let set = match flag {
            "--nodelay" => &mut self.nodelay,
            "-v" | "--verbose" => &mut self.verbose,
            "--abandon" => &mut self.abandon,
            "--poll" => &mut self.poll,
            _ => return false,
        };
        *set = true;
        true
    }

    /// Sets `option` from the value(s) `value` takes from the command line.
    fn set_option(
        &mut self,
        option: &str,
        value: &mut impl FnMut(&str) -> Result<String, String>,
    ) -> Result<(), String> {
        match option {
            "-S" => self.socket = value("-S")?,
            "-s" => self.src_text = Some(value("-s")?),
            "-d" => self.dest_texts.push(value("-d")?),
            "--dest-file" => self.dest_texts.extend(dest_file(&value("--dest-file")?)?),
            "--range" => {
                let prefix = value("--range")?;
                let n: u64 = parse_num("--range", &value("--range")?)?;
                if n == 0 {
                    return Err("--range: N must be at least 1".into());
                }
                self.dest_texts
                    .extend((1..=n).map(|i| format!("{prefix}{i}")));
            }
            "-f" => {
                self.format = match value("-f")?.as_str() {
                    "i" => Format::Ip,
                    "n" => Format::Name,
                    other => return Err(format!("-f: '{other}' is not i or n")),
                }
            }
            "-c" => self.conns = parse_num("-c", &value("-c")?)?,
            "-n" => self.count = Some(parse_num("-n", &value("-n")?)?),
            "--window" => self.window = parse_num("--window", &value("--window")?)?,
            "--duration" => self.duration = Some(parse_secs("--duration", &value("--duration")?)?),
            "--timeout" => self.timeout = parse_secs("--timeout", &value("--timeout")?)?,
            "--interval-ms" => {
                let ms: u64 = parse_num("--interval-ms", &value("--interval-ms")?)?;
                self.interval = Some(Duration::from_millis(ms));
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
        Ok(())
    }

    /// The rules between options.
    fn check(&self) -> Result<(), String> {
        if self.dest_texts.is_empty() {
            return Err("no destination: give -d, --dest-file or --range".into());
        }
        if self.conns == 0 || self.window == 0 {
            return Err("-c and --window must be at least 1".into());
        }
        if self.count.is_some() && self.duration.is_some() {
            return Err("-n and --duration exclude each other".into());
        }
        if self.interval.is_some() && (self.poll || self.abandon) {
            return Err(
                "--interval-ms paces threaded connections: not with --poll or --abandon".into(),
            );
        }
        if self.count == Some(0) {
            return Err("-n must be at least 1".into());
        }
        Ok(())
    }

    /// The addresses parsed in the format given, and one request per
    /// destination unless a count or a duration is given.
    fn into_config(self) -> Result<Config, String> {
        let format = self.format;
        let src = self.src_text.map(|s| parse_addr(&s, format)).transpose()?;
        let dests = self
            .dest_texts
            .iter()
            .map(|d| parse_addr(d, format))
            .collect::<Result<Vec<_>, _>>()?;
        let count = match (self.count, self.duration) {
            (None, None) => Some(dests.len() as u64),
            (count, _) => count,
        };
        Ok(Config {
            socket: self.socket,
            src,
            dests,
            conns: self.conns,
            count,
            duration: self.duration,
            window: self.window,
            nodelay: self.nodelay,
            timeout: self.timeout,
            verbose: self.verbose,
            abandon: self.abandon,
            poll: self.poll,
            interval: self.interval,
        })
    }
}

/// The destinations in file `path`: one a line, blank lines and `#`
/// comments left out.
fn dest_file(path: &str) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--dest-file {path}: {e}"))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect())
}
