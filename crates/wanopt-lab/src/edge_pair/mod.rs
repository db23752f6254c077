//! An edge pair at a branch (`lab up --edges 2`): site 1 gets a second
//! edge namespace, `edgeb`, beside `edge`, both on the client's LAN and
//! each with its own emulated WAN link to the core; the client's gateway
//! 198.18.1.1 is a VRRP address that keepalived in each edge moves to the
//! live one.
//!
//! ```text
//!  client                     edge (A)                              wan                        core
//!  br0 198.18.1.2 ─ eth0 ──── lan0 198.18.1.3 (+ .1 while master)   wan0 198.18.2.1 ── e0 [emulator]  c0 ── wan0  198.18.2.2
//!                 └ eth1 ──── lan0 198.18.1.4 (+ .1 while master)   wan0 198.18.6.1 ── eb0 [emulator-edgeb] cb0 ── edgeb 198.18.6.2
//!                             edgeb (B)
//! ```
//!
//! The client's LAN becomes a bridge (`br0`, holding the client's
//! 198.18.1.2) with one veth to each edge's `lan0`. Edge A keeps its WAN
//! link (link 1); edge B's link is built as a site's is ([`crate::sites`]):
//! its own segment 198.18.6.0/24, fixed MACs with permanent neighbours,
//! its own emulator process in `wan` with the lab's link options and a
//! seed of its own (the lab's + [`SEED_OFFSET`]). Both edges route the
//! server LAN via their core address.
//!
//! The core routes the client LAN back via edge A only: the edges' WAN
//! sides are two segments, so no one address can float between them, and
//! a route that follows the VRRP master would need the core to take part
//! in it. Optimized flows do not care (the core answers each edge's
//! tunnel on that edge's segment, and the server answers the core);
//! direct, unintercepted traffic from the client while B is master leaves
//! through B and its answers come back towards A (see `docs/lab.md`).
//!
//! keepalived ([`vrrp`]) runs in each edge as a lab daemon: one VRRP
//! instance (version 3, advertisements every 200 ms) on `lan0` holding
//! 198.18.1.1/24, A at a higher priority, both `nopreempt` (a recovered A
//! does not take the address back and reset every flow through B) and,
//! with `--optimize`, a `track_script` on the edge's own `GET /health`,
//! so an edge whose wanopt died or lost its tunnel gives the address away.

pub mod topology;
pub mod vrrp;

pub use topology::EdgePairError;

pub use crate::node::{EDGE_B_NAME, EDGE_B_WAN_ADDR};

/// The client LAN's virtual address: the client's gateway, held by the
/// VRRP master (the lab's one-edge LAN address).
pub const VIRTUAL_ADDR: &str = crate::node::EDGE_LAN_ADDR;
/// Edge A's own address on the client LAN.
pub const EDGE_A_LAN_ADDR: &str = "198.18.1.3";
/// Edge B's own address on the client LAN.
pub const EDGE_B_LAN_ADDR: &str = "198.18.1.4";
/// The core's address on edge B's WAN segment.
pub const CORE_EDGE_B_ADDR: &str = "198.18.6.2";
/// Fixed MAC of edge B's WAN interface.
pub const EDGE_B_WAN_MAC: &str = "02:00:c6:12:06:01";
/// Fixed MAC of the core's interface on edge B's segment.
pub const CORE_EDGE_B_MAC: &str = "02:00:c6:12:06:02";
/// The client's bridge: its LAN, with one port to each edge.
pub const CLIENT_BRIDGE: &str = "br0";
/// The client's port towards edge B.
pub const CLIENT_EDGE_B_IF: &str = "eth1";
/// The core's interface towards edge B.
pub const CORE_EDGE_B_IF: &str = "edgeb";
/// Edge B's link's `wan` interfaces: (facing edge B, facing the core).
pub const WAN_EDGE_B_IFS: (&str, &str) = ("eb0", "cb0");
/// The name edge B's link emulator is recorded under.
pub const EDGE_B_EMULATOR: &str = "emulator-edgeb";
/// The file (in the lab's state directory) edge B's link emulator writes
/// its counters to.
pub const EDGE_B_COUNTERS: &str = "counters-edgeb.json";
/// The name edge B's wanopt edge is recorded under.
pub const EDGE_B_DAEMON: &str = "wanopt-edgeb";
/// How far edge B's link's seed is from the lab's (each direction uses
/// its seed and the next; sites start at 2000 + 4).
pub const SEED_OFFSET: u64 = 3000;

