//! `urdma-acm`: the operator's tool for the urdma provider of ibacm.

mod check;
mod control;
mod daemon;
mod dl;
mod doctor;
mod loading;
mod release;
mod report;
mod stats;
mod verbs;

use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "urdma-acm",
    version,
    about = "Checks and inspects the urdma provider of the ibacm daemon",
    after_help = "See urdma-acm(8) and ibacm_urdma(7)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Says what the daemon will load from its provider directory (each
    /// file loaded the daemon's way in a child process), then lists the
    /// RDMA devices and says, per port, whether the stock ibacm daemon will
    /// serve it with urdma, and why not. Exits 0 when urdma loads exactly
    /// once and at least one port can be served.
    Doctor(doctor::Args),
    /// Validates the urdma_ keys of an options file and the hosts file it
    /// names; prints every problem as FILE:LINE: MESSAGE and exits non-zero
    /// if there is any (line 0: the file as a whole).
    CheckConfig(check::Args),
    /// Shows the provider's counters per endpoint, read from a running
    /// daemon over its unix socket, as a table.
    Stats(stats::Args),
    /// Lists what the running provider knows: bindings (address, GID,
    /// where from, how old, until when), hints and remembered failures;
    /// of one ADDRESS, or all (asked over its control socket).
    Show(control::ShowArgs),
    /// Makes the running provider forget what it learned about ADDRESS
    /// (or everything, --all): the next request asks the network.
    Forget(control::ForgetArgs),
    /// Says whether the provider serves: exit 0 serving, 1 degraded, 2 not
    /// running. Never starts the daemon.
    Health(control::HealthArgs),
    /// Prints the completion script for SHELL (bash, zsh, fish, elvish or
    /// powershell) on stdout; the packages install bash's, zsh's and
    /// fish's.
    Completions {
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    // doctor's child, which loads one provider file the daemon's way: not a
    // subcommand, so that neither --help nor the completions offer it.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let [_, command, file] = argv.as_slice() {
        if command == dl::CHILD_COMMAND {
            return dl::child(std::path::Path::new(file));
        }
    }
    match Cli::parse().command {
        Command::Doctor(args) => doctor::run(&args),
        Command::CheckConfig(args) => check::run(&args),
        Command::Stats(args) => stats::run(&args),
        Command::Show(args) => control::show(&args),
        Command::Forget(args) => control::forget(&args),
        Command::Health(args) => control::health(&args),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "urdma-acm", &mut script);
            if shell == clap_complete::Shell::Bash {
                // clap_complete 4.6 names a subcommand's branch after the
                // hyphenated program name otherwise than it sets it, so
                // nothing after `urdma-acm SUB` would complete (tested).
                let text = String::from_utf8_lossy(&script)
                    .replace("urdma__subcmd__acm__subcmd__", "urdma__acm__subcmd__");
                script = text.into_bytes();
            }
            // A closed pipe (`| head`) is no error worth a panic.
            match std::io::stdout().write_all(&script) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            }
        }
    }
}
