//! Several branch sites (`lab up --sites N`): sites 2..N each get a client
//! and an edge namespace and their own emulated WAN link into `wan` and on
//! to the one `core` (and `server`) of the lab.
//!
//! ```text
//!  client2         edge2                   wan                    core
//!  eth0 ──────── lan0    wan0 ───────── s2e [emulator-site2] s2c ── site2
//!  198.18.21.2  198.18.21.1  198.18.22.1                           198.18.22.2
//!  ...
//!  clientK ...   edgeK ...  198.18.(10K+2).1 ── sKe [emulator-siteK] sKc ── siteK 198.18.(10K+2).2
//! ```
//!
//! Site 1 is the lab's `client` and `edge` (198.18.1.0/24, 198.18.2.0/24)
//! and is built as without `--sites`. Site K (2 to [`MAX_SITES`]) has its
//! LAN on 198.18.(10K+1).0/24 (edge .1, client .2) and its WAN segment on
//! 198.18.(10K+2).0/24 (edge .1, core .2): from 198.18.21.0 up, clear of
//! the lab's 198.18.1-4.0/24. The core routes each site's LAN through that
//! site's edge; each edge routes the server LAN (198.18.3.0/24) through
//! the core, as site 1's does. Sites do not route to one another.
//!
//! Every site's link has the same options (`--rtt`, `--rate`, `--up`, ...)
//! and its own emulator process in `wan` (`emulator-siteK`, counters in
//! `counters-siteK.json`), seeded with the lab's seed + 2000 + 2K so its
//! draws are its own. An emulator is one process with a thread per
//! direction, event driven (no spinning): on the lab's two cores three
//! sites at tens of Mbit/s each are fine; more sites, or rates in the
//! hundreds of Mbit/s, measure the machine rather than the links.
//!
//! With `--optimize` each site's edge runs its own `wanopt edge` (own key,
//! `--core` at the core's address on that site's segment) and the one
//! `wanopt core` pins every edge's key and listens on every address.

use std::path::Path;

pub use crate::node::{Site, Sites, SitesError, MAX_SITES, SEED_OFFSET};
use crate::topology::{Lab, Node, TopologyError, EDGE_LAN_IF};

impl Lab {
    /// Adds sites 2..N to a lab that [`Lab::create`] built: per site a
    /// client and an edge namespace, the veths client `eth0` to edge
    /// `lan0`, edge `wan0` to wan `sKe` and wan `sKc` to core `siteK`,
    /// addresses, routes, fixed MACs with permanent neighbours, offloads
    /// off and MTU 1500 as on link 1. A namespace of a site's names that
    /// the lab did not create is an error.
    pub fn create_sites(&self, sites: Sites) -> Result<(), TopologyError> {
        for site in sites.extra() {
            for node in [site.client(), site.edge()] {
                self.add_netns(node)?;
            }
            self.create_site(site)?;
        }
        Ok(())
    }

    fn create_site(&self, site: Site) -> Result<(), TopologyError> {
        let (client, edge) = (site.client(), site.edge());
        let (wan_edge_if, wan_core_if) = site.wan_interfaces();
        let core_if = site.core_if();
        self.veth(client, "eth0", edge, EDGE_LAN_IF)?;
        self.veth(edge, "wan0", Node::Wan, &wan_edge_if)?;
        self.veth(Node::Wan, &wan_core_if, Node::Core, &core_if)?;
        self.ip_in(
            edge,
            &["link", "set", "wan0", "address", &site.edge_wan_mac()],
        )?;
        self.ip_in(
            Node::Core,
            &["link", "set", &core_if, "address", &site.core_wan_mac()],
        )?;
        let addrs = [
            (client, "eth0", site.client_addr()),
            (edge, EDGE_LAN_IF, site.edge_lan_addr()),
            (edge, "wan0", site.edge_wan_addr()),
            (Node::Core, core_if.as_str(), site.core_wan_addr()),
        ];
        for (node, dev, addr) in &addrs {
            self.ip_in(*node, &["addr", "add", &format!("{addr}/24"), "dev", dev])?;
        }
        for (node, dev) in [
            (client, "eth0"),
            (edge, EDGE_LAN_IF),
            (edge, "wan0"),
            (Node::Wan, wan_edge_if.as_str()),
            (Node::Wan, wan_core_if.as_str()),
            (Node::Core, core_if.as_str()),
        ] {
            self.ip_in(node, &["link", "set", dev, "mtu", "1500", "up"])?;
            self.offloads_off(node, dev)?;
        }
        for dev in [&wan_edge_if, &wan_core_if] {
            self.ip_in(Node::Wan, &["link", "set", dev, "promisc", "on"])?;
        }
        self.ip_in(
            client,
            &["route", "add", "default", "via", &site.edge_lan_addr()],
        )?;
        self.ip_in(
            edge,
            &[
                "route",
                "add",
                "198.18.3.0/24",
                "via",
                &site.core_wan_addr(),
            ],
        )?;
        self.ip_in(
            Node::Core,
            &["route", "add", &site.lan(), "via", &site.edge_wan_addr()],
        )?;
        // Static neighbours across the site's link: no ARP through the emulator.
        for (node, dev, peer, mac) in [
            (edge, "wan0", site.core_wan_addr(), site.core_wan_mac()),
            (
                Node::Core,
                core_if.as_str(),
                site.edge_wan_addr(),
                site.edge_wan_mac(),
            ),
        ] {
            self.ip_in(
                node,
                &[
                    "neigh",
                    "replace",
                    &peer,
                    "lladdr",
                    &mac,
                    "dev",
                    dev,
                    "nud",
                    "permanent",
                ],
            )?;
        }
        self.sysctl(edge, "net.ipv4.ip_forward", "1")
    }

