//! The one place that reads the tunnel's congestion controller: its model
//! of the path (bottleneck rate, round-trip time, pacing, whether data
//! waits for the window). Everything else asks here; nothing else looks
//! inside the controller.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use wanopt_cc::Mode;

use super::bbr::{BondShare, QuinnBbr};

/// wanopt's BBR as it models the path in this node's sending direction.
#[derive(Debug, Clone)]
pub struct BbrModel {
    /// The state machine's phase.
    pub mode: Mode,
    /// Bottleneck bandwidth estimate, bytes per second (0 before the first
    /// delivery-rate sample).
    pub bandwidth: u64,
    /// The rate the sender is paced at, bytes per second.
    pub pacing_rate: Option<u64>,
    /// Propagation delay estimate (the windowed min RTT).
    pub min_rtt: Option<Duration>,
    /// Set while the sender has data waiting for its congestion window
    /// ([`wanopt_cc::Bbr::sender_blocked`]; a live flag, not a snapshot).
    pub sender_blocked: Arc<AtomicBool>,
    /// Rounds that ended congested so far.
    pub congested_rounds: u64,
    /// Rounds that began not app-limited so far.
    pub filled_rounds: u64,
    /// The random loss rate the controller learned (0..1).
    pub random_loss: f64,
    /// Whether the path's rate is judged to move (a cellular link).
    pub moving: bool,
    /// The counter the datagram layer tells the controller of packets
    /// the peer's FEC rebuilt by ([`wanopt_cc::Bbr::repaired`]; live).
    pub repaired: Arc<AtomicU64>,
    /// Where the datagram layer publishes a bond's window and rate while
    /// the connection's paths are bonded (live).
    pub bond: Arc<BondShare>,
}

/// The model of `connection`'s controller, when it is wanopt's BBR.
pub fn bbr(connection: &quinn::Connection) -> Option<BbrModel> {
    let controller = connection
        .congestion_state()
        .into_any()
        .downcast::<QuinnBbr>()
        .ok()?;
    let bbr = controller.bbr();
    Some(BbrModel {
        mode: bbr.mode(),
        bandwidth: bbr.bandwidth(),
        pacing_rate: bbr.pacing_rate_bytes(),
        min_rtt: bbr.min_rtt(),
        sender_blocked: bbr.sender_blocked(),
        congested_rounds: bbr.congested_rounds(),
        filled_rounds: bbr.filled_rounds(),
        random_loss: bbr.random_loss(),
        moving: bbr.moving(),
        repaired: bbr.repaired(),
        bond: controller.bond(),
    })
}

/// The tunnel's rate as its congestion controller sees it: BBR's
/// bottleneck bandwidth once it has a sample, else the congestion window
/// over the smoothed round-trip time (with BBR that is about twice the
/// rate: its window holds two BDPs plus its pacing quantum).
pub fn estimated_rate_bps(connection: &quinn::Connection) -> Option<f64> {
    let bbr = bbr(connection)
        .map(|bbr| bbr.bandwidth)
        .filter(|&bytes_per_sec| bytes_per_sec > 0);
    if let Some(bytes_per_sec) = bbr {
        return Some(bytes_per_sec as f64 * 8.0);
    }
    Some(window_rate_bps(
        connection.stats().path.cwnd,
        connection.rtt(),
    ))
}

/// Congestion window over round-trip time (at least 100 µs), bits per
/// second: the rate estimate of a controller without a bandwidth model.
pub fn window_rate_bps(cwnd: u64, rtt: Duration) -> f64 {
    cwnd as f64 * 8.0 / rtt.max(Duration::from_micros(100)).as_secs_f64()
}
