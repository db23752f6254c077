//! The scenario's matrix: link conditions, modes and events, for a full
//! run and for `--quick`.

use serde::{Deserialize, Serialize};

use crate::link::LinkOptions;

/// The scenario's name.
pub const SCENARIO: &str = "realtime";

/// Link 1's round trip, ms.
pub const RTT_MS: u64 = 40;
/// Link 1's rate, Mbit/s (each direction).
pub const LINK_MBPS: u64 = 20;
/// Link 1's delay jitter, ms.
pub const JITTER_MS: u64 = 1;
/// Random loss rates of a full run on link 1, percent (each direction).
pub const LOSSES: [f64; 3] = [1.0, 3.0, 5.0];
/// Gilbert-Elliott bursts on link 1: 1% good to bad, 25% bad to good,
/// every frame lost in the bad state: 3.85% mean loss in bursts of 4
/// frames on average.
pub const BURST_SPEC: &str = "1%,25%";
/// The mean loss of [`BURST_SPEC`], percent: 1 / (1 + 25).
pub const BURST_MEAN_LOSS_PCT: f64 = 3.85;
/// The emulator's seed.
pub const SEED: u64 = 34;
/// Length of a cell of a full run, seconds.
pub const FULL_SECONDS: u64 = 60;
/// Length of a cell of `--quick`, seconds.
pub const QUICK_SECONDS: u64 = 20;
/// Length of the `--smoke` cell, seconds.
pub const SMOKE_SECONDS: u64 = 5;
/// How long `link1-down` cuts link 1, from a third of the cell: shorter
/// than the tunnel's idle timeout (8 s), so that a tunnel on one path
/// outlives it and the cell shows what the outage costs the streams, not
/// a tunnel's end.
pub const CUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How the traffic crosses the WAN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Direct over link 1, no nodes.
    #[serde(rename = "direct")]
    Direct,
    /// Through the wanopt tunnel on link 1, adaptive FEC (`--fec auto`).
    #[serde(rename = "wanopt-fec")]
    WanoptFec,
    /// Through the wanopt tunnel on both links (`--path` on each,
    /// `--path-mode duplicate`): voice and video duplicated, adaptive FEC
    /// as in `wanopt-fec`; link 2 loses as much as link 1 on average,
    /// independently.
    #[serde(rename = "wanopt-dup")]
    WanoptDup,
}

impl Mode {
    /// The mode's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::WanoptFec => "wanopt-fec",
            Mode::WanoptDup => "wanopt-dup",
        }
    }

    /// Whether the traffic goes through the wanopt nodes.
    pub fn tunnel(self) -> bool {
        !matches!(self, Mode::Direct)
    }

    /// WAN paths the traffic may use.
    pub fn paths(self) -> u8 {
        match self {
            Mode::WanoptDup => 2,
            Mode::Direct | Mode::WanoptFec => 1,
        }
    }
}

/// What happens to the links during a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// Nothing.
    #[serde(rename = "none")]
    None,
    /// Link 1 cut at a third of the cell and restored [`CUT`] later
    /// (`lab link 1 down|up`).
    #[serde(rename = "link1-down")]
    Link1Down,
}

impl Event {
    /// The event's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Event::None => "none",
            Event::Link1Down => "link1-down",
        }
    }
}

/// One link condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Condition {
    /// Mean loss on link 1 each way, percent.
    pub loss_pct: f64,
    /// Gilbert-Elliott bursts on link 1 rather than random loss.
    pub burst: bool,
    /// Random loss on link 2 each way, percent; `None`: no link 2.
    pub link2_loss_pct: Option<f64>,
}

impl Condition {
    /// Link 1's options: `rtt 40ms rate 20mbit queue 1bdp jitter 1ms` and
    /// the loss.
    pub fn link(&self) -> LinkOptions {
        let (loss, loss_burst) = if self.burst {
            (None, Some(BURST_SPEC.to_string()))
        } else if self.loss_pct > 0.0 {
            (Some(format!("{}%", self.loss_pct)), None)
        } else {
            (None, None)
        };
        LinkOptions {
            rtt: Some(format!("{RTT_MS}ms")),
            rate: Some(format!("{LINK_MBPS}mbit")),
            queue: Some("1bdp".into()),
            jitter: Some(format!("{JITTER_MS}ms")),
            loss,
            loss_burst,
            seed: Some(SEED),
            ..LinkOptions::default()
        }
    }

