//! Commands and threads inside a host: its network set-up, its clients
//! (`ib_acme`, `urdma-rai`, `urdma-load`) and anything else a test runs
//! there.
//!
//! Clients run in the host's mount namespace as well as its network
//! namespace, because the daemon's socket and the simulator's files sit at
//! fixed paths under `/run`, which each host has its own of. Only the
//! final program gets the simulator preloaded, never the helpers that
//! enter the namespaces.

use super::Namespaces;
use crate::env::{scaled, unique};
use crate::process::{ip_in, run_with_timeout};
use crate::{Artifacts, PathInfo, IB_ACME};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

/// How long a client command may run before it is killed: a provider that
/// never answers would otherwise hang `ib_acme`/librdmacm forever.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);

/// `sh -c` body for `in_namespaces`: bind the host's run dir over /run (and
/// a `resolv.conf` in it, if the test wrote one, over /etc/resolv.conf, as
/// `ip netns exec` does), then exec the program, preloading the sim only
/// if asked.
const RUN_WRAPPER: &str = r#"mount --bind "$URDMA_E2E_RUN" /run || exit 125
if [ -f /run/resolv.conf ]; then mount --bind /run/resolv.conf /etc/resolv.conf || exit 125; fi
if [ -n "$URDMA_E2E_PRELOAD" ]; then exec env LD_PRELOAD="$URDMA_E2E_PRELOAD" "$@"; fi
exec "$@""#;

impl Namespaces {
    /// `ip link set IFNAME up|down` in the host's namespace.
    pub fn set_link(&self, ifname: &str, up: bool) {
        self.ip(&["link", "set", ifname, if up { "up" } else { "down" }]);
    }

