//! The goals for `waas-3g`, checked against the rows of a run,
//! and the cold transfers slower than the reference's, explained by
//! what their path did.

use std::fmt::Write as _;

use super::super::results::{Results, Row};
use super::super::transfer::Test;
use super::cells::{bytes, confirmed, secs, sent, Time};
use crate::kit::{Align, Table};

/// Round trips a warm transfer cannot avoid: its request must cross the
/// WAN; an FTP upload waits for the `150` before its data and for the
/// `226` after it (2; edit-save a download and an upload, 3); smbclient's
/// requests one after the other: a read is open, read, close and a query
/// (4), a save is open, write, close and a query, then open, rename,
/// close (7).
fn round_trips(test: Test) -> f64 {
    match test {
        Test::Upload => 2.0,
        Test::EditSave => 3.0,
        Test::CifsOpen => 4.0,
        Test::CifsSave => 7.0,
        _ => 1.0,
    }
}

/// The goals, checked against the rows.
pub(super) fn goals(out: &mut String, results: &Results) {
    let rtt = super::super::setup::RTT
        .trim_end_matches("ms")
        .parse::<f64>()
        .unwrap_or(150.0)
        / 1000.0;
    let _ = writeln!(out, "## The issue's goals, checked\n");
    // Results from before the real FTP client have the sender's times.
    let has_sent = results.rows.iter().any(|r| r.sent_seconds.is_some());
    let with_sent = |i: &usize| *i == 0 || has_sent;
    // 1. Cold at least as good as the reference's cold on compressible files.
    for (_, (time, how)) in [
        (confirmed as Time, " (uploads until the server's OK)"),
        (
            sent as Time,
            " (uploads timed as the reference's FTP client timed them: until the client's TCP \
             peer acknowledged the last byte)",
        ),
    ]
    .into_iter()
    .enumerate()
    .filter(|(i, _)| with_sent(i))
    {
        cold_goal(out, results, time, how);
    }
    cold_floors(out, results);
    // 2. Warm within 2x of the round trips plus LAN time.
    let mut within = 0;
    let mut outside = Vec::new();
    for r in results
        .rows
        .iter()
        .filter(|r| r.mode == "warm" && !r.test.starts_with("cifs-copy"))
    {
        let test = Test::ALL
            .into_iter()
            .find(|t| t.name() == r.test)
            .unwrap_or(Test::Download);
        // LAN time: the file over the client's 1 Gbit/s-class LAN, each way it moves.
        let moves = if test == Test::EditSave { 2.0 } else { 1.0 };
        let lan = r.file_bytes as f64 * 8.0 / 1e9 * moves;
        let bound = 2.0 * (round_trips(test) * rtt + lan);
        if r.seconds <= bound {
            within += 1;
        } else {
            outside.push(format!(
                "{} {}: {} s > {} s",
                r.test,
                r.file,
                secs(r.seconds),
                secs(bound)
            ));
        }
    }
    let _ = writeln!(
        out,
        "- Warm within 2x of (round trips x RTT + LAN time at 1 Gbit/s): {within} of {}{}",
        within + outside.len(),
        if outside.is_empty() {
            String::new()
        } else {
            format!("; outside: {}", outside.join(", "))
        }
    );
    // 3. Warm upload at least 100x faster than baseline.
    for (_, (time, how)) in [
        (confirmed as Time, " (until the server's OK)"),
        (
            sent as Time,
            " (as the sender sees it: until the client's TCP peer acknowledged the last byte)",
        ),
    ]
    .into_iter()
    .enumerate()
    .filter(|(i, _)| with_sent(i))
    {
        upload_goal(out, results, time, how);
    }
    out.push('\n');
}

/// The files the cold goal covers: Word and Excel ("on compressible files").
fn compressible(r: &Row) -> bool {
    r.file.ends_with(".doc") || r.file.ends_with(".xls")
}

/// The precision of the reference's figures for `test`: its HTTP table
/// (Table 2, timed by a browser) gives whole seconds, the others
/// hundredths.
fn published_precision(test: &str) -> f64 {
    if test == Test::HttpDownload.name() {
        1.0
    } else {
        0.01
    }
}

