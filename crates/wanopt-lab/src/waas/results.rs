//! `results.json` of `waas-3g`: one row per (test, file, mode), medians
//! over the runs, every sample kept.

use serde::{Deserialize, Serialize};

use super::reference;
use super::transfer::Test;
use crate::kit::stats::{first_seen, median, round3, round4};

/// One transfer as measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The client's wall time, seconds.
    pub seconds: f64,
    /// Bytes of Ethernet frames the emulator delivered client to server.
    pub wan_bytes_up: u64,
    /// Bytes of Ethernet frames the emulator delivered server to client.
    pub wan_bytes_down: u64,
    /// edit-save: the open (download) part, seconds.
    pub open_seconds: Option<f64>,
    /// edit-save: the save (upload) part, seconds.
    pub save_seconds: Option<f64>,
    /// upload and edit-save: until the client's TCP peer acknowledged the
    /// upload's last byte (what an FTP client reports), seconds.
    #[serde(default)]
    pub sent_seconds: Option<f64>,
    /// FTP: the client's whole session (login, directory, passive mode
    /// and the transfer; for edit-save both sessions), seconds.
    #[serde(default)]
    pub session_seconds: Option<f64>,
    /// What the path did meanwhile.
    #[serde(default)]
    pub path: PathSample,
}

/// What the path did during one transfer: frames the emulator dropped
/// and, through wanopt, what each node's tunnel counted. The same
/// snapshots as the WAN bytes (just before the client starts, and after
/// it ended and the link settled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PathSample {
    /// Frames the emulator dropped at random (its `loss`), client to
    /// server.
    pub lost_up: u64,
    /// Frames the emulator dropped at random, server to client.
    pub lost_down: u64,
    /// Frames dropped at the emulator's full queue, client to server.
    pub queue_drops_up: u64,
    /// Frames dropped at the emulator's full queue, server to client.
    pub queue_drops_down: u64,
    /// The edge's tunnel (what it sent to the core), cold and warm only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<TunnelSample>,
    /// The core's tunnel (what it sent to the edge), cold and warm only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<TunnelSample>,
}

/// One node's tunnel counters over a transfer (from its `/status`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TunnelSample {
    /// QUIC packets the node sent.
    pub sent_packets: u64,
    /// Packets of those it declared lost.
    pub lost_packets: u64,
    /// Datagrams it sent a second time (tail duplication).
    pub duplicated: u64,
    /// Datagrams from its peer it rebuilt from the peer's parity.
    pub rebuilt: u64,
    /// Whether the node repeated tails when the transfer started.
    pub tails_on: bool,
    /// Its loss monitor's estimate when the transfer started, percent.
    pub loss_percent: f64,
}

impl PathSample {
    /// Frames the emulator dropped server to client, at random or at a
    /// full queue.
    pub fn dropped_down(&self) -> u64 {
        self.lost_down + self.queue_drops_down
    }

    /// Frames the emulator dropped client to server.
    pub fn dropped_up(&self) -> u64 {
        self.lost_up + self.queue_drops_up
    }
}

/// One line for people: what the emulator dropped and what the tunnel
/// did about it.
pub fn path_text(p: &PathSample) -> String {
    use std::fmt::Write as _;
    let mut text = format!(
        "emulator dropped {} down, {} up",
        p.dropped_down(),
        p.dropped_up()
    );
    let queue = p.queue_drops_down + p.queue_drops_up;
    if queue > 0 {
        let _ = write!(text, " ({queue} at a full queue)");
    }
    for (name, t) in [("core", p.core), ("edge", p.edge)] {
        if let Some(t) = t {
            let _ = write!(
                text,
                "; {name} sent {} packets, declared {} lost, repeated {}, rebuilt {} (tails {} at {:.2}% loss)",
                t.sent_packets,
                t.lost_packets,
                t.duplicated,
                t.rebuilt,
                if t.tails_on { "on" } else { "off" },
                t.loss_percent
            );
        }
    }
    text
}

impl Sample {
    /// Both directions.
    pub fn wan_bytes(&self) -> u64 {
        self.wan_bytes_up + self.wan_bytes_down
    }
}

