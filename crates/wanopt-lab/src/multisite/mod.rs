//! The `sites` scenario: several branch sites at once
//! (`lab up --sites N`), each downloading from the one server over its
//! own emulated link, direct with kernel BBR at both ends (the baseline)
//! and through wanopt (one edge per site, one core for all).
//!
//! - **Cells**: 1 and 3 sites (and 10 in a full run), each direct-bbr
//!   then wanopt, on a fresh lab. Every site's link is the same
//!   ([`Plan::link`]: 20 Mbit/s, RTT 40 ms, a 1 BDP queue).
//! - **Workload**: every site's client downloads the same byte count
//!   (the link's rate for [`Plan::seconds`]) from the generator server at
//!   once, one stream each; payloads are pseudo-random, data reduction is
//!   off.
//! - **Figures** ([`Results`]): each site's goodput against its link's
//!   rate, and the core's CPU seconds (user + system, `/proc/PID/stat`
//!   of the `wanopt core` process, read before the first client starts
//!   and after the last one ends) per GB of payload the sites received:
//!   what one more tunnel costs the core.
//! - **Outputs** ([`report`]): `results.json` ([`results`]), `report.md`.

pub mod cpu;
pub mod matrix;
pub mod report;
pub mod results;
pub mod run;

pub use matrix::{Cell, Mode, Plan, LINK_MBIT, RTT_MS, SCENARIO};
pub use results::{CellRow, Results, SiteRow, Skipped};
pub use run::SitesScenario;
