//! Each path's liveness, RTT and loss, from the probes both nodes send on
//! it ([`super::wire`]).
//!
//! Both nodes probe every path. Each probe echoes the newest probe received
//! on that path (`echo_us`) and says how long it was held (`hold_us`), so
//! an echo of one of our probes gives an RTT sample: now − its send time −
//! the hold, smoothed as RFC 6298 §2 smooths TCP's. An echo *advances*
//! when it names a probe newer than the last echo did; it needs a probe to
//! have crossed each way, so a path that fails in one direction only stops
//! advancing at both ends.
//!
//! - **Schedule.** Every `clamp(srtt / 4, 20 ms, 100 ms)` while the lane
//!   sent data in the last second ([`PathMonitor::on_data`]), otherwise
//!   every second. Going idle doubles the interval probe by probe up to a
//!   second, so the peer sees the gaps grow rather than a sudden silence.
//!   A path that has not answered yet is probed every 100 ms.
//! - **Answers.** A node whose interval is at least twice the peer's
//!   answers each of the peer's probes at once (flag ANSWER; an answer is
//!   not answered), so echoes advance at the faster side's pace: a peer
//!   going idle (its gaps growing) does not look like a failing path.
//! - **Interval** in the rules below is the longer of our own and the
//!   peer's (its longest recent gap between probes per sequence number,
//!   decaying by a quarter per probe): echoes cannot advance faster than
//!   the slower side probes.
//! - **States.** `Unknown → Up` at the first echo. `Up → Suspect` when no
//!   echo advanced for [`SUSPECT_INTERVALS`] intervals (a soft state:
//!   selection keeps the path). `Up | Suspect → Down` when none advanced
//!   for `max(6 × interval, 2 × srtt + 4 × rttvar, 150 ms)`.
//!   `Unknown → Down` after `max(UNKNOWN_DOWN, 6 × interval)` without an
//!   echo (a path not answering yet is probed every 100 ms). `Down → Up`
//!   after [`UP_ECHOES`] advances in a row (each within two intervals of
//!   the last).
//! - **False Down.** Echoes advance once per interval; no advance comes
//!   only while every probe of ours since the last one is lost, or every
//!   probe of the peer's after it. With `n` intervals in the bound and a
//!   loss `p` each way, a window passes without one with probability
//!   about `(n + 1) · pⁿ`: at 5% each way and 40 ms RTT (the 150 ms floor
//!   over 20 ms intervals: 6 to 7 intervals) 10⁻⁷ to 10⁻⁸ per interval,
//!   about 0.01 false downs in 10⁵ intervals. The first plan's 5
//!   intervals and 100 ms floor had 7 (both ends together) in the 10⁵
//!   intervals of `no_false_down_at_five_percent_loss`.
//! - **Loss** toward the peer is our sequence numbers against the peer's
//!   `received` count at the echoed probe; from the peer, its sequence
//!   numbers against ours. Both are cumulative (a lost probe costs no
//!   sample) and read over the last [`LOSS_WINDOW`] to `2 × LOSS_WINDOW`
//!   probes.
//! - **Safety.** A probe must carry a sequence number above the last one
//!   accepted on its path (replays are dropped, also after the path is
//!   removed) and the other side's `FROM_CLIENT` bit (reflections are
//!   dropped). The server binds a path from the client's BIND probes; until
//!   the client echoes one of its probes there, it sends at most one probe
//!   per probe received (return routability, no amplification).
//!
//! Sans-IO: the caller verifies probes ([`super::wire::ProbeRepr::parse`])
//! and passes them to [`PathMonitor::on_probe`], sends what
//! [`PathMonitor::poll_due`] returns, and calls
//! [`PathMonitor::handle_timeout`] at [`PathMonitor::next_timeout`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::entry::{Entry, Sent, SENT_HISTORY};
pub use super::entry::{
    BUSY_INTERVAL, BUSY_WINDOW, DOWN_INTERVALS, IDLE_INTERVAL, LOSS_WINDOW, MIN_DOWN, MIN_INTERVAL,
    SUSPECT_INTERVALS, UNKNOWN_DOWN, UP_ECHOES,
};
use super::state::{Loss, PathState, PathView, ProbeStats, Side, StateChange};
use super::wire::{PathId, PathMode, ProbeRepr, MAX_PATH};

/// State changes kept for [`PathMonitor::poll_event`].
const MAX_EVENTS: usize = 64;

