//! The firewall rules `wanopt edge --print-firewall` prints: they send to
//! the edge's transparent ports only the TCP flows (`--transparent`) and
//! UDP flows (`--transparent-udp`) that `--optimize` selects (nothing else
//! reaches the edge process), never the edge host's own addresses, for IPv4
//! and IPv6; each method comes with its teardown. UDP needs TPROXY: the
//! REDIRECT methods carry TCP only.
//!
//! Methods, recommended first:
//! - nftables TPROXY: no NAT, the flow keeps its addresses, so two flows from
//!   one client port to two destinations stay distinct. The `tproxy`
//!   statement of nftables does not match when no transparent socket listens
//!   on the port, so while the edge does not listen (the tunnel is down under
//!   `--fail open`, or the edge is stopped) new flows are routed by the kernel
//!   as if the rule were absent, under the FORWARD policy. Only new
//!   connections (`ct state new`) are diverted; a diverted one is marked in
//!   conntrack (`ct mark`) and its later packets follow the mark, so a flow
//!   routed while the edge was away stays routed when it comes back.
//! - iptables TPROXY: the same, except that the `TPROXY` target drops what
//!   finds no listener (clients retry their SYN until the edge listens).
//! - REDIRECT (iptables or nftables NAT): the edge reads `SO_ORIGINAL_DST`;
//!   while the edge does not listen, new flows are refused (a reset).

use std::fmt::Write as _;

use anyhow::bail;

use wanopt_node::policy::{AddrRule, RuleSet};

/// Packet mark that routes TPROXY'd packets to the local host.
const MARK: &str = "0x77";
/// Routing table of the local route for marked packets.
const TABLE: u32 = 177;

/// What the rules intercept and where they send it.
#[derive(Debug)]
pub struct Interception<'a> {
    /// The LAN interface the clients' traffic arrives on.
    pub lan_if: &'a str,
    /// The edge's transparent TCP port (`--transparent`).
    pub port: Option<u16>,
    /// The edge's transparent UDP port (`--transparent-udp`).
    pub udp_port: Option<u16>,
    /// Whether the transparent listener is an IPv6 one (`[::]:PORT` accepts
    /// IPv4 too; an IPv4 listener takes no IPv6 flow).
    pub listen_v6: bool,
    /// `--optimize` rules; empty means every destination.
    pub optimize: &'a RuleSet,
}

/// Destinations of one address family: every one, or these rules.
enum Selection<'a> {
    All,
    Rules(Vec<&'a AddrRule>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn iptables(self) -> &'static str {
        match self {
            Family::V4 => "iptables",
            Family::V6 => "ip6tables",
        }
    }

    fn ip(self) -> &'static str {
        match self {
            Family::V4 => "ip",
            Family::V6 => "ip -6",
        }
    }

    /// The nftables address expression (`ip`, `ip6`).
    fn nft(self) -> &'static str {
        match self {
            Family::V4 => "ip",
            Family::V6 => "ip6",
        }
    }

    fn nfproto(self) -> &'static str {
        match self {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        }
    }

    fn any(self) -> &'static str {
        match self {
            Family::V4 => "0.0.0.0/0",
            Family::V6 => "::/0",
        }
    }
}

impl Selection<'_> {
    /// iptables matches, one per rule (`-p PROTO` included).
    fn iptables(&self, proto: &str) -> Vec<String> {
        match self {
            Selection::All => vec![format!(" -p {proto}")],
            Selection::Rules(rules) => rules
                .iter()
                .map(|r| {
                    let mut m = format!(" -p {proto} -d {}", r.prefix());
                    if let Some((lo, hi)) = r.port_range() {
                        m += &match lo == hi {
                            true => format!(" --dport {lo}"),
                            false => format!(" --dport {lo}:{hi}"),
                        };
                    }
                    m
                })
                .collect(),
        }
    }

    /// nftables matches, one per rule (`meta l4proto PROTO` included).
    fn nft(&self, family: Family, proto: &str) -> Vec<String> {
        match self {
            Selection::All => vec![format!(
                " meta nfproto {} meta l4proto {proto}",
                family.nfproto()
            )],
            Selection::Rules(rules) => rules
                .iter()
                .map(|r| {
                    let mut m = format!(
                        " meta l4proto {proto} {} daddr {}",
                        family.nft(),
                        r.prefix()
                    );
                    if let Some((lo, hi)) = r.port_range() {
                        m += &match lo == hi {
                            true => format!(" {proto} dport {lo}"),
                            false => format!(" {proto} dport {lo}-{hi}"),
                        };
                    }
                    m
                })
                .collect(),
        }
    }
}

