//! The lab's second WAN link (`lab up --link2 "SPEC"`).
//!
//! ```text
//!  edge                                wan                               core
//!  wan0 198.18.2.1 ──── e0 [emulator]  c0 ──── wan0 198.18.2.2     (link 1)
//!  wan1 198.18.4.1 ──── e1 [emulator2] c1 ──── wan1 198.18.4.2     (link 2)
//! ```
//!
//! Link 2 is a second L2 segment (198.18.4.0/24) through the `wan`
//! namespace, with its own emulator process and counters
//! (`counters2.json`). It gets no routes: direct traffic between the LANs
//! stays on link 1, and only what is addressed to 198.18.4.0/24 (a node's
//! second path) crosses link 2. Its spec has the grammar of the first
//! link's (`"rtt 50ms rate 20mbit loss 5%"`) and applies to both
//! directions; `--link2-up` / `--link2-down` append to one direction, as
//! `--up` / `--down` do for link 1. Its seed is the lab's seed + 1000.

use clap::Args;

use super::options::{LinkOptionError, LinkSpecs};
use crate::topology::{Lab, Node, TopologyError};

/// The edge's address on link 2.
pub const EDGE_WAN2_ADDR: &str = "198.18.4.1";
/// The core's address on link 2.
pub const CORE_WAN2_ADDR: &str = "198.18.4.2";
/// The edge's and the core's interface on link 2.
pub const WAN2_IF: &str = "wan1";
/// The `wan` interface of link 2 that faces the edge (frames in from it go "up").
pub const WAN2_EDGE_IF: &str = "e1";
/// The `wan` interface of link 2 that faces the core (frames in from it go "down").
pub const WAN2_CORE_IF: &str = "c1";
/// Fixed MAC of the edge's link-2 interface (so neighbours are static).
const EDGE_WAN2_MAC: &str = "02:00:c6:12:04:01";
/// Fixed MAC of the core's link-2 interface.
const CORE_WAN2_MAC: &str = "02:00:c6:12:04:02";

/// How far link 2's seed is from the lab's: its draws are independent of
/// link 1's (which uses the seed and the seed + 1).
pub const SEED_OFFSET: u64 = 1000;

/// The options of `lab up` for link 2.
#[derive(Debug, Clone, Default, Args)]
pub struct Link2Options {
    /// Build a second emulated WAN between edge and core (198.18.4.1 to
    /// 198.18.4.2, no routes) with this spec for both directions, in the
    /// grammar of the first link's (e.g. "rtt 50ms rate 20mbit loss 5%";
    /// "" is a perfect link).
    #[arg(long = "link2", id = "link2", value_name = "SPEC")]
    pub link2: Option<String>,
    /// With --link2: extra spec for link 2's client-to-server direction.
    #[arg(long = "link2-up", value_name = "SPEC", requires = "link2")]
    pub link2_up: Option<String>,
    /// With --link2: extra spec for link 2's server-to-client direction.
    #[arg(long = "link2-down", value_name = "SPEC", requires = "link2")]
    pub link2_down: Option<String>,
}

impl Link2Options {
    /// Link 2's validated specs (`None` without `--link2`), seeded with
    /// `seed` (the lab's) + [`SEED_OFFSET`].
    pub fn specs(&self, seed: u64) -> Result<Option<LinkSpecs>, LinkOptionError> {
        let Some(base) = &self.link2 else {
            return Ok(None);
        };
        let base = base.trim();
        let join = |extra: &Option<String>| match extra.as_deref().map(str::trim) {
            Some(e) if !base.is_empty() => format!("{base} {e}"),
            Some(e) => e.to_string(),
            None => base.to_string(),
        };
        let specs = LinkSpecs {
            up: join(&self.link2_up),
            down: join(&self.link2_down),
            seed: seed.wrapping_add(SEED_OFFSET),
            middlebox: String::new(),
            mtu: None,
        };
        for (direction, spec) in [("up", &specs.up), ("down", &specs.down)] {
            crate::model::validate(spec).map_err(|e| LinkOptionError::Link2 {
                direction,
                spec: spec.clone(),
                message: e.to_string(),
            })?;
        }
        Ok(Some(specs))
    }
}

