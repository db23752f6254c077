//! The lab's nodes: the five namespaces of every lab, each extra site's
//! client and edge (`lab up --sites`), site 1's second edge (`lab up
//! --edges 2`) and each core replica (`lab up --cores`), by name and
//! address.

use crate::link::LinkSpecs;

/// The client's address.
pub const CLIENT_ADDR: &str = "198.18.1.2";
/// The edge's address on the client LAN.
pub const EDGE_LAN_ADDR: &str = "198.18.1.1";
/// The edge's address on the WAN segment.
pub const EDGE_WAN_ADDR: &str = "198.18.2.1";
/// The core's address on the WAN segment.
pub const CORE_WAN_ADDR: &str = "198.18.2.2";
/// The core's address on the server LAN.
pub const CORE_LAN_ADDR: &str = "198.18.3.1";
/// The server's address.
pub const SERVER_ADDR: &str = "198.18.3.2";
/// The edge's interface towards the client.
pub const EDGE_LAN_IF: &str = "lan0";
/// The `wan` interface that faces the edge (frames in from it go "up").
pub const WAN_EDGE_IF: &str = "e0";
/// The `wan` interface that faces the core (frames in from it go "down").
pub const WAN_CORE_IF: &str = "c0";

/// A name that is no lab node's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown lab node `{0}`: expected one of client, edge, wan, core, server, clientN, edgeN for site N of `lab up --sites` (N from 1 to {MAX_SITES}), edgeb for the second edge of `lab up --edges 2`, or coreN for replica N of `lab up --cores` (N from 1 to {MAX_CORES})")]
pub struct UnknownNode(pub String);

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
    /// A core replica behind the director `core` (`lab up --cores`).
    Replica(Replica),
    /// Site 1's second edge router (`lab up --edges 2`).
    EdgeB,
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
            Node::Replica(replica) => format!("core{}", replica.number()),
            Node::EdgeB => EDGE_B_NAME.into(),
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
            Node::Replica(replica) => Some(replica.addr()),
            Node::EdgeB => Some(EDGE_B_WAN_ADDR.into()),
        }
    }

    /// Every node a lab of up to [`MAX_SITES`] sites, [`MAX_CORES`]
    /// replicas and an edge pair can have: [`Node::ALL`], each extra
    /// site's client and edge, each replica, then edge B.
    pub fn every_possible() -> impl Iterator<Item = Node> {
        let extra = (2..=MAX_SITES)
            .filter_map(Site::new)
            .flat_map(|site| [site.client(), site.edge()]);
        let replicas = (1..=MAX_CORES).filter_map(Replica::new).map(Node::Replica);
        Node::ALL
            .into_iter()
            .chain(extra)
            .chain(replicas)
            .chain([Node::EdgeB])
    }
}

impl std::str::FromStr for Node {
    type Err = UnknownNode;

    /// `client`, `edge`, `wan`, `core`, `server`, `clientN` / `edgeN`
    /// (site N; `client1` and `edge1` are `client` and `edge`), `edgeb`
    /// (site 1's second edge), or `coreN` (replica N of a core cluster;
    /// `core` is its director).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownNode(s.to_string());
        if let Some(node) = Node::ALL
            .into_iter()
            .chain([Node::EdgeB])
            .find(|n| n.name() == s)
        {
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
            ("core", _, _) => Replica::new(number).map(Node::Replica).ok_or_else(unknown),
            _ => Err(unknown()),
        }
    }
}

/// The most sites a lab builds.
pub const MAX_SITES: u8 = 16;

/// How far the first extra site's seed is from the lab's (link 1 uses the
/// seed and the seed + 1, link 2 the seed + 1000 and + 1001); site K's is
/// the lab's + this + 2K.
pub const SEED_OFFSET: u64 = 2000;

/// How many sites a lab has: 1 (the default, `client` and `edge`) to
/// [`MAX_SITES`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "u8", into = "u8")]
pub struct Sites(u8);

