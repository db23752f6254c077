//! Bounds on the flows a node carries, in all and per LAN source address,
//! so that one host (a busy client, a scanner, a misbehaving application)
//! cannot take every file descriptor the node has and stop everyone else's
//! flows. A flow beyond a bound is refused at once (a TCP reset on the
//! edge, an `unavailable` reply from the core), counted, and logged at
//! most once per [`LOG_EVERY`] with how many were refused since.
//!
//! UDP flows (one per client address and port, kept until idle) count
//! against the same bounds and, besides, may take at most half of each
//! ([`FlowLimits::admit_udp`]): a host spraying datagrams from fresh
//! ports never takes every place from TCP flows.
//!
//! Sans-IO: [`FlowLimits::admit`] takes the time; a [`FlowPermit`] gives
//! its place back when dropped.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// File descriptors kept for the node itself (its sockets, cache files,
/// the control API) when the default bound is derived from the limit.
pub const RESERVED_DESCRIPTORS: u64 = 512;

/// At most one log line about refused flows per this long.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// The bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowLimitsConfig {
    /// Flows at once, in all.
    pub max_flows: usize,
    /// Flows at once from one source address.
    pub max_flows_per_source: usize,
}

impl FlowLimitsConfig {
    /// Defaults for a process that may hold `descriptors` file
    /// descriptors: one per flow on each side of the tunnel (a
    /// pass-through flow holds two), less [`RESERVED_DESCRIPTORS`]; a
    /// source may hold half of that.
    pub fn for_descriptors(descriptors: u64) -> FlowLimitsConfig {
        let max_flows = descriptors.saturating_sub(RESERVED_DESCRIPTORS).max(64) as usize;
        FlowLimitsConfig {
            max_flows,
            max_flows_per_source: (max_flows / 2).max(1),
        }
    }

    /// The bounds of UDP flows within these (in all, per source): half of
    /// each.
    pub fn udp(self) -> (usize, usize) {
        (
            (self.max_flows / 2).max(1),
            (self.max_flows_per_source / 2).max(1),
        )
    }

    /// Defaults for this process (its `RLIMIT_NOFILE` soft limit).
    pub fn for_this_process() -> FlowLimitsConfig {
        let descriptors =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
                .map(|(soft, _)| soft)
                .unwrap_or(1024);
        FlowLimitsConfig::for_descriptors(descriptors)
    }
}

/// Which bound a refused flow hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// The node carries its maximum of flows.
    Total(usize),
    /// The source has its maximum of flows.
    Source(IpAddr, usize),
    /// The node carries its maximum of UDP flows (half of all).
    Udp(usize),
    /// The source has its maximum of UDP flows (half of its share).
    UdpSource(IpAddr, usize),
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitHit::Total(max) => write!(f, "the node carries {max} flows (--max-flows)"),
            LimitHit::Source(ip, max) => {
                write!(f, "{ip} has {max} flows (--max-flows-per-source)")
            }
            LimitHit::Udp(max) => {
                write!(f, "the node carries {max} udp flows (half of --max-flows)")
            }
            LimitHit::UdpSource(ip, max) => {
                write!(
                    f,
                    "{ip} has {max} udp flows (half of --max-flows-per-source)"
                )
            }
        }
    }
}

/// A flow refused by a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The bound.
    pub hit: LimitHit,
    /// When a log line is due: flows refused since the last one (this one
    /// included).
    pub log: Option<u64>,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_source: HashMap<IpAddr, usize>,
    udp_total: usize,
    udp_per_source: HashMap<IpAddr, usize>,
    refused: u64,
    unlogged: u64,
    logged_at: Option<Instant>,
}

/// The flows a node carries, counted against its bounds.
#[derive(Debug)]
pub struct FlowLimits {
    config: FlowLimitsConfig,
    counts: Mutex<Counts>,
}

/// A flow's place within the bounds, given back when dropped.
#[derive(Debug)]
pub struct FlowPermit {
    limits: Arc<FlowLimits>,
    source: IpAddr,
    udp: bool,
}

impl FlowLimits {
    /// Bounds of `config`, nothing admitted yet.
    pub fn new(config: FlowLimitsConfig) -> Arc<FlowLimits> {
        Arc::new(FlowLimits {
            config,
            counts: Mutex::new(Counts::default()),
        })
    }

