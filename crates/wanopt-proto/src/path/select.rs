//! Which paths a lane's datagrams go on, by its mode and the paths' states.
//!
//! - **failover**: one data path. The lane keeps it while it is not down
//!   (a suspect spell does not move it). When it goes down, data moves at
//!   once to the first path that is up (in the listed order, or the lowest
//!   RTT: [`Preference`]). With [`Preference::Listed`] it returns to an
//!   earlier path once that has been up for [`RECOVER_HOLD`], so a flapping
//!   path does not pull the traffic back and forth. With nothing up it
//!   keeps its path, or takes the first that is not down.
//! - **plain**: the same, with FEC off.
//! - **duplicate**: every datagram on every path that is not down (suspect
//!   ones too); the failover path goes first. With every path down, on
//!   every path: none is known to work, so none is spared.
//! - **spread-fec**: data on the failover path, FEC repairs on the best
//!   other path that is up (least loss toward the peer, then lowest RTT),
//!   or with the data when no other is up.
//!
//! Each node selects on its own, from its own probes ([`super::monitor`]).

use std::time::{Duration, Instant};

use super::state::{PathState, PathView};
use super::wire::{PathId, PathMode};

/// How long an earlier path must have been up before failover returns to
/// it.
pub const RECOVER_HOLD: Duration = Duration::from_secs(2);

/// Which path failover prefers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preference {
    /// The order of the views (the client's `--path` order); failover
    /// returns to an earlier path after [`RECOVER_HOLD`].
    Listed,
    /// The lowest RTT among the paths that are up, chosen only when the
    /// data path goes down (the server, which has no order).
    LowestRtt,
}

/// A set of paths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PathSet(u16);

impl PathSet {
    /// No path.
    pub const EMPTY: PathSet = PathSet(0);

    /// Adds `path`.
    pub fn insert(&mut self, path: PathId) {
        self.0 |= 1 << path.get();
    }

    /// Whether `path` is in the set.
    pub fn contains(&self, path: PathId) -> bool {
        self.0 & (1 << path.get()) != 0
    }

    /// How many paths the set holds.
    pub fn len(&self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The paths, by number.
    pub fn iter(&self) -> impl Iterator<Item = PathId> + '_ {
        PathId::all().filter(|p| self.contains(*p))
    }
}

impl FromIterator<PathId> for PathSet {
    fn from_iter<I: IntoIterator<Item = PathId>>(paths: I) -> Self {
        let mut set = PathSet::EMPTY;
        for path in paths {
            set.insert(path);
        }
        set
    }
}

/// Where a lane's datagrams go now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selection {
    /// The path to send on first (its back-pressure is the lane's); `None`
    /// only without paths.
    pub primary: Option<PathId>,
    /// Every path a data datagram goes on (the primary included).
    pub data: PathSet,
    /// Where FEC repairs go when not with the data (spread-fec).
    pub repairs: Option<PathId>,
}

/// Chooses a lane's paths, with the memory failover needs.
#[derive(Debug, Clone)]
pub struct Selector {
    mode: PathMode,
    preference: Preference,
    current: Option<PathId>,
    switches: u64,
}

impl Selector {
    /// A selector for a lane in `mode`.
    pub fn new(mode: PathMode, preference: Preference) -> Selector {
        Selector {
            mode,
            preference,
            current: None,
            switches: 0,
        }
    }

    /// Changes the lane's mode (the server follows the client's); the
    /// data path stays.
    pub fn set_mode(&mut self, mode: PathMode) {
        self.mode = mode;
    }

    /// The lane's mode.
    pub fn mode(&self) -> PathMode {
        self.mode
    }

    /// Times the data path changed from one path to another.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// The data path chosen last.
    pub fn current(&self) -> Option<PathId> {
        self.current
    }

    /// Where datagrams go at `now`, given the paths (in preference order
    /// for [`Preference::Listed`]).
    pub fn select(&mut self, now: Instant, paths: &[PathView]) -> Selection {
        let primary = self.failover(now, paths);
        if primary != self.current {
            if self.current.is_some() && primary.is_some() {
                self.switches += 1;
            }
            self.current = primary;
        }
        let mut data = PathSet::EMPTY;
        let mut repairs = None;
        match self.mode {
            // A bond's data goes on every path: the primary carries what
            // is not bonded (the layer's own datagrams, and data while no
            // path is up for the bond).
            PathMode::Failover | PathMode::Plain | PathMode::Bond => data.extend(primary),
            PathMode::Duplicate => {
                data = paths
                    .iter()
                    .filter(|v| v.state != PathState::Down)
                    .map(|v| v.id)
                    .collect();
                if data.is_empty() {
                    data = paths.iter().map(|v| v.id).collect();
                }
            }
            PathMode::SpreadFec => {
                data.extend(primary);
                repairs = paths
                    .iter()
                    .filter(|v| v.state == PathState::Up && Some(v.id) != primary)
                    .min_by_key(|v| {
                        let loss = (v.loss.unwrap_or(0.0) * 1000.0).round() as u64;
                        (loss, v.rtt.unwrap_or(Duration::MAX))
                    })
                    .map(|v| v.id)
                    .or(primary);
            }
        }
        Selection {
            primary,
            data,
            repairs,
        }
    }