/// Why [`PathMonitor::on_probe`] dropped a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProbeRejected {
    /// The probe carries this node's own side: a reflection.
    #[error("path probe from this node's own side (reflected)")]
    Reflected,
    /// The probe names another path than the one it arrived on.
    #[error("path probe for path {named} arrived on path {arrived}")]
    WrongPath {
        /// The path the probe names.
        named: PathId,
        /// The path it arrived on.
        arrived: PathId,
    },
    /// A path this node does not have (and the probe does not bind it).
    #[error("path probe on unknown path {0}")]
    UnknownPath(PathId),
    /// A sequence number not above the last one accepted on the path.
    #[error("path probe {seq} on path {path} replayed (last accepted {last})")]
    Replay {
        /// The path.
        path: PathId,
        /// The probe's sequence number.
        seq: u32,
        /// The last one accepted.
        last: u32,
    },
}

/// Probes, liveness, RTT and loss of one lane's paths to its peer.
#[derive(Debug, Clone)]
pub struct PathMonitor {
    side: Side,
    mode: PathMode,
    epoch: Instant,
    paths: [Option<Entry>; MAX_PATH as usize],
    /// The last sequence number accepted per path, kept when a path is
    /// removed so that its old probes stay replays.
    seq_floor: [Option<u32>; MAX_PATH as usize],
    /// The last sequence number sent per path (0: none), kept when a path
    /// is removed so that the peer does not take its new probes for
    /// replays.
    last_sent: [u32; MAX_PATH as usize],
    last_data: Option<Instant>,
    peer_mode: Option<PathMode>,
    events: VecDeque<StateChange>,
}

impl PathMonitor {
    /// A monitor for `side` of a lane in `mode`, with no paths; `now`
    /// starts the clock its probes carry.
    pub fn new(now: Instant, side: Side, mode: PathMode) -> PathMonitor {
        PathMonitor {
            side,
            mode,
            epoch: now,
            paths: Default::default(),
            seq_floor: [None; MAX_PATH as usize],
            last_sent: [0; MAX_PATH as usize],
            last_data: None,
            peer_mode: None,
            events: VecDeque::new(),
        }
    }

    /// Adds `path` (nothing if it exists); its first probe is due now. The
    /// server adds paths itself from BIND probes, and probes them only in
    /// answer until the client echoes one.
    pub fn add_path(&mut self, now: Instant, path: PathId) {
        let validated = self.side == Side::Client;
        let next_seq = self.last_sent[path.index()].checked_add(1);
        self.paths[path.index()].get_or_insert_with(|| Entry::new(path, now, validated, next_seq));
    }

    /// Forgets `path` (its sequence numbers stay used both ways).
    pub fn remove_path(&mut self, path: PathId) {
        self.paths[path.index()] = None;
    }

    /// The server learned a new address for `path` (a NAT rebinding):
    /// until the client echoes a probe sent there, it sends there only
    /// answers, one per probe received. Nothing on the client.
    pub fn rebound(&mut self, path: PathId) {
        if self.side == Side::Client {
            return;
        }
        if let Some(entry) = self.paths[path.index()].as_mut() {
            entry.validated = false;
            if !entry.answer_due {
                entry.next_probe = None;
            }
        }
    }

