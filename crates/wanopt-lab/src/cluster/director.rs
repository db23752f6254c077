//! The director's balancing: nftables rules in the `core` namespace, and
//! what they show (the bucket map, the tunnels conntrack tracks).
//!
//! ```text
//! table ip wanopt_cluster {
//!   map buckets { type mark : ipv4_addr; }      # bucket -> replica, kept by the notify script
//!   chain prerouting {
//!     type nat hook prerouting priority dstnat; policy accept;
//!     udp dport 4433 fib daddr type local
//!       meta mark set jhash ip saddr mod 64 seed 0x31fddc ct mark set meta mark
//!       dnat to meta mark map @buckets
//!   }
//! }
//! ```
//!
//! The bucket goes through the packet mark because nft 1.0.6 cannot type
//! a named map by the hash itself (`type mark` is refused as a key for
//! `jhash`, and listing a `typeof jhash ...` map crashes it); the
//! connection's mark keeps the bucket, so `conntrack -L` shows each
//! tunnel's. The hash's seed is fixed, so a lab places the same edge on the
//! same replica every time, and [`bucket_of`] computes it as the kernel
//! does; it was chosen so that sites 1 to 6 land on replica
//! ((K - 1) mod N) + 1 with 2, 3, 4 or 6 replicas: site K on replica K
//! with as many replicas as sites, six sites two to a replica of three. A packet whose bucket has no owner (every
//! replica down) is not translated and finds no listener in the director.

use std::net::Ipv4Addr;

use super::{Cores, Replica, BUCKETS};
use crate::node::TUNNEL_PORT;
use crate::topology::{output, Lab, Node, TopologyError};

/// The nftables table of the director's rules (family `ip`).
pub const TABLE: &str = "wanopt_cluster";

/// The bucket map in [`TABLE`].
pub const MAP: &str = "buckets";

/// The seed of the director's `jhash`.
pub const HASH_SEED: u32 = 0x31_fddc;

/// The director's ruleset, for `nft -f`.
pub fn ruleset() -> String {
    format!(
        "table ip {TABLE} {{\n\
         \x20 map {MAP} {{ type mark : ipv4_addr; }}\n\
         \x20 chain prerouting {{\n\
         \x20   type nat hook prerouting priority dstnat; policy accept;\n\
         \x20   udp dport {TUNNEL_PORT} fib daddr type local \
         meta mark set jhash ip saddr mod {BUCKETS} seed {HASH_SEED:#x} \
         ct mark set meta mark dnat to meta mark map @{MAP}\n\
         \x20 }}\n\
         }}\n"
    )
}

/// Installs the director's rules in `core`, with an empty map: no bucket
/// has an owner until keepalived reports a replica healthy.
pub fn install(lab: &Lab) -> Result<(), TopologyError> {
    let path = lab.state_dir().join("director.nft");
    std::fs::write(&path, ruleset()).map_err(|cause| TopologyError::State {
        path: path.clone(),
        cause,
    })?;
    let mut nft = lab.command(Node::Core, "nft");
    nft.arg("-f").arg(&path);
    output(nft).map(|_| ())
}

/// The kernel's `jhash` (`include/linux/jhash.h`): Bob Jenkins' lookup3
/// `hashlittle`, 32-bit words read little-endian as x86 reads them.
fn jhash(key: &[u8], seed: u32) -> u32 {
    let length = key.len() as u32;
    let init = 0xdead_beef_u32.wrapping_add(length).wrapping_add(seed);
    let (mut a, mut b, mut c) = (init, init, init);
    let word = |bytes: &[u8]| {
        let mut w = [0u8; 4];
        w[..bytes.len()].copy_from_slice(bytes);
        u32::from_le_bytes(w)
    };
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        // __jhash_mix
        a = a.wrapping_sub(c) ^ c.rotate_left(4);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a) ^ a.rotate_left(6);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b) ^ b.rotate_left(8);
        b = b.wrapping_add(a);
        a = a.wrapping_sub(c) ^ c.rotate_left(16);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a) ^ a.rotate_left(19);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b) ^ b.rotate_left(4);
        b = b.wrapping_add(a);
        rest = &rest[12..];
    }
    if rest.is_empty() {
        return c;
    }
    // The tail, zero-padded: missing bytes add nothing.
    let mut tail = [0u8; 12];
    tail[..rest.len()].copy_from_slice(rest);
    a = a.wrapping_add(word(&tail[0..4]));
    b = b.wrapping_add(word(&tail[4..8]));
    c = c.wrapping_add(word(&tail[8..12]));
    // __jhash_final
    c = (c ^ b).wrapping_sub(b.rotate_left(14));
    a = (a ^ c).wrapping_sub(c.rotate_left(11));
    b = (b ^ a).wrapping_sub(a.rotate_left(25));
    c = (c ^ b).wrapping_sub(b.rotate_left(16));
    a = (a ^ c).wrapping_sub(c.rotate_left(4));
    b = (b ^ a).wrapping_sub(a.rotate_left(14));
    (c ^ b).wrapping_sub(b.rotate_left(24))
}

