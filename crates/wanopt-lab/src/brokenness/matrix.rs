//! The `path-brokenness` scenario's sweeps: links, middlebox policies,
//! endpoints and modes, for a full run and for `--quick`, and the paper's
//! figures.

use serde::{Deserialize, Serialize};

use crate::link::LinkOptions;
use crate::profile::{Profile, LINUX};

/// The scenario's name.
pub const SCENARIO: &str = "path-brokenness";

/// The emulator's seed.
pub const SEED: u64 = 3;

/// Which of the paper's experiments a measurement belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Experiment {
    /// Goodput against loss, with SACK, without, and with SACK broken.
    Sack,
    /// The smallest window-scale shift that fills a rate, against the RTT.
    Wscale,
    /// ECN policies on a marking queue.
    Ecn,
}

impl Experiment {
    /// The experiment's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Sack => "sack",
            Experiment::Wscale => "wscale",
            Experiment::Ecn => "ecn",
        }
    }
}

/// How the download crosses the path: kernel TCP with one congestion
/// control at both ends, or through wanopt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Direct, Reno.
    Reno,
    /// Direct, CUBIC.
    Cubic,
    /// Direct, H-TCP (where the kernel has it).
    Htcp,
    /// Direct, BBR.
    Bbr,
    /// Through the wanopt edge and core (their own BBR over QUIC), the
    /// endpoints the kernel's defaults.
    Wanopt,
}

static RENO: Profile = Profile {
    name: "linux-reno",
    description: "this kernel's defaults with Reno",
    congestion_control: Some("reno"),
    ..LINUX
};
static CUBIC: Profile = Profile {
    name: "linux-cubic",
    description: "this kernel's defaults with CUBIC",
    congestion_control: Some("cubic"),
    ..LINUX
};
static HTCP: Profile = Profile {
    name: "linux-htcp",
    description: "this kernel's defaults with H-TCP",
    congestion_control: Some("htcp"),
    ..LINUX
};
static BBR: Profile = Profile {
    name: "linux-bbr",
    description: "this kernel's defaults with BBR",
    congestion_control: Some("bbr"),
    ..LINUX
};
/// The ECN experiment's endpoints: CUBIC (it answers ECN marks; BBR as
/// this kernel has it does not), ECN requested and accepted.
static CUBIC_ECN: Profile = Profile {
    name: "linux-cubic-ecn",
    description: "this kernel's defaults with CUBIC, ECN requested",
    congestion_control: Some("cubic"),
    ecn: Some(1),
    ..LINUX
};
static LINUX_ECN: Profile = Profile {
    name: "linux-ecn",
    description: "this kernel's defaults, ECN requested",
    ecn: Some(1),
    ..LINUX
};

impl Mode {
    /// The mode's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Reno => "reno",
            Mode::Cubic => "cubic",
            Mode::Htcp => "htcp",
            Mode::Bbr => "bbr",
            Mode::Wanopt => "wanopt",
        }
    }

    /// Whether the download goes through the wanopt nodes.
    pub fn tunnel(self) -> bool {
        self == Mode::Wanopt
    }

    /// The kernel congestion control (direct modes).
    pub fn congestion(self) -> Option<&'static str> {
        self.profile(false).congestion_control
    }

    /// The endpoints' profile, with ECN requested for the ECN experiment.
    pub fn profile(self, ecn: bool) -> &'static Profile {
        match (self, ecn) {
            (Mode::Reno, _) => &RENO,
            (Mode::Cubic, false) => &CUBIC,
            (Mode::Cubic, true) => &CUBIC_ECN,
            (Mode::Htcp, _) => &HTCP,
            (Mode::Bbr, _) => &BBR,
            (Mode::Wanopt, false) => &LINUX,
            (Mode::Wanopt, true) => &LINUX_ECN,
        }
    }
}

/// A middlebox policy: its name here, the paper's, and the lab's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Its name in `results.json`.
    pub name: &'static str,
    /// What the paper calls it.
    pub paper: &'static str,
    /// `lab up --middlebox` rules (`""`: none).
    pub rules: &'static str,
}

