//! A simulated urdma RDMA device for running the real `ibacm` daemon (and
//! librdmacm clients) without RDMA hardware: preload `liburdma_sim.so` and it
//! answers the libibverbs/libibumad calls those programs make.
//!
//! * `URDMA_SIM_CONFIG=FILE` describes the devices (format in `config.rs`;
//!   default: `urdma0` and `urdma1`, one active InfiniBand port each).
//! * `URDMA_SIM_CONTROL=PATH` creates a FIFO at PATH through which a test can
//!   change ports and inject async events while the process runs
//!   (`control.rs`).

mod abi;
mod config;
mod control;
mod state;
