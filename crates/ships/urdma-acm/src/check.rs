//! `urdma-acm check-config`: the problems the provider would log for an
//! options file and the hosts file it names, found by the provider's own
//! parsers, before the daemon is (re)started.

use crate::daemon::DEFAULT_OPTS_FILE;
use ibacm_urdma::config::{Config, Diagnostic};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The options file to check.
    #[arg(value_name = "FILE", default_value = DEFAULT_OPTS_FILE)]
    pub file: PathBuf,
    /// The result as one JSON object (schema in urdma-acm(8)); the exit
    /// status is the same.
    #[arg(long)]
    pub json: bool,
}

/// `check-config --json`.
#[derive(serde::Serialize)]
struct CheckJson<'a> {
    file: String,
    ok: bool,
    problems: Vec<ProblemJson<'a>>,
    hosts_file: Option<String>,
    /// Addresses the hosts file binds; null when it is absent or unreadable.
    hosts: Option<usize>,
}

#[derive(serde::Serialize)]
struct ProblemJson<'a> {
    file: &'a str,
    /// 0: the file as a whole.
    line: usize,
    message: &'a str,
}

/// What checking found: every problem, and what the files hold.
pub struct Checked {
    pub problems: Vec<Diagnostic>,
    pub hosts_file: Option<PathBuf>,
    /// Addresses the hosts file binds; `None` if there is no hosts file.
    pub hosts: Option<usize>,
}

/// Reads and checks the options file and its hosts file the way the
/// provider loads them: a missing hosts file is no problem (the provider
/// then knows no static hosts), an unreadable one is.
pub fn check(opts: &Path) -> Checked {
    // A file the operator names must be there, though for the provider
    // (and the daemon) a missing options file means every default.
    if let Err(e) = std::fs::metadata(opts) {
        return Checked {
            problems: vec![Diagnostic::new(
                &opts.display().to_string(),
                0,
                format!("cannot read: {e}"),
            )],
            hosts_file: None,
            hosts: None,
        };
    }
    // The provider's own reader, so both report the same problems.
    let (cfg, mut problems) = Config::load(opts);
    // The provider's own reader: the same problems, worded the same.
    let read = ibacm_urdma::config::reload::read_hosts(&cfg.hosts_file);
    let readable = read.problems.iter().all(|p| p.line != 0);
    problems.extend(read.problems);
    let hosts = (!read.absent && readable).then(|| read.hosts.len());
    // The key file as the provider loads it when discovery starts: a file
    // others can read is refused there, so it is a problem here.
    if let (true, Some(key_file)) = (cfg.discovery, &cfg.auth_key_file) {
        if let Err(d) = ibacm_urdma::config::keyfile::KeyFile::load(key_file) {
            problems.push(d);
        }
    }
    Checked {
        problems,
        hosts_file: Some(cfg.hosts_file),
        hosts,
    }
}

pub fn run(args: &Args) -> ExitCode {
    let checked = check(&args.file);
    let status = match checked.problems.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    };
    if args.json {
        let json = CheckJson {
            file: args.file.display().to_string(),
            ok: checked.problems.is_empty(),
            problems: checked
                .problems
                .iter()
                .map(|p| ProblemJson {
                    file: &p.file,
                    line: p.line,
                    message: &p.message,
                })
                .collect(),
            hosts_file: checked.hosts_file.as_ref().map(|f| f.display().to_string()),
            hosts: checked.hosts,
        };
        println!(
            "{}",
            serde_json::to_string(&json).expect("strings and numbers only")
        );
        return status;
    }
    for p in &checked.problems {
        println!("{p}");
    }
    if !checked.problems.is_empty() {
        eprintln!("urdma-acm: {} problem(s) found", checked.problems.len());
        return ExitCode::FAILURE;
    }
    let hosts = match (&checked.hosts_file, checked.hosts) {
        (Some(f), Some(n)) => format!("hosts file {}: {n} addresses", f.display()),
        (Some(f), None) => format!("hosts file {}: absent (no static hosts)", f.display()),
        (None, _) => String::new(),
    };
    println!("{}: no problems; {hosts}", args.file.display());
    ExitCode::SUCCESS
}