/// A site count out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` sites: a lab has 1 to {MAX_SITES} sites (e.g. --sites 3)")]
pub struct SitesError(String);

impl Sites {
    /// One site: the lab as it is without `--sites`.
    pub const ONE: Sites = Sites(1);

    /// `count` sites, if 1 to [`MAX_SITES`].
    pub fn new(count: u8) -> Option<Sites> {
        (1..=MAX_SITES).contains(&count).then_some(Sites(count))
    }

    /// How many sites.
    pub fn count(self) -> u8 {
        self.0
    }

    /// The sites beyond site 1, in order (none for one site).
    pub fn extra(self) -> impl Iterator<Item = Site> {
        (2..=self.0).map(Site)
    }
}

impl Default for Sites {
    fn default() -> Sites {
        Sites::ONE
    }
}

impl TryFrom<u8> for Sites {
    type Error = SitesError;

    fn try_from(count: u8) -> Result<Sites, SitesError> {
        Sites::new(count).ok_or_else(|| SitesError(count.to_string()))
    }
}

impl From<Sites> for u8 {
    fn from(sites: Sites) -> u8 {
        sites.0
    }
}

impl std::str::FromStr for Sites {
    type Err = SitesError;

    fn from_str(s: &str) -> Result<Sites, SitesError> {
        s.trim()
            .parse::<u8>()
            .ok()
            .and_then(Sites::new)
            .ok_or_else(|| SitesError(s.to_string()))
    }
}

