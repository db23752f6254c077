//! Paths by SLA: which path a lane's real-time datagrams take, chosen from
//! what the probes measure against thresholds
//! (`sla=latency<150ms,loss<1%,jitter<30ms` on a class).
//!
//! - **The metrics**, per path ([`PathView`]): latency is the probes'
//!   smoothed round trip; loss the worse way's, over one or two windows
//!   of 256 probes; jitter the RFC 3550
//!   interarrival jitter of the peer's probes.
//! - **Hysteresis**, evaluated at most every [`EVALUATE_EVERY`]: a path
//!   fails after [`FAIL_AFTER`] evaluations in a row over a threshold, and
//!   meets again only after [`MEET_AGAIN`] under [`MEET_MARGIN`] of every
//!   threshold.
//! - **The choice**: the current path while it meets and is not down;
//!   else the first path that meets, in `--path` order; else the one with
//!   the lowest score (its worst metric over its threshold), moving to a
//!   better one only for a [`BETTER`] score at most every [`MOVE_HOLD`].
//!   A path that goes down is left at once.

use std::fmt;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::state::{PathState, PathView};
use super::wire::{PathId, MAX_PATH};

/// How often the choice is evaluated.
pub const EVALUATE_EVERY: Duration = Duration::from_millis(100);
/// Evaluations in a row over a threshold that make a path fail.
pub const FAIL_AFTER: u32 = 3;
/// How long a failed path must stay under [`MEET_MARGIN`] of every
/// threshold to meet again.
pub const MEET_AGAIN: Duration = Duration::from_secs(2);
/// The share of each threshold a failed path must stay under.
pub const MEET_MARGIN: f64 = 0.8;
/// When no path meets, a move needs a score this much of the current's.
pub const BETTER: f64 = 0.8;
/// When no path meets, the shortest time between moves.
pub const MOVE_HOLD: Duration = Duration::from_secs(2);

/// A class's service level: the most latency, loss and jitter its
/// real-time datagrams' path may have.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sla {
    /// The most round trip.
    pub latency: Option<Duration>,
    /// The most loss, 0 to 1.
    pub loss: Option<f64>,
    /// The most interarrival jitter.
    pub jitter: Option<Duration>,
}

/// An SLA term did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("bad SLA term {term:?}: {why}")]
pub struct SlaError {
    term: String,
    why: &'static str,
}

impl Sla {
    /// Whether no threshold is set.
    pub fn is_empty(&self) -> bool {
        self.latency.is_none() && self.loss.is_none() && self.jitter.is_none()
    }

    /// Adds one term: `latency<150ms`, `loss<1%`, `jitter<30ms` (a later
    /// term for the same metric replaces the earlier).
    pub fn add_term(&mut self, term: &str) -> Result<(), SlaError> {
        let err = |why| SlaError {
            term: term.to_owned(),
            why,
        };
        let (metric, value) = term
            .split_once('<')
            .ok_or_else(|| err("no '<' between metric and threshold: e.g. latency<150ms"))?;
        let value = value.trim();
        match metric.trim() {
            "latency" | "jitter" => {
                let ms = value
                    .strip_suffix("ms")
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v > 0.0 && *v <= 60_000.0)
                    .ok_or_else(|| err("the threshold is milliseconds, 0 to 60000: e.g. 150ms"))?;
                let d = Some(Duration::from_secs_f64(ms / 1e3));
                if metric.trim() == "latency" {
                    self.latency = d;
                } else {
                    self.jitter = d;
                }
            }
            "loss" => {
                let pct = value
                    .strip_suffix('%')
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|v| v.is_finite() && *v > 0.0 && *v <= 100.0)
                    .ok_or_else(|| err("the threshold is a percentage, 0 to 100: e.g. 1%"))?;
                self.loss = Some(pct / 100.0);
            }
            _ => return Err(err(
                "the metric is latency, loss or jitter: e.g. latency<150ms, loss<1%, jitter<30ms",
            )),
        }
        Ok(())
    }

    /// The strictest of two: each threshold the lower of both.
    pub fn strictest(self, other: Sla) -> Sla {
        fn least<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        Sla {
            latency: least(self.latency, other.latency),
            loss: least(self.loss, other.loss),
            jitter: least(self.jitter, other.jitter),
        }
    }

    /// The worst metric of `view` over its threshold (1 is at the
    /// threshold), with that metric; metrics not measured yet count as 0.
    pub fn score(&self, view: &PathView) -> (f64, Option<Metric>) {
        let ratio = |value: Option<f64>, limit: Option<f64>| match (value, limit) {
            (Some(v), Some(l)) => v / l,
            _ => 0.0,
        };
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        [
            (Metric::Latency, ratio(secs(view.rtt), secs(self.latency))),
            (Metric::Loss, ratio(view.sla_loss, self.loss)),
            (Metric::Jitter, ratio(secs(view.jitter), secs(self.jitter))),
        ]
        .into_iter()
        .filter(|(_, r)| *r > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or((0.0, None), |(m, r)| (r, Some(m)))
    }
}

