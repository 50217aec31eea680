//! End-to-end harness: runs the real `/usr/sbin/ibacm` with the provider
//! under test, on simulated urdma devices (`liburdma_sim.so` preloaded),
//! inside a private network namespace and a private mount namespace whose
//! `/run` is a per-host temp directory. Tests talk to it with the real
//! `ib_acme` and with `urdma-rai` (real librdmacm `rdma_getaddrinfo`).
//!
//! The real daemon, because what the provider must get right is what the
//! daemon does with it (its threads, its socket, its port events), and no
//! mock of ibacm would be believed. Namespaces, because several daemons
//! on one machine each need the fixed paths `/run/ibacm*.sock` and their
//! own network, and a test must leave nothing behind.
//!
//! Needs root (network namespaces, mounts) and built artifacts:
//! `cargo build --workspace` first. `URDMA_PROVIDER_SO` overrides the
//! provider library; `URDMA_E2E_KEEP=1` keeps the temp directories.
//!
//! `URDMA_TEST_VALGRIND=1` runs every daemon under valgrind memcheck (see
//! `scripts/memcheck.sh`): each daemon writes `memcheck.<pid>.xml` into
//! `URDMA_TEST_VALGRIND_DIR` (default: the system temp dir), and the
//! harness's own timeouts are multiplied by `slowdown()`.
//!
//! Where to start: `Host` (one daemon), `Net` (several, on one segment),
//! `nodes` (who the hosts of the multi-host scenarios are).

mod artifacts;
pub mod drops;
mod env;
pub mod fake_peer;
pub mod forger;
mod host;
pub mod interrupt;
mod key_file;
pub mod late;
pub mod load;
pub mod neigh_limits;
mod net;
pub mod nodes;
mod path_info;
mod process;
pub mod routed;

pub use artifacts::{Artifacts, IBACM, IB_ACME};
pub use env::{require_root, scaled, slowdown, under_valgrind};
pub use host::{Host, HostConfig, HostsFile, Namespaces, COMMAND_TIMEOUT};
pub use key_file::KeyFile;
pub use net::Net;
pub use path_info::PathInfo;
pub use process::sigterm;
