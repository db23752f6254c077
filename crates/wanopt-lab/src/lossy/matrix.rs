//! The scenario's matrix: link conditions, workloads and modes, for a
//! full run and for `--quick`.

use serde::{Deserialize, Serialize};

use crate::link::LinkOptions;

/// The scenario's name.
pub const SCENARIO: &str = "lossy";

/// The bottleneck rate, Mbit/s (each direction).
pub const LINK_MBPS: u64 = 100;
/// Delay jitter of every condition, ms.
pub const JITTER_MS: u64 = 10;
/// Random loss rates of a full run, percent (each direction).
pub const LOSSES: [f64; 5] = [0.5, 1.0, 3.0, 5.0, 10.0];
/// Round-trip times of a full run, ms.
pub const RTTS: [u64; 3] = [50, 150, 300];
/// Gilbert-Elliott bursts: 1.03% good to bad, 33.3% bad to good, every
/// frame lost in the bad state: 3.0% mean loss in bursts of 3 frames on
/// average (1 / 33.3%).
pub const BURST_SPEC: &str = "1.03%,33.3%";
/// The mean loss of [`BURST_SPEC`], percent.
pub const BURST_MEAN_LOSS_PCT: f64 = 3.0;
/// The emulator's seed.
pub const SEED: u64 = 33;

/// How the traffic crosses the WAN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Direct, kernel CUBIC at both ends.
    #[serde(rename = "cubic")]
    Cubic,
    /// Direct, kernel BBR at both ends.
    #[serde(rename = "bbr")]
    Bbr,
    /// Through the wanopt tunnel, FEC off (`--fec off`).
    #[serde(rename = "wanopt")]
    Wanopt,
    /// Through the wanopt tunnel, adaptive FEC (`--fec auto`).
    #[serde(rename = "wanopt-fec")]
    WanoptFec,
}

/// Every mode, in the order the tables show them.
pub const MODES: [Mode; 4] = [Mode::Cubic, Mode::Bbr, Mode::Wanopt, Mode::WanoptFec];

impl Mode {
    /// The mode's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Cubic => "cubic",
            Mode::Bbr => "bbr",
            Mode::Wanopt => "wanopt",
            Mode::WanoptFec => "wanopt-fec",
        }
    }

    /// Whether the traffic goes through the wanopt nodes.
    pub fn tunnel(self) -> bool {
        matches!(self, Mode::Wanopt | Mode::WanoptFec)
    }

    /// The kernel congestion control of the endpoints (direct modes).
    pub fn congestion(self) -> Option<&'static str> {
        match self {
            Mode::Cubic => Some("cubic"),
            Mode::Bbr => Some("bbr"),
            Mode::Wanopt | Mode::WanoptFec => None,
        }
    }

    /// The `--fec` value the nodes get (tunnel modes), when they have it.
    pub fn fec(self) -> Option<&'static str> {
        match self {
            Mode::Wanopt => Some("off"),
            Mode::WanoptFec => Some("auto"),
            Mode::Cubic | Mode::Bbr => None,
        }
    }
}

/// What runs on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Parallel streams for a fixed time, from a fresh start.
    Bulk,
    /// One download of this many bytes, on a fresh and then a warm tunnel.
    Transfer(u64),
    /// 1 KB requests answered by 1 KB responses.
    Rpc,
}

impl Workload {
    /// The workload's name in `results.json`.
    pub fn name(self) -> String {
        match self {
            Workload::Bulk => "bulk".into(),
            Workload::Rpc => "rpc".into(),
            Workload::Transfer(bytes) if bytes >= 1_000_000 => format!("{}MB", bytes / 1_000_000),
            Workload::Transfer(bytes) => format!("{}KB", bytes / 1_000),
        }
    }
}

/// One link condition: RTT and loss, with the scenario's jitter and rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Condition {
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Mean loss each way, percent.
    pub loss_pct: f64,
    /// Gilbert-Elliott bursts rather than random loss.
    pub burst: bool,
}