    /// Whether the namespaces of `site` exist.
    pub fn has_site(&self, site: Site) -> bool {
        [site.client(), site.edge()]
            .iter()
            .all(|&n| Path::new("/run/netns").join(self.netns(n)).exists())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::LinkSpecs;

    #[test]
    fn site_counts_are_one_to_sixteen() {
        assert_eq!("1".parse::<Sites>().ok(), Some(Sites::ONE));
        assert_eq!("16".parse::<Sites>().map(Sites::count).ok(), Some(16));
        for bad in ["0", "17", "-1", "three", "", "300"] {
            let e = bad
                .parse::<Sites>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(e.contains("a lab has 1 to 16 sites"), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(Sites::default(), Sites::ONE);
        assert_eq!(Sites::ONE.extra().count(), 0);
        let numbers: Vec<u8> = Sites::new(3)
            .map(|s| s.extra().map(Site::number).collect())
            .unwrap_or_default();
        assert_eq!(numbers, [2, 3]);
    }

    /// Settings keep the count as a number, and refuse one out of range.
    #[test]
    fn sites_serialize_as_a_number() {
        let three = Sites::new(3).unwrap_or_default();
        assert_eq!(serde_json::to_string(&three).ok().as_deref(), Some("3"));
        assert_eq!(serde_json::from_str::<Sites>("3").ok(), Some(three));
        assert!(serde_json::from_str::<Sites>("0").is_err());
        assert!(serde_json::from_str::<Sites>("99").is_err());
    }

    /// Every extra site's addresses are its own and clear of the lab's
    /// 198.18.1-4.0/24; names fit an interface name (15 bytes).
    #[test]
    fn site_addresses_do_not_collide() {
        use std::collections::BTreeSet;
        let fixed = [
            "198.18.1.0/24",
            "198.18.2.0/24",
            "198.18.3.0/24",
            "198.18.4.0/24",
        ];
        let mut nets: BTreeSet<String> = fixed.iter().map(|s| s.to_string()).collect();
        let mut macs = BTreeSet::new();
        for number in 2..=MAX_SITES {
            let site = Site::new(number).unwrap_or_else(|| panic!("site {number}"));
            let wan = format!(
                "{}.0/24",
                site.edge_wan_addr().rsplit_once('.').map_or("", |p| p.0)
            );
            assert!(nets.insert(site.lan()), "{}", site.lan());
            assert!(nets.insert(wan.clone()), "{wan}");
            assert!(site.client_addr().parse::<std::net::Ipv4Addr>().is_ok());
            assert!(site.core_wan_addr().parse::<std::net::Ipv4Addr>().is_ok());
            assert!(macs.insert(site.edge_wan_mac()));
            assert!(macs.insert(site.core_wan_mac()));
            let (e, c) = site.wan_interfaces();
            assert!(e.len() <= 15 && c.len() <= 15 && site.core_if().len() <= 15);
        }
        let site2 = Site::new(2).unwrap_or_else(|| panic!("site 2"));
        assert_eq!(site2.client_addr(), "198.18.21.2");
        assert_eq!(site2.core_wan_addr(), "198.18.22.2");
        assert_eq!(site2.edge_wan_mac(), "02:00:c6:12:16:01");
        assert_eq!(Site::new(1), None);
        assert_eq!(Site::new(MAX_SITES + 1), None);
    }

    #[test]
    fn each_site_link_has_its_own_seed() {
        let link = LinkSpecs {
            up: "rtt 10ms".into(),
            down: "rtt 10ms".into(),
            seed: 1,
            middlebox: String::new(),
            mtu: None,
        };
        let seeds: Vec<u64> = (2..=MAX_SITES)
            .filter_map(Site::new)
            .map(|s| s.specs(&link).seed)
            .collect();
        assert_eq!(seeds.first(), Some(&2005));
        // Each direction uses its seed and the next: no two links share one.
        assert!(seeds.windows(2).all(|w| w[1] >= w[0] + 2));
        assert!(seeds.iter().all(|&s| s > 1001 + 1));
        assert_eq!(
            Site::new(2).map(|s| s.specs(&link).up),
            Some(link.up.clone())
        );
    }
}
