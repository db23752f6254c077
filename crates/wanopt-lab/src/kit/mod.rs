//! The kit every scenario's outputs are made with: the rounding and the
//! figures of samples ([`stats`]: medians, percentiles, the trimmed mean),
//! Markdown tables ([`table`]) and the lists of a report ([`markdown`]:
//! cells not measured, flow resets), plots ([`plot`]: the line chart, the
//! modes' colours, SVG and PNG) and the files of an output folder
//! ([`output`]: `results.json` written and read back, `report.md`), and
//! the lab's worker processes waited for until a deadline ([`process`]).
//!
//! A report's goals are [`goal::Goal`]s: a pass/fail line per mode with
//! the cells that missed.
//!
//! It knows nothing of any scenario: scenarios use it, never the other
//! way round.

pub mod goal;
pub mod markdown;
pub mod output;
pub mod plot;
pub mod process;
pub mod stats;
pub mod table;

pub use table::{Align, Table};
