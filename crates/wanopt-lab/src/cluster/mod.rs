//! A core cluster (`lab up --cores N`): the `core` namespace becomes a
//! director that balances the tunnels over N replica namespaces,
//! `core1`..`coreN`, each running its own `wanopt core` with `--optimize`.
//!
//! ```text
//!                                         director (core)                     core1  198.18.5.11
//!  edges ── 198.18.2.2, 198.18.(10K+2).2 ─ nft: UDP 4433 to a local address ─ rep1 ─┐
//!            (the WAN addresses, as ever)    dnat to jhash(ip saddr) mod 64   ...   ├ cluster0 198.18.5.1
//!                                            -> @buckets -> replica           repN ─┘
//!  server ── lan0 198.18.3.1                 keepalived: a vrrp_script per replica (curl /health)
//! ```
//!
//! The director keeps every address the edges dial and its LAN to the
//! server, so direct (unoptimized) traffic is routed exactly as without
//! `--cores`. Each replica is joined to the director by its own veth,
//! enslaved to a bridge (`cluster0`) that is the cluster segment
//! 198.18.5.0/24: director .1, replica K .(10+K), clear of the lab's
//! 198.18.1-4.0/24 and of the sites' 198.18.21.0/24 and up. Replicas route
//! by default via the director; edges route 198.18.5.0/24 via their core
//! address and the server via 198.18.3.1, so the replicas are reachable
//! from both ends (an edge may dial a replica's own address, as the core's
//! `--advertise` tells it to).
//!
//! Balancing is the kernel's, not ours ([`director`]): an nftables map of
//! [`BUCKETS`] hash buckets, `jhash ip saddr mod 64` to a replica address,
//! and a `dnat` of UDP 4433 to the director's own addresses through it. The
//! edge's address picks the bucket, so an edge keeps its replica; replicas
//! answer through the director (NAT mode) and conntrack un-NATs them.
//! Bucket b's owner is replica (b mod N) + 1 while it is healthy; a failed
//! replica's buckets are dealt in turn to the healthy replicas after it, so
//! only its edges move (as WCCP reassigns a failed cache's buckets), and
//! come back to it once it is healthy again (new tunnels only: a tunnel's
//! conntrack entry keeps it where it is).
//!
//! Health is keepalived's ([`keepalived`]): IPVS, whose checkers keepalived
//! would use on a director, is not in this lab's kernel, so each replica
//! gets a `vrrp_script` that asks its control API for `/health` every
//! second, tracked by a peerless VRRP instance whose notify script
//! (`dist/cluster/wanopt-cluster-notify`) rewrites the bucket map for the
//! healthy set and deletes the conntrack entries that still point at a
//! failed replica.
//!
//! `--core-cpu FRACTION` caps each replica's wanopt process at that share
//! of one CPU with a cgroup v1 `cpu` group per replica ([`topology`]).

pub mod director;
pub mod keepalived;
pub mod replicas;
pub mod scenario;
pub mod status;
pub mod topology;

pub use crate::node::{Replica, CONTROL_PORT, MAX_CORES};
pub use topology::ClusterError;

/// Hash buckets of the director's map.
pub const BUCKETS: u32 = 64;

/// The cluster segment.
pub const CLUSTER_NET: &str = "198.18.5.0/24";

/// The director's address on the cluster segment.
pub const DIRECTOR_ADDR: &str = "198.18.5.1";

/// The director's bridge on the cluster segment.
pub const CLUSTER_BRIDGE: &str = "cluster0";

/// How long a silent tunnel lives in a cluster (both nodes'
/// `--tunnel-timeout`): an edge whose replica died redials well within the
/// 3 s a new flow may wait.
pub const TUNNEL_TIMEOUT: &str = "1500ms";

/// The tunnel timeout of a cluster whose replicas are held to a share of a
/// CPU (the scenario's steady and added phases, where the replicas are the
/// bottleneck on purpose and none is killed). A replica at its CPU limit
/// answers late: held to 5% of a CPU under six bulk downloads, its tunnels'
/// round trip rose from 20 ms to 300-600 ms, and now and then one tunnel
/// heard nothing for 1.5 s and timed out (2 resets in 8 rounds of 6
/// downloads), so a capped cluster keeps the nodes' default.
pub const CAPPED_TUNNEL_TIMEOUT: &str = "8s";

