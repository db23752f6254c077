//! Subcommand modules of the `wanopt` binary.

pub mod cache;
pub mod node;
pub mod path;
pub mod probe;
pub mod status;
pub mod token;
