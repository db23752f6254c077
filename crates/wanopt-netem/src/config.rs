//! Configuration of one direction of an emulated link.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::trace::DeliveryTrace;
use crate::units::{BitsPerSecond, Probability};
pub use crate::units::{GilbertElliott, QueueLimit};

/// The smallest byte limit a [`QueueLimit::Bdp`] resolves to: 64 full-size
/// 1500-byte packets, the default queue limit of a Cisco IOS shaping queue,
/// so that a zero or tiny bandwidth-delay product (RTT 0) still leaves the
/// buffer a real shaping router has (16 packets starved plain TCP at 0 ms:
/// 183 Mbit/s of 250 in the lab's first tcp-opt run).
pub const MIN_BDP_QUEUE_BYTES: u64 = 64 * 1500;

/// The queue limit when none is configured: 1000 packets, Linux's default
/// `txqueuelen`.
pub const DEFAULT_QUEUE_LIMIT: QueueLimit = QueueLimit::Packets(1000);

/// A queue limit in a unit the link can count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ResolvedQueueLimit {
    /// At most this many IP bytes waiting for or in serialization.
    Bytes(u64),
    /// At most this many frames waiting for or in serialization.
    Packets(u64),
}

impl ResolvedQueueLimit {
    /// The limit as a number in its own unit (bytes or packets).
    pub fn amount(self) -> u64 {
        match self {
            ResolvedQueueLimit::Bytes(amount) | ResolvedQueueLimit::Packets(amount) => amount,
        }
    }
}

/// Parameters of the RED queue (`ecn red`).
///
/// This is RED on the *instantaneous* backlog rather than Floyd and
/// Jacobson's exponentially weighted average: the marking probability rises
/// linearly from 0 at `min_threshold × limit` to `max_probability` at
/// `max_threshold × limit`, and is 1 above that up to the hard limit. The
/// instantaneous variant reacts within one packet, needs no idle-time
/// correction, and makes marks a pure function of the arrival sequence.
/// Thresholds count in the queue limit's unit (bytes or packets).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RedParams {
    /// Backlog, as a fraction of the queue limit, below which nothing is marked.
    pub min_threshold: f64,
    /// Backlog, as a fraction of the queue limit, above which everything is marked.
    pub max_threshold: f64,
    /// Marking probability just below `max_threshold` (RED's `max_p`).
    pub max_probability: f64,
}

impl Default for RedParams {
    /// Floyd's rules of thumb: `max_th = 3 × min_th`, `max_p = 0.1`; here
    /// `min_th` is a quarter of the queue limit.
    fn default() -> RedParams {
        RedParams {
            min_threshold: 0.25,
            max_threshold: 0.75,
            max_probability: 0.1,
        }
    }
}

/// What the bottleneck queue does as it fills.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub enum QueueDiscipline {
    /// Drop-tail: drop only when the limit would be exceeded.
    #[default]
    DropTail,
    /// RED with ECN (`ecn red`): between the thresholds, frames whose IP ECN
    /// field is ECT(0), ECT(1) or CE are marked CE and other IP frames are
    /// dropped (cause `red`); above the limit everything is dropped (cause
    /// `queue`).
    Red(RedParams),
}

/// One direction of an emulated link. `Default` is a perfect link: no rate
/// limit (hence no queue), no delay, no loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkConfig {
    /// Bottleneck rate counting IP bytes; `None` (or a rate of zero) sends
    /// frames at once, with no queue.
    pub rate: Option<BitsPerSecond>,
    /// One-way propagation delay, the minimum time from arrival to departure.
    pub delay: Duration,
    /// Extra delay drawn uniformly from `[0, jitter]` per frame on top of
    /// `delay`; order-preserving (see [`LinkConfig::reorder`]).
    pub jitter: Duration,
    /// Independent (Bernoulli) loss probability per IP frame.
    pub loss: Probability,
    /// Optional Gilbert-Elliott burst loss, applied in addition to `loss`.
    pub loss_burst: Option<GilbertElliott>,
    /// Limit of the bottleneck queue (only meaningful with a `rate`).
    pub queue: QueueLimit,
    /// The round-trip time a [`QueueLimit::Bdp`] is computed from; `None`
    /// means twice this direction's `delay` (a symmetric link).
    pub rtt_for_bdp: Option<Duration>,
    /// Drop-tail or RED/ECN.
    pub discipline: QueueDiscipline,
    /// Probability that an IP frame is held back by `reorder_gap` after its
    /// in-order departure, so that the frames behind it overtake it.
    pub reorder: Probability,
    /// How long a reordered frame is held back.
    pub reorder_gap: Duration,
    /// Probability that an IP frame is duplicated; the copy takes the same
    /// path (queue, shaper, delay line) right behind the original.
    pub duplicate: Probability,
    /// Time the bottleneck spends on each frame on top of its bytes at
    /// `rate` (a firewall or router that forwards a bounded number of
    /// packets per second, whatever their size): a frame of `b` bytes
    /// occupies it for `b × 8 / rate + per_packet`. Only with a fixed
    /// `rate`.
    #[serde(default, skip_serializing_if = "Duration::is_zero")]
    pub per_packet: Duration,
    /// A capacity that follows a recorded trace of delivery opportunities
    /// ([`crate::trace`]) instead of a fixed `rate`: when set, `rate` is not
    /// used, and a [`QueueLimit::Bdp`] counts the trace's mean rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<DeliveryTrace>,
}

