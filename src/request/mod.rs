pub mod msg;
pub mod path;