    /// The paths, in order.
    pub fn paths(&self) -> impl Iterator<Item = PathId> + '_ {
        self.entries().map(|e| e.id)
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.paths.iter().flatten()
    }

    fn entry(&self, path: PathId) -> Option<&Entry> {
        self.paths[path.index()].as_ref()
    }

    /// The lane sent data: probes go at the busy interval for the next
    /// [`BUSY_WINDOW`].
    pub fn on_data(&mut self, now: Instant) {
        let was_busy = self.busy(now);
        self.last_data = Some(now);
        if !was_busy {
            for entry in self.paths.iter_mut().flatten() {
                let target = entry.target_interval(true);
                entry.retarget(now, target);
            }
        }
    }

    fn busy(&self, now: Instant) -> bool {
        self.last_data
            .is_some_and(|t| now.saturating_duration_since(t) < BUSY_WINDOW)
    }

    /// The clock probes carry: µs since the monitor started, wrapping,
    /// never 0 (which means "no echo").
    fn clock_us(&self, now: Instant) -> u32 {
        (now.saturating_duration_since(self.epoch).as_micros() as u32).max(1)
    }

    /// Takes a verified probe that arrived on `path`.
    pub fn on_probe(
        &mut self,
        now: Instant,
        path: PathId,
        probe: &ProbeRepr,
    ) -> Result<(), ProbeRejected> {
        if probe.from_client == (self.side == Side::Client) {
            return Err(ProbeRejected::Reflected);
        }
        if probe.path != path {
            return Err(ProbeRejected::WrongPath {
                named: probe.path,
                arrived: path,
            });
        }
        let bindable = self.side == Side::Server && probe.bind;
        if self.paths[path.index()].is_none() && !bindable {
            return Err(ProbeRejected::UnknownPath(path));
        }
        if let Some(last) = self.seq_floor[path.index()] {
            if probe.seq <= last {
                if let Some(entry) = self.paths[path.index()].as_mut() {
                    entry.stats.replays += 1;
                }
                return Err(ProbeRejected::Replay {
                    path,
                    seq: probe.seq,
                    last,
                });
            }
        }
        self.seq_floor[path.index()] = Some(probe.seq);
        self.add_path(now, path);
        let Some(entry) = self.paths[path.index()].as_mut() else {
            return Err(ProbeRejected::UnknownPath(path));
        };
        self.peer_mode = Some(probe.mode);
        entry.stats.received += 1;
        entry.received = entry.received.wrapping_add(1);
        if let Some((seq, at)) = entry.last_arrival {
            let numbers = probe.seq.wrapping_sub(seq).max(1);
            // A peer probes at least every IDLE_INTERVAL: a longer gap is
            // an outage, not its pace.
            let gap = (now.saturating_duration_since(at) / numbers).min(IDLE_INTERVAL);
            // The longest recent gap: up at once (a peer going idle
            // spaces its probes out), down by a quarter per probe.
            entry.peer_gap = Some(entry.peer_gap.map_or(gap, |old| gap.max(old * 3 / 4)));
        }
        entry.last_arrival = Some((probe.seq, now));
        let first = *entry.first_seq.get_or_insert(probe.seq);
        entry.loss_from_peer.record(
            u64::from(probe.seq.saturating_sub(first)) + 1,
            u64::from(entry.received),
        );
        if let Some(before) = entry.newest {
            entry.jitter_sample(before, probe.sent_us, now);
        }
        entry.sla_loss_from_peer.record(
            u64::from(probe.seq.saturating_sub(first)) + 1,
            u64::from(entry.received),
        );
        entry.newest = Some((probe.sent_us, now));
        // Unvalidated, every probe gets one answer (return routability);
        // else the slower side answers the faster one's probes.
        let slower = entry.peer_gap.is_some_and(|gap| entry.interval >= 2 * gap);
        if !entry.validated || (slower && !probe.answer) {
            entry.answer_due = true;
            entry.next_probe = Some(now);
        }
        if probe.echo_us != 0 {
            self.on_echo(now, path, probe);
        }
        self.update_state(now, path);
        Ok(())
    }

    fn on_echo(&mut self, now: Instant, path: PathId, probe: &ProbeRepr) {
        let Some(entry) = self.paths[path.index()].as_mut() else {
            return;
        };
        let Some(sent) = entry
            .sent
            .iter()
            .rev()
            .find(|s| s.sent_us == probe.echo_us)
            .copied()
        else {
            entry.stats.unmatched_echoes += 1;
            return;
        };
        if entry.last_echo_seq.is_some_and(|last| sent.seq <= last) {
            return;
        }
        let sample = now
            .saturating_duration_since(sent.at)
            .saturating_sub(Duration::from_micros(u64::from(probe.hold_us)));
        if !sample.is_zero() {
            entry.rtt_sample(sample);
        }
        entry.last_echo_seq = Some(sent.seq);
        entry
            .loss_to_peer
            .record(u64::from(sent.seq), u64::from(probe.received));
        entry
            .sla_loss_to_peer
            .record(u64::from(sent.seq), u64::from(probe.received));
        let in_a_row = entry
            .last_advance
            .is_some_and(|t| now.saturating_duration_since(t) <= entry.suspect_after());
        entry.streak = if in_a_row { entry.streak + 1 } else { 1 };
        entry.last_advance = Some(now);
        entry.echo_base = now;
        entry.validated = true;
        if entry.next_probe.is_none() {
            entry.next_probe = Some(now);
        }
        let to = match entry.state {
            PathState::Down if entry.streak < UP_ECHOES => PathState::Down,
            _ => PathState::Up,
        };
        self.set_state(now, path, to);
        let busy = self.busy(now);
        if let Some(entry) = self.paths[path.index()].as_mut() {
            let target = entry.target_interval(busy);
            if target < entry.interval {
                entry.retarget(now, target);
            }
        }
    }

    fn set_state(&mut self, now: Instant, path: PathId, to: PathState) {
        let Some(entry) = self.paths[path.index()].as_mut() else {
            return;
        };
        let from = entry.state;
        if from == to {
            return;
        }
        entry.state = to;
        match to {
            PathState::Up if matches!(from, PathState::Unknown | PathState::Down) => {
                entry.up_since = Some(now);
            }
            PathState::Down | PathState::Unknown => entry.up_since = None,
            _ => {}
        }
        if self.events.len() == MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(StateChange {
            path,
            from,
            to,
            at: now,
        });
    }

    /// Moves `path` to suspect or down if its echoes are late.
    fn update_state(&mut self, now: Instant, path: PathId) {
        let Some(entry) = self.entry(path) else {
            return;
        };
        let waited = now.saturating_duration_since(entry.echo_base);
        let to = match entry.state {
            PathState::Unknown | PathState::Up | PathState::Suspect
                if waited >= entry.down_after() =>
            {
                PathState::Down
            }
            PathState::Up if waited >= entry.suspect_after() => PathState::Suspect,
            state => state,
        };
        self.set_state(now, path, to);
    }

    /// Updates every path's state to `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        for path in PathId::all() {
            self.update_state(now, path);
        }
    }

    /// When [`PathMonitor::handle_timeout`] or a poll for probes next has
    /// something to do.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.entries()
            .flat_map(|e| {
                let probe = e.next_probe.filter(|_| e.next_seq.is_some());
                let state = match e.state {
                    PathState::Up => Some(e.echo_base + e.suspect_after()),
                    PathState::Unknown | PathState::Suspect => Some(e.echo_base + e.down_after()),
                    PathState::Down => None,
                };
                [probe, state]
            })
            .flatten()
            .min()
    }

    /// The probe to send on `path` now, if one is due.
    #[must_use]
    pub fn poll_probe(&mut self, now: Instant, path: PathId) -> Option<ProbeRepr> {
        let busy = self.busy(now);
        let clock = self.clock_us(now);
        let (side, mode) = (self.side, self.mode);
        let entry = self.paths[path.index()].as_mut()?;
        if entry.next_probe.is_none_or(|t| now < t) {
            return None;
        }
        let seq = entry.next_seq?;
        entry.next_seq = seq.checked_add(1);
        self.last_sent[path.index()] = seq;
        let (echo_us, hold_us) = entry.newest.map_or((0, 0), |(sent_us, at)| {
            let held = now.saturating_duration_since(at).as_micros();
            (sent_us, u32::try_from(held).unwrap_or(u32::MAX))
        });
        if entry.sent.len() == SENT_HISTORY {
            entry.sent.pop_front();
        }
        entry.sent.push_back(Sent {
            seq,
            sent_us: clock,
            at: now,
        });
        entry.stats.sent += 1;
        let answer = std::mem::take(&mut entry.answer_due) || !entry.validated;
        if entry.validated {
            let target = entry.target_interval(busy);
            entry.retarget(now, target);
            entry.next_probe = Some(now + entry.interval);
        } else {
            entry.next_probe = None;
        }
        Some(ProbeRepr {
            bind: side == Side::Client,
            from_client: side == Side::Client,
            answer,
            path,
            mode,
            seq,
            sent_us: clock,
            echo_us,
            hold_us,
            received: entry.received,
            rate_kbit: None,
            realtime: false,
        })
    }

    /// The next probe due on any path (its `path` says which).
    #[must_use]
    pub fn poll_due(&mut self, now: Instant) -> Option<ProbeRepr> {
        PathId::all().find_map(|path| self.poll_probe(now, path))
    }

    /// A change of a path's state, oldest first (the last 64 are kept).
    #[must_use]
    pub fn poll_event(&mut self) -> Option<StateChange> {
        self.events.pop_front()
    }

    /// `path`'s state.
    pub fn state(&self, path: PathId) -> Option<PathState> {
        self.entry(path).map(|e| e.state)
    }

    /// `path`'s smoothed RTT, once measured.
    pub fn rtt(&self, path: PathId) -> Option<Duration> {
        self.entry(path)?.srtt
    }

    /// The interarrival jitter of the peer's probes on `path`.
    pub fn jitter(&self, path: PathId) -> Option<Duration> {
        self.entry(path)?.jitter()
    }

    /// `path`'s loss each way.
    pub fn loss(&self, path: PathId) -> Option<Loss> {
        self.entry(path).map(|e| Loss {
            to_peer: e.loss_to_peer.loss(),
            from_peer: e.loss_from_peer.loss(),
        })
    }

    /// `path`'s probe counts.
    pub fn stats(&self, path: PathId) -> Option<ProbeStats> {
        self.entry(path).map(|e| e.stats)
    }

    /// Whether the peer has shown it receives on `path` (always, on the
    /// client): until then the server sends there only answers to probes.
    pub fn validated(&self, path: PathId) -> bool {
        self.entry(path).is_some_and(|e| e.validated)
    }

    /// `path` for a selector.
    pub fn view(&self, path: PathId) -> Option<PathView> {
        self.entry(path).map(Entry::view)
    }

    /// Every path for a selector, in order, into `out` (cleared first).
    pub fn views(&self, out: &mut Vec<PathView>) {
        out.clear();
        out.extend(self.entries().map(Entry::view));
    }

    /// The mode the peer's probes carry: the lane's mode, as the client
    /// chose it.
    pub fn peer_mode(&self) -> Option<PathMode> {
        self.peer_mode
    }

    /// This lane's mode, as its probes carry it.
    pub fn mode(&self) -> PathMode {
        self.mode
    }
}

#[cfg(test)]
mod tests;