/// Goal 1 with the rows' times read by `time`: strictly, and with our
/// time rounded as the reference rounded its own (a 1.02 s fetch reads
/// 1 s in whole seconds), said only when the two counts differ.
fn cold_goal(out: &mut String, results: &Results, time: Time, how: &str) {
    let mut cells = 0;
    let mut slower = Vec::new();
    let mut slower_rounded = 0;
    for r in results.rows.iter().filter(|r| r.mode == "cold") {
        if let (true, Some(ours), Some(theirs)) = (compressible(r), time(r), r.reference_seconds) {
            cells += 1;
            if ours <= theirs {
                continue;
            }
            // Three decimals below 10 s: the gap is often a few ms.
            let (a, b) = if ours.max(theirs) < 10.0 {
                (format!("{ours:.3}"), format!("{theirs:.3}"))
            } else {
                (secs(ours), secs(theirs))
            };
            slower.push(format!("{} {}: {a} s vs {b} s", r.test, r.file));
            let step = published_precision(&r.test);
            if (ours / step).round() * step > theirs + step / 2.0 {
                slower_rounded += 1;
            }
        }
    }
    let rounded = if slower_rounded == slower.len() {
        String::new()
    } else {
        format!(
            "; rounded as the reference rounds (whole seconds in its HTTP table, hundredths in the others): {} of {cells}",
            cells - slower_rounded
        )
    };
    let _ = writeln!(
        out,
        "- Cold at least as fast as the reference's cold, Word and Excel files{how}: {} of {cells}{}{rounded}",
        cells - slower.len(),
        if slower.is_empty() {
            String::new()
        } else {
            format!("; slower: {}", slower.join(", "))
        }
    );
}

/// One direction of the emulated link as a run's spec set it.
#[derive(Debug, Clone, Copy)]
struct Leg {
    /// Bits per second.
    rate: f64,
    /// One-way delay, seconds.
    delay: f64,
}

fn leg(spec: &str) -> Option<Leg> {
    let config = crate::model::config(spec).ok()?;
    Some(Leg {
        rate: config.rate?.0 as f64,
        delay: config.delay.as_secs_f64(),
    })
}

/// What the bytes that crossed the link cost at its rate, for each
/// Word and Excel cell whose cold time (until the server's OK) is slower
/// than the reference's: the request's round trip(s) plus the bytes of
/// the direction the file moves at that direction's rate, and how many
/// bytes the reference's time leaves room for. Nothing when the run's
/// link specs have no rate (an older results.json).
fn cold_floors(out: &mut String, results: &Results) {
    let (Some(up), Some(down)) = (leg(&results.link.up), leg(&results.link.down)) else {
        return;
    };
    let rtt = up.delay + down.delay;
    let mut lines = Vec::new();
    for r in results.rows.iter().filter(|r| r.mode == "cold") {
        let Some(theirs) = r.reference_seconds else {
            continue;
        };
        if !compressible(r) || r.seconds <= theirs {
            continue;
        }
        let line_time = |bytes: u64, leg: Leg| bytes as f64 * 8.0 / leg.rate;
        let (moved, floor, budget) = if r.test == Test::EditSave.name() {
            let floor =
                2.0 * rtt + line_time(r.wan_bytes_down, down) + line_time(r.wan_bytes_up, up);
            let moved = format!(
                "{} down and {} up",
                bytes(r.wan_bytes_down),
                bytes(r.wan_bytes_up)
            );
            (moved, floor, None)
        } else {
            let (wan, leg, way) = if r.test == Test::Upload.name() {
                (r.wan_bytes_up, up, "up")
            } else {
                (r.wan_bytes_down, down, "down")
            };
            let budget = if theirs > rtt {
                format!(
                    "leaves room for {} {way} after one round trip",
                    bytes(((theirs - rtt) * leg.rate / 8.0) as u64)
                )
            } else {
                "is less than one round trip".into()
            };
            (
                format!("{} {way} at {}", bytes(wan), rate_text(leg.rate)),
                rtt + line_time(wan, leg),
                Some(budget),
            )
        };
        let mut line = format!(
            "  - {} {}: {moved} take {} s with the round trip{} (measured {} s)",
            r.test,
            r.file,
            secs(floor),
            if r.test == Test::EditSave.name() {
                "s"
            } else {
                ""
            },
            secs(r.seconds),
        );
        if let Some(budget) = budget {
            let _ = write!(line, "; the reference's {} s {budget}", secs(theirs));
        }
        lines.push(line);
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "- Where cold is slower (until the server's OK), the link's rate explains it: \
         the bytes that crossed (Ethernet frames, from the emulator's counters) at the rate of the \
         direction the file moves, plus the request's round trip ({} s); the emulator's rate counts \
         IP bytes, about 1% fewer:",
        secs(rtt)
    );
    for line in lines {
        let _ = writeln!(out, "{line}.");
    }
}

