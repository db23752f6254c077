//! The `path-brokenness` scenario: the experiments of the path-brokenness
//! paper (the fourth reference document) on the lab, each a sweep, direct
//! (kernel TCP at both ends) and through wanopt (whose tunnel, QUIC over
//! UDP, no TCP middlebox touches).
//!
//! - **SACK** (`sack`): one download's goodput against the loss rate, with
//!   SACK, with SACK-permitted stripped (`tcp.opt.sackok.removed`) and with
//!   sequence numbers randomized and SACK blocks left unshifted
//!   (`tcp.seqnum.changed`), and the longest time it delivered nothing.
//! - **Window scale** (`wscale`): the smallest window-scale shift a
//!   middlebox may write into both SYNs (`tcp.opt.ws.changed`) that still
//!   fills 100 Mbit/s and 1 Gbit/s as the RTT grows to 800 ms, per
//!   congestion control (Reno, CUBIC, H-TCP where the kernel has it, BBR),
//!   measured around the figure window arithmetic gives; 10 Gbit/s is past
//!   what this machine's emulator carries and is computed.
//! - **ECN** (`ecn`): the ECN policies (`tcp.ecn.blocked`,
//!   `tcp.ecn.changed`, `ip.ecn.changed`, CE set on every ECN-capable
//!   packet, CE cleared behind the queue) on a RED queue that marks, with
//!   ECN on at both ends: connection delay, goodput, retransmissions.
//!
//! [`matrix`] holds the sweeps, [`run`] measures them, [`results`] and
//! [`report`] write `results.json`, `report.md` and the plots.

pub mod matrix;
pub mod report;
pub mod results;
pub mod run;

pub use matrix::SCENARIO;
pub use run::Brokenness;
