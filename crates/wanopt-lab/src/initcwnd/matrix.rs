//! What the `initcwnd` scenario measures: paths, file sizes and modes, for
//! a full run and for `--quick`, and the post's own figures.

use serde::{Deserialize, Serialize};

use crate::link::LinkOptions;
use crate::profile::{Profile, LINUX};

/// The scenario's name.
pub const SCENARIO: &str = "initcwnd";

/// The emulator's seed.
pub const SEED: u64 = 2;

/// A path the files cross.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Path {
    /// Its name in `results.json` and the report.
    pub name: &'static str,
    /// The bottleneck rate, Mbit/s (each direction).
    pub rate_mbps: f64,
    /// Round-trip time, ms.
    pub rtt_ms: u64,
    /// Random loss each way, percent.
    pub loss_pct: f64,
}

impl Path {
    /// The lab's link for this path: a queue of one bandwidth-delay product.
    pub fn link(&self) -> LinkOptions {
        LinkOptions {
            rtt: Some(format!("{}ms", self.rtt_ms)),
            rate: Some(format!("{}kbit", (self.rate_mbps * 1000.0).round() as u64)),
            queue: Some("1bdp".into()),
            loss: (self.loss_pct > 0.0).then(|| format!("{}%", self.loss_pct)),
            seed: Some(SEED),
            ..LinkOptions::default()
        }
    }

    /// `20 Mbit/s, 200 ms, 1% loss`.
    pub fn label(&self) -> String {
        let loss = if self.loss_pct > 0.0 {
            format!(", {}% loss", self.loss_pct)
        } else {
            String::new()
        };
        format!("{} Mbit/s, {} ms{loss}", self.rate_mbps, self.rtt_ms)
    }

    /// The floor of a transfer of `bytes`: one round trip plus the file at
    /// the link's rate, seconds.
    pub fn floor_s(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / (self.rate_mbps * 1e6) + self.rtt_ms as f64 / 1e3
    }
}

/// Long paths at 20 Mbit/s, the rate of a branch's WAN link.
pub const RTT100: Path = Path {
    name: "rtt100",
    rate_mbps: 20.0,
    rtt_ms: 100,
    loss_pct: 0.0,
};
/// 200 ms, about Singapore to London.
pub const RTT200: Path = Path {
    name: "rtt200",
    rate_mbps: 20.0,
    rtt_ms: 200,
    loss_pct: 0.0,
};
/// 300 ms.
pub const RTT300: Path = Path {
    name: "rtt300",
    rate_mbps: 20.0,
    rtt_ms: 300,
    loss_pct: 0.0,
};
/// 200 ms with 1% loss each way.
pub const RTT200_LOSS1: Path = Path {
    name: "rtt200-loss1",
    rate_mbps: 20.0,
    rtt_ms: 200,
    loss_pct: 1.0,
};
/// The post's own path, fitted to its figures (it gives neither rate nor
/// RTT): at 1 Mbit/s and 250 ms a 180 KB file's floor is 1.7 s, near its
/// 2.5 s with an initial window of 10, and 1% loss each way stands for
/// whatever made the window of 2 take 11.7 s.
pub const POST: Path = Path {
    name: "post",
    rate_mbps: 1.0,
    rtt_ms: 250,
    loss_pct: 1.0,
};

/// The size of the post's file (IIS 7.5's `welcome.png`).
pub const POST_FILE: u64 = 180_000;

/// The post's figures: its 180 KB file with an initial window of 2 and 10.
pub const REFERENCE: [(Mode, f64); 2] = [(Mode::Icw2, 11.7), (Mode::Icw10, 2.5)];

/// How the file crosses the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// Direct, the server's initial window 2 segments.
    #[serde(rename = "icw2")]
    Icw2,
    /// Direct, initial window 4 (RFC 3390's, for 1460-byte segments).
    #[serde(rename = "icw4")]
    Icw4,
    /// Direct, initial window 10 (RFC 6928's, Linux's default).
    #[serde(rename = "icw10")]
    Icw10,
    /// Through a wanopt tunnel that carries its first flow.
    #[serde(rename = "wanopt-fresh")]
    WanoptFresh,
    /// Through a wanopt tunnel that has just carried 1 MB.
    #[serde(rename = "wanopt-warm")]
    WanoptWarm,
}

/// Every mode, in the order the tables show them.
pub const MODES: [Mode; 5] = [
    Mode::Icw2,
    Mode::Icw4,
    Mode::Icw10,
    Mode::WanoptFresh,
    Mode::WanoptWarm,
];

/// The endpoints with an initial window of 2 segments.
static ICW2: Profile = Profile {
    name: "linux-icw2",
    description: "this kernel's defaults, initial window 2 segments",
    initcwnd: Some(2),
    ..LINUX
};
/// The endpoints with an initial window of 4 segments.
static ICW4: Profile = Profile {
    name: "linux-icw4",
    description: "this kernel's defaults, initial window 4 segments",
    initcwnd: Some(4),
    ..LINUX
};
/// The endpoints with an initial window of 10 segments, set explicitly.
static ICW10: Profile = Profile {
    name: "linux-icw10",
    description: "this kernel's defaults, initial window 10 segments",
    initcwnd: Some(10),
    ..LINUX
};