/// One (test, file, mode): the interface contract's fields first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `http-download`, `download`, `upload` or `edit-save`.
    pub test: String,
    /// The file (`2M.xls`).
    pub file: String,
    /// `baseline`, `cold` or `warm`.
    pub mode: String,
    /// Median time over the runs, seconds.
    pub seconds: f64,
    /// Median bytes that crossed the emulated WAN, both directions
    /// (Ethernet frames, as counted by the emulator).
    pub wan_bytes: u64,
    /// The file's size.
    pub file_bytes: u64,
    /// Median WAN bytes client to server.
    pub wan_bytes_up: u64,
    /// Median WAN bytes server to client.
    pub wan_bytes_down: u64,
    /// edit-save: median open (download) time, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_seconds: Option<f64>,
    /// edit-save: median save (upload) time, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_seconds: Option<f64>,
    /// upload and edit-save: median time until the client's TCP peer (the
    /// server on the direct path, the edge through wanopt) acknowledged the
    /// upload's last byte, before the server's `OK` (for edit-save, from
    /// the start of the save): the time an FTP client reports, and what the
    /// reference's upload table shows, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_seconds: Option<f64>,
    /// FTP tests: median time of the client's whole session (login and
    /// commands included; `seconds` is the transfer as an FTP client
    /// reports it), seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_seconds: Option<f64>,
    /// The reference's seconds for the same test, file and mode (edit-save:
    /// open plus save), if it published them.
    #[serde(default)]
    pub reference_seconds: Option<f64>,
    /// Runs measured.
    pub runs: usize,
    /// Every run's seconds.
    pub samples_seconds: Vec<f64>,
    /// Every run's WAN bytes.
    pub samples_wan_bytes: Vec<u64>,
    /// Runs that failed (not in the median), with the reason.
    #[serde(default)]
    pub failed_runs: Vec<String>,
    /// What the path did in each run, in the order of `samples_seconds`.
    #[serde(default)]
    pub samples_path: Vec<PathSample>,
}

/// A mode or pass that could not be measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The run (1-based).
    pub run: usize,
    /// `baseline`, `cold` or `warm` (or `cold+warm`).
    pub mode: String,
    /// Why.
    pub reason: String,
}

/// The emulated 3G link as run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkInfo {
    /// Client-to-server spec.
    pub up: String,
    /// Server-to-client spec.
    pub down: String,
    /// The emulator's seed.
    pub seed: u64,
    /// One line for people.
    pub summary: String,
}

/// One generated file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Name.
    pub name: String,
    /// Size, bytes.
    pub bytes: u64,
    /// `word`, `excel`, `powerpoint` or `zip`.
    pub kind: String,
    /// Size over an LZ4-like compressor's estimated output.
    pub lz_ratio: f64,
}

/// `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    /// `waas-3g`.
    pub scenario: String,
    /// One row per test, file and mode.
    pub rows: Vec<Row>,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// Runs per transfer.
    pub runs: usize,
    /// How rows summarize runs.
    pub method: String,
    /// The link.
    pub link: LinkInfo,
    /// Endpoint TCP profile.
    pub profile: String,
    /// Seed of the file set.
    pub file_seed: u64,
    /// The file set.
    pub files: Vec<FileInfo>,
    /// What was not measured, and why.
    pub skipped: Vec<Skipped>,
    /// Transfers whose bytes arrived wrong (the run stops at the first).
    pub corrupted: Vec<String>,
    /// `wanopt cache stats --json` of both nodes after each optimized pass.
    pub cache_stats: Vec<serde_json::Value>,
    /// Effective TCP settings of the endpoints.
    pub endpoints: serde_json::Value,
    /// Wall time of the whole scenario so far, seconds.
    #[serde(default)]
    pub elapsed_seconds: f64,
    /// The CIFS tests' Samba: `smb_encrypt` (`default` or `required`) and
    /// `session` (what `smbstatus` said of a session: protocol, encryption,
    /// signing).
    #[serde(default)]
    pub smb: serde_json::Value,
    /// Every flow reset the nodes logged (WARN lines naming a flow and a
    /// reset), quoted with the log they came from: any fails the run.
    #[serde(default)]
    pub flow_resets: Vec<String>,
}

fn median_u64(values: &[u64]) -> u64 {
    let f: Vec<f64> = values.iter().map(|v| *v as f64).collect();
    median(&f).unwrap_or_default().round() as u64
}

