//! Subcommand modules of the `wanopt` binary.

pub mod cache;
mod config_file;
pub mod docs;
pub mod firewall;
pub mod flows;
pub mod node;
pub mod outcome;
pub mod path;
mod peers;
pub mod probe;
pub mod run;
pub mod size;
pub mod status;
pub mod token;
