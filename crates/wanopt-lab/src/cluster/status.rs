//! What `lab status` shows of a cluster: each replica's health, address
//! and buckets, the tunnels the director tracks, and the bucket map.

use std::fmt::Write as _;
use std::net::Ipv4Addr;

use super::director::{bucket_of, bucket_owners, tunnels, Tunnel};
use super::keepalived::health;
use super::{Cluster, Replica, CLUSTER_NET};
use crate::topology::Lab;

/// The cluster's lines of `lab status`.
pub fn lines(lab: &Lab, cluster: Cluster) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cores     {} replicas behind the director core, on {CLUSTER_NET}{}",
        cluster.cores,
        match cluster.cpu {
            Some(share) => format!(", each capped at {share} CPU"),
            None => String::new(),
        }
    );
    let owners = bucket_owners(lab).unwrap_or_default();
    let tunnels = tunnels(lab).unwrap_or_default();
    for (replica, healthy) in health(lab, cluster.cores) {
        let addr: Option<Ipv4Addr> = replica.addr().parse().ok();
        let buckets = owners
            .iter()
            .filter(|o| **o == addr && addr.is_some())
            .count();
        let carried: Vec<String> = tunnels
            .iter()
            .filter(|t| Some(t.replica) == addr && t.replied)
            .map(describe)
            .collect();
        let _ = writeln!(
            out,
            "core{:<5} {:<12} {:<8} {buckets:>2} buckets  tunnels {}",
            replica.number(),
            replica.addr(),
            match healthy {
                Some(true) => "healthy",
                Some(false) => "FAILED",
                None => "unknown",
            },
            if carried.is_empty() {
                "none".to_string()
            } else {
                carried.join(", ")
            }
        );
    }
    let _ = writeln!(out, "buckets   {}", owner_row(&owners));
    out
}

/// A tunnel as shown: the edge, its bucket, and whether it dialled the
/// replica's own address.
fn describe(tunnel: &Tunnel) -> String {
    let direct = if tunnel.dialled == tunnel.replica {
        " direct"
    } else {
        ""
    };
    format!(
        "{} (bucket {}{direct})",
        tunnel.edge,
        bucket_of(*tunnel.edge.ip())
    )
}

/// The owner of each bucket, 0 to 63, as its replica's number (`-`: no
/// owner).
fn owner_row(owners: &[Option<Ipv4Addr>]) -> String {
    if owners.is_empty() {
        return "(no map: is the director's nftables table there?)".to_string();
    }
    owners
        .iter()
        .map(|owner| {
            owner
                .and_then(|addr| addr.octets()[3].checked_sub(10))
                .and_then(Replica::new)
                .map_or_else(|| "-".to_string(), |r| r.number().to_string())
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_shows_as_replica_numbers() {
        let owners = [
            Some(Ipv4Addr::new(198, 18, 5, 11)),
            None,
            Some(Ipv4Addr::new(198, 18, 5, 13)),
        ];
        assert_eq!(owner_row(&owners), "1 - 3");
        assert!(owner_row(&[]).starts_with("(no map"));
    }
}
