//! The lab's nodes: the five namespaces of every lab and each extra
//! site's client and edge (`lab up --sites`), by name and address.

use crate::sites::Site;
use crate::topology::{TopologyError, CLIENT_ADDR, CORE_WAN_ADDR, EDGE_WAN_ADDR, SERVER_ADDR};

/// One namespace of the lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Node {
    /// The client host.
    Client,
    /// The edge router, where the wanopt edge node runs with `--optimize`.
    Edge,
    /// The emulated WAN: a bump in the wire with no IP address.
    Wan,
    /// The core router, where the wanopt core node runs with `--optimize`.
    Core,
    /// The server host.
    Server,
    /// The client host of an extra site (`lab up --sites`).
    SiteClient(Site),
    /// The edge router of an extra site (`lab up --sites`).
    SiteEdge(Site),
}

impl Node {
    /// Every node of a one-site lab, from the client to the server.
    pub const ALL: [Node; 5] = [
        Node::Client,
        Node::Edge,
        Node::Wan,
        Node::Core,
        Node::Server,
    ];

    /// The node's short name (`client`, `edge`, ..., `client2`, `edge2`).
    pub fn name(self) -> String {
        match self {
            Node::Client => "client".into(),
            Node::Edge => "edge".into(),
            Node::Wan => "wan".into(),
            Node::Core => "core".into(),
            Node::Server => "server".into(),
            Node::SiteClient(site) => format!("client{}", site.number()),
            Node::SiteEdge(site) => format!("edge{}", site.number()),
        }
    }

    /// The node's main address on the lab network (`None` for `wan`).
    ///
    /// For the routers this is the address that faces the WAN (the core's
    /// on site 1's link).
    pub fn address(self) -> Option<String> {
        match self {
            Node::Client => Some(CLIENT_ADDR.into()),
            Node::Edge => Some(EDGE_WAN_ADDR.into()),
            Node::Wan => None,
            Node::Core => Some(CORE_WAN_ADDR.into()),
            Node::Server => Some(SERVER_ADDR.into()),
            Node::SiteClient(site) => Some(site.client_addr()),
            Node::SiteEdge(site) => Some(site.edge_wan_addr()),
        }
    }

    /// Every node a lab of up to [`crate::sites::MAX_SITES`] sites can
    /// have: [`Node::ALL`], then each extra site's client and edge.
    pub fn every_possible() -> impl Iterator<Item = Node> {
        let extra = (2..=crate::sites::MAX_SITES)
            .filter_map(Site::new)
            .flat_map(|site| [site.client(), site.edge()]);
        Node::ALL.into_iter().chain(extra)
    }
}

impl std::str::FromStr for Node {
    type Err = TopologyError;

    /// `client`, `edge`, `wan`, `core`, `server`, or `clientN` / `edgeN`
    /// (site N; `client1` and `edge1` are `client` and `edge`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || TopologyError::UnknownNode(s.to_string());
        if let Some(node) = Node::ALL.into_iter().find(|n| n.name() == s) {
            return Ok(node);
        }
        let (role, number) = s
            .find(|c: char| c.is_ascii_digit())
            .map(|at| s.split_at(at))
            .ok_or_else(unknown)?;
        // Digits only, no sign or leading zero: one spelling per node.
        if number.starts_with('0') || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(unknown());
        }
        let number: u8 = number.parse().map_err(|_| unknown())?;
        match (role, number, Site::new(number)) {
            ("client", 1, _) => Ok(Node::Client),
            ("edge", 1, _) => Ok(Node::Edge),
            ("client", _, Some(site)) => Ok(site.client()),
            ("edge", _, Some(site)) => Ok(site.edge()),
            _ => Err(unknown()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_round_trip() {
        for node in Node::every_possible() {
            assert_eq!(node.name().parse::<Node>().ok(), Some(node));
        }
        assert_eq!(Node::every_possible().count(), 5 + 2 * 15);
        assert!("router".parse::<Node>().is_err());
    }

    /// Site nodes are `clientN` and `edgeN` for N from 1 to 16, one
    /// spelling each; anything else is a one-line error naming them.
    #[test]
    fn site_node_names() {
        let site = |n| Site::new(n).unwrap_or_else(|| panic!("site {n}"));
        assert_eq!("client1".parse::<Node>().ok(), Some(Node::Client));
        assert_eq!("edge1".parse::<Node>().ok(), Some(Node::Edge));
        assert_eq!("client2".parse::<Node>().ok(), Some(site(2).client()));
        assert_eq!("edge16".parse::<Node>().ok(), Some(site(16).edge()));
        assert_eq!(site(3).client().name(), "client3");
        assert_eq!(site(2).client().address().as_deref(), Some("198.18.21.2"));
        for bad in [
            "client0",
            "client17",
            "edge02",
            "client+2",
            "wan2",
            "core2",
            "server2",
            "2",
            "clientx",
            "edge-1",
            "client300",
        ] {
            let e = bad
                .parse::<Node>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(e.contains("clientN, edgeN") && !e.contains('\n'), "{e}");
        }
    }
}