    /// The failover path.
    fn failover(&self, now: Instant, paths: &[PathView]) -> Option<PathId> {
        let position = |id| paths.iter().position(|v| v.id == id);
        let kept = self
            .current
            .and_then(position)
            .filter(|&i| paths[i].state != PathState::Down);
        if let Some(i) = kept {
            if self.preference == Preference::Listed {
                let recovered = paths[..i].iter().find(|v| {
                    v.state == PathState::Up
                        && v.up_since
                            .is_some_and(|t| now.saturating_duration_since(t) >= RECOVER_HOLD)
                });
                if let Some(earlier) = recovered {
                    return Some(earlier.id);
                }
            }
            // An unknown path is kept only while nothing else is up (the
            // first choice, before any echo).
            let unknown = paths[i].state == PathState::Unknown;
            if !unknown || !paths.iter().any(|v| v.state == PathState::Up) {
                return Some(paths[i].id);
            }
        }
        let up = paths.iter().filter(|v| v.state == PathState::Up);
        let best = match self.preference {
            Preference::Listed => up.min_by_key(|v| position(v.id)),
            Preference::LowestRtt => up.min_by_key(|v| v.rtt.unwrap_or(Duration::MAX)),
        };
        best.or_else(|| paths.iter().find(|v| v.state != PathState::Down))
            .map(|v| v.id)
            .or_else(|| self.current.filter(|c| position(*c).is_some()))
            .or_else(|| paths.first().map(|v| v.id))
    }
}