/// Summarizes the samples (and failures) of one test, file and mode.
pub fn row(
    test: Test,
    file: &str,
    file_bytes: u64,
    mode: &str,
    samples: &[Sample],
    failed: Vec<String>,
) -> Option<Row> {
    if samples.is_empty() {
        return None;
    }
    let secs: Vec<f64> = samples.iter().map(|s| s.seconds).collect();
    let wan: Vec<u64> = samples.iter().map(Sample::wan_bytes).collect();
    let up: Vec<u64> = samples.iter().map(|s| s.wan_bytes_up).collect();
    let down: Vec<u64> = samples.iter().map(|s| s.wan_bytes_down).collect();
    let part = |f: fn(&Sample) -> Option<f64>| {
        let v: Vec<f64> = samples.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| round3(median(&v).unwrap_or_default()))
    };
    Some(Row {
        test: test.name().into(),
        file: file.into(),
        mode: mode.into(),
        seconds: round3(median(&secs).unwrap_or_default()),
        wan_bytes: median_u64(&wan),
        file_bytes,
        wan_bytes_up: median_u64(&up),
        wan_bytes_down: median_u64(&down),
        open_seconds: part(|s| s.open_seconds),
        save_seconds: part(|s| s.save_seconds),
        sent_seconds: {
            let v: Vec<f64> = samples.iter().filter_map(|s| s.sent_seconds).collect();
            (!v.is_empty()).then(|| round4(median(&v).unwrap_or_default()))
        },
        session_seconds: part(|s| s.session_seconds),
        reference_seconds: reference::seconds(test, file, mode),
        runs: samples.len(),
        samples_seconds: secs.iter().map(|v| round3(*v)).collect(),
        samples_wan_bytes: wan,
        failed_runs: failed,
        samples_path: samples.iter().map(|s| s.path).collect(),
    })
}

impl Results {
    /// The row of `test`, `file`, `mode`.
    pub fn find(&self, test: Test, file: &str, mode: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.test == test.name() && r.file == file && r.mode == mode)
    }

    /// The files of `test` in the rows, in the order measured.
    pub fn files(&self, test: Test) -> Vec<String> {
        let of_test = self.rows.iter().filter(|r| r.test == test.name());
        first_seen(of_test.map(|r| r.file.clone()))
    }
}

/// A transfer as measured, without edit-save parts (test fixture).
#[cfg(test)]
pub(crate) fn sample(seconds: f64, up: u64, down: u64) -> Sample {
    Sample {
        seconds,
        wan_bytes_up: up,
        wan_bytes_down: down,
        open_seconds: None,
        save_seconds: None,
        sent_seconds: None,
        session_seconds: None,
        path: PathSample::default(),
    }
}

/// `results.json` of a `--quick` run with `rows` (test fixture for the
/// results, report and plot tests).
#[cfg(test)]
pub(crate) fn sample_results(rows: Vec<Row>) -> Results {
    Results {
        scenario: "waas-3g".into(),
        runs: rows.iter().map(|r| r.runs).max().unwrap_or(1),
        rows,
        quick: true,
        method: "median".into(),
        link: LinkInfo {
            up: "rtt 150ms".into(),
            down: "rtt 150ms".into(),
            seed: 3,
            summary: "3G".into(),
        },
        profile: "legacy".into(),
        file_seed: 4,
        files: vec![],
        skipped: vec![],
        corrupted: vec![],
        cache_stats: vec![],
        endpoints: serde_json::Value::Null,
        elapsed_seconds: 0.0,
        smb: serde_json::Value::Null,
        flow_resets: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_json_keeps_the_interface_contract() {
        let samples = [
            sample(12.0, 100, 2_000),
            sample(14.0, 120, 2_400),
            sample(13.0, 110, 2_200),
        ];
        let r = row(Test::Upload, "2M.xls", 2_108_928, "cold", &samples, vec![]);
        let r = r.unwrap_or_else(|| panic!("a row from three samples"));
        assert_eq!(r.seconds, 13.0);
        assert_eq!(r.wan_bytes, 2_310);
        assert_eq!(r.reference_seconds, Some(27.38));
        assert!(row(Test::Upload, "2M.xls", 1, "cold", &[], vec![]).is_none());
        let results = sample_results(vec![r]);
        let json = serde_json::to_value(&results).unwrap_or_default();
        assert_eq!(json["scenario"], "waas-3g");
        let row = &json["rows"][0];
        assert_eq!(row["test"], "upload");
        assert_eq!(row["file"], "2M.xls");
        assert_eq!(row["mode"], "cold");
        assert_eq!(row["seconds"], 13.0);
        assert_eq!(row["wan_bytes"], 2_310);
        assert!(row["seconds"].is_f64());
        assert!(row["wan_bytes"].is_u64());
        // And back.
        let text = serde_json::to_string(&results).unwrap_or_default();
        let back: Result<Results, _> = serde_json::from_str(&text);
        assert_eq!(back.map(|b| b.rows).ok(), Some(results.rows));
    }
}
