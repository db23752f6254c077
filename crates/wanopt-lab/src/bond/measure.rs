//! The figures of one run of a cell: the download's goodput, its rate
//! while link 1 was down, the longest stall and how long after link 1's
//! return the download was at the two links' sum again (from the client's
//! 100 ms bins); the voice stream's one-way delay and delivered loss each
//! way (the `realtime` scenario's figures of its peers' logs).

use super::client::{DownloadReport, Ending, BIN};
use super::matrix::SUM_MBPS;
use crate::kit::stats::{percentile, round2, round3};
use crate::link::CutTimes;
use crate::realtime::measure::stream_figures;
use crate::realtime::peer::{Record, Stream};

/// The window the return to the sum is judged over, in bins (1 s).
pub const RECOVERY_BINS: usize = 10;
/// The share of the sum a window must carry to count as the sum again.
pub const RECOVERY_SHARE: f64 = 0.9;

/// What a download showed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DownloadFigures {
    /// Goodput over the download, Mbit/s.
    pub mbit_s: f64,
    /// The longest time between arrivals, ms.
    pub longest_stall_ms: f64,
    /// Goodput from 1 s after link 1's cut to its return, Mbit/s (`cut`).
    pub cut_mbit_s: Option<f64>,
    /// From link 1's return to the end of the first 1 s window at
    /// [`RECOVERY_SHARE`] of the sum, s (`cut`; `None`: not in the
    /// download's time).
    pub recovered_s: Option<f64>,
    /// Connections that ended other than by the client (0 or 1).
    pub resets: u64,
    /// Bytes that were not the payload's.
    pub wrong_bytes: u64,
    /// Bytes checked, with the drain.
    pub verified_bytes: u64,
    /// Goodput per bin, Mbit/s (the plot's series).
    pub series_mbit_s: Vec<f64>,
    /// How the connection ended, if not cleanly.
    pub note: Option<String>,
}

/// Mbit/s of `bytes` over `seconds` (0 for no time).
pub fn mbit_s(bytes: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / seconds / 1e6
}

/// The bin width, s.
fn bin_s() -> f64 {
    BIN.as_secs_f64()
}

/// Goodput over the bins wholly inside `from_s..to_s` (s since the
/// download's start), Mbit/s; `None` if there is none.
pub fn window_mbit_s(bins: &[u64], from_s: f64, to_s: f64) -> Option<f64> {
    let first = (from_s / bin_s() - 1e-9).ceil().max(0.0) as usize;
    let end = ((to_s / bin_s() + 1e-9).floor().max(0.0) as usize).min(bins.len());
    (end > first).then(|| {
        mbit_s(
            bins[first..end].iter().sum(),
            (end - first) as f64 * bin_s(),
        )
    })
}

/// From `up_s` (link 1 back, s since the download's start) to the end of
/// the first window of [`RECOVERY_BINS`] bins, starting at or after it,
/// that carried `target_mbit_s`, s; `None` if none did.
pub fn recovered_s(bins: &[u64], up_s: f64, target_mbit_s: f64) -> Option<f64> {
    let first = (up_s / bin_s() - 1e-9).ceil().max(0.0) as usize;
    (first..bins.len().saturating_sub(RECOVERY_BINS - 1))
        .find(|&k| {
            let bytes: u64 = bins[k..k + RECOVERY_BINS].iter().sum();
            mbit_s(bytes, RECOVERY_BINS as f64 * bin_s()) >= target_mbit_s
        })
        .map(|k| round2((k + RECOVERY_BINS) as f64 * bin_s() - up_s))
}

/// When link 1 went down and up, s since the download's start.
pub fn cut_marks(cut: CutTimes, start_unix_ms: u64) -> (Option<f64>, Option<f64>) {
    let at = |ms: Option<u64>| ms.map(|ms| (ms as f64 - start_unix_ms as f64) / 1e3);
    (at(cut.down_ms), at(cut.up_ms))
}