impl Condition {
    /// The lab's link options for this condition.
    pub fn link(&self) -> LinkOptions {
        let (loss, loss_burst) = if self.burst {
            (None, Some(BURST_SPEC.to_string()))
        } else if self.loss_pct > 0.0 {
            (Some(format!("{}%", self.loss_pct)), None)
        } else {
            (None, None)
        };
        LinkOptions {
            rtt: Some(format!("{}ms", self.rtt_ms)),
            rate: Some(format!("{LINK_MBPS}mbit")),
            jitter: Some(format!("{JITTER_MS}ms")),
            loss,
            loss_burst,
            seed: Some(SEED),
            ..LinkOptions::default()
        }
    }

    /// The condition in a progress line or a table.
    pub fn label(&self) -> String {
        let loss = if self.burst {
            format!("{}% bursts", self.loss_pct)
        } else {
            format!("{}% loss", self.loss_pct)
        };
        format!("rtt {}ms {loss}", self.rtt_ms)
    }

    /// The loss column of a table (`3 (bursts)`).
    pub fn loss_label(&self) -> String {
        if self.burst {
            format!("{} (bursts)", self.loss_pct)
        } else {
            format!("{}", self.loss_pct)
        }
    }
}

/// One cell: a condition and a mode, with the workloads run on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The link.
    pub condition: Condition,
    /// The mode.
    pub mode: Mode,
    /// The workloads, in the order they run.
    pub workloads: Vec<Workload>,
}

/// The settings of a run: the matrix and the workloads' sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Every cell, in the order they run.
    pub cells: Vec<Cell>,
    /// Bulk duration, seconds.
    pub bulk_seconds: u64,
    /// Bulk streams.
    pub bulk_streams: usize,
    /// RPC connections (each sends its requests one after another).
    pub rpc_connections: usize,
    /// RPC requests per connection.
    pub rpc_requests: usize,
    /// Longest an RPC run may take, seconds.
    pub rpc_deadline_seconds: u64,
    /// Longest a transfer may take, seconds (then it counts as not done).
    pub transfer_deadline_seconds: u64,
}

/// Size of an RPC request and of its response, bytes.
pub const RPC_BYTES: u64 = 1_000;