impl fmt::Display for Sla {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms = Vec::new();
        if let Some(l) = self.latency {
            terms.push(format!("latency<{}ms", trim(l.as_secs_f64() * 1e3)));
        }
        if let Some(l) = self.loss {
            terms.push(format!("loss<{}%", trim(l * 100.0)));
        }
        if let Some(j) = self.jitter {
            terms.push(format!("jitter<{}ms", trim(j.as_secs_f64() * 1e3)));
        }
        f.write_str(&terms.join(","))
    }
}

/// A number without trailing zeros (`150`, `0.5`).
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A measured figure to a tenth, without a trailing `.0`.
fn tenths(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

/// One of an SLA's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Round trip.
    Latency,
    /// Loss.
    Loss,
    /// Interarrival jitter.
    Jitter,
}

impl Metric {
    /// How the metric of `view` reads, with its threshold in `sla`
    /// (`loss 3.2% > 1%`).
    fn describe(self, view: &PathView, sla: &Sla) -> String {
        let ms = |d: Option<Duration>| tenths(d.map_or(0.0, |d| d.as_secs_f64() * 1e3));
        match self {
            Metric::Latency => format!("latency {} ms > {} ms", ms(view.rtt), ms(sla.latency)),
            Metric::Loss => format!(
                "loss {}% > {}%",
                tenths(view.sla_loss.unwrap_or(0.0) * 100.0),
                trim(sla.loss.unwrap_or(0.0) * 100.0)
            ),
            Metric::Jitter => format!("jitter {} ms > {} ms", ms(view.jitter), ms(sla.jitter)),
        }
    }
}

/// Where real-time datagrams go, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct SlaChoice {
    /// The path.
    pub path: PathId,
    /// Whether it meets the SLA.
    pub meets: bool,
    /// Why it was chosen, for `wanopt flows` and status.
    pub why: String,
}

/// One path's standing against the SLA.
#[derive(Debug, Clone, Copy, Default)]
struct Standing {
    failing: bool,
    over_in_a_row: u32,
    under_since: Option<Instant>,
    score: f64,
    worst: Option<Metric>,
}

/// Chooses the path of a lane's real-time datagrams by an SLA.
#[derive(Debug, Clone)]
pub struct SlaSelector {
    sla: Sla,
    standings: [Standing; MAX_PATH as usize],
    choice: Option<SlaChoice>,
    evaluated: Option<Instant>,
    moved: Option<Instant>,
    moves: u64,
}

impl SlaSelector {
    /// A selector for `sla`.
    pub fn new(sla: Sla) -> SlaSelector {
        SlaSelector {
            sla,
            standings: [Standing::default(); MAX_PATH as usize],
            choice: None,
            evaluated: None,
            moved: None,
            moves: 0,
        }
    }

    /// The SLA.
    pub fn sla(&self) -> Sla {
        self.sla
    }

    /// The current choice.
    pub fn choice(&self) -> Option<&SlaChoice> {
        self.choice.as_ref()
    }

    /// Times real-time datagrams moved from one path to another.
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Evaluates the paths (in `--path` order) at `now` if
    /// [`EVALUATE_EVERY`] passed or the chosen path went down; returns
    /// the choice.
    pub fn select(&mut self, now: Instant, paths: &[PathView]) -> Option<&SlaChoice> {
        let current = self.choice.as_ref().map(|c| c.path);
        let current_down = current.is_some_and(|c| {
            paths
                .iter()
                .find(|v| v.id == c)
                .is_none_or(|v| v.state == PathState::Down)
        });
        let due = self
            .evaluated
            .is_none_or(|t| now.saturating_duration_since(t) >= EVALUATE_EVERY);
        if !due && !current_down {
            return self.choice.as_ref();
        }
        if due {
            self.evaluated = Some(now);
            for view in paths {
                self.stand(now, view);
            }
        }
        let choice = self.choose(now, paths, current, current_down);
        if let Some(choice) = &choice {
            if current.is_some_and(|c| c != choice.path) {
                self.moves += 1;
                self.moved = Some(now);
            } else if current.is_none() {
                self.moved = Some(now);
            }
        }
        self.choice = choice;
        self.choice.as_ref()
    }

