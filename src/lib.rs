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
pub mod auth;
pub mod bounded;
pub mod cache;
pub mod config;
pub mod discovery;
pub mod engine;
pub mod fastmap;
#[cfg(feature = "fault-injection")]
pub mod fault;
// The daemon boundary: the only module allowed unsafe code (Cargo.toml).
#[allow(unsafe_code)]
mod ffi;
pub mod host;
pub mod hosts;
pub mod log;
pub mod msg;
pub mod neigh;
pub mod net;
pub mod path;
pub mod ratelimit;
pub mod reload;
pub mod resolver;
pub mod text;
pub mod threads;
pub mod wire;
pub mod worker;