/// The SACK experiment's policies.
pub const SACK_POLICIES: [Policy; 3] = [
    Policy {
        name: "sack",
        paper: "loss with SACK",
        rules: "",
    },
    Policy {
        name: "no-sack",
        paper: "tcp.opt.sackok.removed",
        rules: "strip-sack-permitted",
    },
    Policy {
        name: "broken-sack",
        paper: "tcp.seqnum.changed",
        rules: "randomize-seq-broken-sack",
    },
];

/// The ECN experiment's policies.
pub const ECN_POLICIES: [Policy; 7] = [
    Policy {
        name: "ecn",
        paper: "ECN on the marking queue",
        rules: "",
    },
    Policy {
        name: "ecn-blocked",
        paper: "tcp.ecn.blocked",
        rules: "block-ecn-setup",
    },
    Policy {
        name: "ecn-flags-cleared",
        paper: "tcp.ecn.changed",
        rules: "bleach-tcp-ecn",
    },
    Policy {
        name: "ip-ecn-11",
        paper: "ip.ecn.changed.11",
        rules: "rewrite-ecn ce",
    },
    Policy {
        name: "ce-on-ect",
        paper: "fallback-proof ip.ecn.changed.11",
        rules: "set-ce",
    },
    Policy {
        name: "ip-ecn-00",
        paper: "ip.ecn.changed.00 (ECN bleached)",
        rules: "bleach-ip-ecn",
    },
    Policy {
        name: "ce-cleared",
        paper: "CE cleared behind the queue",
        rules: "after-queue clear-ce",
    },
];

/// A link of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// The bottleneck rate, Mbit/s.
    pub rate_mbps: u64,
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Random loss each way, percent.
    pub loss_pct: f64,
    /// A RED queue that marks ECN-capable packets (drops the others).
    pub red: bool,
}

impl Link {
    /// The lab's link, a queue of one bandwidth-delay product (at least
    /// 100 packets) with the policy's `rules` in front.
    pub fn options(&self, rules: &str) -> LinkOptions {
        let bdp_packets = self.rate_mbps * 1_000_000 / 8 * self.rtt_ms / 1000 / 1500;
        LinkOptions {
            rtt: Some(format!("{}ms", self.rtt_ms)),
            rate: Some(format!("{}mbit", self.rate_mbps)),
            queue: Some(if bdp_packets >= 100 {
                "1bdp".into()
            } else {
                "100p".into()
            }),
            loss: (self.loss_pct > 0.0).then(|| format!("{}%", self.loss_pct)),
            ecn: self.red.then(|| "red".into()),
            middlebox: (!rules.is_empty()).then(|| rules.into()),
            seed: Some(SEED),
            ..LinkOptions::default()
        }
    }
}

/// One measurement: a download of `seconds` over `link` behind `rules`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The experiment.
    pub experiment: Experiment,
    /// The link.
    pub link: Link,
    /// The middlebox policy.
    pub policy: Policy,
    /// The window-scale shift written into both SYNs (`wscale`).
    pub wscale: Option<u8>,
    /// How the download crosses.
    pub mode: Mode,
    /// How long the download runs, seconds.
    pub seconds: u64,
}

impl Cell {
    /// The middlebox rules: the policy's, and `wscale N`.
    pub fn rules(&self) -> String {
        match self.wscale {
            Some(shift) => format!("wscale {shift}"),
            None => self.policy.rules.to_string(),
        }
    }

    /// The cell in a progress line.
    pub fn label(&self) -> String {
        let what = match self.wscale {
            Some(shift) => format!("wscale {shift}"),
            None => self.policy.name.to_string(),
        };
        format!(
            "{} {} Mbit/s {} ms {}% {what} {}",
            self.experiment.name(),
            self.link.rate_mbps,
            self.link.rtt_ms,
            self.link.loss_pct,
            self.mode.name()
        )
    }
}