    /// Updates one path's standing from its metrics now.
    fn stand(&mut self, now: Instant, view: &PathView) {
        let (score, worst) = self.sla.score(view);
        let s = &mut self.standings[view.id.index()];
        s.score = score;
        s.worst = worst;
        if !s.failing {
            s.over_in_a_row = if score > 1.0 { s.over_in_a_row + 1 } else { 0 };
            if s.over_in_a_row >= FAIL_AFTER {
                s.failing = true;
                s.under_since = None;
            }
        } else if score <= MEET_MARGIN {
            let since = *s.under_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= MEET_AGAIN {
                *s = Standing {
                    score,
                    worst,
                    ..Standing::default()
                };
            }
        } else {
            s.under_since = None;
        }
    }

    fn meets(&self, view: &PathView) -> bool {
        view.state != PathState::Down
            && view.rtt.is_some()
            && !self.standings[view.id.index()].failing
    }

    fn choose(
        &self,
        now: Instant,
        paths: &[PathView],
        current: Option<PathId>,
        current_down: bool,
    ) -> Option<SlaChoice> {
        let kept = current
            .filter(|_| !current_down)
            .and_then(|c| paths.iter().find(|v| v.id == c));
        if let Some(view) = kept.filter(|v| self.meets(v)) {
            return Some(self.chose(view, true, paths));
        }
        let up = |v: &&PathView| matches!(v.state, PathState::Up);
        let score = |v: &PathView| self.standings[v.id.index()].score;
        // A path that meets and is under every threshold now first (a
        // path over them has not failed yet only for the hysteresis).
        let meeting = paths
            .iter()
            .filter(up)
            .filter(|v| self.meets(v))
            .min_by_key(|v| score(v) > 1.0);
        if let Some(view) = meeting {
            return Some(self.chose(view, true, paths));
        }
        let best = paths
            .iter()
            .filter(up)
            .min_by(|a, b| score(a).total_cmp(&score(b)));
        match (kept, best) {
            (Some(kept), Some(best)) => {
                let held = self
                    .moved
                    .is_some_and(|t| now.saturating_duration_since(t) < MOVE_HOLD);
                let better = score(best) < score(kept) * BETTER;
                let view = if better && !held { best } else { kept };
                Some(self.chose(view, false, paths))
            }
            (Some(view), None) | (None, Some(view)) => Some(self.chose(view, false, paths)),
            (None, None) => paths
                .iter()
                .find(|v| v.state != PathState::Down)
                .map(|v| self.chose(v, false, paths)),
        }
    }

    /// The choice of `view`, with why: what the paths before it in the
    /// order lack, or (none meets) its own worst metric.
    fn chose(&self, view: &PathView, meets: bool, paths: &[PathView]) -> SlaChoice {
        let lacks = |v: &PathView| {
            let s = &self.standings[v.id.index()];
            if v.state == PathState::Down {
                format!("path {} is down", v.id.get())
            } else if v.rtt.is_none() {
                format!("path {} is not measured yet", v.id.get())
            } else {
                match s.worst.filter(|_| s.failing) {
                    Some(m) if s.score > 1.0 => {
                        format!("path {}: {}", v.id.get(), m.describe(v, &self.sla))
                    }
                    _ => format!("path {}: failed the SLA, recovering", v.id.get()),
                }
            }
        };
        let why = if meets {
            let earlier: Vec<String> = paths
                .iter()
                .take_while(|v| v.id != view.id)
                .filter(|v| !self.meets(v))
                .map(lacks)
                .collect();
            if earlier.is_empty() {
                format!("meets {}", self.sla)
            } else {
                format!("meets {} ({})", self.sla, earlier.join("; "))
            }
        } else {
            format!("no path meets {}; the best: {}", self.sla, lacks(view))
        };
        SlaChoice {
            path: view.id,
            meets,
            why,
        }
    }
}

#[cfg(test)]
mod tests;
