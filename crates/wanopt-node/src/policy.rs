//! Address rules: `CIDR[:PORT[-PORT]]`, as used by the core's `--allow` and
//! the edge's `--optimize`.
//!
//! `198.51.100.0/24` matches every port of that prefix, `198.51.100.7:443`
//! one port of one host (a bare address is a /32 or /128),
//! `[2001:db8::/32]:8000-8100` a port range of an IPv6 prefix, and `0.0.0.0/0`
//! or `::/0` everything of that family. A list of rules matches when any rule
//! does; an empty list matches nothing (the caller decides what that means).
//!
//! The core host itself is never reached by a broad rule
//! ([`RuleSet::permits`]): a loopback, unspecified ("this host"),
//! link-local or own interface address is permitted only by a rule that
//! names it, one whose prefix lies inside that range (`127.0.0.1:5432`,
//! `127.0.0.0/8`, `fe80::/10`) or is that very address (`10.0.0.1`,
//! `[2001:db8::1]:443`). `0.0.0.0/0`, `::/0` or a server subnet that holds
//! the core's own address do not name it. Multicast (`224.0.0.0/4`,
//! `ff00::/8`) and the broadcast address are reached the same way, only
//! by a rule that names them: a broad `--allow-udp` does not send a
//! client's datagrams to every host of a segment.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;

/// A rule did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad address rule {rule:?}: {why} (expected CIDR[:PORT[-PORT]], e.g. 198.51.100.0/24:443 or [2001:db8::/32]:8000-8100)")]
pub struct RuleError {
    rule: String,
    why: &'static str,
}

/// One `CIDR[:PORT[-PORT]]` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrRule {
    net: IpNet,
    ports: (u16, u16),
}

impl AddrRule {
    /// Whether `addr` falls inside the prefix and the port range.
    pub fn matches(&self, addr: SocketAddr) -> bool {
        let ip = match addr.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        self.net.contains(&ip) && (self.ports.0..=self.ports.1).contains(&addr.port())
    }

    /// Whether the prefix is an IPv6 one.
    pub fn is_ipv6(&self) -> bool {
        matches!(self.net, IpNet::V6(_))
    }

    /// The prefix as `address/length`, e.g. `198.51.100.0/24`.
    pub fn prefix(&self) -> String {
        self.net.to_string()
    }

    /// The port range, `None` when the rule covers every port.
    pub fn port_range(&self) -> Option<(u16, u16)> {
        (self.ports != (0, u16::MAX)).then_some(self.ports)
    }
}

impl FromStr for AddrRule {
    type Err = RuleError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |why| RuleError {
            rule: text.to_owned(),
            why,
        };
        let text = text.trim();
        // Split "[v6net]:ports", "v4net:ports" or a bare net.
        let (net_text, ports_text) = if let Some(rest) = text.strip_prefix('[') {
            let (net, after) = rest.split_once(']').ok_or(err("missing ']'"))?;
            match after {
                "" => (net, None),
                _ => (
                    net,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or(err("expected ':' after ']'"))?,
                    ),
                ),
            }
        } else if text.matches(':').count() == 1 {
            let (net, ports) = text.split_once(':').ok_or(err("bad port"))?;
            (net, Some(ports))
        } else {
            (text, None)
        };
        let net = match net_text.parse::<IpNet>() {
            Ok(net) => net,
            Err(_) => IpNet::from(
                net_text
                    .parse::<IpAddr>()
                    .map_err(|_| err("not an IP prefix"))?,
            ),
        };
        let ports = match ports_text {
            None => (0, u16::MAX),
            Some(p) => {
                let parse = |s: &str| s.trim().parse::<u16>().map_err(|_| err("bad port"));
                let (lo, hi) = match p.split_once('-') {
                    Some((lo, hi)) => (parse(lo)?, parse(hi)?),
                    None => (parse(p)?, parse(p)?),
                };
                if lo > hi {
                    return Err(err("port range runs backwards"));
                }
                (lo, hi)
            }
        };
        Ok(AddrRule {
            net: net.trunc(),
            ports,
        })
    }
}

impl fmt::Display for AddrRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let net = match self.net {
            IpNet::V6(n) if self.ports != (0, u16::MAX) => format!("[{n}]"),
            n => n.to_string(),
        };
        match self.ports {
            (0, u16::MAX) => write!(f, "{net}"),
            (lo, hi) if lo == hi => write!(f, "{net}:{lo}"),
            (lo, hi) => write!(f, "{net}:{lo}-{hi}"),
        }
    }
}