/// The window a rate needs at an RTT, in bytes (the bandwidth-delay
/// product), and the smallest shift that lets a 16-bit window field carry
/// it: `ceil(log2(window / 65535))`, at least 0, at most 14.
pub fn needed_wscale(rate_mbps: u64, rtt_ms: u64) -> u8 {
    let window = rate_mbps as f64 * 1e6 / 8.0 * rtt_ms as f64 / 1e3;
    let ratio = window / 65_535.0;
    if ratio <= 1.0 {
        0
    } else {
        (ratio.log2().ceil() as u8).min(14)
    }
}

/// The paper's smallest shifts (Fig. 5): per rate, up to 400 ms and
/// beyond.
pub fn paper_wscale(rate_mbps: u64, rtt_ms: u64) -> Option<u8> {
    let high = rtt_ms > 400;
    match rate_mbps {
        100 => Some(if high { 8 } else { 6 }),
        1000 => Some(if high { 11 } else { 8 }),
        10_000 => Some(if high { 13 } else { 11 }),
        _ => None,
    }
}

/// One window-scale sweep: a rate, an RTT and a congestion control, whose
/// shifts are measured around [`needed_wscale`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WscaleSweep {
    /// The link.
    pub link: Link,
    /// The endpoints.
    pub mode: Mode,
    /// Download length, seconds.
    pub seconds: u64,
}

/// A download reaching this share of the link's rate fills it.
pub const FILLS: f64 = 0.9;

/// The rate the window-scale experiment computes instead of measuring.
pub const COMPUTED_RATE_MBPS: u64 = 10_000;

/// What a run covers.
struct Scope {
    /// Download length of the SACK and ECN cells, seconds.
    seconds: u64,
    /// The SACK experiment's loss rates, percent.
    losses: &'static [f64],
    /// The SACK experiment's modes.
    sack_modes: &'static [Mode],
    /// The window-scale experiment's RTTs, ms.
    rtts: &'static [u64],
    /// The window-scale experiment's rates, Mbit/s.
    rates: &'static [u64],
    /// The window-scale experiment's congestion controls.
    ccs: &'static [Mode],
    /// The ECN experiment's policies.
    ecn_policies: &'static [Policy],
}

/// `--quick`: a cell or two of each experiment.
const QUICK: Scope = Scope {
    seconds: 4,
    losses: &[1.0],
    sack_modes: &[Mode::Cubic, Mode::Wanopt],
    rtts: &[100],
    rates: &[100],
    ccs: &[Mode::Bbr],
    ecn_policies: &[ECN_POLICIES[0], ECN_POLICIES[1], ECN_POLICIES[4]],
};

/// A full run.
const FULL: Scope = Scope {
    seconds: 10,
    losses: &[0.0, 0.01, 0.1, 1.0, 3.0],
    sack_modes: &[Mode::Cubic, Mode::Bbr, Mode::Wanopt],
    rtts: &[50, 200, 800],
    rates: &[100, 1000],
    ccs: &[Mode::Reno, Mode::Cubic, Mode::Htcp, Mode::Bbr],
    ecn_policies: &ECN_POLICIES,
};

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The SACK and ECN cells, in order.
    pub cells: Vec<Cell>,
    /// The window-scale sweeps (each two or three downloads).
    pub sweeps: Vec<WscaleSweep>,
    /// Through wanopt, the harshest shift (`wscale 0`) on each
    /// window-scale link.
    pub wscale_tunnel: Vec<Cell>,
    /// RTTs of the window-scale experiment (and of its computed rows), ms.
    pub wscale_rtts: Vec<u64>,
}

