//! The scenario's matrix: the two links, the modes, events and workloads,
//! for a full run and for `--quick`.

use std::time::Duration;

use crate::link::{Link2Options, LinkOptionError, LinkOptions, LinkSpecs};

/// The scenario's name.
pub const SCENARIO: &str = "bond";

/// Link 1's rate, Mbit/s each way: the faster link, and the one direct
/// traffic takes (link 2 has no routes).
pub const LINK1_MBPS: u64 = 30;
/// Link 1's round trip, ms.
pub const LINK1_RTT_MS: u64 = 80;
/// Link 2's rate, Mbit/s each way.
pub const LINK2_MBPS: u64 = 20;
/// Link 2's round trip, ms: the better path for delay.
pub const LINK2_RTT_MS: u64 = 40;
/// What the two links carry together, Mbit/s.
pub const SUM_MBPS: f64 = (LINK1_MBPS + LINK2_MBPS) as f64;
/// Random loss on link 1 in the `loss` event, percent each way.
pub const LOSS_PCT: f64 = 1.0;
/// The emulators' seed (link 2's is this + 1000).
pub const SEED: u64 = 35;
/// A download's length in a full run, s.
pub const FULL_SECONDS: u64 = 20;
/// A download's length with `--quick`, s.
pub const QUICK_SECONDS: u64 = 15;
/// Runs per cell of a full run (the rows hold their medians).
pub const FULL_RUNS: usize = 3;
/// The voice's class in `wanopt-sla`: real-time, its path by an SLA that
/// link 2's round trip (40 ms) meets and link 1's (80 ms) does not.
pub const SLA_CLASS: &str = "name=voice,udp,realtime,sla=latency<60ms";
/// The path that meets [`SLA_CLASS`]: link 2's.
pub const SLA_PATH: u8 = 2;

/// The share of each link's rate the `wanopt-shaped` edge declares
/// (`--path ...,rate=`): under it, the links' own queues stay empty.
pub const SHAPED_SHARE: f64 = 0.97;
/// How long the `cut` event keeps link 1 down, from a third of the
/// download: shorter than the tunnel's idle timeout (8 s).
pub const CUT: Duration = Duration::from_secs(5);

/// How the traffic crosses the WAN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No nodes: link 1 only, kernel BBR at both ends (the better link
    /// alone, the baseline).
    Direct,
    /// The tunnel with a `--path` on each link, `--path-mode failover`:
    /// link 1 carries everything, link 2 takes over when it fails.
    WanoptFailover,
    /// The tunnel with a `--path` on each link, `--path-mode bond`: both
    /// links carry the data at once.
    WanoptBond,
    /// As `WanoptBond`, each `--path` declaring [`SHAPED_SHARE`] of its
    /// link's rate (`rate=`): the queue is the nodes', where real-time
    /// datagrams go first.
    WanoptShaped,
    /// As `WanoptShaped`, the voice in a class with an SLA
    /// ([`SLA_CLASS`]): its datagrams take the path that meets it (link
    /// 2's, the shorter) alone, not a copy on each.
    WanoptSla,
    /// The tunnel on link 2 alone (failover, link 1 cut for the whole
    /// cell): the voice baseline, its better path's delay.
    WanoptPath2,
}

impl Mode {
    /// The mode's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::WanoptFailover => "wanopt-failover",
            Mode::WanoptBond => "wanopt-bond",
            Mode::WanoptShaped => "wanopt-shaped",
            Mode::WanoptSla => "wanopt-sla",
            Mode::WanoptPath2 => "wanopt-path2",
        }
    }

    /// Whether the traffic goes through the wanopt nodes.
    pub fn tunnel(self) -> bool {
        self != Mode::Direct
    }

    /// The edge's `--path-mode` (its `--path`s, link 1 first, come with
    /// the lab's link 2).
    pub fn path_mode(self) -> Option<&'static str> {
        match self {
            Mode::Direct => None,
            Mode::WanoptFailover | Mode::WanoptPath2 => Some("failover"),
            Mode::WanoptBond | Mode::WanoptShaped | Mode::WanoptSla => Some("bond"),
        }
    }

    /// The rates the edge declares on links 1 and 2, Mbit/s
    /// (`wanopt-shaped`, `wanopt-sla`).
    pub fn declared_mbps(self) -> Option<[f64; 2]> {
        matches!(self, Mode::WanoptShaped | Mode::WanoptSla).then(|| {
            [LINK1_MBPS, LINK2_MBPS].map(|m| (m as f64 * SHAPED_SHARE * 10.0).round() / 10.0)
        })
    }
}

