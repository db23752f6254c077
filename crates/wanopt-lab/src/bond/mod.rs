//! The `bond` scenario: two links of different rates and delays between
//! the edge and the core (link 1 30 Mbit/s at RTT 80 ms, link 2 20 Mbit/s
//! at 40 ms), one TCP download with both clean, with 1% loss on link 1,
//! and with link 1 cut and restored mid-transfer, and a voice-like UDP
//! stream beside a download; direct (kernel BBR on link 1, the better link
//! alone), through wanopt in failover mode and in bond mode, and the voice
//! alone on link 2 as its baseline (docs/design/bonding.md §4, §5 S6).
//!
//! - **Matrix** ([`matrix`]): the links, modes, events and workloads of a
//!   full run (20 s downloads, 3 runs a cell) and of `--quick` (15 s, 1).
//! - **Download** ([`client`], the hidden `lab bond-client` in the client
//!   namespace): one connection to the generator server whose payload is
//!   a function of a seed the client sends
//!   ([`crate::traffic::seeded_payload`]), so every byte is checked; the
//!   bytes per 100 ms, the longest stall, resets. The voice stream is the
//!   `realtime` scenario's peer ([`crate::realtime::peer`], voice only).
//! - **Figures** ([`measure`], [`results`]): goodput, the longest stall,
//!   the rate while link 1 is down, the time to the sum again after it
//!   returns; the voice's one-way delay p99 and loss each way; medians of
//!   the runs.
//! - **Outputs** ([`report`], [`goals`], [`plot`]): `results.json`,
//!   `report.md` with the design's goals as PASS/FAIL lines and their
//!   figures, `bond-cut.svg`/`.png`, `bond-clean.svg`/`.png` and
//!   `series/<cell>.json`.
//!
//! A binary whose edge has no `--path-mode bond` runs everything else and
//! lists the bond cells under "Not measured" with the reason.

pub mod client;
pub mod goals;
pub mod matrix;
pub mod measure;
pub mod plot;
pub mod report;
pub mod results;
pub mod run;

pub use matrix::SCENARIO;
pub use run::Bond;
