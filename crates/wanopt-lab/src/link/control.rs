//! `lab link N down|up`: signals a link's emulator (its side of a cut is
//! [`super::cut`]) and waits until its counters show the new state in both
//! directions, in a snapshot taken after the request.

use std::thread;
use std::time::{Duration, Instant};

use super::wan::WanLink;
use crate::bringup::{settings_path, Settings};
use crate::clock::unix_ms;
use crate::topology::{Lab, Node, TopologyError};

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

/// Link `number` of the running `lab` and its emulator's pid.
pub fn running_emulator(lab: &Lab, number: u32) -> Result<(WanLink, i32), LinkControlError> {
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
    Ok((link, pid))
}

/// Sends `signal` to `link`'s emulator, `pid`.
pub fn signal_emulator(
    link: WanLink,
    pid: i32,
    signal: nix::sys::signal::Signal,
) -> Result<(), LinkControlError> {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).map_err(|cause| {
        LinkControlError::Signal {
            link: link.number(),
            pid,
            cause,
        }
    })
}

/// Cuts (`down`) or restores link `number` of `lab` and waits until its
/// emulator shows the new state in both directions.
pub fn set_link(lab: &Lab, number: u32, down: bool) -> Result<Confirmed, LinkControlError> {
    use nix::sys::signal::Signal;
    let (link, pid) = running_emulator(lab, number)?;
    let requested = unix_ms();
    let signal = if down {
        Signal::SIGUSR1
    } else {
        Signal::SIGUSR2
    };
    signal_emulator(link, pid, signal)?;
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

/// When a link went down and up again in [`cut_between`], ms since the
/// Unix epoch by its emulator's clock.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CutTimes {
    /// When it went down.
    pub down_ms: Option<u64>,
    /// When it came back.
    pub up_ms: Option<u64>,
}

/// Cuts link `number` of `lab` at `down_at` and restores it at `up_at`
/// (a scenario's event, on a thread of its own).
pub fn cut_between(
    lab: &Lab,
    number: u32,
    down_at: Instant,
    up_at: Instant,
) -> Result<CutTimes, String> {
    thread::sleep(down_at.saturating_duration_since(Instant::now()));
    let down = set_link(lab, number, true).map_err(|e| e.to_string())?;
    thread::sleep(up_at.saturating_duration_since(Instant::now()));
    let up = set_link(lab, number, false).map_err(|e| e.to_string())?;
    Ok(CutTimes {
        down_ms: down.changed_unix_ms,
        up_ms: up.changed_unix_ms,
    })
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
