//! The `fwsm` scenario: the firewall single-flow guide (the second
//! reference document) on the lab. One TCP flow between two hosts on
//! 1 Gbit/s ports with a 256 KB window, through a stateful firewall that
//! forwards a bounded number of packets per flow, clamps the MSS,
//! randomizes sequence numbers without rewriting SACK blocks and reorders
//! (its defaults), or through the same firewall tuned, or with jumbo
//! frames; direct and through wanopt, beside the guide's table.
//!
//! - **Matrix** ([`matrix`]): the configurations (the guide's four rows,
//!   and its default firewall 20 ms away, where the window binds), the
//!   firewall model fitted to the guide's figures, the hosts and the modes.
//! - **Run** ([`run`]): a fresh lab per configuration and mode, its idle
//!   round trip by `ping`, then one-stream downloads ([`crate::download`]).
//! - **Figures** ([`results`]): the median download per configuration and
//!   mode, the firewall's ceiling, and the window arithmetic (`wanopt
//!   window`) at the idle round trip.
//! - **Outputs** ([`report`]): `results.json`, `report.md` with the tables
//!   and the goals as pass/fail lines, `fwsm.svg`/`.png`.

pub mod matrix;
pub mod report;
pub mod results;
pub mod run;

pub use matrix::SCENARIO;
pub use run::Fwsm;