impl Mode {
    /// The mode's name in `results.json`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Icw2 => "icw2",
            Mode::Icw4 => "icw4",
            Mode::Icw10 => "icw10",
            Mode::WanoptFresh => "wanopt-fresh",
            Mode::WanoptWarm => "wanopt-warm",
        }
    }

    /// Whether the file goes through the wanopt nodes.
    pub fn tunnel(self) -> bool {
        matches!(self, Mode::WanoptFresh | Mode::WanoptWarm)
    }

    /// The server's initial window, segments (direct modes).
    pub fn initcwnd(self) -> Option<u32> {
        self.profile().initcwnd.filter(|_| !self.tunnel())
    }

    /// The endpoints' profile: through the tunnel, the kernel's defaults
    /// (the endpoints' windows only cross a LAN).
    pub fn profile(self) -> &'static Profile {
        match self {
            Mode::Icw2 => &ICW2,
            Mode::Icw4 => &ICW4,
            Mode::Icw10 => &ICW10,
            Mode::WanoptFresh | Mode::WanoptWarm => &LINUX,
        }
    }

    /// The post's figure for a file of `bytes` over `path`, seconds.
    pub fn reference_s(self, path: &Path, bytes: u64) -> Option<f64> {
        REFERENCE
            .iter()
            .find(|(mode, _)| *mode == self)
            .filter(|_| path.name == POST.name && bytes == POST_FILE)
            .map(|(_, seconds)| *seconds)
    }
}

/// `50KB`, `180KB`, `1MB`.
pub fn size_name(bytes: u64) -> String {
    if bytes >= 1_000_000 && bytes.is_multiple_of(1_000_000) {
        format!("{}MB", bytes / 1_000_000)
    } else {
        format!("{}KB", bytes / 1000)
    }
}

/// A path and the files that cross it.
#[derive(Debug, Clone, PartialEq)]
pub struct Leg {
    /// The path.
    pub path: Path,
    /// File sizes, bytes.
    pub sizes: Vec<u64>,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The paths and their files, in order.
    pub legs: Vec<Leg>,
    /// Transfers per path, size and mode (the median is reported).
    pub runs: usize,
    /// A transfer not done by then counts as unfinished, seconds.
    pub deadline_seconds: u64,
}

impl Plan {
    /// The full run (three runs of each transfer unless `runs`) or the
    /// quick one (the post's file over 200 ms, clean and lossy, once).
    pub fn new(quick: bool, runs: Option<usize>) -> Plan {
        let all = vec![50_000, POST_FILE, 1_000_000, 5_000_000];
        let legs = if quick {
            vec![
                Leg {
                    path: RTT200,
                    sizes: vec![POST_FILE],
                },
                Leg {
                    path: RTT200_LOSS1,
                    sizes: vec![POST_FILE],
                },
            ]
        } else {
            let mut legs: Vec<Leg> = [RTT100, RTT200, RTT300, RTT200_LOSS1]
                .into_iter()
                .map(|path| Leg {
                    path,
                    sizes: all.clone(),
                })
                .collect();
            // 5 MB at 1 Mbit/s is 40 s a run: the post's path stops at 1 MB.
            legs.push(Leg {
                path: POST,
                sizes: vec![50_000, POST_FILE, 1_000_000],
            });
            legs
        };
        Plan {
            legs,
            runs: runs.unwrap_or(if quick { 1 } else { 3 }),
            deadline_seconds: 60,
        }
    }

    /// Measured transfers in all (the progress bar's steps).
    pub fn steps(&self) -> u64 {
        let sizes: usize = self.legs.iter().map(|leg| leg.sizes.len()).sum();
        (sizes * MODES.len() * self.runs) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_sizes_and_the_posts_figures() {
        // The floor the scenario's goal is measured against: 180 KB at
        // 20 Mbit/s is 72 ms, plus the round trip.
        assert!((RTT200.floor_s(POST_FILE) - 0.272).abs() < 1e-9);
        assert!((POST.floor_s(POST_FILE) - 1.69).abs() < 1e-9);
        assert_eq!(size_name(50_000), "50KB");
        assert_eq!(size_name(5_000_000), "5MB");
        assert_eq!(Mode::Icw2.reference_s(&POST, POST_FILE), Some(11.7));
        assert_eq!(Mode::Icw10.reference_s(&POST, POST_FILE), Some(2.5));
        assert_eq!(Mode::Icw4.reference_s(&POST, POST_FILE), None);
        assert_eq!(Mode::Icw2.reference_s(&RTT200, POST_FILE), None);
        assert_eq!(Mode::Icw4.initcwnd(), Some(4));
        assert_eq!(Mode::WanoptWarm.initcwnd(), None);
        assert_eq!(RTT200_LOSS1.link().loss.as_deref(), Some("1%"));
        assert_eq!(POST.link().rate.as_deref(), Some("1000kbit"));
    }

    #[test]
    fn the_quick_form_is_small_and_runs_can_be_chosen() {
        let quick = Plan::new(true, None);
        assert_eq!(quick.steps(), 2 * 5);
        let full = Plan::new(false, Some(5));
        assert_eq!(full.steps(), (4 * 4 + 3) * 5 * 5);
        assert!(full.legs.iter().all(|leg| leg.sizes.contains(&POST_FILE)));
    }
}