/// Every run of the Word and Excel cold cells slower than the reference
/// (until the server's OK), with what the path did in it: frames the
/// emulator dropped each way, and what each node's tunnel sent, declared
/// lost, repeated (tail duplication) and rebuilt from its peer's parity.
/// Nothing when no such cell has path samples (an older results.json).
pub(super) fn slow_cold_paths(out: &mut String, results: &Results) {
    let slow: Vec<&Row> = results
        .rows
        .iter()
        .filter(|r| r.mode == "cold" && compressible(r) && !r.samples_path.is_empty())
        .filter(|r| r.reference_seconds.is_some_and(|theirs| r.seconds > theirs))
        .collect();
    if slow.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## What the path did in the cold transfers slower than the reference\n\n\
         Each run of those cells: frames the emulator dropped (random loss, plus full-queue drops \
         if any), and each node's tunnel over the same window as the WAN bytes: QUIC packets sent, \
         declared lost, repeated by tail duplication, and the peer's datagrams rebuilt from parity; \
         `tails` is whether the node repeated tails when the transfer started, with its loss \
         monitor's estimate.\n"
    );
    let mut table = Table::new([
        ("test", Align::Left),
        ("file", Align::Left),
        ("run s", Align::Right),
        ("dropped down / up", Align::Right),
        ("core sent / lost / repeated", Align::Right),
        ("core rebuilt", Align::Right),
        ("core tails", Align::Left),
        ("edge sent / lost / repeated", Align::Right),
        ("edge rebuilt", Align::Right),
        ("edge tails", Align::Left),
    ]);
    let tunnel = |t: Option<super::super::results::TunnelSample>| match t {
        Some(t) => [
            format!("{} / {} / {}", t.sent_packets, t.lost_packets, t.duplicated),
            t.rebuilt.to_string(),
            format!(
                "{} ({:.2}%)",
                if t.tails_on { "on" } else { "off" },
                t.loss_percent
            ),
        ],
        None => ["-".into(), "-".into(), "-".into()],
    };
    for r in slow {
        for (i, p) in r.samples_path.iter().enumerate() {
            let mut cells = vec![
                r.test.clone(),
                r.file.clone(),
                r.samples_seconds.get(i).map_or("-".into(), |s| secs(*s)),
                format!("{} / {}", p.dropped_down(), p.dropped_up()),
            ];
            cells.extend(tunnel(p.core));
            cells.extend(tunnel(p.edge));
            table.row(cells);
        }
    }
    let _ = writeln!(out, "{table}");
}

fn rate_text(bps: f64) -> String {
    if bps >= 1e6 {
        format!("{} Mbit/s", bps / 1e6)
    } else {
        format!("{} kbit/s", bps / 1e3)
    }
}

/// Goal 3 with the upload rows' times read by `time`.
fn upload_goal(out: &mut String, results: &Results, time: Time, how: &str) {
    let mut fast = 0;
    let mut slow = Vec::new();
    for r in results
        .rows
        .iter()
        .filter(|r| r.mode == "warm" && r.test == Test::Upload.name())
    {
        let base = results.find(Test::Upload, &r.file, "baseline");
        if let (Some(base), Some(warm)) = (base.and_then(time), time(r)) {
            let speedup = base / warm.max(1e-9);
            if speedup >= 100.0 {
                fast += 1;
            } else {
                slow.push(format!("{}: {speedup:.0}x", r.file));
            }
        }
    }
    let _ = writeln!(
        out,
        "- Warm upload at least 100x faster than baseline{how}: {fast} of {}{}",
        fast + slow.len(),
        if slow.is_empty() {
            String::new()
        } else {
            format!("; below: {}", slow.join(", "))
        }
    );
}
