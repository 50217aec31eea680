//! ibacm-urdma: an address and route resolution provider for the ibacm
//! daemon, for the ports of urdma virtual RDMA devices.
//!
//! The data path, one module per step:
//! request ([`msg`]) → parse ([`msg`], [`addr`]) → lookup ([`cache`],
//! [`hosts`], [`resolver`]) → resolve ([`engine`], or [`discovery`] between
//! hosts over [`wire`] and [`net`], on the [`worker`] thread) → path
//! ([`path`]) → reply ([`msg`]).
//! Only `ffi` touches raw pointers; everything else is safe Rust.

pub mod addr;
// The daemon boundary: the only module allowed unsafe code (Cargo.toml).
#[allow(unsafe_code)]
mod boundary;
pub mod bounded;
pub mod config;
pub mod discovery;
pub mod engine;
pub mod entropy;
pub mod fastmap;
#[cfg(feature = "fault-injection")]
pub mod fault;
pub mod host;
pub mod ib;
pub mod local;
pub mod log;
pub mod metrics;
pub mod request;
pub mod runtime;
pub mod summary;
pub mod threads;