/// The bucket the director's rule puts packets from `source` in: nft's
/// `jhash ip saddr mod 64 seed ...` (`nft_jhash_eval`: the hash of the
/// address's four bytes as they sit in the packet, scaled to the modulus
/// with `reciprocal_scale`).
pub fn bucket_of(source: Ipv4Addr) -> u32 {
    let hash = jhash(&source.octets(), HASH_SEED);
    ((u64::from(hash) * u64::from(BUCKETS)) >> 32) as u32
}

/// The replica that owns `bucket` while every replica of `cores` is
/// healthy: replica (b mod N) + 1.
pub fn home_of(bucket: u32, cores: Cores) -> Option<Replica> {
    let number = bucket % u32::from(cores.count()) + 1;
    u8::try_from(number).ok().and_then(Replica::new)
}

/// The director's bucket map now: each bucket's replica address (`None`:
/// no owner), from `nft -j list map`.
pub fn bucket_owners(lab: &Lab) -> Result<Vec<Option<Ipv4Addr>>, TopologyError> {
    let mut nft = lab.command(Node::Core, "nft");
    nft.args(["-j", "list", "map", "ip", TABLE, MAP]);
    Ok(parse_owners(&output(nft)?))
}

/// The owners in `nft -j list map` output.
fn parse_owners(json: &str) -> Vec<Option<Ipv4Addr>> {
    let mut owners = vec![None; BUCKETS as usize];
    let doc: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let maps = doc["nftables"].as_array().into_iter().flatten();
    for element in maps.flat_map(|m| m["map"]["elem"].as_array().into_iter().flatten()) {
        let bucket = element[0].as_u64().and_then(|b| usize::try_from(b).ok());
        let addr = element[1].as_str().and_then(|a| a.parse().ok());
        if let (Some(slot), Some(addr)) = (bucket.and_then(|b| owners.get_mut(b)), addr) {
            *slot = Some(addr);
        }
    }
    owners
}

/// One tunnel the director's conntrack tracks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tunnel {
    /// The edge's address and port.
    pub edge: std::net::SocketAddrV4,
    /// The address it dialled (the director's, or a replica's own).
    pub dialled: Ipv4Addr,
    /// The replica that answers it.
    pub replica: Ipv4Addr,
    /// Whether the replica has answered (conntrack saw a reply).
    pub replied: bool,
    /// Seconds before conntrack forgets it.
    pub expires_s: u64,
}

/// The tunnels (UDP to port 4433) the director's conntrack tracks, from
/// `conntrack -L`.
pub fn tunnels(lab: &Lab) -> Result<Vec<Tunnel>, TopologyError> {
    let mut conntrack = lab.command(Node::Core, "conntrack");
    conntrack.args([
        "-L",
        "-p",
        "udp",
        "--orig-port-dst",
        &TUNNEL_PORT.to_string(),
    ]);
    Ok(parse_tunnels(&output(conntrack)?))
}

