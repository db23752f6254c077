//! The emulator's side of a cut (`lab link N down|up`).
//!
//! The emulator process of each link holds a [`CutState`]. A thread of its
//! own takes SIGUSR1 (cut) and SIGUSR2 (restore) with `sigwait` and sets
//! it; both directions' pumps read it through a [`Blackhole`] around their
//! link model. While the link is down, every frame that arrives is dropped,
//! and so is every frame that comes due: a real cut also loses what is in
//! flight. These drops are counted as `dropped_down`. The counters publish
//! the state (`cut.down`, `cut.down_since_unix_ms`, `cut.changed_unix_ms`,
//! and `down` per direction), and `lab link` ([`super::control`]) waits
//! until both directions show it in a snapshot taken after the request.
//!
//! [`Blackhole`]: super::frame::Blackhole

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use super::rules::RulesSwitch;
use crate::clock::unix_ms;

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

/// Blocks SIGUSR1, SIGUSR2 and SIGHUP in the calling thread, and so in
/// every thread it starts afterwards, and starts the thread that takes
/// them: SIGUSR1 cuts the link, SIGUSR2 restores it, SIGHUP reads new
/// middlebox rules into `rules` (`lab middlebox`, [`super::rules`]). Call
/// it before starting any other thread.
pub fn take_signals(state: Arc<CutState>, rules: Arc<RulesSwitch>) -> std::io::Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGUSR1);
    signals.add(Signal::SIGUSR2);
    signals.add(Signal::SIGHUP);
    signals.thread_block()?;
    thread::Builder::new()
        .name("wan-cut".into())
        .spawn(move || loop {
            match signals.wait() {
                Ok(Signal::SIGUSR1) => state.set_down(true),
                Ok(Signal::SIGUSR2) => state.set_down(false),
                Ok(Signal::SIGHUP) => {
                    if let Err(e) = rules.reload() {
                        tracing::warn!("middlebox rules unchanged: {e}");
                    }
                }
                Ok(_) | Err(_) => {}
            }
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

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
