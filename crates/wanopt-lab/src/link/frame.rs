//! The frame path of one link direction: what the emulator's driver pumps
//! (a one-direction link model, sans-IO) and the switch a cut puts in it.

use std::sync::Arc;
use std::time::Instant;

use super::cut::CutState;

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

/// A link model behind a switch: while the [`CutState`] says down, frames
/// that arrive or come due are dropped (and counted) instead.
pub struct Blackhole<L> {
    link: L,
    state: Arc<CutState>,
    dropped_down: u64,
}

impl<L> Blackhole<L> {
    /// `link`, cut whenever `state` says so.
    pub fn new(link: L, state: Arc<CutState>) -> Blackhole<L> {
        Blackhole {
            link,
            state,
            dropped_down: 0,
        }
    }

    /// Frames dropped because the link was down.
    pub fn dropped_down(&self) -> u64 {
        self.dropped_down
    }
}

impl<L: FrameLink> FrameLink for Blackhole<L> {
    fn handle_frame(&mut self, now: Instant, frame: Vec<u8>) {
        if self.state.is_down() {
            self.dropped_down += 1;
            return;
        }
        self.link.handle_frame(now, frame)
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        loop {
            let frame = self.link.poll_transmit(now)?;
            if !self.state.is_down() {
                return Some(frame);
            }
            self.dropped_down += 1;
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.link.poll_timeout()
    }

    fn counters_json(&self) -> serde_json::Value {
        let mut value = self.link.counters_json();
        if let Some(map) = value.as_object_mut() {
            map.insert("down".into(), self.state.is_down().into());
            map.insert("dropped_down".into(), self.dropped_down.into());
        }
        value
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn frame(n: u8) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[59] = n;
        f
    }

    /// Frames in flight when the link goes down are lost as they come
    /// due, frames arriving while it is down never enter the link, and
    /// after it comes back up frames cross it again.
    #[test]
    fn the_pump_drops_while_down() {
        let config = crate::model::config("rtt 20ms").unwrap_or_else(|e| panic!("{e}"));
        let state = Arc::new(CutState::default());
        let mut link = Blackhole::new(crate::model::build(config, 1, &[], 1), state.clone());
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);

        link.handle_frame(ms(0), frame(1));
        assert_eq!(link.poll_transmit(ms(10)).map(|f| f[59]), Some(1));
        link.handle_frame(ms(20), frame(2)); // in flight, due at 30 ms
        state.set_down(true);
        link.handle_frame(ms(25), frame(3)); // arrives while down
        assert_eq!(link.poll_transmit(ms(40)), None);
        assert_eq!(link.dropped_down(), 2);
        assert_eq!(link.poll_timeout(), None);
        let counters = link.counters_json();
        assert_eq!(counters["down"], true);
        assert_eq!(counters["dropped_down"], 2);

        state.set_down(false);
        link.handle_frame(ms(50), frame(4));
        assert_eq!(link.poll_transmit(ms(59)), None);
        assert_eq!(link.poll_transmit(ms(60)).map(|f| f[59]), Some(4));
        assert_eq!(link.dropped_down(), 2);
        assert_eq!(link.counters_json()["down"], false);
    }
}
