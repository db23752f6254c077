//! The `lossy` scenario: TCP across a 100 Mbit/s path with
//! random loss (0.5 to 10% each way) or Gilbert-Elliott bursts, 10 ms of
//! jitter, at RTT 50, 150 and 300 ms, direct with kernel CUBIC and BBR and
//! through wanopt with FEC off and on (`--fec auto`, when the nodes have
//! it), data reduction off.
//!
//! - **Matrix** ([`matrix`]): the conditions, modes and workloads of a full
//!   run and of `--quick`.
//! - **Workloads** ([`client`], run in the lab's `client` namespace against
//!   the generator server): a timed bulk download of 4 streams from a fresh
//!   lab, sampled as it arrives; downloads of 100 KB, 1 MB and 10 MB on a
//!   fresh lab and again right after (warm); 1 KB requests answered by 1 KB
//!   responses. Payloads are pseudo-random, never repeated.
//! - **Figures** ([`measure`], [`results`]): goodput, the time to 90% of
//!   the final rate, completion times against their floor, p50/p99, and
//!   wire overhead from the emulator's own counters, the same way for
//!   every mode.
//! - **Outputs** ([`report`], [`goals`], [`plot`]): `results.json`,
//!   `report.md` with a table per RTT and the scenario's goals as pass/fail
//!   lines, `lossy-bulk.svg`/`.png`.

pub mod client;
pub mod goals;
pub mod matrix;
pub mod measure;
pub mod plot;
pub mod report;
pub mod results;
pub mod run;

pub use matrix::SCENARIO;
pub use run::Lossy;
