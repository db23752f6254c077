//! The wanopt lab: network namespaces joined by veth pairs, our user-space WAN
//! emulator as a bump in the wire, endpoint TCP profiles, a traffic generator
//! and scenarios that run the direct and the optimized path back to back.
//!
//! Start with [`cli`] (the `wanopt lab` subcommands), [`topology`] (the
//! namespaces and addresses) and [`driver`] (the emulator's packet I/O).

pub mod bench;
pub mod bond;
pub mod bringup;
pub mod brokenness;
pub mod cellular;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod download;
pub mod driver;
pub mod edge_pair;
pub mod emulator;
mod exit;
pub mod fwsm;
pub mod grid;
pub mod initcwnd;
pub mod kit;
pub mod link;
pub mod lossy;
pub mod model;
pub mod multisite;
pub mod node;
pub mod optimize;
pub mod profile;
pub mod rawsock;
pub mod reach;
pub mod realtime;
pub mod rng;
pub mod scenario;
pub mod sites;
pub mod status;
pub mod topology;
pub mod traffic;
pub mod waas;
