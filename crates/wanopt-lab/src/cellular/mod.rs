//! The `cellular` scenario: links whose capacity follows a recorded
//! cellular trace (Mahimahi's format) each way, at a 60 ms base round trip,
//! behind a deep (500 KB) or a shallow (100 KB) drop-tail buffer. In every
//! cell one download runs for 60 s (20 s with `--quick`) and, beside it on
//! a connection of its own, a 64-byte request/response every 100 ms: direct
//! with kernel CUBIC and with kernel BBR, and through wanopt.
//!
//! - **Matrix** ([`matrix`]): the traces (recorded ones tuned on and held
//!   out, and a synthetic one), buffers and modes.
//! - **Client** ([`client`], `wanopt lab cellular-client` in the lab's
//!   `client` namespace): the download and the ping.
//! - **Figures** ([`results`]): the download's rate, the ping's p50, p95
//!   and p99, and the queue the link held (its p95 in bytes, weighted by
//!   time, and the frames' p95 wait in it), from the emulator's own
//!   histograms.
//! - **Outputs** ([`report`], [`plot`]): `results.json`, `report.md` with a
//!   table per buffer and the goals, and a plot of rate and delay over time
//!   per trace.

pub mod client;
pub mod matrix;
pub mod plot;
pub mod report;
pub mod results;
pub mod run;

pub use matrix::SCENARIO;
pub use run::Cellular;
