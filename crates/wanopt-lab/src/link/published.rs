//! What a running emulator publishes, read back: both directions' counters
//! from its counters file, as of a snapshot taken after a given moment
//! (what a scenario reads before and after a measurement).

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use crate::bringup::counters_path;
use crate::topology::Lab;

/// An Ethernet header, which the emulator's byte counters include and its
/// rate does not.
pub const ETHERNET_HEADER: u64 = 14;

/// How long a reader waits for a snapshot fresh enough.
const FRESH_WITHIN: Duration = Duration::from_secs(5);

/// One direction's counters since the emulator started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionTotals {
    /// IP bytes the link delivered (its frames' bytes less their Ethernet
    /// headers).
    pub ip_bytes: u64,
    /// Bytes the driver wrote to the egress interface, Ethernet headers
    /// included.
    pub tx_bytes: u64,
    /// Frames dropped as random loss.
    pub lost_frames: u64,
    /// Frames dropped at a full queue.
    pub queue_drops: u64,
    /// Frames RED dropped (not ECN-capable).
    pub red_drops: u64,
    /// Frames RED marked CE.
    pub ce_marked: u64,
    /// Frames held back and overtaken (`reorder`).
    pub reordered: u64,
    /// The most IP bytes handed to the link in any 100 ms since the
    /// emulator started (a peak: [`DirectionTotals::since`] keeps it).
    pub peak_ip_bytes_100ms: u64,
}

impl DirectionTotals {
    fn from_json(direction: &serde_json::Value) -> DirectionTotals {
        let link = |k: &str| direction["link"][k].as_u64().unwrap_or(0);
        DirectionTotals {
            ip_bytes: link("bytes_out").saturating_sub(ETHERNET_HEADER * link("frames_out")),
            tx_bytes: direction["io"]["tx_bytes"].as_u64().unwrap_or(0),
            lost_frames: link("dropped_loss"),
            queue_drops: link("dropped_queue"),
            red_drops: link("dropped_red"),
            ce_marked: link("ce_marked"),
            reordered: link("reordered"),
            peak_ip_bytes_100ms: link("peak_ip_bytes_100ms"),
        }
    }

    /// What happened between `before` and `self`.
    pub fn since(&self, before: &DirectionTotals) -> DirectionTotals {
        DirectionTotals {
            ip_bytes: self.ip_bytes.saturating_sub(before.ip_bytes),
            tx_bytes: self.tx_bytes.saturating_sub(before.tx_bytes),
            lost_frames: self.lost_frames.saturating_sub(before.lost_frames),
            queue_drops: self.queue_drops.saturating_sub(before.queue_drops),
            red_drops: self.red_drops.saturating_sub(before.red_drops),
            ce_marked: self.ce_marked.saturating_sub(before.ce_marked),
            reordered: self.reordered.saturating_sub(before.reordered),
            peak_ip_bytes_100ms: self.peak_ip_bytes_100ms,
        }
    }
}

/// Both directions' counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkTotals {
    /// Client to server.
    pub up: DirectionTotals,
    /// Server to client.
    pub down: DirectionTotals,
}

impl LinkTotals {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &LinkTotals) -> LinkTotals {
        LinkTotals {
            up: self.up.since(&before.up),
            down: self.down.since(&before.down),
        }
    }

    /// A counter summed over both directions.
    pub fn both(&self, counter: impl Fn(&DirectionTotals) -> u64) -> u64 {
        counter(&self.up) + counter(&self.down)
    }

    /// The totals in a counters file's text, if both directions' snapshots
    /// were taken at or after `not_before_ms`.
    fn parse(text: &str, not_before_ms: u64) -> Option<LinkTotals> {
        let doc: serde_json::Value = serde_json::from_str(text).ok()?;
        let fresh = ["up", "down"]
            .iter()
            .all(|d| doc[d]["at_unix_ms"].as_u64().unwrap_or(0) >= not_before_ms);
        fresh.then(|| LinkTotals {
            up: DirectionTotals::from_json(&doc["up"]),
            down: DirectionTotals::from_json(&doc["down"]),
        })
    }
}

/// The lab's link counters as of a snapshot taken at or after
/// `not_before_ms` (waiting up to 5 s for one).
pub fn link_totals(lab: &Lab, not_before_ms: u64) -> Result<LinkTotals, String> {
    totals_in(&counters_path(lab), not_before_ms)
}

/// The counters in the file `path` as of a snapshot taken at or after
/// `not_before_ms` (waiting up to 5 s for one).
pub fn totals_in(path: &Path, not_before_ms: u64) -> Result<LinkTotals, String> {
    let deadline = Instant::now() + FRESH_WITHIN;
    loop {
        if let Some(totals) = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| LinkTotals::parse(&text, not_before_ms))
        {
            return Ok(totals);
        }
        if Instant::now() > deadline {
            return Err("the emulator's counters are stale (is the emulator running?)".into());
        }
        thread::sleep(Duration::from_millis(40));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_read_only_when_both_directions_are_fresh() {
        let text = r#"{
            "up": {"at_unix_ms": 2000, "io": {"tx_bytes": 1514},
                   "link": {"bytes_out": 1514, "frames_out": 1, "dropped_loss": 2,
                            "dropped_queue": 3, "dropped_red": 4, "ce_marked": 5, "reordered": 6,
                            "peak_ip_bytes_100ms": 250000}},
            "down": {"at_unix_ms": 1000, "link": {}}
        }"#;
        assert_eq!(LinkTotals::parse(text, 1500), None);
        let totals = LinkTotals::parse(text, 1000).unwrap_or_default();
        assert_eq!(
            totals.up,
            DirectionTotals {
                ip_bytes: 1500,
                tx_bytes: 1514,
                lost_frames: 2,
                queue_drops: 3,
                red_drops: 4,
                ce_marked: 5,
                reordered: 6,
                peak_ip_bytes_100ms: 250_000,
            }
        );
        assert_eq!(totals.down, DirectionTotals::default());
        let later = LinkTotals {
            up: DirectionTotals {
                lost_frames: 7,
                ..totals.up
            },
            ..totals
        };
        assert_eq!(later.since(&totals).both(|d| d.lost_frames), 5);
        // A peak is not a count: what happened since keeps it.
        assert_eq!(later.since(&totals).up.peak_ip_bytes_100ms, 250_000);
        assert_eq!(LinkTotals::parse("not json", 0), None);
    }
}
