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
//! and `down` per direction), and `lab link` waits until both directions show it in a snapshot taken after
//! the request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::bringup::{settings_path, Settings};
use crate::driver::{unix_ms, FrameLink};
use crate::link2::WanLink;
use crate::topology::{Lab, Node, TopologyError};

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

/// How long `lab link` waits for the emulator to show the new state.
pub const CONFIRM_WITHIN: Duration = Duration::from_secs(2);

/// Errors of `lab link N down|up`.
#[derive(Debug, thiserror::Error)]
pub enum LinkControlError {
    /// No lab is up.
    #[error(transparent)]
    NotUp(TopologyError),
    /// The lab has no such link.
    #[error("the lab has no link {number}: {hint}")]
    NoSuchLink {
        /// The number asked for.
        number: u32,
        /// How to get one.
        hint: &'static str,
    },
    /// The link's emulator process is not running.
    #[error("link {0}'s emulator is not running (see `wanopt lab status`; `wanopt lab up` rebuilds the lab)")]
    NoEmulator(u8),
    /// The signal could not be sent.
    #[error("cannot signal link {link}'s emulator (pid {pid}): {cause}")]
    Signal {
        /// The link.
        link: u8,
        /// The emulator's pid.
        pid: i32,
        /// The underlying error.
        cause: nix::Error,
    },
    /// The emulator did not show the new state in time.
    #[error("link {link}'s emulator did not show the link {state} within 2 s")]
    Unconfirmed {
        /// The link.
        link: u8,
        /// `down` or `up`.
        state: &'static str,
    },
}

impl LinkControlError {
    /// Whether this is the user's mistake (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::NotUp(_) | Self::NoSuchLink { .. })
    }
}

/// The link numbered `number` in a lab that has link 2 or not.
pub fn which_link(number: u32, has_link2: bool) -> Result<WanLink, LinkControlError> {
    match WanLink::from_number(number) {
        Some(WanLink::Two) if !has_link2 => Err(LinkControlError::NoSuchLink {
            number,
            hint: "it was brought up without --link2 (`wanopt lab up --link2 \"SPEC\"` adds it)",
        }),
        Some(link) => Ok(link),
        None => Err(LinkControlError::NoSuchLink {
            number,
            hint: "links are numbered 1 and 2",
        }),
    }
}

/// What the emulator confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confirmed {
    /// The link.
    pub link: WanLink,
    /// Whether it is down now.
    pub down: bool,
    /// When its state last changed, by the emulator's clock (ms since
    /// the UNIX epoch), if ever.
    pub changed_unix_ms: Option<u64>,
}

/// Cuts (`down`) or restores link `number` of `lab` and waits until its
/// emulator shows the new state in both directions.
pub fn set_link(lab: &Lab, number: u32, down: bool) -> Result<Confirmed, LinkControlError> {
    use nix::sys::signal::{kill, Signal};
    if !lab.is_up() {
        return Err(LinkControlError::NotUp(TopologyError::NotUp(
            lab.netns(Node::Wan),
        )));
    }
    let settings: Option<Settings> = std::fs::read_to_string(settings_path(lab))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let has_link2 = settings.is_some_and(|s| s.link2.is_some());
    let link = which_link(number, has_link2)?;
    let pid = lab
        .running_pid(link.daemon())
        .ok_or(LinkControlError::NoEmulator(link.number()))?;
    let requested = unix_ms();
    let signal = if down {
        Signal::SIGUSR1
    } else {
        Signal::SIGUSR2
    };
    kill(nix::unistd::Pid::from_raw(pid), signal).map_err(|cause| LinkControlError::Signal {
        link: link.number(),
        pid,
        cause,
    })?;
    let path = lab.state_dir().join(link.counters_file());
    let deadline = Instant::now() + CONFIRM_WITHIN;
    loop {
        let doc: serde_json::Value = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        if shows(&doc, down, requested) {
            return Ok(Confirmed {
                link,
                down,
                changed_unix_ms: doc["cut"]["changed_unix_ms"].as_u64(),
            });
        }
        if Instant::now() >= deadline {
            return Err(LinkControlError::Unconfirmed {
                link: link.number(),
                state: if down { "down" } else { "up" },
            });
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Whether an emulator's counters show the link `down` (or up) in both
/// directions, in snapshots taken at or after `since` (ms since the UNIX
/// epoch).
fn shows(doc: &serde_json::Value, down: bool, since: u64) -> bool {
    doc["cut"]["down"].as_bool() == Some(down)
        && ["up", "down"].iter().all(|direction| {
            let d = &doc[direction];
            d["at_unix_ms"].as_u64().is_some_and(|at| at >= since)
                && d["link"]["down"].as_bool() == Some(down)
        })
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn only_links_the_lab_has_can_be_switched() {
        assert_eq!(which_link(1, false).ok(), Some(WanLink::One));
        assert_eq!(which_link(2, true).ok(), Some(WanLink::Two));
        for (number, has_link2, needle) in [
            (
                2,
                false,
                "the lab has no link 2: it was brought up without --link2",
            ),
            (3, true, "the lab has no link 3: links are numbered 1 and 2"),
            (0, true, "the lab has no link 0"),
        ] {
            let e = which_link(number, has_link2)
                .err()
                .unwrap_or_else(|| panic!("link {number} accepted"));
            assert!(e.is_usage());
            let text = e.to_string();
            assert!(text.starts_with(needle) && !text.contains('\n'), "{text}");
        }
    }

    /// `lab link` believes only snapshots taken after its request, in
    /// both directions.
    #[test]
    fn confirmation_needs_fresh_snapshots_of_both_directions() {
        let doc = |cut: bool, at_up: u64, up: bool, at_down: u64, down: bool| {
            serde_json::json!({
                "cut": {"down": cut},
                "up": {"at_unix_ms": at_up, "link": {"down": up}},
                "down": {"at_unix_ms": at_down, "link": {"down": down}},
            })
        };
        assert!(shows(&doc(true, 100, true, 101, true), true, 100));
        assert!(shows(&doc(false, 100, false, 101, false), false, 100));
        // A snapshot from before the request.
        assert!(!shows(&doc(true, 99, true, 101, true), true, 100));
        // A direction that has not seen the new state yet.
        assert!(!shows(&doc(true, 100, true, 101, false), true, 100));
        assert!(!shows(&doc(false, 100, true, 101, true), true, 100));
        // No counters yet.
        assert!(!shows(&serde_json::Value::Null, true, 0));
    }
}