/// How many replicas a cluster has: 1 to [`MAX_CORES`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "u8", into = "u8")]
pub struct Cores(u8);

/// A replica count out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` cores: a cluster has 1 to {MAX_CORES} replicas (e.g. --cores 3)")]
pub struct CoresError(String);

impl Cores {
    /// `count` replicas, if 1 to [`MAX_CORES`].
    pub fn new(count: u8) -> Option<Cores> {
        (1..=MAX_CORES).contains(&count).then_some(Cores(count))
    }

    /// How many replicas.
    pub fn count(self) -> u8 {
        self.0
    }

    /// The replicas, in order.
    pub fn replicas(self) -> impl Iterator<Item = Replica> {
        (1..=self.0).filter_map(Replica::new)
    }
}

impl TryFrom<u8> for Cores {
    type Error = CoresError;

    fn try_from(count: u8) -> Result<Cores, CoresError> {
        Cores::new(count).ok_or_else(|| CoresError(count.to_string()))
    }
}

impl From<Cores> for u8 {
    fn from(cores: Cores) -> u8 {
        cores.0
    }
}

impl std::str::FromStr for Cores {
    type Err = CoresError;

    fn from_str(s: &str) -> Result<Cores, CoresError> {
        s.trim()
            .parse::<u8>()
            .ok()
            .and_then(Cores::new)
            .ok_or_else(|| CoresError(s.to_string()))
    }
}

impl std::fmt::Display for Cores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The share of one CPU each replica's wanopt process may use
/// (`--core-cpu`), in thousandths: 10 (0.01) to 1000 (1.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct CpuShare(u16);

/// A CPU share out of range or not a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: --core-cpu is a share of one CPU from 0.01 to 1.0 (e.g. --core-cpu 0.5)")]
pub struct CpuShareError(String);

impl CpuShare {
    /// The shortest `cpu.cfs_period_us`: a capped replica runs at least
    /// every 10 ms, so that it behaves like a slower CPU rather than one
    /// that stops for most of 100 ms and then sends a burst its links'
    /// queues cannot hold.
    pub const MIN_PERIOD_US: u32 = 10_000;

    /// The smallest quota the kernel takes, microseconds.
    const MIN_QUOTA_US: u32 = 1_000;

    /// The cgroup's `cpu.cfs_period_us`: 10 ms, or longer for a share
    /// whose quota would be under the kernel's 1 ms minimum (100 ms at
    /// 0.01).
    pub fn period_us(self) -> u32 {
        // self.0 is thousandths: quota = period * self.0 / 1000 >= 1 ms.
        let for_min_quota = (Self::MIN_QUOTA_US * 1000).div_ceil(u32::from(self.0).max(1));
        Self::MIN_PERIOD_US.max(for_min_quota)
    }

    /// The cgroup's `cpu.cfs_quota_us`: the share of [`Self::period_us`].
    pub fn quota_us(self) -> u32 {
        self.period_us() * u32::from(self.0) / 1000
    }

    /// The share as a fraction of one CPU.
    pub fn fraction(self) -> f64 {
        f64::from(self.0) / 1000.0
    }
}

impl TryFrom<f64> for CpuShare {
    type Error = CpuShareError;

    fn try_from(fraction: f64) -> Result<CpuShare, CpuShareError> {
        let thousandths = (fraction * 1000.0).round();
        if fraction.is_finite() && (10.0..=1000.0).contains(&thousandths) {
            Ok(CpuShare(thousandths as u16))
        } else {
            Err(CpuShareError(fraction.to_string()))
        }
    }
}

impl From<CpuShare> for f64 {
    fn from(share: CpuShare) -> f64 {
        share.fraction()
    }
}

impl std::str::FromStr for CpuShare {
    type Err = CpuShareError;

    fn from_str(s: &str) -> Result<CpuShare, CpuShareError> {
        s.trim()
            .parse::<f64>()
            .ok()
            .and_then(|f| CpuShare::try_from(f).ok())
            .ok_or_else(|| CpuShareError(s.to_string()))
    }
}

impl std::fmt::Display for CpuShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fraction().fmt(f)
    }
}

