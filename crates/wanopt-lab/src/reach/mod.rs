//! The `reach` scenario: the tunnel on paths that block or police UDP.
//! One link of 50 Mbit/s, RTT 40 ms, a 1 BDP queue; UDP open, blocked
//! from before the edge starts, blocked in the middle of a download,
//! policed to 2 Mbit/s, and blocked then let through again; direct with
//! kernel BBR and through wanopt with the edge's `--transport auto`.
//!
//! - **Plan** ([`plan`]): the cases, modes, link and transfer sizes of a
//!   full run and of `--quick`.
//! - **Transfers** ([`transfer`]): byte-checked downloads from a server
//!   thread in `server` to a client thread in `client`, with the moments
//!   of the request, the first byte and the last.
//! - **The nodes** ([`nodes`]): the edge started again with the path's
//!   rules in place, its status (the transport of its tunnel, and why;
//!   its flow resets by reason), and the link's middlebox rules changed
//!   while things run.
//! - **Cases** ([`cases`]) and the run ([`run`]): every case, mode and run
//!   on a fresh lab.
//! - **Outputs** ([`results`], [`report`]): `results.json` and
//!   `report.md` with each goal met or missed.

pub mod cases;
pub mod nodes;
pub mod plan;
pub mod report;
pub mod results;
pub mod run;
pub mod transfer;

pub use plan::SCENARIO;
pub use run::Reach;
