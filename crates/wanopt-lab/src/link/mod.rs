//! The lab's emulated WAN links, a room per concept:
//!
//! - [`options`]: the link options of `wanopt lab up` (and of scenarios),
//!   turned into one emulator spec per direction.
//! - [`wan`]: which link: link 1 or link 2, each with its emulator process,
//!   counters file and interfaces.
//! - [`second`]: the second WAN link (`lab up --link2`): its addresses,
//!   options and namespaces' plumbing.
//! - [`frame`]: the frame path of one link direction, what the emulator's
//!   driver pumps, and the switch a cut puts in it.
//! - [`cut`] and [`control`]: cutting and restoring a link while things
//!   run, the emulator's side (the state, the signals) and that of
//!   `lab link N down|up` (signal, then wait for the counters).
//! - [`rules`] and [`middlebox`]: changing a link's middlebox rules while
//!   things run, the emulator's side (the switch the link models follow)
//!   and that of `lab middlebox` and [`set_middlebox`] (check, request,
//!   signal, then wait for the counters).
//! - [`published`]: a running emulator's counters read back, as of a
//!   snapshot taken after a given moment (what scenarios read around a
//!   measurement).

pub mod control;
pub mod cut;
pub mod frame;
pub mod middlebox;
pub mod options;
pub mod published;
pub mod rules;
pub mod second;
pub mod wan;

pub use control::{cut_between, set_link, CutTimes};
pub use cut::CutState;
pub use frame::{Blackhole, FrameLink};
pub use middlebox::{set_middlebox, MiddleboxApplied, MiddleboxControlError};
pub use options::{LinkOptionError, LinkOptions, LinkSpecs};
pub use published::{link_totals, LinkTotals};
pub use rules::RulesSwitch;
pub use second::Link2Options;
pub use wan::WanLink;