    /// Runs `f` on a thread that has joined this host's network namespace
    /// (the mount namespace stays the test's): e.g. to send raw datagrams
    /// from the host without external tools.
    #[allow(unsafe_code)] // setns(2), which std does not wrap
    pub fn in_netns<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let ns = File::open(format!("/run/netns/{}", self.netns)).expect("open netns");
        std::thread::scope(|s| {
            s.spawn(move || {
                // setns(CLONE_NEWNET) changes only the calling thread.
                // SAFETY: a valid descriptor of a network namespace.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .expect("thread in the host's network namespace panicked")
        })
    }

    /// Loopback, and a local link `e0` with `addrs` unless there are none
    /// (see `HostConfig::ip_addrs`).
    pub(super) fn setup_network(&self, addrs: &[String]) {
        self.ip(&["link", "set", "lo", "up"]);
        if addrs.is_empty() {
            return;
        }
        self.ip(&["link", "add", "e0", "type", "veth", "peer", "name", "e0p"]);
        for a in addrs {
            let mut args = vec!["addr", "add", a.as_str(), "dev", "e0"];
            if a.contains(':') {
                // Without DAD the address is usable at once, not "tentative".
                args.push("nodad");
            }
            self.ip(&args);
        }
        self.ip(&["link", "set", "e0p", "up"]);
        self.ip(&["link", "set", "e0", "up"]);
    }

    /// A command that runs `argv` in this host's network namespace and in a
    /// private mount namespace where `/run` is this host's run directory (so
    /// the fixed paths `/run/ibacm*.sock` reach this daemon). With
    /// `preload_sim`, only the final program gets `LD_PRELOAD`, not the
    /// nsenter/unshare/mount helpers.
    pub fn in_namespaces(&self, preload_sim: bool, argv: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.netns))
            .args(["--", "unshare", "-m", "--propagation", "private", "--"])
            .args(["sh", "-c", RUN_WRAPPER, "sh"])
            .args(argv)
            .env("URDMA_E2E_RUN", self.path("run"));
        if preload_sim {
            cmd.env("URDMA_E2E_PRELOAD", &self.artifacts.sim);
        } else {
            cmd.env_remove("URDMA_E2E_PRELOAD");
        }
        cmd.env_remove("LD_PRELOAD");
        cmd
    }

    /// `urdma-acm stats ARGS` in the host's namespaces, where `/run` holds
    /// the daemon's socket and the provider's metrics file: exit code,
    /// stdout, stderr. Bounded: a daemon that never answers would hang it.
    pub fn stats(&self, args: &[&str]) -> (i32, String, String) {
        let tool = Artifacts::urdma_acm();
        let mut argv = vec!["timeout", "15", tool.to_str().unwrap(), "stats"];
        argv.extend_from_slice(args);
        let out = self
            .in_namespaces(false, &argv)
            .output()
            .expect("run urdma-acm");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `ib_acme ARGS -S <socket>` (the `-S` is added unless given), run in
    /// the host's namespaces. Returns the exit code (-1 if killed or timed
    /// out) and stdout+stderr interleaved.
    pub fn acme(&self, args: &[&str]) -> (i32, String) {
        let sock = self.socket();
        let mut argv = vec![IB_ACME];
        argv.extend_from_slice(args);
        if !args.contains(&"-S") {
            argv.extend_from_slice(&["-S", sock.to_str().unwrap()]);
        }
        self.run_client(self.in_namespaces(false, &argv))
    }

    /// Runs `ib_acme ARGS`, which must succeed and print a path: the path
    /// and the whole output.
    pub fn acme_path(&self, args: &[&str]) -> (PathInfo, String) {
        let (code, out) = self.acme(args);
        assert_eq!(code, 0, "ib_acme {args:?} failed:\n{out}");
        assert!(
            out.contains("return status 0x0"),
            "ib_acme {args:?}:\n{out}"
        );
        let path = PathInfo::parse(&out);
        assert!(
            !path.0.is_empty(),
            "ib_acme {args:?} printed no path:\n{out}"
        );
        (path, out)
    }

    /// `urdma-rai ARGS` (librdmacm `rdma_getaddrinfo`) with the sim
    /// preloaded, so librdmacm sees the same devices as the daemon.
    pub fn rai(&self, args: &[&str]) -> (i32, String) {
        let rai = self.artifacts.rai.to_str().unwrap().to_string();
        let mut argv = vec![rai.as_str()];
        argv.extend_from_slice(args);
        let mut cmd = self.in_namespaces(true, &argv);
        // The sim in the client must not compete for the daemon's FIFO.
        cmd.env_remove("URDMA_SIM_CONTROL");
        if self.path("sim.cfg").exists() {
            cmd.env("URDMA_SIM_CONFIG", self.path("sim.cfg"));
        } else {
            cmd.env_remove("URDMA_SIM_CONFIG");
        }
        self.run_client(cmd)
    }

    /// `urdma-load ARGS -S <socket>` (the `-S` is added unless given) in the
    /// host's namespaces, killed after `timeout`. Returns the exit code and
    /// the output, whose last line is the `key=value` summary.
    pub fn load(&self, args: &[&str], timeout: Duration) -> (i32, String) {
        let sock = self.socket();
        let load = self.artifacts.load.to_str().unwrap().to_string();
        let mut argv = vec![load.as_str()];
        argv.extend_from_slice(args);
        if !args.contains(&"-S") {
            argv.extend_from_slice(&["-S", sock.to_str().unwrap()]);
        }
        run_with_timeout(
            self.in_namespaces(false, &argv),
            &self.path(&unique("load")),
            scaled(timeout),
        )
    }

    /// Any command inside the host's namespaces (e.g. `ip addr`).
    pub fn exec(&self, argv: &[&str]) -> (i32, String) {
        self.run_client(self.in_namespaces(false, argv))
    }

    fn run_client(&self, cmd: Command) -> (i32, String) {
        run_with_timeout(cmd, &self.path(&unique("client")), scaled(COMMAND_TIMEOUT))
    }

    /// `ip ARGS` in the host's namespace, which must succeed.
    pub(crate) fn ip(&self, args: &[&str]) {
        ip_in(&self.netns, args);
    }
}
