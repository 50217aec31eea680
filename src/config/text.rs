//! The provider reads its files (the options, hosts and key files) line by
//! line with the daemon's rules, which `acm-proto` keeps for every program
//! that reads the daemon's files; the names stay here so that the
//! provider's modules, tests and fuzz targets reach them as before.

pub use acm_proto::text::{is_space, lines, read, text, tokens, Diagnostic};
