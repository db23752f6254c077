//! The kit every scenario's outputs are made with: the rounding and the
//! figures of samples ([`stats`]: medians, percentiles, the trimmed mean).
//!
//! It knows nothing of any scenario: scenarios use it, never the other
//! way round.

pub mod stats;
