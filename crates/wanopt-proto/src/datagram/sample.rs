//! What the node remembers of each path between samples: its loss, whether
//! it carries bulk traffic, its capacity (slowly forgotten), and the streams
//! ending on it.

use std::time::{Duration, Instant};

use super::duplication::DuplicationMode;
use crate::dup::{LossMonitor, TailParams};

/// One sample of a tunnel connection, for
/// [`super::DatagramLayer::handle_sample`].
#[derive(Debug, Clone, Copy)]
pub struct PathSample {
    /// Packets sent on the path since the connection began.
    pub sent_packets: u64,
    /// Packets declared lost since the connection began.
    pub lost_packets: u64,
    /// Smoothed round-trip time.
    pub srtt: Duration,
    /// The congestion controller's rate estimate, bytes per second (the
    /// path's capacity is the highest estimate seen, slowly forgotten).
    pub rate_estimate: Option<f64>,
    /// UDP bytes sent on the path since the connection began (the send
    /// rate between two samples tells bulk traffic from sparse).
    pub udp_tx_bytes: u64,
    /// UDP bytes received on the path since the connection began (the
    /// highest receive rate is a floor of what the path carries, for a
    /// direction that only acknowledges).
    pub udp_rx_bytes: u64,
    /// The path MTU (UDP payload).
    pub mtu: u16,
    /// QUIC DATAGRAM frames sent since the connection began (UDP flows'
    /// datagrams, which nothing resends: FEC protects them harder).
    pub datagrams_sent: u64,
    /// Rounds the congestion controller found congested so far (wanopt's
    /// BBR), so that FEC does not answer loss at a growing queue.
    pub congested_rounds: Option<u64>,
    /// Rounds the controller began not app-limited so far (wanopt's BBR):
    /// while they grow, the sender drives the path and the controller's
    /// random-loss estimate bounds what FEC answers.
    pub filled_rounds: Option<u64>,
    /// The random loss rate the congestion controller learned (wanopt's
    /// BBR): FEC answers no more loss than this.
    pub random_loss: Option<f64>,
    /// The controller is still in its startup: its random-loss estimate
    /// means something only for a sender that drives the path (a sparse
    /// sender's controller never leaves startup nor sees a queue).
    pub startup: bool,
}

/// What the node remembers of a path between samples.
#[derive(Debug, Default)]
pub(super) struct PathMemory {
    pub(super) loss: LossMonitor,
    /// Whether the last sample found the path carrying bulk traffic.
    pub(super) bulk: bool,
    /// The previous sample's time and UDP bytes sent.
    last_tx: Option<(Instant, u64)>,
    /// The highest rate estimate seen, decayed with a one-minute half-life,
    /// and when it was last updated. BBR's own estimate is a max over about
    /// ten round trips, so it falls as soon as the traffic turns sparse
    /// (app-limited samples), which is exactly when tails matter.
    capacity: Option<(f64, Instant)>,
    /// The previous sample's UDP bytes received, and the highest receive
    /// rate, decayed like `capacity`.
    last_rx: Option<(Instant, u64)>,
    received_peak: Option<(f64, Instant)>,
    /// The tail parameters the last sample gave the path (whether on or
    /// not), for a stream end between samples.
    pub(super) params: Option<TailParams>,
    /// Streams on the path whose last bytes are written and not yet
    /// acknowledged (the node's stream-end guards alive).
    pub(super) ending: usize,
}

/// How often the node samples its paths for duplication (short, so that
/// tails come back soon after a bulk transfer ends).
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);

/// Half-life of a path's remembered capacity.
const CAPACITY_HALF_LIFE: Duration = Duration::from_secs(60);

impl PathMemory {
    /// The send rate since the previous sample, bytes per second (0 at the
    /// first sample or when the counter went back: a new connection).
    pub(super) fn send_rate(&mut self, now: Instant, tx_bytes: u64) -> f64 {
        let rate = match self.last_tx {
            Some((at, last)) if tx_bytes >= last => {
                let secs = now.saturating_duration_since(at).as_secs_f64();
                if secs > 0.0 {
                    (tx_bytes - last) as f64 / secs
                } else {
                    0.0
                }
            }
            _ => 0.0,
        };
        self.last_tx = Some((now, tx_bytes));
        rate
    }

    /// Whether tails are repeated on the path in `mode`: `auto` wants a
    /// lossy path that carries no bulk traffic, or one where a stream is
    /// ending.
    pub(super) fn repeats(&self, mode: DuplicationMode) -> bool {
        match mode {
            DuplicationMode::Off => false,
            DuplicationMode::Tails => true,
            DuplicationMode::Auto => self.loss.is_lossy() && (!self.bulk || self.ending > 0),
        }
    }

    pub(super) fn capacity(&mut self, now: Instant, estimate: Option<f64>) -> Option<f64> {
        let estimate = estimate.filter(|r| r.is_finite() && *r > 0.0);
        let remembered = self.remembered(now);
        let capacity = higher(estimate, remembered);
        self.capacity = capacity.map(|c| (c, now));
        capacity
    }

    /// The remembered capacity decayed to `now`, bytes per second.
    pub(super) fn remembered(&self, now: Instant) -> Option<f64> {
        decayed(self.capacity, now)
    }

    /// The highest rate the peer's datagrams arrived at, slowly
    /// forgotten, bytes per second (`rx_bytes`: received so far).
    pub(super) fn received_peak(&mut self, now: Instant, rx_bytes: u64) -> Option<f64> {
        let rate = match self.last_rx {
            Some((at, last)) if rx_bytes >= last => {
                let secs = now.saturating_duration_since(at).as_secs_f64();
                (secs > 0.0).then(|| (rx_bytes - last) as f64 / secs)
            }
            _ => None,
        };
        self.last_rx = Some((now, rx_bytes));
        let peak = higher(rate, decayed(self.received_peak, now));
        self.received_peak = peak.map(|p| (p, now));
        peak
    }
}

/// The higher of two rates, either of which may be unknown.
pub(super) fn higher(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// A remembered rate decayed to `now` with [`CAPACITY_HALF_LIFE`].
fn decayed(remembered: Option<(f64, Instant)>, now: Instant) -> Option<f64> {
    remembered.map(|(rate, at)| {
        let half_lives =
            now.saturating_duration_since(at).as_secs_f64() / CAPACITY_HALF_LIFE.as_secs_f64();
        rate * 0.5f64.powf(half_lives)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_the_highest_estimate_slowly_forgotten() {
        let t0 = Instant::now();
        let mut path = PathMemory::default();
        assert_eq!(path.capacity(t0, None), None);
        assert_eq!(path.capacity(t0, Some(250_000.0)), Some(250_000.0));
        // Sparse traffic: BBR's estimate drops; the capacity does not.
        let later = t0 + Duration::from_secs(1);
        let c = path.capacity(later, Some(5_000.0)).unwrap();
        assert!(c > 247_000.0 && c < 250_000.0, "{c}");
        // A minute of nothing halves it; a new high replaces it.
        let c = path.capacity(later + CAPACITY_HALF_LIFE, None).unwrap();
        assert!((c - 124_000.0).abs() < 1_500.0, "{c}");
        let c = path
            .capacity(later + CAPACITY_HALF_LIFE, Some(1e6))
            .unwrap();
        assert_eq!(c, 1e6);
        // Nonsense estimates are ignored.
        assert_eq!(
            path.capacity(later + CAPACITY_HALF_LIFE, Some(f64::NAN)),
            Some(1e6)
        );
    }
}
