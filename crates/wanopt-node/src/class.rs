//! Traffic classes: which UDP flows the edge protects as real-time
//! traffic and which flows go ahead of or behind the others in the tunnel.
//!
//! A class is a name, what it matches and what it gets:
//!
//! ```text
//! --class name=voice,udp,dscp=ef,realtime,priority=high
//! --class name=backup,tcp,dst=10.9.0.0/16:873,priority=low
//! ```
//!
//! - `udp` / `tcp`: the protocol (both when neither is given);
//! - `dst=CIDR[:PORT[-PORT]]`, repeatable: the destination (any when none);
//! - `dscp=ef|af41|cs5|46`, repeatable: the DSCP of a UDP flow's first
//!   datagram (any when none). The edge does not see a TCP client's DSCP,
//!   so a class with `dscp` matches UDP flows only;
//! - `realtime` (UDP flows only: TCP resends what it loses): the flow's
//!   datagrams, both ways, go on every WAN path when the edge's
//!   `--path-mode` is `duplicate`, and in the FEC's call strand (short
//!   blocks, a full code of their own) when FEC is on;
//! - `priority=high|normal|low`: the flow's tunnel stream goes ahead of,
//!   with, or behind the others (UDP datagrams always go ahead of streams'
//!   data, within their share);
//! - `sla=latency<150ms,loss<1%,jitter<30ms` (real-time classes; the
//!   items with `<` after `sla=` are its terms): real-time datagrams take
//!   the first path that meets it, or the best one when none does
//!   ([`wanopt_proto::path::sla`]), instead of every path (bond) or the
//!   data path (failover, spread-fec). With several, the strictest
//!   thresholds of all apply.
//!
//! Within a key any value matches; all keys given must match. The first
//! class that matches a flow is its class. Without any class, every UDP
//! flow is real-time; with classes, only the flows of a class that says
//! `realtime`.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use wanopt_proto::path::Sla;
use wanopt_proto::Services;

use crate::policy::AddrRule;

/// A class did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad traffic class {spec:?}: {why} (expected e.g. name=voice,udp,dscp=ef,dst=10.0.0.0/8:5004-5100,realtime,priority=high,sla=latency<150ms,loss<1%)")]
pub struct ClassError {
    spec: String,
    why: String,
}

/// The protocol a class matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// TCP flows.
    Tcp,
    /// UDP flows.
    Udp,
}

/// Where a class's flows go relative to the others in the tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// Ahead of the others.
    High,
    /// With the others.
    #[default]
    Normal,
    /// Behind the others.
    Low,
}

impl Priority {
    /// The QUIC stream priority (higher goes first).
    pub fn stream_priority(self) -> i32 {
        match self {
            Priority::High => 1,
            Priority::Normal => 0,
            Priority::Low => -1,
        }
    }

    /// The open header's bits for it.
    pub fn services(self) -> Services {
        match self {
            Priority::High => Services::URGENT,
            Priority::Normal => Services::default(),
            Priority::Low => Services::BACKGROUND,
        }
    }

    /// The priority an open header asks for.
    pub fn of(services: Services) -> Priority {
        if services.contains(Services::URGENT) {
            Priority::High
        } else if services.contains(Services::BACKGROUND) {
            Priority::Low
        } else {
            Priority::Normal
        }
    }
}

/// One traffic class.
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficClass {
    /// Its name, shown in `wanopt flows`.
    pub name: String,
    /// The protocol, or both.
    pub proto: Option<Proto>,
    /// Destinations (any when empty).
    pub dst: Vec<AddrRule>,
    /// DSCP values, 0-63 (any when empty).
    pub dscp: Vec<u8>,
    /// Duplicate the flow's datagrams over every WAN path.
    pub realtime: bool,
    /// Stream priority.
    pub priority: Priority,
    /// The service level its real-time datagrams' path must meet (empty:
    /// none).
    pub sla: Sla,
}

/// DSCP names (RFC 2474, 2597, 3246, 5865).
const DSCP_NAMES: &[(&str, u8)] = &[
    ("cs0", 0),
    ("be", 0),
    ("default", 0),
    ("cs1", 8),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("cs2", 16),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("cs3", 24),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("cs4", 32),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("cs5", 40),
    ("voice-admit", 44),
    ("ef", 46),
    ("cs6", 48),
    ("cs7", 56),
];

/// A DSCP given by name or as a number 0-63.
pub fn parse_dscp(text: &str) -> Option<u8> {
    let text = text.trim().to_ascii_lowercase();
    if let Some(&(_, v)) = DSCP_NAMES.iter().find(|(name, _)| *name == text) {
        return Some(v);
    }
    text.parse::<u8>().ok().filter(|v| *v < 64)
}