impl Plan {
    /// The full run or `--quick` (a cell or two of each experiment).
    pub fn new(quick: bool) -> Plan {
        let Scope {
            seconds,
            losses,
            sack_modes,
            rtts,
            rates,
            ccs,
            ecn_policies,
        } = if quick { QUICK } else { FULL };
        let mut cells = Vec::new();
        for &loss_pct in losses {
            for policy in SACK_POLICIES {
                for &mode in sack_modes {
                    cells.push(Cell {
                        experiment: Experiment::Sack,
                        link: Link {
                            rate_mbps: 200,
                            rtt_ms: 50,
                            loss_pct,
                            red: false,
                        },
                        policy,
                        wscale: None,
                        mode,
                        seconds,
                    });
                }
            }
        }
        for &policy in ecn_policies {
            for mode in [Mode::Cubic, Mode::Wanopt] {
                cells.push(Cell {
                    experiment: Experiment::Ecn,
                    link: Link {
                        rate_mbps: 100,
                        rtt_ms: 50,
                        loss_pct: 0.0,
                        red: true,
                    },
                    policy,
                    wscale: None,
                    mode,
                    seconds,
                });
            }
        }
        let mut sweeps = Vec::new();
        let mut wscale_tunnel = Vec::new();
        for &rate_mbps in rates {
            for &rtt_ms in rtts {
                let link = Link {
                    rate_mbps,
                    rtt_ms,
                    loss_pct: 0.0,
                    red: false,
                };
                // Slow start to the rate takes about a dozen round trips
                // (and the receiver's window grows with it); the rate is
                // read over the second half, which a quick run starts 30
                // round trips in at 100 ms so that a loaded machine's slower
                // start does not read as a window that cannot fill.
                let seconds = (if quick { 6 } else { 10 }).max(rtt_ms * 25 / 1000);
                for &mode in ccs {
                    sweeps.push(WscaleSweep {
                        link,
                        mode,
                        seconds,
                    });
                }
                wscale_tunnel.push(Cell {
                    experiment: Experiment::Wscale,
                    link,
                    policy: Policy {
                        name: "wscale",
                        paper: "tcp.opt.ws.changed",
                        rules: "",
                    },
                    wscale: Some(0),
                    mode: Mode::Wanopt,
                    seconds,
                });
            }
        }
        Plan {
            cells,
            sweeps,
            wscale_tunnel,
            wscale_rtts: rtts.to_vec(),
        }
    }

    /// Downloads in all, four per window-scale sweep (the progress bar's
    /// steps).
    pub fn steps(&self) -> u64 {
        (self.cells.len() + 4 * self.sweeps.len() + self.wscale_tunnel.len()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_arithmetic_gives_the_papers_shape() {
        // 100 Mbit/s x 100 ms = 1.25 MB = 19 x 64 KB: a shift of 5.
        assert_eq!(needed_wscale(100, 100), 5);
        assert_eq!(needed_wscale(100, 800), 8);
        assert_eq!(needed_wscale(1000, 800), 11);
        assert_eq!(needed_wscale(10_000, 800), 14);
        assert_eq!(needed_wscale(100, 1), 0);
        assert_eq!(paper_wscale(1000, 800), Some(11));
        assert_eq!(paper_wscale(100, 200), Some(6));
        assert_eq!(paper_wscale(20, 200), None);
    }

    #[test]
    fn plans_and_links() {
        let quick = Plan::new(true);
        assert_eq!(quick.cells.len(), 3 * 2 + 3 * 2);
        assert_eq!(quick.sweeps.len(), 1);
        assert!(quick.steps() <= 20);
        let full = Plan::new(false);
        assert_eq!(full.sweeps.len(), 2 * 3 * 4);
        let link = Link {
            rate_mbps: 100,
            rtt_ms: 50,
            loss_pct: 0.0,
            red: true,
        };
        let options = link.options("set-ce");
        assert_eq!(options.queue.as_deref(), Some("1bdp"));
        let short = Link { rtt_ms: 5, ..link }.options("");
        assert_eq!(
            (short.queue.as_deref(), short.middlebox),
            (Some("100p"), None)
        );
        assert_eq!(options.ecn.as_deref(), Some("red"));
        assert_eq!(options.middlebox.as_deref(), Some("set-ce"));
        assert!(options.specs().is_ok());
        assert_eq!(Mode::Htcp.congestion(), Some("htcp"));
        assert_eq!(Mode::Wanopt.profile(true).ecn, Some(1));
    }
}