/// Whether `name` can be a Linux interface name (and is safe to print
/// into a shell command).
fn is_interface_name(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@+".contains(&b))
}

/// The rules and their teardown, as shell commands with comments.
pub fn rules(i: &Interception) -> anyhow::Result<String> {
    let lan = i.lan_if;
    if !is_interface_name(lan) {
        bail!("--lan-if {lan:?} is not an interface name");
    }
    // The diverted protocols and their ports, TCP first.
    let protos: Vec<(&str, u16)> = [("tcp", i.port), ("udp", i.udp_port)]
        .into_iter()
        .filter_map(|(proto, port)| Some((proto, port?)))
        .collect();
    let Some(&(_, first_port)) = protos.first() else {
        bail!("--print-firewall needs --transparent LISTEN or --transparent-udp LISTEN");
    };
    let (v6_rules, v4_rules): (Vec<&AddrRule>, Vec<&AddrRule>) =
        i.optimize.0.iter().partition(|r| r.is_ipv6());
    if !v6_rules.is_empty() && !i.listen_v6 {
        bail!(
            "--print-firewall: IPv6 --optimize rules need IPv6 transparent listeners: give [::]:{first_port} (it accepts IPv4 too)"
        );
    }
    let mut families: Vec<(Family, Selection)> = Vec::new();
    if i.optimize.is_empty() {
        families.push((Family::V4, Selection::All));
        if i.listen_v6 {
            families.push((Family::V6, Selection::All));
        }
    } else {
        if !v4_rules.is_empty() {
            families.push((Family::V4, Selection::Rules(v4_rules)));
        }
        if !v6_rules.is_empty() {
            families.push((Family::V6, Selection::Rules(v6_rules)));
        }
    }
    let what = protos
        .iter()
        .map(|(proto, port)| format!("{} flows to port {port}", proto.to_uppercase()))
        .collect::<Vec<_>>()
        .join(" and ");

    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(
        w,
        "# wanopt edge: send the flows that --optimize selects, arriving on {lan}, to the\n\
         # edge's transparent ports ({what}); other flows and the edge\n\
         # host's own addresses are left to the kernel (and the FORWARD policy). The edge\n\
         # host must route the clients' traffic (it is their gateway). Pick one method."
    );
    for (family, _) in &families {
        let _ = writeln!(
            w,
            "{}",
            match family {
                Family::V4 => "sysctl -w net.ipv4.ip_forward=1",
                Family::V6 => "sysctl -w net.ipv6.conf.all.forwarding=1",
            }
        );
    }

    nft_tproxy(w, lan, &protos, &families);
    iptables_tproxy(w, lan, &protos, &families);
    match i.port {
        Some(port) => redirect(w, lan, port, &families),
        None => {
            let _ = writeln!(
                w,
                "\n# (REDIRECT carries no UDP: it loses the original destination.)"
            );
        }
    }
    Ok(out)
}

/// The diverted protocols and their transparent ports.
type Protos<'a> = [(&'a str, u16)];

