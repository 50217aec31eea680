//! ibacm-urdma: an address and route resolution provider for the ibacm
//! daemon, for the ports of urdma virtual RDMA devices.
//!
//! The components, in the order of the data path (docs/architecture.md);
//! each imports only those below it, as tests/architecture.rs holds:
//!
//! - `boundary`: the C boundary the daemon calls (`provider_query`, the
//!   vtable); pointers become ids there, and every entry point runs in a
//!   panic guard. The only module with unsafe code; everything else is
//!   safe Rust.
//! - [`runtime`]: the engine behind its lock, the discovery sockets and the
//!   provider's threads: the discovery worker ([`runtime::worker`]), the
//!   resolvers ([`runtime::nss`]), the hosts-file watcher
//!   ([`runtime::watcher`]) and the metrics writer ([`runtime::report`]).
//! - [`engine`]: the provider's state and the request path, with explicit
//!   time and no I/O: request → parse ([`request::msg`], [`addr`]) →
//!   lookup (the destination cache in `engine/cache.rs`, this host in [`local`], the
//!   hosts file in [`config::hosts`], what [`discovery`] learned) → path
//!   ([`request::path`]) → reply.
//! - [`discovery`]: resolution between hosts (docs/protocol.md), with its
//!   own state and its datagrams ([`discovery::wire`]); their sockets are
//!   the runtime's ([`runtime::net`]).
//! - [`request`]: the daemon's message and path records. [`local`]: this host's devices, ports, endpoints and
//!   addresses. [`config`]: the `urdma_*` options and the hosts file.
//!
//! Shared by all of them: [`addr`] (addresses), [`buggify`] (the faults
//! the core injects into itself under simulation), [`ib`] (MTU and rate
//! encodings), [`bounded`] (tables with a capacity and lifetimes),
//! [`entropy`] (the seed of transaction ids), [`fastmap`] (the hash map),
//! [`handle`] (the handles of devices, ports, endpoints and addresses),
//! [`daemon`] (the daemon's helpers as a trait), [`log`] (the
//! bridge onto `acm_write`), [`metrics`] (the Prometheus text format),
//! [`summary`] (counts summed up in the log) and [`threads`] (supervised
//! threads); `fault` holds the fault hooks of test builds (feature
//! `fault-injection`).

pub mod addr;
// The daemon boundary: the only module allowed unsafe code (Cargo.toml).
#[allow(unsafe_code)]
mod boundary;
pub mod bounded;
pub mod buggify;
pub mod config;
pub mod control;
pub mod daemon;
pub mod discovery;
pub mod engine;
pub mod entropy;
pub mod fastmap;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod handle;

pub mod ib;
pub mod local;
pub mod log;
pub mod metrics;
pub mod request;
pub mod runtime;
pub mod summary;
pub mod threads;
