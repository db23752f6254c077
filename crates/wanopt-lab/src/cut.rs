//! Cutting and restoring a lab link while things run (`lab link N
//! down|up`).
//!
//! The emulator process of each link holds a [`CutState`]. A thread of its
//! own takes SIGUSR1 (cut) and SIGUSR2 (restore) with `sigwait` and sets
//! it; both directions' pumps read it through a [`Blackhole`] around their
//! link model. While the link is down, every frame that arrives is dropped,
//! and so is every frame that comes due: a real cut also loses what is in
//! flight. These drops are counted as `dropped_down`. The counters publish
//! the state (`cut.down`, `cut.down_since_unix_ms`, `cut.changed_unix_ms`,
//! and `down` per direction), and `lab link` (`link_control.rs`) waits
//! until both directions show it in a snapshot taken after the request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crate::clock::unix_ms;
use crate::frame_link::FrameLink;

/// Whether a link is cut, and since when; shared by the emulator's signal
/// thread, its two pumps and its publisher.
#[derive(Debug, Default)]
pub struct CutState {
    down: AtomicBool,
    /// When the state last changed, ms since the UNIX epoch (0: never).
    changed_unix_ms: AtomicU64,
}

impl CutState {
    /// Cuts (`true`) or restores (`false`) the link; a request for the
    /// state it already has changes nothing.
    pub fn set_down(&self, down: bool) {
        if self.down.load(Ordering::Acquire) != down {
            self.changed_unix_ms.store(unix_ms(), Ordering::Release);
            self.down.store(down, Ordering::Release);
        }
    }

    /// Whether the link is cut.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// When the state last changed (ms since the UNIX epoch), if ever.
    pub fn changed_unix_ms(&self) -> Option<u64> {
        Some(self.changed_unix_ms.load(Ordering::Acquire)).filter(|&t| t > 0)
    }

    /// The state as published with the counters.
    pub fn to_json(&self) -> serde_json::Value {
        let down = self.is_down();
        let changed = self.changed_unix_ms();
        serde_json::json!({
            "down": down,
            "down_since_unix_ms": if down { changed } else { None },
            "changed_unix_ms": changed,
        })
    }
}

/// Blocks SIGUSR1 and SIGUSR2 in the calling thread, and so in every
/// thread it starts afterwards, and starts the thread that takes them:
/// SIGUSR1 cuts the link, SIGUSR2 restores it. Call it before starting
/// any other thread.
pub fn take_signals(state: Arc<CutState>) -> std::io::Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGUSR1);
    signals.add(Signal::SIGUSR2);
    signals.thread_block()?;
    thread::Builder::new()
        .name("wan-cut".into())
        .spawn(move || loop {
            match signals.wait() {
                Ok(Signal::SIGUSR1) => state.set_down(true),
                Ok(Signal::SIGUSR2) => state.set_down(false),
                Ok(_) | Err(_) => {}
            }
        })
        .map(|_| ())
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

    #[test]
    fn the_state_knows_when_it_changed() {
        let state = CutState::default();
        assert!(!state.is_down());
        assert_eq!(state.changed_unix_ms(), None);
        assert_eq!(
            state.to_json()["down_since_unix_ms"],
            serde_json::Value::Null
        );
        state.set_down(true);
        let since = state.changed_unix_ms().unwrap_or(0);
        assert!(since > 0);
        assert_eq!(state.to_json()["down_since_unix_ms"], since);
        state.set_down(true);
        assert_eq!(state.changed_unix_ms(), Some(since));
        state.set_down(false);
        assert_eq!(state.to_json()["down"], false);
        assert_eq!(
            state.to_json()["down_since_unix_ms"],
            serde_json::Value::Null
        );
    }
}