impl Plan {
    /// The full matrix, or the `--quick` subset: RTT 150 ms, loss 1% and
    /// 5%, bulk and 1 MB transfers and fewer RPC samples; both with a
    /// loss-free bulk cell per RTT and mode (the goodput reference).
    pub fn new(quick: bool) -> Plan {
        // RPC: 200 samples (a p99 is their second highest) over 8
        // connections, 25 exchanges each, so a run at 300 ms takes ~8 s.
        type Matrix<'a> = (&'a [u64], &'a [f64], &'a [u64], usize);
        let (rtts, losses, transfers, rpc_connections): Matrix = if quick {
            (&[150], &[1.0, 5.0], &[1_000_000], 4)
        } else {
            (&RTTS, &LOSSES, &[100_000, 1_000_000, 10_000_000], 8)
        };
        let mut cells = Vec::new();
        let mut lossy = vec![Workload::Bulk];
        lossy.extend(transfers.iter().map(|b| Workload::Transfer(*b)));
        lossy.push(Workload::Rpc);
        for &rtt_ms in rtts {
            let mut conditions = vec![Condition {
                rtt_ms,
                loss_pct: 0.0,
                burst: false,
            }];
            conditions.extend(losses.iter().map(|&loss_pct| Condition {
                rtt_ms,
                loss_pct,
                burst: false,
            }));
            if !quick {
                conditions.push(Condition {
                    rtt_ms,
                    loss_pct: BURST_MEAN_LOSS_PCT,
                    burst: true,
                });
            }
            for condition in conditions {
                for mode in MODES {
                    let workloads = if condition.loss_pct == 0.0 {
                        vec![Workload::Bulk]
                    } else {
                        lossy.clone()
                    };
                    cells.push(Cell {
                        condition,
                        mode,
                        workloads,
                    });
                }
            }
        }
        Plan {
            cells,
            bulk_seconds: 10,
            bulk_streams: 4,
            rpc_connections,
            rpc_requests: 25,
            rpc_deadline_seconds: 30,
            transfer_deadline_seconds: 10,
        }
    }

    /// Progress steps: one per measurement (a transfer counts twice,
    /// fresh and warm).
    pub fn steps(&self) -> u64 {
        self.cells
            .iter()
            .flat_map(|c| &c.workloads)
            .map(|w| match w {
                Workload::Transfer(_) => 2,
                _ => 1,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_matrix_has_every_condition_mode_and_workload() {
        let plan = Plan::new(false);
        // 3 RTTs x (loss-free, 5 random, bursts) x 4 modes.
        assert_eq!(plan.cells.len(), 3 * 7 * 4);
        let lossy: Vec<&Cell> = plan
            .cells
            .iter()
            .filter(|c| c.condition.loss_pct > 0.0)
            .collect();
        assert_eq!(lossy.len(), 3 * 6 * 4);
        let names: Vec<String> = lossy[0].workloads.iter().map(|w| w.name()).collect();
        assert_eq!(names, ["bulk", "100KB", "1MB", "10MB", "rpc"]);
        let free: Vec<&Cell> = plan
            .cells
            .iter()
            .filter(|c| c.condition.loss_pct == 0.0)
            .collect();
        assert_eq!(free.len(), 3 * 4);
        assert!(free.iter().all(|c| c.workloads == [Workload::Bulk]));
        let bursts: Vec<&Cell> = plan.cells.iter().filter(|c| c.condition.burst).collect();
        assert_eq!(bursts.len(), 3 * 4);
        assert!(bursts.iter().all(|c| c.condition.loss_pct == 3.0));
        for mode in MODES {
            assert_eq!(plan.cells.iter().filter(|c| c.mode == mode).count(), 21);
        }
        // bulk + 3 transfers x 2 + rpc per lossy cell, bulk per loss-free one.
        assert_eq!(plan.steps(), 72 * 8 + 12);
        assert_eq!(plan.rpc_connections * plan.rpc_requests, 200);
    }

    #[test]
    fn the_quick_subset_is_rtt_150_loss_1_and_5_every_mode() {
        let plan = Plan::new(true);
        assert!(plan.cells.iter().all(|c| c.condition.rtt_ms == 150));
        let losses: Vec<f64> = plan.cells.iter().map(|c| c.condition.loss_pct).collect();
        assert_eq!(
            losses,
            [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0]
        );
        let modes: Vec<Mode> = plan.cells[4..8].iter().map(|c| c.mode).collect();
        assert_eq!(modes, MODES);
        let names: Vec<String> = plan.cells[4].workloads.iter().map(|w| w.name()).collect();
        assert_eq!(names, ["bulk", "1MB", "rpc"]);
        assert_eq!(plan.bulk_seconds, 10);
        assert!(plan.rpc_connections * plan.rpc_requests >= 100);
        assert_eq!(plan.steps(), 8 * 4 + 4);
    }

    #[test]
    fn conditions_become_link_options() {
        let random = Condition {
            rtt_ms: 150,
            loss_pct: 0.5,
            burst: false,
        };
        let specs = random.link().specs().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(specs.down, "rtt 150ms rate 100mbit loss 0.5% jitter 10ms");
        let burst = Condition {
            burst: true,
            loss_pct: BURST_MEAN_LOSS_PCT,
            ..random
        };
        let specs = burst.link().specs().unwrap_or_else(|e| panic!("{e}"));
        assert!(specs.up.contains("loss-burst 1.03%,33.3%"), "{specs:?}");
        assert!(!specs.up.contains(" loss "), "{specs:?}");
        let model = wanopt_netem::units::parse_gilbert_elliott(BURST_SPEC)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!((model.mean_loss() * 100.0 - BURST_MEAN_LOSS_PCT).abs() < 0.05);
        assert!((1.0 / model.bad_to_good.value() - 3.0).abs() < 0.01);
        let free = Condition {
            loss_pct: 0.0,
            ..random
        };
        assert!(!free
            .link()
            .specs()
            .map(|s| s.up)
            .unwrap_or_default()
            .contains("loss"));
    }
}