/// What `lab up --cores N [--core-cpu FRACTION]` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cluster {
    /// How many replicas.
    pub cores: Cores,
    /// Each replica's wanopt process's share of one CPU, if capped.
    #[serde(default)]
    pub cpu: Option<CpuShare>,
}

impl Cluster {
    /// Both nodes' `--tunnel-timeout`: [`TUNNEL_TIMEOUT`], or
    /// [`CAPPED_TUNNEL_TIMEOUT`] when the replicas are held to a share of a
    /// CPU.
    pub fn tunnel_timeout(&self) -> &'static str {
        match self.cpu {
            Some(_) => CAPPED_TUNNEL_TIMEOUT,
            None => TUNNEL_TIMEOUT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_cluster_keeps_the_default_tunnel_timeout() {
        let cores = Cores::try_from(3).unwrap();
        let capped = Cluster {
            cores,
            cpu: Some(CpuShare::try_from(0.05).unwrap()),
        };
        assert_eq!(capped.tunnel_timeout(), "8s");
        assert_eq!(Cluster { cores, cpu: None }.tunnel_timeout(), "1500ms");
    }

    #[test]
    fn core_counts_are_one_to_eight() {
        assert_eq!("3".parse::<Cores>().map(Cores::count).ok(), Some(3));
        assert_eq!("8".parse::<Cores>().map(Cores::count).ok(), Some(8));
        for bad in ["0", "9", "-1", "three", "", "300"] {
            let e = bad
                .parse::<Cores>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.contains("1 to 8 replicas") && !e.contains('\n'), "{e}");
        }
        let numbers: Vec<u8> = Cores::new(3)
            .map(|c| c.replicas().map(Replica::number).collect())
            .unwrap_or_default();
        assert_eq!(numbers, [1, 2, 3]);
        assert_eq!(
            serde_json::to_string(&Cores::new(3)).ok().as_deref(),
            Some("3")
        );
        assert!(serde_json::from_str::<Cores>("9").is_err());
    }

    #[test]
    fn cpu_shares_are_a_hundredth_to_one() {
        // (quota, period) in microseconds: the quota is the share of a
        // 10 ms period, longer where it would be under 1 ms.
        let share = |s: &str| s.parse::<CpuShare>().map(|c| (c.quota_us(), c.period_us()));
        assert_eq!(share("0.5"), Ok((5_000, 10_000)));
        assert_eq!(share("0.01"), Ok((1_000, 100_000)));
        assert_eq!(share("0.05"), Ok((1_000, 20_000)));
        assert_eq!(share("0.03"), Ok((1_000, 33_334)));
        assert_eq!(share("1"), Ok((10_000, 10_000)));
        assert_eq!(share("1.0"), Ok((10_000, 10_000)));
        assert_eq!(share(" 0.25 "), Ok((2_500, 10_000)));
        for bad in ["0", "0.001", "1.5", "-0.5", "half", "", "NaN", "inf"] {
            let e = bad
                .parse::<CpuShare>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.contains("0.01 to 1.0") && !e.contains('\n'), "{e}");
        }
        let cluster = Cluster {
            cores: Cores(2),
            cpu: "0.3".parse().ok(),
        };
        let text = serde_json::to_string(&cluster).unwrap_or_default();
        assert_eq!(text, r#"{"cores":2,"cpu":0.3}"#);
        assert_eq!(serde_json::from_str::<Cluster>(&text).ok(), Some(cluster));
    }

    /// Replica addresses are on the cluster segment, clear of the lab's
    /// and the sites' segments; interface names fit (15 bytes).
    #[test]
    fn replica_addresses() {
        let all: Vec<Replica> = (1..=MAX_CORES).filter_map(Replica::new).collect();
        assert_eq!(all.len(), 8);
        assert_eq!(Replica::new(0), None);
        assert_eq!(Replica::new(9), None);
        assert_eq!(all[0].addr(), "198.18.5.11");
        assert_eq!(all[7].addr(), "198.18.5.18");
        assert_eq!(all[2].control(), "198.18.5.13:7002");
        assert_eq!(all[1].daemon(), "wanopt-core2");
        for replica in all {
            assert!(replica.addr().starts_with("198.18.5."));
            assert_ne!(replica.addr(), DIRECTOR_ADDR);
            assert!(replica.director_if().len() <= 15);
        }
    }
}
