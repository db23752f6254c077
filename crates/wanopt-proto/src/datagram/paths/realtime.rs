//! Where a peer's real-time datagrams go when they have a path of their
//! own: the client's SLA choice ([`crate::path::sla`]), which its probes
//! carry (the REALTIME bit) so the server sends them there too.
//!
//! - **failover, plain, spread-fec:** a transmit whose datagrams all
//!   carry real-time flows goes on that path instead of the data path (a
//!   batch that mixes goes with the data);
//! - **bond:** real-time datagrams go on that path alone, ahead of the
//!   bonded data, instead of a copy on every path that is up;
//! - **duplicate:** every path, as before: the SLA only orders them.
//!
//! Without an SLA (or while its path is down) they go as the mode sends
//! them.

use std::collections::VecDeque;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{Event, PeerPaths};
use crate::path::{PathId, PathMode, PathState, Side};

/// Where real-time datagrams go, as `/status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RealtimeStatus {
    /// The path they take.
    pub path: u8,
    /// The SLA it was chosen by (the client's; `None` on the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla: Option<String>,
    /// Whether the path meets it (the client's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meets: Option<bool>,
    /// Why this path (the client's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Times they moved from one path to another (the client's).
    #[serde(default)]
    pub moves: u64,
}

impl PeerPaths {
    /// The client's SLA choice, after the selector ran.
    /// In duplicate mode they keep a copy on every path: no choice.
    pub(super) fn select_realtime(&mut self, now: Instant, events: &mut VecDeque<Event>) {
        let Some(sla) = self.sla.as_mut() else {
            return;
        };
        let choice = match self.mode {
            PathMode::Duplicate => None,
            _ => sla.select(now, &self.views).cloned(),
        };
        let to = choice.as_ref().map(|c| c.path);
        if to != self.realtime {
            self.realtime = to;
            events.push_back(Event::RealtimeMoved {
                canonical: self.canonical,
                to,
                why: choice.map(|c| c.why).unwrap_or_default(),
            });
        }
    }

    /// The server follows the client: a probe on `path`, sent at
    /// `sent_us` by the client's clock (one for all paths), says whether
    /// real-time datagrams take it. A probe sent before the one the
    /// server last followed is not followed: after a move, the old path's
    /// last probe may come after the new one's first.
    pub(super) fn follow_realtime(
        &mut self,
        path: PathId,
        (realtime, sent_us): (bool, u32),
        events: &mut VecDeque<Event>,
    ) {
        let newer = self
            .realtime_sent_us
            .is_none_or(|last| sent_us.wrapping_sub(last) as i32 > 0);
        if !newer {
            return;
        }
        let to = match (realtime, self.realtime) {
            (true, current) if current == Some(path) => {
                self.realtime_sent_us = Some(sent_us);
                return;
            }
            (true, _) => Some(path),
            (false, Some(current)) if current == path => None,
            _ => return,
        };
        self.realtime = to;
        self.realtime_sent_us = Some(sent_us);
        events.push_back(Event::RealtimeMoved {
            canonical: self.canonical,
            to,
            why: String::new(),
        });
    }

    /// The path real-time datagrams take now, if they have one of their
    /// own: not in duplicate mode, and not while it is down.
    pub(super) fn realtime_path(&self) -> Option<PathId> {
        if self.mode == PathMode::Duplicate {
            return None;
        }
        self.realtime
            .filter(|p| self.routes[p.index()].is_some())
            .filter(|p| self.monitor.state(*p) != Some(PathState::Down))
    }

    /// Where real-time datagrams go, for status.
    pub(super) fn realtime_status(&self) -> Option<RealtimeStatus> {
        let path = self.realtime.filter(|_| self.mode != PathMode::Duplicate)?;
        let sla = self.sla.as_ref().filter(|_| self.side == Side::Client);
        let choice = sla.and_then(|s| s.choice());
        Some(RealtimeStatus {
            path: path.get(),
            sla: sla.map(|s| s.sla().to_string()),
            meets: choice.map(|c| c.meets),
            why: choice.map(|c| c.why.clone()),
            moves: sla.map_or(0, |s| s.moves()),
        })
    }
}
