//! quinn's side of wanopt's BBR: the congestion controller quinn drives
//! ([`Controller`]) and the factory that builds one per connection.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use quinn::congestion::{Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

use super::{Bbr, BbrConfig};

impl ControllerFactory for BbrConfig {
    fn build(self: Arc<Self>, _now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Bbr::new(&self, current_mtu))
    }
}

impl Controller for Bbr {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        self.handle_sent(now, bytes);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        _app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        self.handle_ack(now, sent, bytes);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.handle_end_acks(now, in_flight, app_limited);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.handle_loss(now, sent, lost_bytes, is_persistent_congestion);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.mtu = u64::from(new_mtu.max(1200));
        self.cwnd = self.cwnd.max(self.min_cwnd());
    }

    fn window(&self) -> u64 {
        self.congestion_window()
    }

    fn pacing_rate(&self) -> Option<u64> {
        self.pacing_rate_bytes()
    }

    fn on_idle_poll(&mut self, blocked: bool) {
        self.blocked.store(blocked, Ordering::Relaxed);
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut metrics = ControllerMetrics::default();
        metrics.congestion_window = self.congestion_window();
        metrics.pacing_rate = self.pacing_rate_bytes().map(|r| r.saturating_mul(8));
        metrics
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.initial_window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
