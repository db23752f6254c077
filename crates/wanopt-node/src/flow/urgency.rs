//! Interactive flows ahead of bulk inside the tunnel.
//!
//! Every flow's stream starts at its class's interactive level and is
//! moved one level down, to bulk, once it has written more than a burst
//! of [`BURST`] bytes faster than [`RATE`]: a credit that refills at
//! `RATE` up to `BURST` and that each write spends (least attained
//! service, as PIAS schedules datacenter flows). A request/response flow
//! (a 64-byte ping every 100 ms, a shell, a database's queries) never runs
//! out of credit; a download does after its first quarter megabyte, and
//! regains the interactive level once it has been quiet long enough to
//! earn back half the burst. QUIC stream priorities are strict: the
//! tunnel's sender packs the pending data of a higher level first, so a
//! bulk flow's backlog in the tunnel never adds to an interactive flow's
//! wait; the bottleneck's own queue is the controller's to keep short.
//!
//! Levels: a class's priority `p` (high 1, normal 0, low -1) is the stream
//! priority `2p + 1` while interactive and `2p` as bulk, so a bulk flow of
//! a high class still goes ahead of an interactive flow of a normal one.

use std::time::Instant;

/// The credit's ceiling, bytes.
pub(crate) const BURST: f64 = 256.0 * 1024.0;

/// The credit's refill, bytes per second.
pub(crate) const RATE: f64 = 64.0 * 1024.0;

/// The stream priority of a class's priority while its flow is interactive.
pub(crate) fn interactive_level(class_priority: i32) -> i32 {
    class_priority.saturating_mul(2).saturating_add(1)
}

/// One direction's credit and level.
#[derive(Debug, Clone)]
pub(crate) struct Urgency {
    interactive: i32,
    credit: f64,
    last: Instant,
    bulk: bool,
}

impl Urgency {
    /// A stream that starts at the interactive `level` (what
    /// [`interactive_level`] gave it) at `now`, with a full credit.
    pub(crate) fn new(level: i32, now: Instant) -> Urgency {
        Urgency {
            interactive: level,
            credit: BURST,
            last: now,
            bulk: false,
        }
    }

    /// `bytes` are written at `now`: the stream's new priority when its
    /// level changes.
    pub(crate) fn on_write(&mut self, now: Instant, bytes: usize) -> Option<i32> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        let credit = (self.credit + elapsed * RATE).min(BURST) - bytes as f64;
        // A bulk flow owes nothing beyond an empty credit: quiet for
        // `BURST / 2 / RATE` (2 s), it is interactive again.
        self.credit = credit.max(0.0);
        if !self.bulk && credit < 0.0 {
            self.bulk = true;
            return Some(self.interactive.saturating_sub(1));
        }
        if self.bulk && self.credit >= BURST / 2.0 {
            self.bulk = false;
            return Some(self.interactive);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_ping_stays_interactive_and_a_download_goes_bulk_then_back() {
        let start = Instant::now();
        let mut ping = Urgency::new(interactive_level(0), start);
        for i in 0..10_000u32 {
            let at = start + Duration::from_millis(100) * i;
            assert_eq!(ping.on_write(at, 64), None);
        }
        let mut download = Urgency::new(interactive_level(0), start);
        let mut changed = Vec::new();
        // 64 KB writes every millisecond: 64 MB/s.
        for i in 0..100u32 {
            let at = start + Duration::from_millis(u64::from(i));
            if let Some(level) = download.on_write(at, 64 * 1024) {
                changed.push((i, level));
            }
        }
        assert_eq!(changed, [(4, 0)]);
        // Quiet for 3 s (192 KB earned back), then a small request.
        let later = start + Duration::from_secs(3);
        assert_eq!(download.on_write(later, 100), Some(1));
        // A high class's bulk still outranks a normal class's interactive.
        assert!(interactive_level(1) - 1 > interactive_level(0));
        assert_eq!(interactive_level(-1), -1);
    }
}
