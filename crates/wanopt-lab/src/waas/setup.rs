//! The scenario's setup: its name, the emulated 3G link, the endpoints'
//! profile and the files each test transfers (all of the reference's, or
//! a few with `--quick`).

use super::files::{self, find, FileSpec};
use super::reference;
use super::transfer::Test;
use crate::link::LinkOptions;

/// The scenario's name.
pub const SCENARIO: &str = "waas-3g";

/// Round-trip time of the emulated 3G link (the reference measured 146 to
/// 156 ms on average during its tests).
pub const RTT: &str = "150ms";
/// Downlink rate: an HSDPA card of the reference's time (2009) delivered
/// 1-2 Mbit/s; the reference's own downloads ran at 1.0-1.4 Mbit/s.
pub const DOWN_RATE: &str = "2mbit";
/// Uplink rate: such cards sent on a Release 99 uplink of 384 kbit/s; the
/// reference's uploads ran at about 0.11 Mbit/s.
pub const UP_RATE: &str = "384kbit";
/// Random loss in each direction.
pub const LOSS: &str = "0.5%";
/// Downlink buffer (about 260 ms at 2 Mbit/s).
pub const DOWN_QUEUE: &str = "64kb";
/// Uplink buffer (about 670 ms at 384 kbit/s).
pub const UP_QUEUE: &str = "32kb";
/// The emulator's seed.
pub const LINK_SEED: u64 = 3;

/// The link options of the scenario.
pub fn link_options() -> LinkOptions {
    LinkOptions {
        rtt: Some(RTT.into()),
        loss: Some(LOSS.into()),
        seed: Some(LINK_SEED),
        up: Some(format!("rate {UP_RATE} queue {UP_QUEUE}")),
        down: Some(format!("rate {DOWN_RATE} queue {DOWN_QUEUE}")),
        ..LinkOptions::default()
    }
}

/// The link in one line for reports.
pub fn link_summary() -> String {
    format!(
        "RTT {RTT}, down {DOWN_RATE} (queue {DOWN_QUEUE}), up {UP_RATE} (queue {UP_QUEUE}), \
         {LOSS} random loss each way"
    )
}

/// The endpoint TCP profile: CUBIC, the loss-based TCP of an ordinary host
/// (the reference's endpoints were Windows XP and Windows Server 2003).
pub const PROFILE: &str = "legacy";

/// The files `--quick` runs in every test: a small document, a
/// presentation full of pictures, and the 2 MB spreadsheet the reference
/// quotes (146 s baseline, 27 s cold, 0.19 s warm upload).
pub const QUICK_FILES: [&str; 3] = ["50K.doc", "200K.ppt", "2M.xls"];

/// The OOXML documents `--quick` adds to the CIFS tests.
pub const QUICK_OOXML_FILES: [&str; 2] = ["300K.docx", "80K.xlsx"];

/// The tests to run and each test's files: the reference's own file list
/// per table, or [`QUICK_FILES`] everywhere with `quick`; the CIFS tests
/// also take the OOXML set ([`files::OOXML_SET`], or
/// [`QUICK_OOXML_FILES`]). A copy test's files are copied as sets, one
/// transfer per set.
pub fn plan(quick: bool) -> Vec<(Test, Vec<&'static FileSpec>)> {
    Test::ALL
        .iter()
        .map(|test| {
            let mut names: Vec<&str> = if quick {
                QUICK_FILES.to_vec()
            } else {
                reference::files(*test)
            };
            if test.is_cifs() {
                if quick {
                    names.extend(QUICK_OOXML_FILES);
                } else {
                    names.extend(files::OOXML_SET.iter().map(|f| f.name));
                }
            }
            (*test, names.into_iter().filter_map(find).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_cover_the_reference_tables() {
        let full = plan(false);
        let counts: Vec<usize> = full.iter().map(|(_, f)| f.len()).collect();
        assert_eq!(counts, [7, 18, 12, 18, 23, 23, 23, 23]);
        let quick = plan(true);
        assert!(quick.iter().all(|(t, f)| f.len()
            == QUICK_FILES.len()
                + if t.is_cifs() {
                    QUICK_OOXML_FILES.len()
                } else {
                    0
                }));
        assert!(quick
            .iter()
            .all(|(_, f)| f.iter().any(|s| s.name == "2M.xls")));
    }

    #[test]
    fn the_link_is_valid_and_asymmetric() {
        let specs = link_options().specs();
        assert!(specs.is_ok(), "{specs:?}");
        if let Ok(specs) = specs {
            assert!(specs.up.contains("rate 384kbit"), "{}", specs.up);
            assert!(specs.down.contains("rate 2mbit"), "{}", specs.down);
            assert!(specs.up.contains("loss 0.5%") && specs.down.contains("rtt 150ms"));
        }
    }
}