impl FromStr for TrafficClass {
    type Err = ClassError;

    fn from_str(spec: &str) -> Result<Self, ClassError> {
        let err = |why: String| ClassError {
            spec: spec.to_owned(),
            why,
        };
        let mut class = TrafficClass {
            name: String::new(),
            proto: None,
            dst: Vec::new(),
            dscp: Vec::new(),
            realtime: false,
            priority: Priority::Normal,
            sla: Sla::default(),
        };
        let mut in_sla = false;
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            if in_sla && !item.contains('=') && item.contains('<') {
                class.sla.add_term(item).map_err(|e| err(e.to_string()))?;
                continue;
            }
            in_sla = false;
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (item, None),
            };
            match (key, value) {
                ("name", Some(v)) if !v.is_empty() => class.name = v.to_owned(),
                ("udp" | "tcp", None) => {
                    let proto = if key == "udp" { Proto::Udp } else { Proto::Tcp };
                    if class.proto.is_some_and(|p| p != proto) {
                        return Err(err(
                            "both udp and tcp: leave both out to match either".into()
                        ));
                    }
                    class.proto = Some(proto);
                }
                ("dst", Some(v)) => class.dst.push(
                    v.parse()
                        .map_err(|e: crate::policy::RuleError| err(e.to_string()))?,
                ),
                ("dscp", Some(v)) => class.dscp.push(parse_dscp(v).ok_or_else(|| {
                    err(format!(
                        "unknown DSCP {v:?} (a number 0-63 or a name: ef, af11-af43, cs0-cs7)"
                    ))
                })?),
                ("realtime", None) => class.realtime = true,
                ("sla", Some(v)) => {
                    class.sla.add_term(v).map_err(|e| err(e.to_string()))?;
                    in_sla = true;
                }
                ("priority", Some(v)) => {
                    class.priority = match v {
                        "high" => Priority::High,
                        "normal" => Priority::Normal,
                        "low" => Priority::Low,
                        _ => return Err(err(format!("priority {v:?} is not high, normal or low"))),
                    }
                }
                _ => return Err(err(format!("unknown item {item:?}"))),
            }
        }
        if class.name.is_empty() {
            return Err(err("no name=".into()));
        }
        class.check().map_err(err)?;
        Ok(class)
    }
}

impl TrafficClass {
    /// What a class may not say, however it was given.
    pub fn check(&self) -> Result<(), String> {
        if self.realtime && self.proto == Some(Proto::Tcp) {
            return Err("realtime applies to UDP flows only (TCP resends what it loses)".into());
        }
        if !self.sla.is_empty() && !self.realtime {
            return Err("sla chooses the path of real-time datagrams: add realtime (other flows go as --path-mode sends them)".into());
        }
        if !self.dscp.is_empty() && self.proto == Some(Proto::Tcp) {
            return Err(
                "dscp matches UDP flows only (the edge does not see a TCP client's DSCP)".into(),
            );
        }
        Ok(())
    }

    /// Whether a flow of `proto` to `dst`, whose first datagram carried
    /// `dscp` (UDP), is of this class.
    pub fn matches(&self, proto: Proto, dst: Option<SocketAddr>, dscp: Option<u8>) -> bool {
        let proto_ok = match self.proto {
            Some(p) => p == proto,
            // A class that names a DSCP matches only what carries one.
            None => self.dscp.is_empty() || proto == Proto::Udp,
        };
        let dst_ok =
            self.dst.is_empty() || dst.is_some_and(|d| self.dst.iter().any(|r| r.matches(d)));
        let dscp_ok = self.dscp.is_empty() || dscp.is_some_and(|d| self.dscp.contains(&d));
        proto_ok && dst_ok && dscp_ok
    }
}

impl fmt::Display for TrafficClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "name={}", self.name)?;
        match self.proto {
            Some(Proto::Udp) => write!(f, ",udp")?,
            Some(Proto::Tcp) => write!(f, ",tcp")?,
            None => {}
        }
        for rule in &self.dst {
            write!(f, ",dst={rule}")?;
        }
        for dscp in &self.dscp {
            write!(f, ",dscp={dscp}")?;
        }
        if self.realtime {
            write!(f, ",realtime")?;
        }
        match self.priority {
            Priority::High => write!(f, ",priority=high")?,
            Priority::Normal => {}
            Priority::Low => write!(f, ",priority=low")?,
        }
        if !self.sla.is_empty() {
            write!(f, ",sla={}", self.sla)?;
        }
        Ok(())
    }
}

/// The edge's classes, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Classes(pub Vec<TrafficClass>);

