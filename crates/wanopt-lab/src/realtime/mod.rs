//! The `realtime` scenario: a voice-like stream (50 packets/s
//! of 200 B each way), a video-like stream (2 Mbit/s down) and a bulk TCP
//! download at the same time, across a 20 Mbit/s, 40 ms link with random
//! or bursty loss, direct and through wanopt with FEC (`--fec auto`), the
//! UDP streams carried by the edge's `--forward-udp`.
//!
//! - **Matrix** ([`matrix`]): the conditions, modes and events of a full
//!   run and of `--quick`.
//! - **Streams** ([`peer`], the hidden `lab rt-peer` in the client and
//!   server namespaces): `"WORT" | stream u8 | seq u32 | sent_ns u64`
//!   packets, every send and every arrival logged with its time; arrivals
//!   stamped by the kernel ([`stamp`], `SO_TIMESTAMPNS`). Every namespace
//!   reads the same clock, so one-way delay is arrival minus send. The bulk
//!   download is `lab lossy-client --workload bulk --streams 1`.
//! - **Figures** ([`measure`], [`results`]): delivered loss, duplicates
//!   delivered, one-way delay p50/p99, RFC 3550 jitter, the longest gap
//!   between arrivals, bulk goodput, wire overhead; per-100 ms series.
//! - **Outputs** ([`report`], [`goals`], [`plot`]): `results.json`,
//!   `report.md` with the scenario's goals as pass/fail lines,
//!   `realtime-delay.svg`/`.png`, `realtime-loss.svg`/`.png` and
//!   `series/<cell>.json`.

pub mod goals;
pub mod matrix;
pub mod measure;
pub mod peer;
pub mod plot;
pub mod report;
pub mod results;
pub mod run;
pub mod stamp;

pub use matrix::SCENARIO;
pub use run::Realtime;