/// The recommended method: nftables TPROXY.
fn nft_tproxy(w: &mut String, lan: &str, protos: &Protos, families: &[(Family, Selection)]) {
    let _ = writeln!(
        w,
        "\n# Recommended: nftables TPROXY (no NAT, flows keep their addresses; while the\n\
         # edge does not listen, the rule does not match and flows are routed as usual)."
    );
    policy_routing(w, families, "add");
    let chain = "inet wanopt prerouting";
    let _ = writeln!(
        w,
        "nft add table inet wanopt\n\
         nft 'add chain {chain} {{ type filter hook prerouting priority mangle; }}'\n\
         nft add rule {chain} iifname \"{lan}\" fib daddr type local return"
    );
    for (proto, port) in protos {
        let _ = writeln!(
            w,
            "nft add rule {chain} iifname \"{lan}\" meta l4proto {proto} ct mark {MARK} tproxy to :{port} meta mark set {MARK} accept"
        );
    }
    for (proto, port) in protos {
        for (family, selection) in families {
            for m in selection.nft(*family, proto) {
                let _ = writeln!(
                    w,
                    "nft add rule {chain} iifname \"{lan}\" ct state new{m} tproxy {} to :{port} meta mark set {MARK} ct mark set {MARK} accept",
                    family.nft()
                );
            }
        }
    }
    let _ = writeln!(w, "# Teardown:\nnft delete table inet wanopt");
    policy_routing(w, families, "del");
}

/// iptables TPROXY.
fn iptables_tproxy(w: &mut String, lan: &str, protos: &Protos, families: &[(Family, Selection)]) {
    let _ = writeln!(
        w,
        "\n# Or iptables TPROXY (the same, but what finds no listener is dropped:\n\
         # SYNs and datagrams, while the edge does not listen)."
    );
    policy_routing(w, families, "add");
    for (family, selection) in families {
        let ipt = family.iptables();
        let _ = writeln!(
            w,
            "{ipt} -t mangle -N WANOPT\n\
             {ipt} -t mangle -A WANOPT -m addrtype --dst-type LOCAL -j RETURN"
        );
        for (proto, _) in protos {
            for m in selection.iptables(proto) {
                let _ = writeln!(
                    w,
                    "{ipt} -t mangle -A WANOPT -m conntrack --ctstate NEW{m} -j CONNMARK --set-mark {MARK}"
                );
            }
        }
        for (proto, port) in protos {
            let _ = writeln!(
                w,
                "{ipt} -t mangle -A WANOPT -p {proto} -m connmark --mark {MARK} -j TPROXY --on-port {port} --tproxy-mark {MARK}/0xffffffff"
            );
        }
        for (proto, _) in protos {
            let _ = writeln!(
                w,
                "{ipt} -t mangle -A PREROUTING -i {lan} -p {proto} -j WANOPT"
            );
        }
    }
    let _ = writeln!(w, "# Teardown:");
    for (family, _) in families {
        chain_teardown(w, family.iptables(), "mangle", lan, protos);
    }
    policy_routing(w, families, "del");
}

/// REDIRECT, TCP only, with iptables or nftables.
fn redirect(w: &mut String, lan: &str, port: u16, families: &[(Family, Selection)]) {
    let chain = "inet wanopt prerouting";
    let _ = writeln!(
        w,
        "\n# Or REDIRECT, for TCP only (NAT; the edge reads SO_ORIGINAL_DST; new flows are\n\
         # refused while the edge does not listen), with iptables:"
    );
    let tcp = [("tcp", port)];
    for (family, selection) in families {
        let ipt = family.iptables();
        let _ = writeln!(
            w,
            "{ipt} -t nat -N WANOPT\n\
             {ipt} -t nat -A WANOPT -m addrtype --dst-type LOCAL -j RETURN"
        );
        for m in selection.iptables("tcp") {
            let _ = writeln!(w, "{ipt} -t nat -A WANOPT{m} -j REDIRECT --to-ports {port}");
        }
        let _ = writeln!(w, "{ipt} -t nat -A PREROUTING -i {lan} -p tcp -j WANOPT");
    }
    let _ = writeln!(w, "# Teardown:");
    for (family, _) in families {
        chain_teardown(w, family.iptables(), "nat", lan, &tcp);
    }
    let _ = writeln!(
        w,
        "\n# or with nftables:\n\
         nft add table inet wanopt\n\
         nft 'add chain {chain} {{ type nat hook prerouting priority dstnat; }}'\n\
         nft add rule {chain} iifname \"{lan}\" fib daddr type local return"
    );
    for (family, selection) in families {
        for m in selection.nft(*family, "tcp") {
            let _ = writeln!(
                w,
                "nft add rule {chain} iifname \"{lan}\"{m} redirect to :{port}"
            );
        }
    }
    let _ = writeln!(w, "# Teardown:\nnft delete table inet wanopt");
}