/// The edge's policy: which flows it optimizes and how. A reload
/// replaces it while flows run; each new flow reads the current one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EdgePolicy {
    /// Transparent flows to optimize (`--optimize`); empty: all.
    pub optimize: crate::policy::RuleSet,
    /// Connect unmatched transparent flows from the edge's address.
    pub pass_unmatched: bool,
    /// Optimized flows that skip data reduction.
    pub no_reduce_to: crate::policy::RuleSet,
    /// Traffic classes.
    pub classes: Classes,
}

/// The current [`EdgePolicy`], replaced whole by a reload.
#[derive(Debug, Default)]
pub struct LivePolicy(std::sync::RwLock<std::sync::Arc<EdgePolicy>>);

impl LivePolicy {
    /// A live policy starting as `policy`.
    pub fn new(policy: EdgePolicy) -> LivePolicy {
        LivePolicy(std::sync::RwLock::new(std::sync::Arc::new(policy)))
    }

    /// The policy now.
    pub fn get(&self) -> std::sync::Arc<EdgePolicy> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces it; whether it changed.
    pub fn set(&self, policy: EdgePolicy) -> bool {
        let mut current = self.0.write().unwrap_or_else(|e| e.into_inner());
        let changed = **current != policy;
        *current = std::sync::Arc::new(policy);
        changed
    }
}

/// What a flow gets from its class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Treatment<'a> {
    /// The class's name, if a class matched.
    pub class: Option<&'a str>,
    /// Protect its datagrams (duplication, the call strand).
    pub realtime: bool,
    /// Its stream's priority.
    pub priority: Priority,
}

impl Treatment<'_> {
    /// The open header's bits for it (on top of the flow's others).
    pub fn services(&self) -> Services {
        let realtime = if self.realtime {
            Services::REALTIME
        } else {
            Services::default()
        };
        self.priority.services().with(realtime)
    }
}

/// The names `wanopt flows` shows for a flow's class services.
pub fn service_names(services: Services) -> impl Iterator<Item = &'static str> {
    [
        (Services::REALTIME, "realtime"),
        (Services::URGENT, "priority-high"),
        (Services::BACKGROUND, "priority-low"),
    ]
    .into_iter()
    .filter(move |(bit, _)| services.contains(*bit))
    .map(|(_, name)| name)
}

