//! What a link has done so far.

use std::collections::VecDeque;

use serde::Serialize;

use crate::histogram::LogHistogram;

/// Counters of one link direction. Frame and byte counts of traffic in and out
/// count whole Ethernet frames; the queue figures count in the shaper's unit,
/// IP bytes (frame length minus the Ethernet header), like the queue limit.
///
/// At any moment:
/// `frames_in + duplicated = frames_out + dropped_loss + dropped_queue +
/// dropped_red + frames_in_flight`. Queue occupancy is as of the last call
/// that passed a `now` (`handle_frame` or `poll_transmit`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Frames handed to the link.
    pub frames_in: u64,
    /// Bytes of the frames handed to the link.
    pub bytes_in: u64,
    /// Frames the link delivered (duplicates included).
    pub frames_out: u64,
    /// Bytes of the frames the link delivered.
    pub bytes_out: u64,
    /// Frames dropped by random or burst loss.
    pub dropped_loss: u64,
    /// Frames dropped because the queue limit would have been exceeded.
    pub dropped_queue: u64,
    /// Non-ECN-capable frames dropped by RED.
    pub dropped_red: u64,
    /// ECN-capable frames RED marked CE (frames already CE included).
    pub ce_marked: u64,
    /// Copies made by duplication.
    pub duplicated: u64,
    /// Frames held back so that later frames overtake them.
    pub reordered: u64,
    /// Non-IP frames (ARP and others) forwarded on the priority lane.
    pub non_ip: u64,
    /// Frames accepted and not yet delivered (queue plus delay line).
    pub frames_in_flight: u64,
    /// IP bytes waiting for or in serialization.
    pub queue_bytes: u64,
    /// Frames waiting for or in serialization.
    pub queue_frames: u64,
    /// Largest `queue_bytes` seen.
    pub max_queue_bytes: u64,
    /// Nanoseconds the queue spent at each `queue_bytes` level, up to the
    /// last call that passed a `now`: its quantiles are the queue the link
    /// held, weighted by time.
    pub queue_bytes_time: LogHistogram,
    /// Frames by the nanoseconds each waited in the queue and in
    /// serialization (the bottleneck's own delay, without the delay line).
    pub queue_delay_ns: LogHistogram,
    /// The most IP bytes (frame length less the Ethernet header) of IP
    /// frames handed to the link within any [`PEAK_WINDOW_NS`], before
    /// loss: what a sender put on the link at its burstiest, to check a
    /// declared rate against (20 Mbit/s is 250 000 bytes per 100 ms).
    pub peak_ip_bytes_100ms: u64,
}

/// The sliding window of [`Counters::peak_ip_bytes_100ms`]: 100 ms.
pub const PEAK_WINDOW_NS: u64 = 100_000_000;

/// The arrivals of the last [`PEAK_WINDOW_NS`] and their sum.
#[derive(Debug, Default)]
pub(crate) struct PeakWindow {
    arrivals: VecDeque<(u64, u64)>,
    sum: u64,
}

impl PeakWindow {
    /// `bytes` arrived at `now_ns` (never before the last arrival): the
    /// bytes that arrived within the window ending now, this one included.
    pub(crate) fn add(&mut self, now_ns: u64, bytes: u64) -> u64 {
        while let Some(&(at, old)) = self.arrivals.front() {
            if at + PEAK_WINDOW_NS > now_ns {
                break;
            }
            self.arrivals.pop_front();
            self.sum -= old;
        }
        self.arrivals.push_back((now_ns, bytes));
        self.sum += bytes;
        self.sum
    }
}

impl Counters {
    /// All frames dropped, whatever the cause.
    pub fn dropped(&self) -> u64 {
        self.dropped_loss + self.dropped_queue + self.dropped_red
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_holds_what_arrived_within_the_last_100_ms() {
        let mut window = PeakWindow::default();
        let ms = 1_000_000;
        assert_eq!(window.add(0, 1000), 1000);
        assert_eq!(window.add(50 * ms, 500), 1500);
        // 99.999 ms after the first: still in; 100 ms after: out.
        assert_eq!(window.add(100 * ms - 1, 1), 1501);
        assert_eq!(window.add(100 * ms, 10), 511);
        assert_eq!(window.add(400 * ms, 7), 7);
    }
}
