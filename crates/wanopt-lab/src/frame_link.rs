//! What the emulator's driver pumps: a one-direction link model, sans-IO.

use std::time::Instant;

/// A one-direction link model the driver can pump (sans-IO, like
/// `wanopt_netem::Link`).
pub trait FrameLink: Send {
    /// A frame arrived at `now`.
    fn handle_frame(&mut self, now: Instant, frame: Vec<u8>);
    /// The next frame whose departure time is at or before `now`.
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>>;
    /// When the next frame departs, if any is held.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The model's counters as JSON.
    fn counters_json(&self) -> serde_json::Value;
}

impl FrameLink for Box<dyn FrameLink> {
    fn handle_frame(&mut self, now: Instant, frame: Vec<u8>) {
        (**self).handle_frame(now, frame)
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        (**self).poll_transmit(now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        (**self).poll_timeout()
    }
    fn counters_json(&self) -> serde_json::Value {
        (**self).counters_json()
    }
}
