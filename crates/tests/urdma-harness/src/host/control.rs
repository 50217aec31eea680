//! Driving the simulated devices inside a running daemon: port events,
//! GID changes, through the simulator's control FIFO.
//!
//! Each command waits for the simulator's acknowledgement in the daemon's
//! output, so a test knows the event has happened before it checks what
//! the provider did about it; without that, every check after an event
//! would race the event.

use crate::env::scaled;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

const INJECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The simulator's control FIFO, and how many of its acknowledgements in
/// the daemon's output have been consumed.
pub(super) struct SimControl {
    fifo: PathBuf,
    acks_seen: Mutex<usize>,
}

impl SimControl {
    pub(super) fn new(fifo: PathBuf) -> SimControl {
        SimControl {
            fifo,
            acks_seen: Mutex::new(0),
        }
    }

    /// A restarted daemon's output starts again with no acknowledgement.
    pub(super) fn forget_acks(&self) {
        *self.acks_seen.lock().unwrap() = 0;
    }

    /// Writes `line` to the FIFO and waits for its acknowledgement in
    /// `output()` (the daemon's stdout/stderr): `Err` with the simulator's
    /// answer if it rejected the line.
    pub(super) fn send(&self, line: &str, output: impl Fn() -> String) -> Result<(), String> {
        assert!(!line.contains('\n'), "one control line at a time");
        let mut seen = self.acks_seen.lock().unwrap();
        let deadline = Instant::now() + scaled(INJECT_TIMEOUT);
        let mut fifo = self.open(deadline)?;
        fifo.write_all(format!("{line}\n").as_bytes())
            .map_err(|e| format!("write control FIFO: {e}"))?;
        drop(fifo);
        loop {
            let acks: Vec<String> = output()
                .lines()
                .filter_map(|l| l.strip_prefix("urdma-sim: control: ").map(str::to_string))
                .collect();
            if acks.len() > *seen {
                let ack = acks[*seen].clone();
                *seen += 1;
                return match ack.strip_prefix("ok: ") {
                    Some(_) => Ok(()),
                    None => Err(ack),
                };
            }
            if Instant::now() > deadline {
                return Err("the simulator did not acknowledge the command".into());
            }
            sleep(Duration::from_millis(5));
        }
    }

    /// Non-blocking open fails (ENXIO) until the simulator has opened its
    /// end; retried until `deadline` instead of blocking forever on a dead
    /// daemon.
    fn open(&self, deadline: Instant) -> Result<std::fs::File, String> {
        loop {
            match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.fifo)
            {
                Ok(f) => return Ok(f),
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("cannot open control FIFO: {e}"))
                }
                Err(_) => sleep(Duration::from_millis(5)),
            }
        }
    }
}