    /// Link 2's specs (`None` without link 2): link 1's rate, RTT, queue
    /// and jitter with `link2_loss_pct` random loss, seeded apart.
    pub fn link2(&self) -> Result<Option<crate::link::LinkSpecs>, crate::link::LinkOptionError> {
        let Some(loss_pct) = self.link2_loss_pct else {
            return Ok(None);
        };
        let like = Condition {
            loss_pct,
            burst: false,
            link2_loss_pct: None,
        };
        let base = like.link().specs()?.up;
        crate::link::Link2Options {
            link2: Some(base),
            ..Default::default()
        }
        .specs(SEED)
    }

    /// The condition in a progress line or a table.
    pub fn label(&self) -> String {
        let link1 = if self.burst {
            format!("link 1 {}% bursts", self.loss_pct)
        } else {
            format!("link 1 {}% loss", self.loss_pct)
        };
        match self.link2_loss_pct {
            Some(l) => format!("{link1}, link 2 {l}% loss"),
            None => link1,
        }
    }
}

/// One cell: a condition, a mode and an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// The links.
    pub condition: Condition,
    /// The mode.
    pub mode: Mode,
    /// What happens to the links meanwhile.
    pub event: Event,
}

impl Cell {
    /// The cell as a file name stem (`loss5-direct-none`).
    pub fn stem(&self) -> String {
        let c = &self.condition;
        let link2 = c
            .link2_loss_pct
            .map(|l| format!("-link2loss{l}"))
            .unwrap_or_default();
        format!(
            "loss{}{}{link2}-{}-{}",
            c.loss_pct,
            if c.burst { "bursts" } else { "" },
            self.mode.name(),
            self.event.name()
        )
    }
}

/// The settings of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Every cell, in the order they run.
    pub cells: Vec<Cell>,
    /// Each cell's length, seconds.
    pub seconds: u64,
}

/// Which plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// Every condition, both events, 60 s cells.
    Full,
    /// Link 1 at 5% random loss, both events, 20 s cells.
    Quick,
    /// One direct cell of 5 s (a check that the scenario runs).
    Smoke,
}

