pub mod cache;
pub mod msg;
pub mod path;