    /// The bounds.
    pub fn config(&self) -> FlowLimitsConfig {
        self.config
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for a new flow from `source` at `now`, or why not.
    pub fn admit(self: &Arc<Self>, source: IpAddr, now: Instant) -> Result<FlowPermit, Refusal> {
        self.admit_as(source, now, false)
    }

    /// A place for a new UDP flow from `source` at `now`, or why not:
    /// within the bounds of every flow, and within half of each.
    pub fn admit_udp(
        self: &Arc<Self>,
        source: IpAddr,
        now: Instant,
    ) -> Result<FlowPermit, Refusal> {
        self.admit_as(source, now, true)
    }

    fn admit_as(
        self: &Arc<Self>,
        source: IpAddr,
        now: Instant,
        udp: bool,
    ) -> Result<FlowPermit, Refusal> {
        let mut counts = self.counts();
        let from_source = counts.per_source.get(&source).copied().unwrap_or(0);
        let (udp_max, udp_per_source) = self.config.udp();
        let hit = if counts.total >= self.config.max_flows {
            Some(LimitHit::Total(self.config.max_flows))
        } else if from_source >= self.config.max_flows_per_source {
            Some(LimitHit::Source(source, self.config.max_flows_per_source))
        } else if udp && counts.udp_total >= udp_max {
            Some(LimitHit::Udp(udp_max))
        } else if udp && counts.udp_per_source.get(&source).copied().unwrap_or(0) >= udp_per_source
        {
            Some(LimitHit::UdpSource(source, udp_per_source))
        } else {
            None
        };
        if let Some(hit) = hit {
            counts.refused += 1;
            counts.unlogged += 1;
            let due = counts
                .logged_at
                .is_none_or(|at| now.saturating_duration_since(at) >= LOG_EVERY);
            let log = due.then(|| {
                counts.logged_at = Some(now);
                std::mem::take(&mut counts.unlogged)
            });
            return Err(Refusal { hit, log });
        }
        counts.total += 1;
        *counts.per_source.entry(source).or_insert(0) += 1;
        if udp {
            counts.udp_total += 1;
            *counts.udp_per_source.entry(source).or_insert(0) += 1;
        }
        Ok(FlowPermit {
            limits: self.clone(),
            source,
            udp,
        })
    }

    /// Flows carried now.
    pub fn active(&self) -> usize {
        self.counts().total
    }

    /// Flows refused by a bound since start.
    pub fn refused(&self) -> u64 {
        self.counts().refused
    }
}

impl Drop for FlowPermit {
    fn drop(&mut self) {
        let mut counts = self.limits.counts();
        counts.total = counts.total.saturating_sub(1);
        release(&mut counts.per_source, self.source);
        if self.udp {
            counts.udp_total = counts.udp_total.saturating_sub(1);
            release(&mut counts.udp_per_source, self.source);
        }
    }
}

/// One flow fewer from `source`.
fn release(per_source: &mut HashMap<IpAddr, usize>, source: IpAddr) {
    if let Some(n) = per_source.get_mut(&source) {
        *n -= 1;
        if *n == 0 {
            per_source.remove(&source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 1, 0, last])
    }

    #[test]
    fn a_source_holds_at_most_its_share_and_the_node_at_most_its_total() {
        let limits = FlowLimits::new(FlowLimitsConfig {
            max_flows: 5,
            max_flows_per_source: 3,
        });
        let t0 = Instant::now();
        let mut held: Vec<FlowPermit> = (0..3).map(|_| limits.admit(ip(1), t0).unwrap()).collect();
        let refused = limits.admit(ip(1), t0).unwrap_err();
        assert_eq!(refused.hit, LimitHit::Source(ip(1), 3));
        // Another host still gets in, up to the total.
        held.push(limits.admit(ip(2), t0).unwrap());
        held.push(limits.admit(ip(3), t0).unwrap());
        assert_eq!(limits.admit(ip(4), t0).unwrap_err().hit, LimitHit::Total(5));
        assert_eq!(limits.active(), 5);
        assert_eq!(limits.refused(), 2);
        // A flow that ends gives its place back, to its source too.
        held.remove(0);
        assert_eq!(limits.active(), 4);
        held.push(limits.admit(ip(1), t0).unwrap());
        drop(held);
        assert_eq!(limits.active(), 0);
        assert!(limits.counts().per_source.is_empty());
    }

    #[test]
    fn udp_flows_take_at_most_half_and_leave_tcp_the_rest() {
        let limits = FlowLimits::new(FlowLimitsConfig {
            max_flows: 8,
            max_flows_per_source: 6,
        });
        let t0 = Instant::now();
        let mut held: Vec<FlowPermit> = (0..3)
            .map(|_| limits.admit_udp(ip(1), t0).unwrap())
            .collect();
        assert_eq!(
            limits.admit_udp(ip(1), t0).unwrap_err().hit,
            LimitHit::UdpSource(ip(1), 3)
        );
        held.push(limits.admit_udp(ip(2), t0).unwrap());
        assert_eq!(
            limits.admit_udp(ip(3), t0).unwrap_err().hit,
            LimitHit::Udp(4)
        );
        // TCP flows still get the other half, the sprayer's host included.
        held.push(limits.admit(ip(1), t0).unwrap());
        held.extend((0..3).map(|_| limits.admit(ip(3), t0).unwrap()));
        assert_eq!(limits.admit(ip(4), t0).unwrap_err().hit, LimitHit::Total(8));
        // A UDP flow's end gives back both places.
        held.remove(0);
        assert_eq!(limits.active(), 7);
        held.push(limits.admit_udp(ip(1), t0).unwrap());
        drop(held);
        let counts = limits.counts();
        assert_eq!((counts.total, counts.udp_total), (0, 0));
        assert!(counts.per_source.is_empty() && counts.udp_per_source.is_empty());
    }

    #[test]
    fn refusals_are_logged_at_most_once_per_interval_with_their_count() {
        let limits = FlowLimits::new(FlowLimitsConfig {
            max_flows: 1,
            max_flows_per_source: 1,
        });
        let t0 = Instant::now();
        let _held = limits.admit(ip(1), t0).unwrap();
        assert_eq!(limits.admit(ip(1), t0).unwrap_err().log, Some(1));
        for i in 1..100 {
            let at = t0 + Duration::from_millis(i * 50);
            assert_eq!(limits.admit(ip(2), at).unwrap_err().log, None, "{i}");
        }
        // 99 more since the first line.
        let later = limits.admit(ip(2), t0 + LOG_EVERY).unwrap_err();
        assert_eq!(later.log, Some(100));
        assert_eq!(limits.refused(), 101);
    }

    #[test]
    fn defaults_follow_the_descriptor_limit() {
        let c = FlowLimitsConfig::for_descriptors(20_000);
        assert_eq!(c.max_flows, 19_488);
        assert_eq!(c.max_flows_per_source, 9_744);
        assert_eq!(FlowLimitsConfig::for_descriptors(100).max_flows, 64);
    }
}