impl Plan {
    /// The plan of `size`. Modes are `direct`, `wanopt-fec` and
    /// `wanopt-dup` (whose cells add link 2, losing link 1's mean loss).
    pub fn new(size: Size) -> Plan {
        let random = |loss_pct| Condition {
            loss_pct,
            burst: false,
            link2_loss_pct: None,
        };
        let modes = [Mode::Direct, Mode::WanoptFec, Mode::WanoptDup];
        let (conditions, modes, events, seconds): (Vec<Condition>, &[Mode], &[Event], u64) =
            match size {
                Size::Smoke => (
                    vec![random(5.0)],
                    &modes[..1],
                    &[Event::None],
                    SMOKE_SECONDS,
                ),
                Size::Quick => (
                    vec![random(5.0)],
                    &modes,
                    &[Event::None, Event::Link1Down],
                    QUICK_SECONDS,
                ),
                Size::Full => {
                    let mut c: Vec<Condition> = LOSSES.iter().map(|&l| random(l)).collect();
                    c.push(Condition {
                        loss_pct: BURST_MEAN_LOSS_PCT,
                        burst: true,
                        link2_loss_pct: None,
                    });
                    (c, &modes, &[Event::None, Event::Link1Down], FULL_SECONDS)
                }
            };
        let mut cells = Vec::new();
        for &condition in &conditions {
            for &event in events {
                for &mode in modes {
                    let condition = match mode {
                        Mode::WanoptDup => Condition {
                            link2_loss_pct: Some(condition.loss_pct),
                            ..condition
                        },
                        _ => condition,
                    };
                    cells.push(Cell {
                        condition,
                        mode,
                        event,
                    });
                }
            }
        }
        Plan { cells, seconds }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_plan_is_one_condition_in_every_mode_and_event() {
        let plan = Plan::new(Size::Quick);
        assert_eq!(plan.cells.len(), 6);
        assert_eq!(plan.seconds, 20);
        assert!(plan
            .cells
            .iter()
            .all(|c| c.condition.loss_pct == 5.0 && !c.condition.burst));
        let cells: Vec<(Mode, Event)> = plan.cells.iter().map(|c| (c.mode, c.event)).collect();
        assert_eq!(
            cells,
            [
                (Mode::Direct, Event::None),
                (Mode::WanoptFec, Event::None),
                (Mode::WanoptDup, Event::None),
                (Mode::Direct, Event::Link1Down),
                (Mode::WanoptFec, Event::Link1Down),
                (Mode::WanoptDup, Event::Link1Down)
            ]
        );
        // Link 2 only in wanopt-dup, as lossy as link 1.
        assert!(plan
            .cells
            .iter()
            .all(|c| { c.condition.link2_loss_pct == (c.mode == Mode::WanoptDup).then_some(5.0) }));
        // The cut is over before the cell's last third, and shorter than
        // the tunnel's idle timeout.
        assert!(plan.seconds as f64 / 3.0 + CUT.as_secs_f64() <= plan.seconds as f64 * 2.0 / 3.0);
        assert!(CUT < std::time::Duration::from_secs(8));
        let smoke = Plan::new(Size::Smoke);
        assert_eq!(smoke.cells.len(), 1);
        assert_eq!((smoke.cells[0].mode, smoke.seconds), (Mode::Direct, 5));
    }

    #[test]
    fn the_full_plan_has_every_condition_mode_and_event() {
        let plan = Plan::new(Size::Full);
        // (1, 3, 5% random, bursts) x 2 events x 3 modes.
        assert_eq!(plan.cells.len(), 4 * 2 * 3);
        assert_eq!(plan.seconds, 60);
        assert_eq!(plan.cells.iter().filter(|c| c.condition.burst).count(), 6);
        assert_eq!(
            plan.cells
                .iter()
                .filter(|c| c.event == Event::Link1Down)
                .count(),
            12
        );
        assert_eq!(
            plan.cells
                .iter()
                .filter(|c| c.mode == Mode::WanoptDup)
                .count(),
            8
        );
        // Each condition's direct cell runs before its wanopt one, so the
        // added delay can be reported as the rows come.
        assert_eq!(plan.cells[0].mode, Mode::Direct);
        assert_eq!(plan.cells[1].mode, Mode::WanoptFec);
    }

    #[test]
    fn conditions_become_link_options() {
        let c = Condition {
            loss_pct: 5.0,
            burst: false,
            link2_loss_pct: None,
        };
        let specs = c.link().specs().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            specs.down,
            "rtt 40ms rate 20mbit queue 1bdp loss 5% jitter 1ms"
        );
        let burst = Condition {
            loss_pct: BURST_MEAN_LOSS_PCT,
            burst: true,
            ..c
        };
        assert_eq!(c.link2().ok().flatten(), None);
        let two = Condition {
            link2_loss_pct: Some(5.0),
            ..c
        };
        let link2 = two
            .link2()
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("link 2"));
        assert_eq!(
            link2.up,
            "rtt 40ms rate 20mbit queue 1bdp loss 5% jitter 1ms"
        );
        assert_ne!(link2.seed, SEED);
        let specs = burst.link().specs().unwrap_or_else(|e| panic!("{e}"));
        assert!(specs.up.contains("loss-burst 1%,25%") && !specs.up.contains(" loss "));
        let model = wanopt_netem::units::parse_gilbert_elliott(BURST_SPEC)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!((model.mean_loss() * 100.0 - BURST_MEAN_LOSS_PCT).abs() < 0.01);
        assert_eq!(
            Cell {
                condition: burst,
                mode: Mode::WanoptFec,
                event: Event::Link1Down
            }
            .stem(),
            "loss3.85bursts-wanopt-fec-link1-down"
        );
    }
}
