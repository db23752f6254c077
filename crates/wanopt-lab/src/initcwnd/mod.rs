//! The `initcwnd` scenario: the initial-window post (the third reference
//! document) on the lab. One short file over a long path, on a fresh TCP
//! connection whose server starts with an initial window of 2, 4 or 10
//! segments (a route attribute in the server's namespace, as `ip route`
//! sets it), and through a fresh and a warm wanopt tunnel; the post's
//! figures beside the rows they correspond to.
//!
//! - **Matrix** ([`matrix`]): the paths (long RTTs at 20 Mbit/s, a lossy
//!   one, and a long, slow, lossy path fitted to the post's own figures),
//!   the file sizes and the modes, for a full run and for `--quick`.
//! - **Run** ([`run`]): every transfer is the `lossy` scenario's client
//!   (`wanopt lab lossy-client --workload transfer`) against the lab's
//!   generator, timed from just before the connect to the last byte.
//! - **Figures** ([`results`]): the median of the runs per path, size and
//!   mode, against the floor (one round trip plus the file at the link's
//!   rate: what a connection already open and a window already open would
//!   take).
//! - **Outputs** ([`report`]): `results.json`, `report.md` with a table per
//!   path and the goals as pass/fail lines, `initcwnd.svg`/`.png`.

pub mod matrix;
pub mod report;
pub mod results;
pub mod run;

pub use matrix::SCENARIO;
pub use run::Initcwnd;