/// What happens to link 1 during a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Nothing: both links clean.
    None,
    /// [`LOSS_PCT`] random loss on link 1 each way, the whole cell.
    Loss,
    /// Link 1 cut at a third of the download and restored [`CUT`] later
    /// (`lab link 1 down|up`).
    Cut,
}

impl Event {
    /// The event's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Event::None => "none",
            Event::Loss => "loss",
            Event::Cut => "cut",
        }
    }
}

/// What runs across the links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// One TCP download from the lab's server, every byte checked.
    Bulk,
    /// A voice-like UDP stream (50 packets/s of 200 B each way) beside one
    /// bulk download; alone in `wanopt-path2`.
    Voice,
}

impl Workload {
    /// The workload's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Bulk => "bulk",
            Workload::Voice => "voice",
        }
    }
}

/// One cell: a mode, an event and a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    /// The mode.
    pub mode: Mode,
    /// What happens to link 1.
    pub event: Event,
    /// What runs.
    pub workload: Workload,
}

impl Cell {
    /// Whether a bulk download runs (all but the voice baseline).
    pub fn bulk(&self) -> bool {
        !(self.workload == Workload::Voice && self.mode == Mode::WanoptPath2)
    }

    /// Whether the voice stream runs.
    pub fn voice(&self) -> bool {
        self.workload == Workload::Voice
    }

    /// The cell as a file name stem (`wanopt-bond-cut-bulk`).
    pub fn stem(&self) -> String {
        format!(
            "{}-{}-{}",
            self.mode.name(),
            self.event.name(),
            self.workload.name()
        )
    }

    /// Link 1's options: 30 Mbit/s, RTT 80 ms, a queue of 1 BDP, and the
    /// loss of the `loss` event.
    pub fn link1(&self) -> LinkOptions {
        LinkOptions {
            rtt: Some(format!("{LINK1_RTT_MS}ms")),
            rate: Some(format!("{LINK1_MBPS}mbit")),
            queue: Some("1bdp".into()),
            loss: (self.event == Event::Loss).then(|| format!("{LOSS_PCT}%")),
            seed: Some(SEED),
            ..LinkOptions::default()
        }
    }

    /// Link 2's specs: 20 Mbit/s, RTT 40 ms, a queue of 1 BDP, clean
    /// (always `Some`: every cell has link 2).
    pub fn link2(&self) -> Result<Option<LinkSpecs>, LinkOptionError> {
        Link2Options {
            link2: Some(link2_spec()),
            ..Link2Options::default()
        }
        .specs(SEED)
    }

    /// Link 1 as a row states it: its spec, or `down` for the voice
    /// baseline (cut for the whole cell).
    pub fn link1_label(&self) -> String {
        if self.mode == Mode::WanoptPath2 {
            return "down".into();
        }
        self.link1()
            .specs()
            .map(|s| s.down)
            .unwrap_or_else(|e| e.to_string())
    }
}

/// Link 2's spec.
pub fn link2_spec() -> String {
    format!("rtt {LINK2_RTT_MS}ms rate {LINK2_MBPS}mbit queue 1bdp")
}

/// The settings of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Every cell, in the order they run.
    pub cells: Vec<Cell>,
    /// Each download's length, s.
    pub seconds: u64,
    /// Runs per cell.
    pub runs: usize,
}