impl Extend<PathId> for PathSet {
    fn extend<I: IntoIterator<Item = PathId>>(&mut self, paths: I) {
        for path in paths {
            self.insert(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn id(n: u8) -> PathId {
        PathId::new(n).unwrap()
    }

    fn view(n: u8, state: PathState, since: Option<Instant>) -> PathView {
        PathView {
            id: id(n),
            state,
            rtt: Some(Duration::from_millis(40 + 10 * u64::from(n))),
            loss: Some(0.0),
            up_since: since,
            sla_loss: Some(0.0),
            jitter: None,
        }
    }

    fn set(paths: &[u8]) -> PathSet {
        paths.iter().map(|&n| id(n)).collect()
    }

    #[test]
    fn failover_takes_the_first_path_and_switches_when_it_goes_down() {
        let t0 = Instant::now();
        let mut s = Selector::new(PathMode::Failover, Preference::Listed);
        // Before any echo: the first path.
        let unknown = [
            view(1, PathState::Unknown, None),
            view(2, PathState::Unknown, None),
        ];
        assert_eq!(s.select(t0, &unknown).primary, Some(id(1)));
        // Path 2 answers first while path 1 has not: data goes where it
        // can arrive.
        let only_two = [
            view(1, PathState::Unknown, None),
            view(2, PathState::Up, Some(t0)),
        ];
        assert_eq!(s.select(t0, &only_two).primary, Some(id(2)));
        assert_eq!(s.switches(), 1);
        // Both up later: path 1 is preferred once it has been up 2 s.
        let t1 = t0 + 100 * MS;
        let both = [
            view(1, PathState::Up, Some(t1)),
            view(2, PathState::Up, Some(t0)),
        ];
        assert_eq!(s.select(t1, &both).primary, Some(id(2)));
        let back = s.select(t1 + RECOVER_HOLD, &both);
        assert_eq!(
            back,
            Selection {
                primary: Some(id(1)),
                data: set(&[1]),
                repairs: None
            }
        );
        // A suspect spell keeps the data path; down moves it at once.
        let t2 = t1 + 3 * RECOVER_HOLD;
        let suspect = [
            view(1, PathState::Suspect, Some(t1)),
            view(2, PathState::Up, Some(t0)),
        ];
        assert_eq!(s.select(t2, &suspect).primary, Some(id(1)));
        let down = [
            view(1, PathState::Down, None),
            view(2, PathState::Up, Some(t0)),
        ];
        assert_eq!(s.select(t2, &down).primary, Some(id(2)));
        assert_eq!(s.switches(), 3);
    }

    #[test]
    fn failover_returns_only_after_the_hold() {
        let t0 = Instant::now();
        let mut s = Selector::new(PathMode::Plain, Preference::Listed);
        let down = [
            view(1, PathState::Down, None),
            view(2, PathState::Up, Some(t0)),
        ];
        assert_eq!(s.select(t0, &down).primary, Some(id(2)));
        // Path 1 back up at t1: not before t1 + RECOVER_HOLD.
        let t1 = t0 + Duration::from_secs(5);
        let recovered = [
            view(1, PathState::Up, Some(t1)),
            view(2, PathState::Up, Some(t0)),
        ];
        for after in [Duration::ZERO, RECOVER_HOLD / 2, RECOVER_HOLD - MS] {
            assert_eq!(s.select(t1 + after, &recovered).primary, Some(id(2)));
        }
        // It fails again inside the hold: the clock starts over.
        assert_eq!(s.select(t1 + RECOVER_HOLD / 2, &down).primary, Some(id(2)));
        let t3 = t1 + RECOVER_HOLD;
        let again = [
            view(1, PathState::Up, Some(t3)),
            view(2, PathState::Up, Some(t0)),
        ];
        assert_eq!(
            s.select(t3 + RECOVER_HOLD - MS, &again).primary,
            Some(id(2))
        );
        assert_eq!(s.select(t3 + RECOVER_HOLD, &again).primary, Some(id(1)));
        assert_eq!(s.switches(), 1);
    }

    #[test]
    fn failover_follows_the_listed_order() {
        let t0 = Instant::now();
        let later = t0 + RECOVER_HOLD;
        // Views listed 3, 1, 2: path 3 is the preferred one.
        let mut s = Selector::new(PathMode::Failover, Preference::Listed);
        let paths = [
            view(3, PathState::Up, Some(t0)),
            view(1, PathState::Up, Some(t0)),
            view(2, PathState::Up, Some(t0)),
        ];
        assert_eq!(s.select(later, &paths).primary, Some(id(3)));
        let three_down = [
            view(3, PathState::Down, None),
            view(1, PathState::Up, Some(t0)),
            view(2, PathState::Up, Some(t0)),
        ];
        assert_eq!(s.select(later, &three_down).primary, Some(id(1)));
        // Every path down: the lane stays where it is.
        let all_down = [
            view(3, PathState::Down, None),
            view(1, PathState::Down, None),
            view(2, PathState::Down, None),
        ];
        assert_eq!(s.select(later, &all_down).primary, Some(id(1)));
        // No path: nothing.
        assert_eq!(
            Selector::new(PathMode::Failover, Preference::Listed).select(t0, &[]),
            Selection {
                primary: None,
                data: PathSet::EMPTY,
                repairs: None
            }
        );
    }

    #[test]
    fn lowest_rtt_preference_moves_only_on_down() {
        let t0 = Instant::now();
        let mut s = Selector::new(PathMode::Failover, Preference::LowestRtt);
        let mut paths = [
            view(1, PathState::Up, Some(t0)),
            view(2, PathState::Up, Some(t0)),
        ];
        paths[1].rtt = Some(10 * MS);
        assert_eq!(s.select(t0, &paths).primary, Some(id(2)));
        // Path 1 gets faster: no move while path 2 works.
        paths[0].rtt = Some(5 * MS);
        assert_eq!(
            s.select(t0 + 10 * RECOVER_HOLD, &paths).primary,
            Some(id(2))
        );
        paths[1].state = PathState::Down;
        assert_eq!(
            s.select(t0 + 10 * RECOVER_HOLD, &paths).primary,
            Some(id(1))
        );
    }

    #[test]
    fn duplicate_selects_every_path_not_down() {
        let t0 = Instant::now();
        let mut s = Selector::new(PathMode::Duplicate, Preference::Listed);
        let paths = [
            view(1, PathState::Down, None),
            view(2, PathState::Suspect, Some(t0)),
            view(3, PathState::Up, Some(t0)),
            view(4, PathState::Unknown, None),
        ];
        let selection = s.select(t0, &paths);
        assert_eq!(selection.data, set(&[2, 3, 4]));
        // The failover path (the first up) goes first.
        assert_eq!(selection.primary, Some(id(3)));
        assert_eq!(selection.repairs, None);
        let all_down = [
            view(1, PathState::Down, None),
            view(2, PathState::Down, None),
        ];
        assert_eq!(s.select(t0, &all_down).data, set(&[1, 2]));
    }

    #[test]
    fn spread_fec_puts_repairs_on_the_best_other_path() {
        let t0 = Instant::now();
        let mut s = Selector::new(PathMode::SpreadFec, Preference::Listed);
        let mut paths = [
            view(1, PathState::Up, Some(t0)),
            view(2, PathState::Up, Some(t0)),
            view(3, PathState::Up, Some(t0)),
        ];
        // Path 2 loses 5%, path 3 nothing: repairs on 3.
        paths[1].loss = Some(0.05);
        let selection = s.select(t0, &paths);
        assert_eq!(selection.data, set(&[1]));
        assert_eq!(selection.repairs, Some(id(3)));
        // Same loss: the lower RTT (path 2).
        paths[1].loss = Some(0.0);
        assert_eq!(s.select(t0, &paths).repairs, Some(id(2)));
        // Only a suspect or down other path: repairs go with the data.
        paths[1].state = PathState::Suspect;
        paths[2].state = PathState::Down;
        let alone = s.select(t0, &paths);
        assert_eq!((alone.data, alone.repairs), (set(&[1]), Some(id(1))));
    }

    #[test]
    fn path_sets() {
        let s = set(&[1, 15, 7]);
        assert_eq!(s.len(), 3);
        assert_eq!(s.iter().map(PathId::get).collect::<Vec<_>>(), [1, 7, 15]);
        assert!(s.contains(id(7)) && !s.contains(id(2)));
        assert!(PathSet::EMPTY.is_empty());
    }
}