/// The figures of a download, `cut` the times of link 1's cut if any.
pub fn download_figures(report: &DownloadReport, cut: Option<CutTimes>) -> DownloadFigures {
    let bins = &report.bins;
    let mut figures = DownloadFigures {
        mbit_s: round2(mbit_s(report.bytes, report.seconds)),
        longest_stall_ms: report.longest_stall_ms,
        resets: u64::from(report.ending.is_reset()),
        wrong_bytes: report.wrong_bytes,
        verified_bytes: report.total_bytes,
        series_mbit_s: bins.iter().map(|b| round3(mbit_s(*b, bin_s()))).collect(),
        note: match &report.ending {
            Ending::Clean => None,
            Ending::DrainTimedOut => Some(format!(
                "the drain after the half-close did not end in time ({:.1} s)",
                report.drain_s
            )),
            Ending::ClosedEarly => Some("the server closed before the end".into()),
            Ending::Failed(e) => Some(format!("the connection failed: {e}")),
        },
        ..DownloadFigures::default()
    };
    if let Some(cut) = cut {
        let (down_s, up_s) = cut_marks(cut, report.start_unix_ms);
        if let (Some(down), Some(up)) = (down_s, up_s) {
            figures.cut_mbit_s = window_mbit_s(bins, down + 1.0, up).map(round2);
        }
        if let Some(up) = up_s {
            figures.recovered_s = recovered_s(bins, up, RECOVERY_SHARE * SUM_MBPS);
        }
    }
    figures
}

/// What the voice stream showed, each way.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VoiceFigures {
    /// Median one-way delay over both directions' packets, ms.
    pub p50_ms: Option<f64>,
    /// One-way delay p99, client to server, ms.
    pub p99_up_ms: Option<f64>,
    /// One-way delay p99, server to client, ms.
    pub p99_down_ms: Option<f64>,
    /// Delivered loss, client to server, percent.
    pub loss_up_pct: Option<f64>,
    /// Delivered loss, server to client, percent.
    pub loss_down_pct: Option<f64>,
    /// Copies delivered twice (must be 0).
    pub duplicates: u64,
}

/// The records of the voice stream that are sends (`received` false) or
/// arrivals.
fn voice(records: &[Record], received: bool) -> Vec<Record> {
    records
        .iter()
        .filter(|r| r.stream == Stream::Voice && r.received == received)
        .copied()
        .collect()
}