impl Plan {
    /// The plan, full or `--quick`: the bulk download with each event in
    /// `direct`, `wanopt-failover` and `wanopt-bond` (the baseline first),
    /// and clean in `wanopt-shaped`; then voice alone on link 2
    /// (`wanopt-path2`), and voice beside a download in `wanopt-failover`,
    /// `wanopt-bond` and `wanopt-shaped`. `--quick` runs each cell once
    /// with shorter downloads.
    pub fn new(quick: bool) -> Plan {
        let mut cells = Vec::new();
        for event in [Event::None, Event::Loss, Event::Cut] {
            for mode in [Mode::Direct, Mode::WanoptFailover, Mode::WanoptBond] {
                cells.push(Cell {
                    mode,
                    event,
                    workload: Workload::Bulk,
                });
            }
        }
        cells.push(Cell {
            mode: Mode::WanoptShaped,
            event: Event::None,
            workload: Workload::Bulk,
        });
        for mode in [
            Mode::WanoptPath2,
            Mode::WanoptFailover,
            Mode::WanoptBond,
            Mode::WanoptShaped,
            Mode::WanoptSla,
        ] {
            cells.push(Cell {
                mode,
                event: Event::None,
                workload: Workload::Voice,
            });
        }
        let (seconds, runs) = if quick {
            (QUICK_SECONDS, 1)
        } else {
            (FULL_SECONDS, FULL_RUNS)
        };
        Plan {
            cells,
            seconds,
            runs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_runs_every_event_in_every_bulk_mode_then_voice() {
        let plan = Plan::new(true);
        assert_eq!((plan.seconds, plan.runs), (15, 1));
        let stems: Vec<String> = plan.cells.iter().map(Cell::stem).collect();
        assert_eq!(
            stems,
            [
                "direct-none-bulk",
                "wanopt-failover-none-bulk",
                "wanopt-bond-none-bulk",
                "direct-loss-bulk",
                "wanopt-failover-loss-bulk",
                "wanopt-bond-loss-bulk",
                "direct-cut-bulk",
                "wanopt-failover-cut-bulk",
                "wanopt-bond-cut-bulk",
                "wanopt-shaped-none-bulk",
                "wanopt-path2-none-voice",
                "wanopt-failover-none-voice",
                "wanopt-bond-none-voice",
                "wanopt-shaped-none-voice",
                "wanopt-sla-none-voice",
            ]
        );
        // The voice baseline is voice alone; every other cell downloads.
        assert!(plan
            .cells
            .iter()
            .all(|c| c.bulk() == (c.mode != Mode::WanoptPath2)));
        assert_eq!(plan.cells.iter().filter(|c| c.voice()).count(), 5);
        let full = Plan::new(false);
        assert_eq!((full.seconds, full.runs), (20, 3));
        assert_eq!(full.cells, plan.cells);
        // The cut is over with a third of the download left for the
        // return, and shorter than the tunnel's idle timeout.
        for seconds in [QUICK_SECONDS, FULL_SECONDS] {
            let left = seconds as f64 * 2.0 / 3.0 - CUT.as_secs_f64();
            assert!(left >= 5.0 - 1e-9, "{seconds}: {left}");
        }
        assert!(CUT < Duration::from_secs(8));
    }

    #[test]
    fn link_1_is_the_faster_and_link_2_the_nearer() {
        let cell = |mode, event| Cell {
            mode,
            event,
            workload: Workload::Bulk,
        };
        let clean = cell(Mode::Direct, Event::None);
        let specs = clean.link1().specs().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(specs.down, "rtt 80ms rate 30mbit queue 1bdp");
        assert_eq!(specs.up, specs.down);
        assert_eq!(specs.seed, SEED);
        let lossy = cell(Mode::WanoptBond, Event::Loss);
        assert_eq!(
            lossy.link1_label(),
            "rtt 80ms rate 30mbit queue 1bdp loss 1%"
        );
        let link2 = lossy
            .link2()
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("link 2"));
        assert_eq!(link2.up, "rtt 40ms rate 20mbit queue 1bdp");
        assert_eq!(link2.seed, SEED + 1000);
        assert_eq!(cell(Mode::WanoptPath2, Event::None).link1_label(), "down");
        assert_eq!(SUM_MBPS, 50.0);
        assert_eq!(Mode::WanoptBond.path_mode(), Some("bond"));
        assert_eq!(Mode::WanoptShaped.path_mode(), Some("bond"));
        assert_eq!(Mode::WanoptShaped.declared_mbps(), Some([29.1, 19.4]));
        assert_eq!(Mode::WanoptBond.declared_mbps(), None);
        assert_eq!(Mode::WanoptPath2.path_mode(), Some("failover"));
        assert_eq!(Mode::Direct.path_mode(), None);
        assert!(!Mode::Direct.tunnel() && Mode::WanoptPath2.tunnel());
    }
}
