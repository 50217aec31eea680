//! The control FIFO (`URDMA_SIM_CONTROL`): lets a test change ports and
//! inject async events while the daemon runs.
//!
//! Grammar, one command per line (`#` comments and blank lines ignored):
//!   event DEV PORT NAME        NAME: port_active port_err lid_change
//!                              pkey_change gid_change sm_change
//!                              client_reregister
//!   set DEV PORT KEY VALUE     KEY: any port key of the config file
//!
//! Every processed line is acknowledged on stderr as
//! `urdma-sim: control: ok: LINE` or `urdma-sim: control: error: MSG: LINE`,
//! which is how a harness learns that a command has taken effect (a write to
//! a FIFO returns before the reader has seen it).

use crate::state::Hardware;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Once;

static STARTED: Once = Once::new();

/// Starts the reader thread once per process, if the variable is set.
/// `make_fifo` is the C boundary's (the one module with `unsafe`).
pub fn start(sim: &'static Hardware, make_fifo: fn(&Path) -> std::io::Result<()>) {
    STARTED.call_once(|| {
        let Some(path) = std::env::var_os("URDMA_SIM_CONTROL").map(PathBuf::from) else {
            return;
        };
        if let Err(e) = make_fifo(&path) {
            eprintln!("urdma-sim: control: {}: {e}", path.display());
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("urdma-sim-ctl".into())
            .spawn(move || serve(sim, path));
        if let Err(e) = spawned {
            eprintln!("urdma-sim: control: cannot start thread: {e}");
        }
    });
}

fn serve(sim: &'static Hardware, path: PathBuf) {
    // Opened for writing too, so that the FIFO always has a writer: reads
    // never hit end-of-file between two `echo ... > fifo`. Opened for
    // reading only, it had to be closed and opened again after each
    // writer, and a line written in that moment (the writer's open still
    // succeeded, the reader was about to close) went with the pipe: the
    // command was lost and never acknowledged.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("urdma-sim: control: {}: {e}", path.display());
            return;
        }
    };
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        let cmd = line.split('#').next().unwrap_or("").trim();
        if cmd.is_empty() {
            continue;
        }
        match sim.command(cmd) {
            Ok(()) => eprintln!("urdma-sim: control: ok: {cmd}"),
            Err(e) => eprintln!("urdma-sim: control: error: {e}: {cmd}"),
        }
    }
}
