//! `wanopt probe`: a path's round-trip time and, for each direction, its
//! loss, reordering, duplication and bottleneck rate, measured with
//! numbered UDP datagrams echoed by `wanopt probe --listen` at the far end
//! (the format and the reflector's bookkeeping are `wanopt_proto::probe`).
//!
//! The rate comes from packet trains: datagrams sent back to back leave
//! the path's narrowest link spaced by their transmission time there, so
//! a train's bytes over the time between its first and last arrival is
//! that link's rate (IP bytes, like `wanopt window --rate`). Arrival times
//! are the kernel's receive timestamps (`SO_TIMESTAMPNS`) at each end, and
//! the median over several trains discards the ones cross traffic spread
//! out or squeezed together.
//!
//! - [`config`]: the flags of a run, checked into a [`ProbeConfig`].
//! - [`run`]: the run itself, [`probe`], giving a [`Report`].
//! - [`report`]: what a run measured, its warnings and its text.
//! - [`reflect`]: the far end, [`UdpReflector`].
//! - [`stamp`]: the kernel's arrival times.

pub mod config;
pub mod reflect;
pub mod report;
pub mod run;
pub mod stamp;

pub use config::{ConfigError, ProbeConfig, ProbeFlags};
pub use reflect::{ListenError, UdpReflector};
pub use report::{text, Direction, RateEstimate, Rates, Report, Rtt};
pub use run::{probe, ProbeError, Progress};
