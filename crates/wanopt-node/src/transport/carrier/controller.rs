//! The congestion controller of a tunnel over TCP: none of its own. The
//! kernel's controller on the carrier connection sets the rate, and the
//! carrier socket makes quinn wait while TCP's buffer is full, so a QUIC
//! window on top would only cap the tunnel below what TCP carries (and
//! nothing is ever lost to slow it).

use std::any::Any;
use std::sync::Arc;

use quinn_proto::congestion::{Controller, ControllerFactory};

/// A window as large as the connection's send window: never the limit.
#[derive(Debug, Clone, Copy)]
pub struct Unlimited {
    window: u64,
}

impl Unlimited {
    /// A factory of controllers whose window is `window` bytes.
    pub fn factory(window: u64) -> Arc<Unlimited> {
        Arc::new(Unlimited { window })
    }
}

impl ControllerFactory for Unlimited {
    fn build(self: Arc<Self>, _now: std::time::Instant, _mtu: u16) -> Box<dyn Controller> {
        Box::new(*self)
    }
}

impl Controller for Unlimited {
    fn on_congestion_event(
        &mut self,
        _now: std::time::Instant,
        _sent: std::time::Instant,
        _persistent: bool,
        _lost_bytes: u64,
    ) {
    }

    fn on_mtu_update(&mut self, _mtu: u16) {}

    fn window(&self) -> u64 {
        self.window
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(*self)
    }

    fn initial_window(&self) -> u64 {
        self.window
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_never_shrinks() {
        let now = std::time::Instant::now();
        let mut c = Unlimited::factory(96 << 20).build(now, 1200);
        c.on_congestion_event(now, now, true, 1 << 20);
        c.on_mtu_update(8192);
        assert_eq!(c.window(), 96 << 20);
        assert_eq!(c.initial_window(), 96 << 20);
        assert_eq!(c.pacing_rate(), None);
    }
}