/// The voice figures of the client's and the server's peer logs.
pub fn voice_figures(client: &[Record], server: &[Record]) -> VoiceFigures {
    let up = stream_figures(&voice(client, false), &voice(server, true));
    let down = stream_figures(&voice(server, false), &voice(client, true));
    let delays: Vec<f64> = [(client, server), (server, client)]
        .iter()
        .flat_map(|(from, to)| {
            let sent: std::collections::HashSet<u32> =
                voice(from, false).iter().map(|r| r.seq).collect();
            voice(to, true)
                .into_iter()
                .filter(move |r| sent.contains(&r.seq))
                .map(|r| (r.recv_ns as f64 - r.sent_ns as f64) / 1e6)
        })
        .collect();
    VoiceFigures {
        p50_ms: percentile(&delays, 0.5).map(round2),
        p99_up_ms: up.delay_p99_ms.map(round2),
        p99_down_ms: down.delay_p99_ms.map(round2),
        loss_up_pct: up.delivered_loss_pct.map(round3),
        loss_down_pct: down.delivered_loss_pct.map(round3),
        duplicates: (up.duplicates + down.duplicates) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_come_from_the_bins_wholly_inside_a_window() {
        // 50 Mbit/s (625,000 B a bin), 20 Mbit/s from 5 s.
        let bins: Vec<u64> = (0..100u64)
            .map(|i| match i {
                50..=99 => 250_000,
                _ => 625_000,
            })
            .collect();
        assert_eq!(window_mbit_s(&bins, 0.0, 5.0), Some(50.0));
        assert_eq!(window_mbit_s(&bins, 6.0, 10.0), Some(20.0));
        // 4.95 s starts the bin at 5.0; nothing wholly inside 5.01-5.09.
        assert_eq!(window_mbit_s(&bins, 4.95, 5.5), Some(20.0));
        assert_eq!(window_mbit_s(&bins, 5.01, 5.09), None);
        assert_eq!(window_mbit_s(&bins, 9.0, 20.0), Some(20.0));
        assert_eq!(mbit_s(1_000_000, 0.0), 0.0);
    }

    #[test]
    fn the_return_is_the_end_of_the_first_second_at_the_sum() {
        // Link 1 back at 10.05 s; 30 Mbit/s until 12 s, then 50.
        let bins: Vec<u64> = (0..150u64)
            .map(|i| match i {
                50..=99 => 250_000,
                100..=119 => 375_000,
                _ => 625_000,
            })
            .collect();
        // The first whole window starts at 10.1 s; [11.8, 12.8) is the
        // first at 45 Mbit/s (8 bins at 50, 2 at 30): 12.8 - 10.05.
        assert_eq!(recovered_s(&bins, 10.05, 45.0), Some(2.75));
        // At 30 Mbit/s a window passes as soon as one starts.
        assert_eq!(recovered_s(&bins, 10.05, 30.0), Some(1.05));
        // Never at 60; nor with less than a window left.
        assert_eq!(recovered_s(&bins, 10.05, 60.0), None);
        assert_eq!(recovered_s(&bins, 14.5, 45.0), None);
    }

    #[test]
    fn a_downloads_figures_follow_its_cut() {
        let bins: Vec<u64> = (0..150u64)
            .map(|i| match i {
                50..=99 => 250_000,
                _ => 625_000,
            })
            .collect();
        let report = DownloadReport {
            start_unix_ms: 1_000_000,
            seconds: 15.0,
            bytes: bins.iter().sum(),
            total_bytes: bins.iter().sum::<u64>() + 10,
            wrong_bytes: 0,
            bins,
            longest_stall_ms: 120.0,
            longest_stall_at_s: Some(5.0),
            drain_s: 0.3,
            ending: Ending::Clean,
        };
        let cut = CutTimes {
            down_ms: Some(1_005_000),
            up_ms: Some(1_010_000),
        };
        let f = download_figures(&report, Some(cut));
        assert_eq!(f.mbit_s, 40.0);
        assert_eq!(f.cut_mbit_s, Some(20.0));
        assert_eq!(f.recovered_s, Some(1.0));
        assert_eq!((f.resets, f.wrong_bytes, f.note), (0, 0, None));
        assert_eq!(f.series_mbit_s.len(), 150);
        let failed = DownloadReport {
            ending: Ending::Failed("Connection reset by peer".into()),
            ..report
        };
        let f = download_figures(&failed, None);
        assert_eq!((f.resets, f.cut_mbit_s, f.recovered_s), (1, None, None));
        assert!(f.note.is_some_and(|n| n.contains("reset by peer")));
    }

    #[test]
    fn voice_figures_are_each_way() {
        let ms = 1_000_000u64;
        let rec = |received, seq: u32, delay_ms: u64| Record {
            received,
            stream: Stream::Voice,
            seq,
            sent_ns: u64::from(seq) * 20 * ms,
            recv_ns: if received {
                u64::from(seq) * 20 * ms + delay_ms * ms
            } else {
                0
            },
        };
        let mut client = Vec::new();
        let mut server = Vec::new();
        for seq in 0..200 {
            client.push(rec(false, seq, 0));
            server.push(rec(false, seq, 0));
            server.push(rec(true, seq, 21));
            if seq != 7 {
                client.push(rec(true, seq, 20 + u64::from(seq == 99) * 10));
            }
        }
        let v = voice_figures(&client, &server);
        assert_eq!(v.p99_up_ms, Some(21.0));
        assert_eq!(v.p99_down_ms, Some(20.0));
        assert_eq!(v.loss_up_pct, Some(0.0));
        assert_eq!(v.loss_down_pct, Some(0.5));
        assert_eq!(v.duplicates, 0);
        assert!(v.p50_ms.is_some_and(|p| (20.0..=21.0).contains(&p)));
    }
}
