//! The `waas-3g` scenario: the method of the reference "Cisco Wide Area
//! Application Services: Optimizing Third-Generation Wireless Networks" on
//! an emulated 3G link, to show what data reduction (compression and the
//! byte cache) adds to TCP optimization.
//!
//! - **Files** ([`files`], [`office`]): the names and sizes of the
//!   reference's Table 1 (Word, Excel and PowerPoint files of 48 KB to
//!   2.1 MB and a 5.6 MB zip), generated from a seed to behave like real
//!   Office 97-2003 files.
//! - **Tests** ([`transfer`]): HTTP download (a new connection per file),
//!   FTP-like download and upload, and "open, edit, save" (download, change
//!   16 bytes in the middle, upload the whole file). The receiver checks
//!   every byte.
//! - **Modes**: `baseline` (the lab without wanopt nodes), `cold` (wanopt
//!   with data reduction, both nodes' caches cleared with `wanopt cache
//!   clear` right before the transfer) and `warm` (the same transfer again
//!   right after, caches kept). For edit-save each pass saves a new edit,
//!   so a warm save still carries a change.
//! - **WAN bytes** come from the emulator's own counters: Ethernet frames it
//!   delivered in both directions during the transfer, the same way for
//!   every mode.
//! - **Outputs** ([`report`], [`plot`]): `results.json` ([`results`]),
//!   `report.md` with the reference's tables beside ours ([`mod@reference`]),
//!   one plot per test (`waas-3g-<test>.svg`/`.png`), node logs per pass.

pub mod clients;
pub mod commands;
pub mod compound;
pub mod files;
pub mod office;
pub mod ooxml;
pub mod plot;
pub mod reference;
pub mod report;
pub mod results;
pub mod run;
pub mod servers;
pub mod setup;
pub mod text;
pub mod transfer;

pub use run::Waas3g;
pub use setup::{
    link_options, link_summary, plan, DOWN_QUEUE, DOWN_RATE, LINK_SEED, LOSS, PROFILE, QUICK_FILES,
    QUICK_OOXML_FILES, RTT, SCENARIO, UP_QUEUE, UP_RATE,
};
