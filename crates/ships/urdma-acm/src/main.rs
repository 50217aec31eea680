//! `urdma-acm`: the operator's tool for the urdma provider of ibacm.

mod check;
mod daemon;
mod dl;
mod doctor;
mod loading;
mod report;
mod stats;
mod verbs;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
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
    /// Internal (doctor runs it): loads FILE as the daemon does, in a
    /// process of its own.
    #[command(name = dl::CHILD_COMMAND, hide = true)]
    LoadProvider { file: PathBuf },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Doctor(args) => doctor::run(&args),
        Command::CheckConfig(args) => check::run(&args),
        Command::Stats(args) => stats::run(&args),
        Command::LoadProvider { file } => dl::child(&file),
    }
}
