//! Subcommand modules of the `wanopt` binary.

pub mod node;
pub mod status;
