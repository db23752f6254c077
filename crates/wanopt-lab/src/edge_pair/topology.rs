//! The edge pair's namespace and links: edge B's namespace, the client's
//! bridge with a port to each edge, the edges' own LAN addresses, and edge
//! B's WAN link to the core.

use std::path::Path;

use super::{
    CLIENT_BRIDGE, CLIENT_EDGE_B_IF, CORE_EDGE_B_ADDR, CORE_EDGE_B_IF, CORE_EDGE_B_MAC,
    EDGE_A_LAN_ADDR, EDGE_B_LAN_ADDR, EDGE_B_WAN_ADDR, EDGE_B_WAN_MAC, WAN_EDGE_B_IFS,
};
use crate::topology::{Lab, Node, TopologyError, CLIENT_ADDR, EDGE_LAN_ADDR, EDGE_LAN_IF};

/// Errors building or running the edge pair.
#[derive(Debug, thiserror::Error)]
pub enum EdgePairError {
    /// A namespace, link, address or route could not be made, or a lab
    /// daemon not started.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// keepalived (or curl, its health check) is not installed.
    #[error(
        "--edges 2 needs keepalived and curl (apt-get install keepalived curl): cannot run `{0}`"
    )]
    Missing(&'static str),
    /// keepalived exited, or no edge became the VRRP master in time.
    #[error("{0}")]
    Vrrp(String),
}

impl Lab {
    /// Turns site 1 of a lab that [`Lab::create`] built into an edge pair:
    /// edge B's namespace, the client's bridge `br0` (its address moves
    /// there from `eth0`, both `eth0` and `eth1` its ports), edge B's
    /// `lan0` on it, the edges' own LAN addresses (198.18.1.3 and .4; the
    /// VRRP address .1 is keepalived's), edge B's WAN link and routes.
    /// `mtu` is the lab's.
    pub fn create_edge_pair(&self, mtu: Option<u16>) -> Result<(), TopologyError> {
        let mtu = mtu.unwrap_or(1500).to_string();
        let (client, edge_a, edge_b) = (Node::Client, Node::Edge, Node::EdgeB);
        self.add_netns(edge_b)?;
        // The client's LAN becomes a bridge with a port to each edge.
        self.ip_in(client, &["link", "add", CLIENT_BRIDGE, "type", "bridge"])?;
        self.ip_in(client, &["addr", "flush", "dev", "eth0"])?;
        self.ip_in(client, &["link", "set", "eth0", "master", CLIENT_BRIDGE])?;
        self.veth(client, CLIENT_EDGE_B_IF, edge_b, EDGE_LAN_IF)?;
        self.ip_in(
            client,
            &["link", "set", CLIENT_EDGE_B_IF, "master", CLIENT_BRIDGE],
        )?;
        let client_addr = format!("{CLIENT_ADDR}/24");
        self.ip_in(client, &["addr", "add", &client_addr, "dev", CLIENT_BRIDGE])?;
        // Edge A's own address; the shared one is the VRRP master's.
        self.ip_in(
            edge_a,
            &[
                "addr",
                "del",
                &format!("{EDGE_LAN_ADDR}/24"),
                "dev",
                EDGE_LAN_IF,
            ],
        )?;
        let (wan_edge_if, wan_core_if) = WAN_EDGE_B_IFS;
        self.veth(edge_b, "wan0", Node::Wan, wan_edge_if)?;
        self.veth(Node::Wan, wan_core_if, Node::Core, CORE_EDGE_B_IF)?;
        self.ip_in(edge_b, &["link", "set", "wan0", "address", EDGE_B_WAN_MAC])?;
        self.ip_in(
            Node::Core,
            &["link", "set", CORE_EDGE_B_IF, "address", CORE_EDGE_B_MAC],
        )?;
        for (node, dev, addr) in [
            (edge_a, EDGE_LAN_IF, EDGE_A_LAN_ADDR),
            (edge_b, EDGE_LAN_IF, EDGE_B_LAN_ADDR),
            (edge_b, "wan0", EDGE_B_WAN_ADDR),
            (Node::Core, CORE_EDGE_B_IF, CORE_EDGE_B_ADDR),
        ] {
            self.ip_in(node, &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
        }
        for (node, dev) in [
            (client, CLIENT_EDGE_B_IF),
            (edge_b, EDGE_LAN_IF),
            (edge_b, "wan0"),
            (Node::Wan, wan_edge_if),
            (Node::Wan, wan_core_if),
            (Node::Core, CORE_EDGE_B_IF),
        ] {
            self.ip_in(node, &["link", "set", dev, "mtu", &mtu, "up"])?;
            self.offloads_off(node, dev)?;
        }
        // The client's frames leave through the bridge: no offloads there
        // either, as on every port of the path.
        self.ip_in(client, &["link", "set", CLIENT_BRIDGE, "up"])?;
        self.offloads_off(client, CLIENT_BRIDGE)?;
        for dev in [wan_edge_if, wan_core_if] {
            self.ip_in(Node::Wan, &["link", "set", dev, "promisc", "on"])?;
        }
        self.ip_in(client, &["route", "add", "default", "via", EDGE_LAN_ADDR])?;
        self.ip_in(
            edge_b,
            &["route", "add", "198.18.3.0/24", "via", CORE_EDGE_B_ADDR],
        )?;
        // Static neighbours across edge B's link: no ARP through the emulator.
        for (node, dev, peer, mac) in [
            (edge_b, "wan0", CORE_EDGE_B_ADDR, CORE_EDGE_B_MAC),
            (Node::Core, CORE_EDGE_B_IF, EDGE_B_WAN_ADDR, EDGE_B_WAN_MAC),
        ] {
            self.ip_in(
                node,
                &[
                    "neigh",
                    "replace",
                    peer,
                    "lladdr",
                    mac,
                    "dev",
                    dev,
                    "nud",
                    "permanent",
                ],
            )?;
        }
        self.sysctl(edge_b, "net.ipv4.ip_forward", "1")
    }

    /// Whether edge B's namespace exists.
    pub fn has_edge_b(&self) -> bool {
        Path::new("/run/netns")
            .join(self.netns(Node::EdgeB))
            .exists()
    }
}