/// How many edges site 1 has: 1 (the lab as ever) or 2 (an edge pair).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "u8", into = "u8")]
pub struct Edges(u8);

/// An edge count out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` edges: a branch has 1 or 2 edges (--edges 2: an edge pair behind one VRRP address)")]
pub struct EdgesError(String);

impl Edges {
    /// One edge: the lab as it is without `--edges`.
    pub const ONE: Edges = Edges(1);
    /// An edge pair.
    pub const PAIR: Edges = Edges(2);

    /// `count` edges, if 1 or 2.
    pub fn new(count: u8) -> Option<Edges> {
        (1..=2).contains(&count).then_some(Edges(count))
    }

    /// How many edges.
    pub fn count(self) -> u8 {
        self.0
    }

    /// Whether site 1 has an edge pair.
    pub fn is_pair(self) -> bool {
        self.0 == 2
    }
}

impl Default for Edges {
    fn default() -> Edges {
        Edges::ONE
    }
}

impl TryFrom<u8> for Edges {
    type Error = EdgesError;

    fn try_from(count: u8) -> Result<Edges, EdgesError> {
        Edges::new(count).ok_or_else(|| EdgesError(count.to_string()))
    }
}

impl From<Edges> for u8 {
    fn from(edges: Edges) -> u8 {
        edges.0
    }
}

impl std::str::FromStr for Edges {
    type Err = EdgesError;

    fn from_str(s: &str) -> Result<Edges, EdgesError> {
        s.trim()
            .parse::<u8>()
            .ok()
            .and_then(Edges::new)
            .ok_or_else(|| EdgesError(s.to_string()))
    }
}

impl std::fmt::Display for Edges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Edge B's link's specs: the lab's link with its own seed.
pub fn edge_b_specs(lab_link: &crate::link::LinkSpecs) -> crate::link::LinkSpecs {
    crate::link::LinkSpecs {
        seed: lab_link.seed.wrapping_add(SEED_OFFSET),
        ..lab_link.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_counts_are_one_or_two() {
        assert_eq!("1".parse::<Edges>().ok(), Some(Edges::ONE));
        assert_eq!("2".parse::<Edges>().ok(), Some(Edges::PAIR));
        assert!(Edges::PAIR.is_pair() && !Edges::ONE.is_pair());
        assert_eq!(Edges::default(), Edges::ONE);
        for bad in ["0", "3", "-1", "two", "", "300"] {
            let e = bad
                .parse::<Edges>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.contains("a branch has 1 or 2 edges"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(
            serde_json::to_string(&Edges::PAIR).ok().as_deref(),
            Some("2")
        );
        assert!(serde_json::from_str::<Edges>("3").is_err());
    }

    /// Edge B's segment and names are clear of the lab's, the cluster's
    /// and the sites'; interface names fit (15 bytes).
    #[test]
    fn edge_b_is_clear_of_the_rest() {
        for taken in [
            "198.18.1.",
            "198.18.2.",
            "198.18.3.",
            "198.18.4.",
            "198.18.5.",
        ] {
            assert!(!EDGE_B_WAN_ADDR.starts_with(taken));
        }
        let site2 = crate::sites::Site::new(2).map(|s| s.edge_wan_mac());
        assert_ne!(site2.as_deref(), Some(EDGE_B_WAN_MAC));
        for name in [
            CLIENT_BRIDGE,
            CORE_EDGE_B_IF,
            WAN_EDGE_B_IFS.0,
            WAN_EDGE_B_IFS.1,
        ] {
            assert!(name.len() <= 15);
        }
        let link = crate::link::LinkSpecs {
            up: "rtt 10ms".into(),
            down: "rtt 10ms".into(),
            seed: 1,
            middlebox: String::new(),
            mtu: None,
        };
        let seed = edge_b_specs(&link).seed;
        assert_eq!(seed, 3001);
        // Clear of link 2 (+1000) and of every site's (+2000 + 2K, K <= 16).
        assert!(seed > 1 + 2000 + 2 * u64::from(crate::sites::MAX_SITES) + 1);
    }
}
