//! The grid scenarios: `tcp-opt` and scenario TOML files. A grid of
//! RTTs, middlebox rules, endpoint profiles and paths (direct and through
//! wanopt), every point a few bulk transfers with the traffic generator on
//! a freshly built lab.
//!
//! - [`spec`]: the scenario as written (the built-in `tcp-opt`, a TOML
//!   file) and the reference's figures.
//! - `points`: the grid's points, in order, each with its link.
//! - [`run`]: the [`Grid`] scenario the runner runs.
//! - [`results`], [`report`], [`plot`]: `results.json`, `report.md` and
//!   `throughput.svg`/`.png`.

pub mod plot;
mod points;
pub mod report;
pub mod results;
pub mod run;
pub mod spec;

pub use results::{Results, Row, Skipped};
pub use run::Grid;