/// The tunnels in `conntrack -L` lines (`udp 17 119 src=E dst=D sport=P
/// dport=4433 src=R dst=E sport=4433 dport=P [ASSURED] mark=0 use=1`).
fn parse_tunnels(text: &str) -> Vec<Tunnel> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let values = |key: &str| -> Vec<&str> {
                words
                    .iter()
                    .filter_map(|w| w.strip_prefix(key))
                    .collect::<Vec<_>>()
            };
            let (src, dst, sport) = (values("src="), values("dst="), values("sport="));
            let edge_ip: Ipv4Addr = src.first()?.parse().ok()?;
            Some(Tunnel {
                edge: std::net::SocketAddrV4::new(edge_ip, sport.first()?.parse().ok()?),
                dialled: dst.first()?.parse().ok()?,
                replica: src.get(1)?.parse().ok()?,
                replied: !line.contains("[UNREPLIED]"),
                expires_s: words.get(2)?.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lookup3's own test vectors (its `driver5`), which the kernel's
    /// jhash reproduces; the cluster test checks the buckets against the
    /// kernel's rule.
    #[test]
    fn jhash_matches_lookup3() {
        assert_eq!(jhash(b"", 0), 0xdead_beef);
        assert_eq!(jhash(b"", 0xdead_beef), 0xbd5b_7dde);
        let text = b"Four score and seven years ago";
        assert_eq!(jhash(text, 0), 0x1777_0551);
        assert_eq!(jhash(text, 1), 0xcd62_8161);
    }

    /// The seed puts site K's edge (sites 1 to 6) on replica
    /// ((K - 1) mod N) + 1 with 2, 3, 4 or 6 replicas: site K on replica K
    /// with as many replicas as sites, and six sites two to a replica of
    /// three (what the docs, the cluster test and the `cluster` scenario
    /// rely on).
    #[test]
    fn site_edges_land_on_their_own_replicas() {
        let edges: Vec<Ipv4Addr> = [2u8, 22, 32, 42, 52, 62]
            .map(|x| Ipv4Addr::new(198, 18, x, 1))
            .to_vec();
        for n in [2u8, 3, 4, 6] {
            let cores = Cores::new(n).unwrap_or_else(|| panic!("{n} cores"));
            for (k, edge) in edges.iter().enumerate() {
                let home = home_of(bucket_of(*edge), cores).map(Replica::number);
                assert_eq!(home, Some(k as u8 % n + 1), "{edge} with {n} cores");
            }
        }
        assert!((0..=255u8).all(|x| bucket_of(Ipv4Addr::new(10, 0, 0, x)) < BUCKETS));
    }

    #[test]
    fn the_ruleset_hashes_the_source_into_the_map() {
        let rules = ruleset();
        assert!(
            rules.contains("udp dport 4433 fib daddr type local"),
            "{rules}"
        );
        assert!(
            rules.contains("jhash ip saddr mod 64 seed 0x31fddc"),
            "{rules}"
        );
        assert!(rules.contains("dnat to meta mark map @buckets"), "{rules}");
    }

    #[test]
    fn owners_and_tunnels_parse() {
        let json = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}}, {"map": {"family": "ip", "name": "buckets", "table": "wanopt_cluster", "type": "mark", "map": "ipv4_addr", "elem": [[0, "198.18.5.11"], [63, "198.18.5.13"], [99, "198.18.5.12"]]}}]}"#;
        let owners = parse_owners(json);
        assert_eq!(owners.len(), 64);
        assert_eq!(owners[0], Some(Ipv4Addr::new(198, 18, 5, 11)));
        assert_eq!(owners[1], None);
        assert_eq!(owners[63], Some(Ipv4Addr::new(198, 18, 5, 13)));
        assert_eq!(parse_owners("").len(), 64);
        let text = "udp      17 118 src=198.18.2.1 dst=198.18.2.2 sport=40112 dport=4433 src=198.18.5.11 dst=198.18.2.1 sport=4433 dport=40112 [ASSURED] mark=0 use=1\n\
            udp      17 28 src=198.18.22.1 dst=198.18.5.12 sport=5000 dport=4433 [UNREPLIED] src=198.18.5.12 dst=198.18.22.1 sport=4433 dport=5000 mark=61 use=1\n\
            conntrack v1.4.7 (conntrack-tools): 2 flow entries have been shown.\n";
        let tunnels = parse_tunnels(text);
        assert_eq!(tunnels.len(), 2, "{tunnels:?}");
        assert_eq!(tunnels[0].edge.to_string(), "198.18.2.1:40112");
        assert_eq!(tunnels[0].replica, Ipv4Addr::new(198, 18, 5, 11));
        assert!(tunnels[0].replied);
        assert_eq!(tunnels[0].expires_s, 118);
        assert_eq!(tunnels[1].dialled, Ipv4Addr::new(198, 18, 5, 12));
        assert!(!tunnels[1].replied);
    }
}