impl Default for LinkConfig {
    fn default() -> LinkConfig {
        LinkConfig {
            rate: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: Probability::ZERO,
            loss_burst: None,
            queue: DEFAULT_QUEUE_LIMIT,
            rtt_for_bdp: None,
            discipline: QueueDiscipline::DropTail,
            reorder: Probability::ZERO,
            reorder_gap: Duration::from_millis(1),
            duplicate: Probability::ZERO,
            per_packet: Duration::ZERO,
            trace: None,
        }
    }
}

impl LinkConfig {
    /// One direction of a symmetric link with round-trip time `rtt`: the
    /// one-way delay is `rtt / 2` and BDP queue limits use `rtt`.
    pub fn from_rtt(rtt: Duration) -> LinkConfig {
        LinkConfig {
            delay: rtt / 2,
            rtt_for_bdp: Some(rtt),
            ..LinkConfig::default()
        }
    }

    /// The round-trip time used for the bandwidth-delay product:
    /// `rtt_for_bdp`, or twice `delay` when that is `None`.
    pub fn bdp_rtt(&self) -> Duration {
        self.rtt_for_bdp.unwrap_or(self.delay * 2)
    }

    /// The bottleneck's rate: the trace's mean rate when the capacity
    /// follows a trace, else `rate`; `None` without a bottleneck.
    pub fn capacity(&self) -> Option<BitsPerSecond> {
        match &self.trace {
            Some(trace) => Some(trace.mean_rate()),
            None => self.rate.filter(|rate| rate.0 > 0),
        }
    }

    /// The bandwidth-delay product `capacity × RTT` in bytes, if there is a
    /// bottleneck.
    pub fn bdp_bytes(&self) -> Option<u64> {
        let rate = self.capacity()?;
        let bits = u128::from(rate.0) * self.bdp_rtt().as_nanos() / 1_000_000_000;
        Some(u64::try_from(bits / 8).unwrap_or(u64::MAX))
    }

    /// The queue limit in bytes or packets, or `None` when there is no
    /// bottleneck (frames are then never queued). `Bdp(k)` becomes
    /// `max(k × bdp_bytes, MIN_BDP_QUEUE_BYTES)` bytes. [`crate::Link::new`]
    /// resolves the limit this way, once.
    pub fn resolve_queue(&self) -> Option<ResolvedQueueLimit> {
        let bdp = self.bdp_bytes()?;
        Some(match self.queue {
            QueueLimit::Bytes(bytes) => ResolvedQueueLimit::Bytes(bytes),
            QueueLimit::Packets(packets) => ResolvedQueueLimit::Packets(packets),
            QueueLimit::Bdp(multiple) => {
                // `as` saturates for huge or non-finite values; negative becomes 0.
                let bytes = (bdp as f64 * multiple.max(0.0)) as u64;
                ResolvedQueueLimit::Bytes(bytes.max(MIN_BDP_QUEUE_BYTES))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdp_queue_resolves_from_rate_and_rtt() {
        let config = LinkConfig {
            rate: Some(BitsPerSecond(250_000_000)),
            queue: QueueLimit::Bdp(2.0),
            ..LinkConfig::from_rtt(Duration::from_millis(100))
        };
        assert_eq!(config.delay, Duration::from_millis(50));
        assert_eq!(config.bdp_bytes(), Some(3_125_000));
        assert_eq!(
            config.resolve_queue(),
            Some(ResolvedQueueLimit::Bytes(6_250_000))
        );
    }

    #[test]
    fn bdp_rtt_defaults_to_twice_the_delay_and_has_a_floor() {
        let config = LinkConfig {
            rate: Some(BitsPerSecond(8_000_000)),
            delay: Duration::from_millis(10),
            queue: QueueLimit::Bdp(1.0),
            ..LinkConfig::default()
        };
        assert_eq!(config.bdp_bytes(), Some(20_000));
        assert_eq!(
            config.resolve_queue(),
            Some(ResolvedQueueLimit::Bytes(MIN_BDP_QUEUE_BYTES))
        );
    }

    #[test]
    fn a_spec_string_parses_into_a_config() {
        let config: LinkConfig = "rtt 100ms rate 250mbit queue 2bdp".parse().unwrap();
        assert_eq!(config.delay, Duration::from_millis(50));
        assert_eq!(
            config.resolve_queue(),
            Some(ResolvedQueueLimit::Bytes(6_250_000))
        );
        assert!("rate 250".parse::<LinkConfig>().is_err());
    }

    #[test]
    fn no_rate_means_no_queue() {
        assert_eq!(LinkConfig::default().resolve_queue(), None);
    }

    #[test]
    fn gilbert_elliott_mean_loss_is_the_bad_state_share() {
        let model = GilbertElliott {
            good_to_bad: Probability::new(0.01).unwrap(),
            bad_to_good: Probability::new(0.3).unwrap(),
            loss_in_bad: Probability::ONE,
            loss_in_good: Probability::ZERO,
        };
        assert!((model.mean_loss() - 0.01 / 0.31).abs() < 1e-12);
    }
}
