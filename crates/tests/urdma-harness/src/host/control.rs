//! Driving the simulated devices inside a running daemon: port events,
//! GID changes, through the simulator's control FIFO.
//!
//! Each command waits for the simulator's acknowledgement in the daemon's
//! output, so a test knows the event has happened before it checks what
//! the provider did about it; without that, every check after an event
//! would race the event.

use super::Host;
use crate::env::scaled;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::thread::sleep;
use std::time::{Duration, Instant};

const INJECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Host {
    /// Sends one control line to the simulator in the daemon and waits until
    /// the simulator has applied it. Panics if it was rejected.
    pub fn inject(&self, line: &str) {
        if let Err(e) = self.try_inject(line) {
            panic!("inject `{line}`: {e}\n{}", self.diagnostics());
        }
    }

    pub fn try_inject(&self, line: &str) -> Result<(), String> {
        assert!(!line.contains('\n'), "one control line at a time");
        let mut seen = self.acks_seen.lock().unwrap();
        let deadline = Instant::now() + scaled(INJECT_TIMEOUT);
        // Non-blocking open fails (ENXIO) until the simulator has opened
        // its end; retry instead of blocking forever on a dead daemon.
        let mut fifo = loop {
            match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(self.control_path())
            {
                Ok(f) => break f,
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("cannot open control FIFO: {e}"))
                }
                Err(_) => sleep(Duration::from_millis(5)),
            }
        };
        fifo.write_all(format!("{line}\n").as_bytes())
            .map_err(|e| format!("write control FIFO: {e}"))?;
        drop(fifo);
        loop {
            let acks: Vec<String> = self
                .daemon_output()
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
}
