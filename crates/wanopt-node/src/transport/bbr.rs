//! quinn's side of wanopt's BBR: the congestion controller quinn drives
//! ([`Controller`]) and the factory that builds one per connection.
//!
//! The controller itself is [`wanopt_cc::Bbr`], a sans-IO state machine
//! that knows nothing of quinn (the bonding layer runs one per path). quinn's
//! traits are foreign to this crate as the controller is, so the adapter is
//! a newtype, [`QuinnBbr`]; [`BbrFactory`] draws each connection's random
//! seed (so that tunnels sharing a bottleneck do not probe in lockstep).
//! Its trace lines keep the target `wanopt_node::bbr`
//! ([`wanopt_cc::LOG_TARGET`]).

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use quinn::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;
use wanopt_cc::{Bbr, BbrConfig};

/// Builds a [`QuinnBbr`] per connection from its [`BbrConfig`]
/// (quinn's [`ControllerFactory`]).
#[derive(Clone, Debug, Default)]
pub struct BbrFactory {
    /// The settings every connection's controller shares.
    pub config: BbrConfig,
}

impl ControllerFactory for BbrFactory {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(QuinnBbr(
            Bbr::new(&self.config, current_mtu, rand::random()),
            Arc::default(),
        ))
    }
}

/// wanopt's BBR as quinn's congestion [`Controller`]: what
/// `Connection::congestion_state` hands out, to be downcast to this type
/// (`transport::model`). While the connection's paths are bonded, the
/// window and pacing rate are the bond's ([`BondShare`]); BBR keeps
/// learning beside it.
#[derive(Clone, Debug)]
pub struct QuinnBbr(Bbr, Arc<BondShare>);

impl QuinnBbr {
    /// The controller quinn drives.
    pub fn bbr(&self) -> &Bbr {
        &self.0
    }

    /// What the datagram layer publishes while the paths are bonded
    /// (shared with clones).
    pub fn bond(&self) -> Arc<BondShare> {
        self.1.clone()
    }
}

/// What the datagram layer publishes for a connection's controller: the
/// window and pacing rate while its paths are bonded (the sums of its
/// paths' controllers; 0 while not bonded), and the rate cap of a data
/// path with a declared rate (0: none).
#[derive(Debug, Default)]
pub struct BondShare {
    window: AtomicU64,
    pacing_rate: AtomicU64,
    rate_cap: AtomicU64,
}

impl BondShare {
    /// Publishes the bond's budget, or `None` when the paths are not
    /// bonded (the controller's own then).
    pub fn set(&self, budget: Option<(u64, u64)>) {
        let (window, pacing_rate) = budget.unwrap_or((0, 0));
        self.window.store(window, Ordering::Relaxed);
        self.pacing_rate.store(pacing_rate, Ordering::Relaxed);
    }

    fn get(&self) -> Option<(u64, u64)> {
        let window = self.window.load(Ordering::Relaxed);
        (window > 0).then(|| (window, self.pacing_rate.load(Ordering::Relaxed)))
    }

    /// Publishes the most the connection may send, bytes per second
    /// ([`wanopt_cc::Bbr::set_rate_cap`]), or `None`.
    pub fn set_rate_cap(&self, cap: Option<u64>) {
        self.rate_cap.store(cap.unwrap_or(0), Ordering::Relaxed);
    }

    fn rate_cap(&self) -> Option<u64> {
        Some(self.rate_cap.load(Ordering::Relaxed)).filter(|&c| c > 0)
    }
}

impl QuinnBbr {
    /// Follows the cap the datagram layer published.
    fn follow_cap(&mut self) {
        let cap = self.1.rate_cap();
        if cap != self.0.rate_cap() {
            self.0.set_rate_cap(cap);
        }
    }
}

impl Controller for QuinnBbr {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        self.follow_cap();
        self.0.handle_sent(now, bytes);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        _app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        self.0.handle_ack(now, sent, bytes);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.follow_cap();
        self.0.handle_end_acks(now, in_flight, app_limited);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.0
            .handle_loss(now, sent, lost_bytes, is_persistent_congestion);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.0.set_mtu(new_mtu);
    }

    fn window(&self) -> u64 {
        match self.1.get() {
            Some((window, _)) => window,
            None => self.0.congestion_window(),
        }
    }

    fn pacing_rate(&self) -> Option<u64> {
        match self.1.get() {
            Some((_, rate)) => Some(rate.max(1)),
            None => self.0.pacing_rate_bytes(),
        }
    }

    fn on_idle_poll(&mut self, blocked: bool) {
        self.0.set_blocked(blocked);
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.window();
        metrics.pacing_rate = self.pacing_rate().map(|r| r.saturating_mul(8));
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.0.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    fn controller() -> Box<dyn Controller> {
        Arc::new(BbrFactory::default()).build(Instant::now(), 1200)
    }

    #[test]
    fn the_sender_blocked_flag_follows_idle_polls_and_is_shared_with_clones() {
        let mut controller = controller();
        let snapshot = controller.clone_box();
        // What `Connection::congestion_state` hands out is a clone: its
        // flag is the live controller's.
        let snapshot = snapshot.into_any().downcast::<QuinnBbr>().unwrap();
        let flag = snapshot.bbr().sender_blocked();
        assert!(!flag.load(Ordering::Relaxed));
        controller.on_idle_poll(true);
        assert!(flag.load(Ordering::Relaxed));
        controller.on_idle_poll(false);
        assert!(!flag.load(Ordering::Relaxed));
    }

    #[test]
    fn quinn_reads_the_window_and_the_mtu_reaches_the_controller() {
        let mut controller = controller();
        assert_eq!(controller.initial_window(), 14_720);
        assert_eq!(controller.window(), 14_720);
        assert_eq!(controller.pacing_rate(), None);
        controller.on_mtu_update(9000);
        assert_eq!(controller.window(), 4 * 9000);
        assert_eq!(controller.metrics().congestion_window, 4 * 9000);
    }

    /// What the datagram layer publishes to `controller` (through a clone,
    /// as the node gets it).
    fn share_of(controller: &dyn Controller) -> Arc<BondShare> {
        controller
            .clone_box()
            .into_any()
            .downcast::<QuinnBbr>()
            .unwrap()
            .bond()
    }

    #[test]
    fn a_bonded_connection_sends_at_the_bond_s_budget() {
        let controller = controller();
        let share = share_of(controller.as_ref());
        share.set(Some((1_000_000, 6_000_000)));
        assert_eq!(controller.window(), 1_000_000);
        assert_eq!(controller.pacing_rate(), Some(6_000_000));
        assert_eq!(controller.metrics().congestion_window, 1_000_000);
        share.set(None);
        assert_eq!(controller.window(), 14_720);
        assert_eq!(controller.pacing_rate(), None);
    }

    #[test]
    fn a_published_rate_cap_reaches_the_controller_at_its_next_send() {
        let mut controller = controller();
        let share = share_of(controller.as_ref());
        share.set_rate_cap(Some(2_300_000));
        controller.on_sent(Instant::now(), 1200, 0);
        // Capped, the controller paces from its first packet, at the cap.
        assert_eq!(controller.pacing_rate(), Some(2_300_000));
        let live = controller.into_any().downcast::<QuinnBbr>().unwrap();
        assert_eq!(live.bbr().rate_cap(), Some(2_300_000));
        let mut controller: Box<dyn Controller> = live;
        share.set_rate_cap(None);
        controller.on_sent(Instant::now(), 1200, 1);
        let live = controller.into_any().downcast::<QuinnBbr>().unwrap();
        assert_eq!(live.bbr().rate_cap(), None);
    }
}