/// The policy routing that delivers TPROXY-marked packets locally.
fn policy_routing(w: &mut String, families: &[(Family, Selection)], verb: &str) {
    for (family, _) in families {
        let ip = family.ip();
        let _ = writeln!(
            w,
            "{ip} rule {verb} fwmark {MARK} lookup {TABLE}\n\
             {ip} route {verb} local {} dev lo table {TABLE}",
            family.any()
        );
    }
}

fn chain_teardown(w: &mut String, ipt: &str, table: &str, lan: &str, protos: &[(&str, u16)]) {
    for (proto, _) in protos {
        let _ = writeln!(
            w,
            "{ipt} -t {table} -D PREROUTING -i {lan} -p {proto} -j WANOPT"
        );
    }
    let _ = writeln!(w, "{ipt} -t {table} -F WANOPT\n{ipt} -t {table} -X WANOPT");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn print(optimize: &[&str], listen_v6: bool) -> anyhow::Result<String> {
        let set = RuleSet(optimize.iter().map(|r| r.parse().unwrap()).collect());
        rules(&Interception {
            lan_if: "lan0",
            port: Some(7000),
            udp_port: None,
            listen_v6,
            optimize: &set,
        })
    }

    /// The lines of the method whose heading contains `heading`, up to its
    /// teardown, and the teardown's lines.
    fn method<'a>(out: &'a str, heading: &str) -> (Vec<&'a str>, Vec<&'a str>) {
        let start = out.find(heading).unwrap();
        let mut lines = out[start..]
            .lines()
            .skip(1)
            .filter(|l| !l.starts_with("# ") || *l == "# Teardown:");
        let setup: Vec<&str> = lines.by_ref().take_while(|l| *l != "# Teardown:").collect();
        let teardown: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
        (setup, teardown)
    }

    #[test]
    fn only_the_optimized_destinations_are_diverted_by_every_method() {
        let out = print(&["198.18.3.0/24:80-90", "[2001:db8::/32]:443"], true).unwrap();
        for heading in [
            "Recommended: nftables TPROXY",
            "Or iptables TPROXY",
            "with iptables:",
            "or with nftables:",
        ] {
            let (setup, _) = method(&out, heading);
            let diverting: Vec<&&str> = setup
                .iter()
                .filter(|l| {
                    l.contains("ct state new")
                        || l.contains("--ctstate NEW")
                        || l.contains("redirect to")
                        || l.contains("REDIRECT")
                })
                .collect();
            assert_eq!(diverting.len(), 2, "{heading}: {diverting:?}");
            for l in &diverting {
                assert!(
                    l.contains("198.18.3.0/24") || l.contains("2001:db8::/32"),
                    "{l}"
                );
                assert!(
                    l.contains("80:90") || l.contains("80-90") || l.contains("443"),
                    "{l}"
                );
            }
            // The edge host's own addresses are never diverted.
            assert!(
                setup
                    .iter()
                    .any(|l| l.contains("fib daddr type local return")
                        || l.contains("--dst-type LOCAL -j RETURN")),
                "{heading}"
            );
        }
        assert!(out.contains("ip6tables -t mangle -A WANOPT -m conntrack --ctstate NEW -p tcp -d 2001:db8::/32 --dport 443 -j CONNMARK"), "{out}");
        assert!(out.contains("ct state new meta l4proto tcp ip6 daddr 2001:db8::/32 tcp dport 443 tproxy ip6 to :7000"), "{out}");
        assert!(
            out.contains("ip -6 route add local ::/0 dev lo table 177"),
            "{out}"
        );
        assert!(
            out.contains("sysctl -w net.ipv6.conf.all.forwarding=1"),
            "{out}"
        );
    }

    #[test]
    fn tproxy_comes_first_and_every_method_has_its_teardown() {
        let out = print(&["198.18.3.0/24"], false).unwrap();
        let first = out.find("tproxy ip to :7000").unwrap();
        assert!(first < out.find("TPROXY --on-port").unwrap());
        assert!(first < out.find("REDIRECT").unwrap());
        let (_, teardown) = method(&out, "Recommended: nftables TPROXY");
        assert_eq!(
            teardown,
            [
                "nft delete table inet wanopt",
                "ip rule del fwmark 0x77 lookup 177",
                "ip route del local 0.0.0.0/0 dev lo table 177"
            ]
        );
        let (_, teardown) = method(&out, "with iptables:");
        assert_eq!(
            teardown,
            [
                "iptables -t nat -D PREROUTING -i lan0 -p tcp -j WANOPT",
                "iptables -t nat -F WANOPT",
                "iptables -t nat -X WANOPT"
            ]
        );
        // An IPv4-only rule set prints nothing for IPv6.
        assert!(!out.contains("ip6"), "{out}");
    }

    #[test]
    fn no_rule_diverts_every_destination_of_the_listeners_families() {
        let out = print(&[], false).unwrap();
        assert!(
            out.contains("ct state new meta nfproto ipv4 meta l4proto tcp tproxy ip to :7000"),
            "{out}"
        );
        assert!(!out.contains("ipv6"), "{out}");
        let out = print(&[], true).unwrap();
        assert!(
            out.contains("ct state new meta nfproto ipv6 meta l4proto tcp tproxy ip6 to :7000"),
            "{out}"
        );
    }

    #[test]
    fn udp_is_diverted_by_tproxy_to_its_own_port_and_never_redirected() {
        let set = RuleSet(vec!["198.18.3.0/24:5004-5006".parse().unwrap()]);
        let both = |port| {
            rules(&Interception {
                lan_if: "lan0",
                port,
                udp_port: Some(7001),
                listen_v6: false,
                optimize: &set,
            })
            .unwrap()
        };
        let out = both(Some(7000));
        let (setup, _) = method(&out, "Recommended: nftables TPROXY");
        assert!(setup.contains(&"nft add rule inet wanopt prerouting iifname \"lan0\" ct state new meta l4proto udp ip daddr 198.18.3.0/24 udp dport 5004-5006 tproxy ip to :7001 meta mark set 0x77 ct mark set 0x77 accept"), "{setup:#?}");
        assert!(setup.contains(&"nft add rule inet wanopt prerouting iifname \"lan0\" meta l4proto udp ct mark 0x77 tproxy to :7001 meta mark set 0x77 accept"), "{setup:#?}");
        assert!(setup
            .iter()
            .any(|l| l.contains("l4proto tcp") && l.contains(":7000")));
        let (setup, teardown) = method(&out, "Or iptables TPROXY");
        assert!(setup.contains(&"iptables -t mangle -A WANOPT -p udp -m connmark --mark 0x77 -j TPROXY --on-port 7001 --tproxy-mark 0x77/0xffffffff"), "{setup:#?}");
        assert!(setup.contains(&"iptables -t mangle -A PREROUTING -i lan0 -p udp -j WANOPT"));
        assert!(teardown.contains(&"iptables -t mangle -D PREROUTING -i lan0 -p udp -j WANOPT"));
        assert!(teardown.contains(&"iptables -t mangle -D PREROUTING -i lan0 -p tcp -j WANOPT"));
        // REDIRECT carries TCP only.
        let (setup, _) = method(&out, "with iptables:");
        assert!(setup.iter().all(|l| !l.contains("udp")), "{setup:#?}");
        // UDP alone: no REDIRECT method at all.
        let out = both(None);
        assert!(
            !out.contains("REDIRECT --to-ports") && !out.contains("redirect to"),
            "{out}"
        );
        assert!(
            !out.contains("l4proto tcp") && !out.contains("-p tcp"),
            "{out}"
        );
    }

    #[test]
    fn ipv6_rules_need_an_ipv6_listener_and_interface_names_are_checked() {
        let e = print(&["[2001:db8::/32]:443"], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("[::]:7000"), "{e}");
        let set = RuleSet::default();
        let e = rules(&Interception {
            lan_if: "lan0; reboot",
            port: Some(7000),
            udp_port: None,
            listen_v6: false,
            optimize: &set,
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("not an interface name"), "{e}");
    }
}