/// An ordered list of rules; matches when any rule matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSet(pub Vec<AddrRule>);

/// What a [`RuleSet`] says of a destination of the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permit {
    /// A rule permits it.
    Allowed,
    /// No rule matches it.
    NotListed,
    /// It is the host itself (the reason given: `loopback`,
    /// `unspecified`, `link-local` or `one of its own addresses`) or many
    /// hosts (`multicast`, `broadcast`), and only rules broader than that
    /// range match it.
    SelfNotNamed(&'static str),
}

/// The address an IPv4-mapped IPv6 address stands for; others as they are.
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The ranges by which `ip` is the host itself, each with its reason:
/// loopback, unspecified, link-local, or one of `host` (the host's own
/// interface addresses) as a single-address range; or by which it reaches
/// many hosts (multicast, broadcast). Empty for any other address.
pub fn self_ranges(ip: IpAddr, host: &[IpAddr]) -> Vec<(IpNet, &'static str)> {
    const LOCAL: [(&str, &str); 9] = [
        ("127.0.0.0/8", "loopback"),
        ("::1/128", "loopback"),
        ("0.0.0.0/8", "unspecified"),
        ("::/128", "unspecified"),
        ("169.254.0.0/16", "link-local"),
        ("fe80::/10", "link-local"),
        ("224.0.0.0/4", "multicast"),
        ("ff00::/8", "multicast"),
        ("255.255.255.255/32", "broadcast"),
    ];
    let ip = unmapped(ip);
    let mut ranges: Vec<(IpNet, &'static str)> = LOCAL
        .iter()
        .filter_map(|&(net, why)| Some((net.parse::<IpNet>().ok()?, why)))
        .filter(|(net, _)| net.contains(&ip))
        .collect();
    if host.iter().any(|&own| unmapped(own) == ip) {
        ranges.push((IpNet::from(ip), "one of its own addresses"));
    }
    ranges
}

impl RuleSet {
    /// Whether any rule matches `addr`.
    pub fn matches(&self, addr: SocketAddr) -> bool {
        self.0.iter().any(|rule| rule.matches(addr))
    }

    /// How closely the best rule that matches `addr` names it: its prefix
    /// length, then how few ports it spans (greater is closer); `None`
    /// when no rule matches. Routes pick a peer by it.
    pub fn specificity(&self, addr: SocketAddr) -> Option<(u8, u32)> {
        self.0
            .iter()
            .filter(|rule| rule.matches(addr))
            .map(|rule| {
                let span = u32::from(rule.ports.1 - rule.ports.0);
                (rule.net.prefix_len(), u32::from(u16::MAX) - span)
            })
            .max()
    }

    /// Whether the core may connect to `addr`, on a host whose own
    /// interface addresses are `host`: a rule must match it and, when it
    /// is the host itself ([`self_ranges`]), the rule must name it (its
    /// prefix inside one of those ranges).
    pub fn permits(&self, addr: SocketAddr, host: &[IpAddr]) -> Permit {
        let ranges = self_ranges(addr.ip(), host);
        let mut listed = false;
        for rule in self.0.iter().filter(|rule| rule.matches(addr)) {
            listed = true;
            if ranges.is_empty() || ranges.iter().any(|(range, _)| range.contains(&rule.net)) {
                return Permit::Allowed;
            }
        }
        match ranges.first() {
            Some(&(_, why)) if listed => Permit::SelfNotNamed(why),
            _ => Permit::NotListed,
        }
    }

    /// Whether the set has no rule.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> AddrRule {
        s.parse().unwrap()
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn prefixes_hosts_and_port_ranges_match_as_written() {
        assert!(rule("198.51.100.0/24").matches(addr("198.51.100.9:1")));
        assert!(!rule("198.51.100.0/24").matches(addr("198.51.101.9:1")));
        assert!(rule("198.51.100.7:443").matches(addr("198.51.100.7:443")));
        assert!(!rule("198.51.100.7:443").matches(addr("198.51.100.7:80")));
        assert!(!rule("198.51.100.7:443").matches(addr("198.51.100.8:443")));
        let r = rule("127.0.0.0/8:8000-8100");
        assert!(r.matches(addr("127.0.0.1:8000")) && r.matches(addr("127.0.0.1:8100")));
        assert!(!r.matches(addr("127.0.0.1:8101")));
        let r6 = rule("[2001:db8::/32]:80");
        assert!(r6.matches(addr("[2001:db8::1]:80")));
        assert!(!r6.matches(addr("[2001:db9::1]:80")));
        assert!(rule("::1").matches(addr("[::1]:5")));
        assert!(rule("0.0.0.0/0").matches(addr("[::ffff:192.0.2.1]:5")));
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for bad in [
            "",
            "300.1.1.1",
            "10.0.0.0/33",
            "1.2.3.4:99999",
            "1.2.3.4:9-1",
            "[::1",
            "[::1]x",
        ] {
            let e = bad.parse::<AddrRule>().unwrap_err().to_string();
            assert!(e.starts_with("bad address rule"), "{bad}: {e}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "198.51.100.0/24",
            "10.0.0.1/32:443",
            "[2001:db8::/32]:8000-8100",
        ] {
            assert_eq!(rule(text).to_string(), text);
            assert_eq!(rule(&rule(text).to_string()), rule(text));
        }
    }

    #[test]
    fn the_host_itself_is_reached_only_by_a_rule_that_names_it() {
        let host: Vec<IpAddr> = vec![
            "10.0.0.1".parse().unwrap(),
            "2001:db8::1".parse().unwrap(),
            "fe80::1".parse().unwrap(),
        ];
        let set = |rules: &[&str]| RuleSet(rules.iter().map(|r| rule(r)).collect());
        let everything = set(&["0.0.0.0/0", "::/0"]);
        for target in [
            "127.0.0.1:22",
            "127.9.9.9:22",
            "0.0.0.0:7447",
            "169.254.169.254:80",
            "10.0.0.1:7447",
            "[::1]:22",
            "[::]:22",
            "[fe80::2]:22",
            "[2001:db8::1]:22",
            "[::ffff:127.0.0.1]:22",
            "[::ffff:10.0.0.1]:22",
        ] {
            assert!(
                matches!(
                    everything.permits(addr(target), &host),
                    Permit::SelfNotNamed(_)
                ),
                "{target}"
            );
        }
        assert_eq!(
            everything.permits(addr("127.0.0.1:22"), &host),
            Permit::SelfNotNamed("loopback")
        );
        assert_eq!(
            everything.permits(addr("10.0.0.1:22"), &host),
            Permit::SelfNotNamed("one of its own addresses")
        );
        // Other hosts, even in the core's own subnet, stay reachable.
        let subnet = set(&["10.0.0.0/24"]);
        assert_eq!(subnet.permits(addr("10.0.0.2:80"), &host), Permit::Allowed);
        assert!(matches!(
            subnet.permits(addr("10.0.0.1:80"), &host),
            Permit::SelfNotNamed(_)
        ));
        assert_eq!(
            everything.permits(addr("198.51.100.7:80"), &host),
            Permit::Allowed
        );
        // Rules that name the host, its loopback or its link-local range.
        for (rules, target) in [
            (&["127.0.0.1"][..], "127.0.0.1:22"),
            (&["127.0.0.0/8:8000-8100"], "127.0.0.1:8000"),
            (&["10.0.0.1:5432"], "10.0.0.1:5432"),
            (&["0.0.0.0/0", "10.0.0.1"], "10.0.0.1:80"),
            (&["::1"], "[::1]:22"),
            (&["[fe80::/10]:22"], "[fe80::1]:22"),
            (&["169.254.169.254"], "169.254.169.254:80"),
        ] {
            assert_eq!(set(rules).permits(addr(target), &host), Permit::Allowed);
        }
        // Multicast and broadcast: only when named.
        for (target, why) in [
            ("239.1.2.3:5004", "multicast"),
            ("[ff02::1]:5004", "multicast"),
            ("255.255.255.255:67", "broadcast"),
        ] {
            let broad = set(&["0.0.0.0/0", "::/0"]);
            assert_eq!(
                broad.permits(addr(target), &host),
                Permit::SelfNotNamed(why)
            );
        }
        assert_eq!(
            set(&["239.1.2.0/24"]).permits(addr("239.1.2.3:5004"), &host),
            Permit::Allowed
        );
        // Naming one port does not open the others.
        assert_eq!(
            set(&["127.0.0.1:5432", "0.0.0.0/0"]).permits(addr("127.0.0.1:22"), &host),
            Permit::SelfNotNamed("loopback")
        );
        assert_eq!(
            set(&["198.51.100.0/24"]).permits(addr("127.0.0.1:22"), &host),
            Permit::NotListed
        );
    }

    #[test]
    fn an_empty_set_matches_nothing() {
        assert!(!RuleSet::default().matches(addr("127.0.0.1:1")));
    }
}
