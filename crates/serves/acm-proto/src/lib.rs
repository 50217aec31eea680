//! What the ibacm daemon puts on its client socket and in its files, in
//! one place for every program here that speaks to it or for it: the
//! provider answers `struct acm_msg`s the daemon hands over, `urdma-acm`
//! asks the daemon for endpoints and counters, `urdma-load` sends resolve
//! requests; the provider and `urdma-acm` read the daemon's options file.
//! Each used to carry its own codec and tokenizer, and copies drift: a
//! fix to one (a byte order, a length check, how a line splits) must reach
//! all of them, and here it does, once.
//!
//! Safe code only (byte offsets computed from the generated C layouts), so
//! that the tools can use it freely; the provider's boundary does the one
//! pointer cast that takes the daemon's message as a [`msg::MsgBuf`].

pub mod msg;
pub mod options;
pub mod text;