impl std::fmt::Display for Sites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One of the sites beyond site 1: its number is 2 to [`MAX_SITES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Site(u8);

impl Site {
    /// Site `number`, if it is one of the extra sites (2 to [`MAX_SITES`]).
    pub fn new(number: u8) -> Option<Site> {
        (2..=MAX_SITES).contains(&number).then_some(Site(number))
    }

    /// The site's number.
    pub fn number(self) -> u8 {
        self.0
    }

    /// The third octet of the site's LAN (198.18.X.0/24).
    fn lan_octet(self) -> u8 {
        10 * self.0 + 1
    }

    /// The third octet of the site's WAN segment (198.18.X.0/24).
    fn wan_octet(self) -> u8 {
        10 * self.0 + 2
    }

    /// The site's client namespace.
    pub fn client(self) -> Node {
        Node::SiteClient(self)
    }

    /// The site's edge namespace.
    pub fn edge(self) -> Node {
        Node::SiteEdge(self)
    }

    /// The site's LAN, as a prefix.
    pub fn lan(self) -> String {
        format!("198.18.{}.0/24", self.lan_octet())
    }

    /// The client's address.
    pub fn client_addr(self) -> String {
        format!("198.18.{}.2", self.lan_octet())
    }

    /// The edge's address on the site's LAN.
    pub fn edge_lan_addr(self) -> String {
        format!("198.18.{}.1", self.lan_octet())
    }

    /// The edge's address on the site's WAN segment.
    pub fn edge_wan_addr(self) -> String {
        format!("198.18.{}.1", self.wan_octet())
    }

    /// The core's address on the site's WAN segment.
    pub fn core_wan_addr(self) -> String {
        format!("198.18.{}.2", self.wan_octet())
    }

    /// Fixed MAC of the edge's WAN interface.
    pub(crate) fn edge_wan_mac(self) -> String {
        format!("02:00:c6:12:{:02x}:01", self.wan_octet())
    }

    /// Fixed MAC of the core's interface on the site's segment.
    pub(crate) fn core_wan_mac(self) -> String {
        format!("02:00:c6:12:{:02x}:02", self.wan_octet())
    }

    /// The core's interface towards the site.
    pub fn core_if(self) -> String {
        format!("site{}", self.0)
    }

    /// The site link's `wan` interfaces: (facing the edge, facing the core).
    pub fn wan_interfaces(self) -> (String, String) {
        (format!("s{}e", self.0), format!("s{}c", self.0))
    }

    /// The name the site link's emulator is recorded under.
    pub fn emulator(self) -> String {
        format!("emulator-site{}", self.0)
    }

    /// The file (in the lab's state directory) the site link's emulator
    /// writes its counters to.
    pub fn counters_file(self) -> String {
        format!("counters-site{}.json", self.0)
    }

    /// The name the site's wanopt edge is recorded under.
    pub fn edge_daemon(self) -> String {
        format!("wanopt-edge{}", self.0)
    }

    /// The site link's specs: the lab's link with the site's own seed.
    pub fn specs(self, lab_link: &LinkSpecs) -> LinkSpecs {
        LinkSpecs {
            seed: lab_link
                .seed
                .wrapping_add(SEED_OFFSET + 2 * u64::from(self.0)),
            ..lab_link.clone()
        }
    }
}

/// UDP port of the core's tunnel.
pub const TUNNEL_PORT: u16 = 4433;

/// The most replicas a core cluster (`lab up --cores N`) has.
pub const MAX_CORES: u8 = 8;

/// Port of each replica's control API (on its cluster address), where
/// keepalived asks for `/health`.
pub const CONTROL_PORT: u16 = 7002;

/// The second edge of site 1 (`lab up --edges 2`): its namespace's short
/// name.
pub const EDGE_B_NAME: &str = "edgeb";

/// Edge B's address on its WAN segment.
pub const EDGE_B_WAN_ADDR: &str = "198.18.6.1";

/// One replica of the cluster: its number is 1 to [`MAX_CORES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Replica(u8);

impl Replica {
    /// Replica `number`, if 1 to [`MAX_CORES`].
    pub fn new(number: u8) -> Option<Replica> {
        (1..=MAX_CORES).contains(&number).then_some(Replica(number))
    }

    /// The replica's number.
    pub fn number(self) -> u8 {
        self.0
    }

    /// The replica's namespace.
    pub fn node(self) -> Node {
        Node::Replica(self)
    }

    /// The replica's address on the cluster segment: 198.18.5.(10+K).
    pub fn addr(self) -> String {
        format!("198.18.5.{}", 10 + self.0)
    }

    /// The director's interface towards the replica (a port of
    /// [`crate::cluster::CLUSTER_BRIDGE`]).
    pub fn director_if(self) -> String {
        format!("rep{}", self.0)
    }

    /// The name the replica's wanopt core is recorded under.
    pub fn daemon(self) -> String {
        format!("wanopt-core{}", self.0)
    }

    /// The replica's control API (`--control`).
    pub fn control(self) -> String {
        format!("{}:{CONTROL_PORT}", self.addr())
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
        assert_eq!(Node::every_possible().count(), 5 + 2 * 15 + 8 + 1);
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
            "core0",
            "core9",
            "core02",
            "server2",
            "2",
            "clientx",
            "edge-1",
            "client300",
            "edgec",
            "edgeb2",
        ] {
            let e = bad
                .parse::<Node>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(e.contains("clientN, edgeN") && !e.contains('\n'), "{e}");
            assert!(e.contains("coreN for replica N"), "{e}");
            assert!(e.contains("edgeb for the second edge"), "{e}");
        }
    }

    /// Replicas are `core1` to `core8`; `core` stays the director.
    #[test]
    fn replica_node_names() {
        let replica = |n| Replica::new(n).map(Node::Replica);
        assert_eq!("core1".parse::<Node>().ok(), replica(1));
        assert_eq!("core8".parse::<Node>().ok(), replica(8));
        assert_eq!("core".parse::<Node>().ok(), Some(Node::Core));
        assert_eq!(
            replica(3).and_then(Node::address).as_deref(),
            Some("198.18.5.13")
        );
        assert_eq!(replica(2).map(Node::name).as_deref(), Some("core2"));
    }
}