impl Lab {
    /// Adds link 2 to a lab that [`Lab::create`] built: the veths edge
    /// `wan1` to wan `e1` and wan `c1` to core `wan1`, addresses, fixed
    /// MACs with permanent neighbours, offloads off and MTU 1500 as on
    /// link 1. No routes.
    pub fn create_link2(&self) -> Result<(), TopologyError> {
        self.veth(Node::Edge, WAN2_IF, Node::Wan, WAN2_EDGE_IF)?;
        self.veth(Node::Wan, WAN2_CORE_IF, Node::Core, WAN2_IF)?;
        let ends = [
            (Node::Edge, EDGE_WAN2_ADDR, EDGE_WAN2_MAC),
            (Node::Core, CORE_WAN2_ADDR, CORE_WAN2_MAC),
        ];
        for (node, addr, mac) in ends {
            self.ip_in(node, &["link", "set", WAN2_IF, "address", mac])?;
            self.ip_in(
                node,
                &["addr", "add", &format!("{addr}/24"), "dev", WAN2_IF],
            )?;
        }
        for (node, dev) in [
            (Node::Edge, WAN2_IF),
            (Node::Wan, WAN2_EDGE_IF),
            (Node::Wan, WAN2_CORE_IF),
            (Node::Core, WAN2_IF),
        ] {
            self.ip_in(node, &["link", "set", dev, "mtu", "1500", "up"])?;
            self.offloads_off(node, dev)?;
        }
        for dev in [WAN2_EDGE_IF, WAN2_CORE_IF] {
            self.ip_in(Node::Wan, &["link", "set", dev, "promisc", "on"])?;
        }
        // Static neighbours across link 2: no ARP through the emulator.
        for (node, peer, peer_mac) in [
            (Node::Edge, CORE_WAN2_ADDR, CORE_WAN2_MAC),
            (Node::Core, EDGE_WAN2_ADDR, EDGE_WAN2_MAC),
        ] {
            self.ip_in(
                node,
                &[
                    "neigh",
                    "replace",
                    peer,
                    "lladdr",
                    peer_mac,
                    "dev",
                    WAN2_IF,
                    "nud",
                    "permanent",
                ],
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link2_spec_is_both_directions_plus_extras_and_its_own_seed() {
        let options = Link2Options {
            link2: Some(" rtt 50ms rate 20mbit loss 5% ".into()),
            link2_up: Some("rate 2mbit".into()),
            link2_down: None,
        };
        let specs = options.specs(7).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            specs,
            Some(LinkSpecs {
                up: "rtt 50ms rate 20mbit loss 5% rate 2mbit".into(),
                down: "rtt 50ms rate 20mbit loss 5%".into(),
                seed: 1007,
                middlebox: String::new(),
                mtu: None,
            })
        );
        assert_eq!(Link2Options::default().specs(7).ok(), Some(None));
        let perfect = Link2Options {
            link2: Some(String::new()),
            ..Link2Options::default()
        };
        assert_eq!(
            perfect.specs(1).ok().flatten().map(|s| (s.up, s.down)),
            Some((String::new(), String::new()))
        );
    }

    #[test]
    fn a_bad_link2_spec_is_one_line_naming_link2() {
        for (options, needle) in [
            (
                Link2Options {
                    link2: Some("warp 9".into()),
                    ..Link2Options::default()
                },
                "bad --link2 up spec `warp 9`: ",
            ),
            (
                Link2Options {
                    link2: Some("rtt 10ms".into()),
                    link2_down: Some("loss 150%".into()),
                    ..Link2Options::default()
                },
                "bad --link2 down spec `rtt 10ms loss 150%`: ",
            ),
        ] {
            let e = options
                .specs(1)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.starts_with(needle), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