impl Classes {
    /// The treatment of a flow: its class's, or the default (UDP flows
    /// real-time when no class is given at all).
    pub fn classify(
        &self,
        proto: Proto,
        dst: Option<SocketAddr>,
        dscp: Option<u8>,
    ) -> Treatment<'_> {
        match self.0.iter().find(|c| c.matches(proto, dst, dscp)) {
            Some(c) => Treatment {
                class: Some(&c.name),
                realtime: c.realtime && proto == Proto::Udp,
                priority: c.priority,
            },
            None => Treatment {
                class: None,
                realtime: self.0.is_empty() && proto == Proto::Udp,
                priority: Priority::Normal,
            },
        }
    }

    /// Whether any class names a DSCP (the UDP listeners then read it).
    pub fn uses_dscp(&self) -> bool {
        self.0.iter().any(|c| !c.dscp.is_empty())
    }

    /// The SLA real-time datagrams' path must meet: the strictest of the
    /// real-time classes' (`None`: no class has one).
    pub fn sla(&self) -> Option<Sla> {
        self.0
            .iter()
            .filter(|c| c.realtime && !c.sla.is_empty())
            .map(|c| c.sla)
            .reduce(Sla::strictest)
    }

    /// Whether there are no classes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Option<SocketAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn an_sla_takes_the_terms_after_it_and_the_strictest_of_all_applies() {
        let c: TrafficClass =
            "name=voice,udp,realtime,sla=latency<150ms, loss<1%,jitter<30ms,priority=high"
                .parse()
                .unwrap();
        assert_eq!(c.priority, Priority::High);
        assert_eq!(c.sla.to_string(), "latency<150ms,loss<1%,jitter<30ms");
        assert_eq!(
            c.to_string(),
            "name=voice,udp,realtime,priority=high,sla=latency<150ms,loss<1%,jitter<30ms"
        );
        assert_eq!(c.to_string().parse::<TrafficClass>().unwrap(), c);
        let video: TrafficClass = "name=video,udp,realtime,sla=latency<100ms,loss<2%"
            .parse()
            .unwrap();
        let bulk: TrafficClass = "name=bulk,tcp,priority=low".parse().unwrap();
        assert_eq!(
            Classes(vec![c.clone(), video, bulk.clone()])
                .sla()
                .unwrap()
                .to_string(),
            "latency<100ms,loss<1%,jitter<30ms"
        );
        assert_eq!(Classes(vec![bulk]).sla(), None);
        for (bad, says) in [
            ("name=x,udp,sla=latency<150ms", "add realtime"),
            ("name=x,tcp,sla=loss<1%", "add realtime"),
            (
                "name=x,udp,realtime,sla=latency<150",
                "bad SLA term \"latency<150\"",
            ),
            (
                "name=x,udp,realtime,sla=loss<1%,rtt<5ms",
                "the metric is latency, loss or jitter",
            ),
            // A term with `<` that follows no sla= is no item.
            ("name=x,udp,realtime,loss<1%", "unknown item \"loss<1%\""),
        ] {
            let e = bad.parse::<TrafficClass>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn classes_parse_print_and_refuse_what_they_cannot_do() {
        let c: TrafficClass = "name=voice, udp, dscp=ef, dscp=af41, dst=10.0.0.0/8:5004-5100, realtime, priority=high"
            .parse()
            .unwrap();
        assert_eq!(c.proto, Some(Proto::Udp));
        assert_eq!(c.dscp, [46, 34]);
        assert!(c.realtime);
        assert_eq!(c.priority, Priority::High);
        assert_eq!(
            c.to_string(),
            "name=voice,udp,dst=10.0.0.0/8:5004-5100,dscp=46,dscp=34,realtime,priority=high"
        );
        assert_eq!(c.to_string().parse::<TrafficClass>().unwrap(), c);
        for (bad, says) in [
            ("udp,realtime", "no name="),
            ("name=x,tcp,realtime", "UDP flows only"),
            ("name=x,tcp,dscp=ef", "UDP flows only"),
            ("name=x,udp,tcp", "both udp and tcp"),
            ("name=x,dscp=64", "unknown DSCP"),
            ("name=x,dscp=xx", "unknown DSCP"),
            ("name=x,priority=urgent", "not high, normal or low"),
            ("name=x,dst=10.0.0.0/33", "bad address rule"),
            ("name=x,duplicat", "unknown item"),
        ] {
            let e = bad.parse::<TrafficClass>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_first_matching_class_decides_and_without_classes_udp_is_realtime() {
        let none = Classes::default();
        assert!(
            none.classify(Proto::Udp, addr("10.0.0.1:5004"), None)
                .realtime
        );
        assert!(
            !none
                .classify(Proto::Tcp, addr("10.0.0.1:443"), None)
                .realtime
        );

        let classes = Classes(vec![
            "name=voice,udp,dscp=ef,realtime,priority=high"
                .parse()
                .unwrap(),
            "name=media,dst=10.1.0.0/16:5004-5100,realtime"
                .parse()
                .unwrap(),
            "name=backup,tcp,dst=10.9.0.0/16,priority=low"
                .parse()
                .unwrap(),
        ]);
        let t = classes.classify(Proto::Udp, addr("192.0.2.1:9"), Some(46));
        assert_eq!(
            (t.class, t.realtime, t.priority),
            (Some("voice"), true, Priority::High)
        );
        assert_eq!(t.services(), Services::REALTIME.with(Services::URGENT));
        // Not EF: the next class, by destination.
        let t = classes.classify(Proto::Udp, addr("10.1.2.3:5004"), Some(0));
        assert_eq!((t.class, t.realtime), (Some("media"), true));
        // A TCP flow to the media range is of that class, never real-time.
        let t = classes.classify(Proto::Tcp, addr("10.1.2.3:5004"), None);
        assert_eq!((t.class, t.realtime), (Some("media"), false));
        let t = classes.classify(Proto::Tcp, addr("10.9.0.1:873"), None);
        assert_eq!((t.class, t.priority), (Some("backup"), Priority::Low));
        assert_eq!(Priority::of(t.services()), Priority::Low);
        // With classes, a flow of none is not real-time.
        let t = classes.classify(Proto::Udp, addr("192.0.2.1:53"), Some(0));
        assert_eq!(
            (t.class, t.realtime, t.priority),
            (None, false, Priority::Normal)
        );
        // A DSCP class never matches a flow without a DSCP read.
        let dscp_only = Classes(vec!["name=ef,dscp=ef".parse().unwrap()]);
        assert_eq!(
            dscp_only
                .classify(Proto::Tcp, addr("10.0.0.1:1"), None)
                .class,
            None
        );
        assert_eq!(
            dscp_only
                .classify(Proto::Udp, addr("10.0.0.1:1"), None)
                .class,
            None
        );
        assert!(dscp_only.uses_dscp() && !classes.is_empty());
    }

    #[test]
    fn dscp_names_are_the_rfcs_code_points() {
        assert_eq!(parse_dscp("EF"), Some(46));
        assert_eq!(parse_dscp("af11"), Some(10));
        assert_eq!(parse_dscp("af43"), Some(38));
        assert_eq!(parse_dscp("cs7"), Some(56));
        assert_eq!(parse_dscp("63"), Some(63));
        assert_eq!(parse_dscp("64"), None);
    }
}
