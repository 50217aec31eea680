//! What a host is before and after its daemon: a network namespace, and a
//! temp directory that its commands see as `/run` and that holds the
//! daemon's files (configuration, log, output).
//!
//! Owned apart from the daemon because they outlive it: a test kills or
//! restarts the daemon and still reads its log, and a bare host (no
//! daemon at all) runs commands and joins segments all the same. Dropping
//! it deletes the namespace and the directory (also on panic), since the
//! tests run as root on shared machines and must leave nothing behind.

use crate::env::{require_root, unique};
use crate::process::run;
use crate::Artifacts;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// A host's network namespace and directory, and the built programs run
/// in them.
pub struct Namespaces {
    pub netns: String,
    pub dir: PathBuf,
    pub artifacts: Artifacts,
}

impl Namespaces {
    /// A fresh network namespace (loopback up, no other interface) and an
    /// empty directory with `run` and `prov` in it.
    pub(super) fn create() -> Namespaces {
        require_root();
        crate::interrupt::clean_up_on_signals();
        let artifacts = Artifacts::locate();
        let netns = unique("urdma-e2e");
        let dir = std::env::temp_dir().join(&netns);
        let _ = fs::remove_dir_all(&dir);
        for sub in ["run", "prov"] {
            fs::create_dir_all(dir.join(sub)).expect("create temp dir");
        }

        // From here on a panic must still clean up: build the value early so
        // its Drop runs.
        run(&["ip", "netns", "add", &netns]);
        let ns = Namespaces {
            netns,
            dir,
            artifacts,
        };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Where `HostConfig::hosts_file` is written.
    pub fn hosts_path(&self) -> PathBuf {
        self.path("hosts.data")
    }

    /// The daemon's unix socket, as seen from outside its mount namespace.
    pub fn socket(&self) -> PathBuf {
        self.path("run/ibacm-unix.sock")
    }

    pub fn control_path(&self) -> PathBuf {
        self.path("sim.ctl")
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
        if std::env::var_os("URDMA_E2E_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("keeping {}", self.dir.display());
        }
    }
}
