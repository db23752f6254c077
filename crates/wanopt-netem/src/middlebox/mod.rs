//! Middlebox rules that rewrite TCP/IPv4 headers the way real path elements
//! do, so the lab can show what they break (and that the optimizer's tunnel
//! is immune): stripping SACK-permitted, changing or stripping the window
//! scale, clamping the MSS, randomizing initial sequence numbers (with or
//! without fixing SACK blocks), and the paper's ECN policies: bleaching ECN,
//! blocking ECN negotiation, setting or clearing congestion marks and
//! rewriting the IP ECN field. Two rules act on UDP instead, as networks
//! that block or police it do (and so QUIC): blocking it and policing it
//! to a rate with a token bucket.
//!
//! Rules are first-match, like smoltcp's fault injector or turmoil's rules:
//! [`Middlebox::process`] tries the rules in order, and the first whose
//! [`Match`] accepts the segment applies all its [`Action`]s; later rules are
//! not consulted. A rule is of one protocol ([`Rule::protocol`]): a rule
//! with a UDP action ([`Action::BlockUdp`], [`Action::PoliceUdp`]) sees
//! only UDP datagrams, any other only TCP segments, so `port 22 drop`
//! never drops UDP and `block-udp` never touches TCP. Options are rewritten in place (a removed option becomes
//! NOPs, so lengths never change), and the TCP checksum is updated
//! incrementally (RFC 1624), the IPv4 header checksum likewise when the ECN
//! field changes: a checksum that was wrong stays wrong.
//!
//! The middlebox keeps no per-flow table: the sequence offset of a flow
//! direction is a keyed hash of the seed and the directed 4-tuple, so the two
//! directions of the lab can run separate `Middlebox` values with the same
//! rules and seed (one per thread) and still agree. The only state is the
//! token bucket of each `police-udp` rule, which needs the time: like the
//! link, [`Middlebox::process`] takes `now` from its caller, so a test runs
//! it on a virtual clock. Only IPv4 TCP and UDP are looked at: IPv6, other
//! protocols, non-first fragments and unparseable frames pass unchanged.
//! [`parse_rules`] reads rules from text (`"port 22 drop; mss 1200"`,
//! `"port 443 block-udp; police-udp 2mbit"`).
//!
//! ```
//! use std::time::Instant;
//!
//! use wanopt_netem::middlebox::{Action, Match, Middlebox, Rule};
//!
//! let mut middlebox = Middlebox::new(
//!     vec![Rule {
//!         matches: Match::Any,
//!         after_queue: false,
//!         actions: vec![Action::StripSackPermitted, Action::ClampMss(1200)],
//!     }],
//!     7,
//! );
//! let mut frame = vec![0u8; 60];
//! let _verdict = middlebox.process(Instant::now(), &mut frame);
//! ```

mod options;
mod sequence;
pub mod spec;
pub mod udp;

use std::net::Ipv4Addr;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::units::BitsPerSecond;
use crate::wire::checksum;
use crate::wire::tcp::{self, TcpSegment};
use crate::wire::{Ecn, FrameKind, Ipv4Packet, UdpDatagram};

pub use spec::{parse_rules, ParseRulesError};

/// IPv4's protocol number of TCP.
const PROTOCOL_TCP: u8 = 6;
/// IPv4's protocol number of UDP.
const PROTOCOL_UDP: u8 = 17;

/// Which segments (or datagrams) of its protocol a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Match {
    /// Every IPv4 TCP segment (every UDP datagram for a UDP rule).
    #[serde(alias = "AnyTcp")]
    Any,
    /// Segments whose source or destination port is this one (both
    /// directions of a connection, which sequence randomization needs).
    Port(u16),
    /// Segments whose source or destination address is this one.
    Address(Ipv4Addr),
}

/// The transport protocol a rule looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Protocol {
    /// TCP segments: every action but the UDP ones.
    Tcp,
    /// UDP datagrams: [`Action::BlockUdp`] and [`Action::PoliceUdp`].
    Udp,
}

/// One rewrite (or the drop) a rule performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// Replace the SACK-permitted option with NOPs (SACK is never negotiated).
    StripSackPermitted,
    /// Replace the window-scale option with NOPs (windows stay unscaled).
    StripWindowScale,
    /// Overwrite the window-scale shift count (the window fields are left
    /// alone, so the endpoints misread each other's windows, as with the
    /// broken middleboxes this emulates).
    SetWindowScale(u8),
    /// Lower an MSS option above this value to it.
    ClampMss(u16),
    /// Shift sequence numbers by a per-flow random offset, and
    /// acknowledgment numbers back, so the endpoints never see each other's
    /// real numbers. With `rewrite_sack`, SACK blocks are shifted too;
    /// without, they are left as they are and point at nonsense, like a
    /// middlebox that does not know SACK.
    RandomizeSequence {
        /// Whether SACK block edges are shifted with the acknowledgment number.
        rewrite_sack: bool,
    },
    /// Set the IP ECN field to Not-ECT.
    BleachIpEcn,
    /// Clear the TCP ECE, CWR and AE bits (ECN cannot be negotiated).
    BleachTcpEcn,
    /// Drop ECN-setup SYNs (SYN with ECE and CWR, no ACK), the paper's
    /// `tcp.ecn.blocked`: a sender that falls back retries without ECN after
    /// its SYN timeout (Linux: 1 s). Other segments of the rule get its other
    /// actions.
    BlockEcnSetup,
    /// Mark ECN-capable packets (ECT(0) or ECT(1)) Congestion Experienced,
    /// leaving Not-ECT ones alone: the paper's fallback-proof
    /// `ip.ecn.changed`, which the endpoints cannot tell from a congested
    /// path.
    SetCe,
    /// Turn CE marks back into ECT(0), hiding a congested queue's marks
    /// from the receiver.
    ClearCe,
    /// Overwrite the IP ECN field of every segment with this codepoint
    /// (`rewrite-ecn ce` is the paper's `ip.ecn.changed.11`, which marks
    /// SYNs too and so turns ECN off at negotiation).
    RewriteEcn(Ecn),
    /// Drop the segment.
    Drop,
    /// Drop the UDP datagram (a network that blocks UDP, and so QUIC).
    BlockUdp,
    /// Police UDP datagrams to `rate` (IP bytes) with a token bucket
    /// `burst_bytes` deep, full at the start: a datagram that finds too
    /// few tokens is dropped (RFC 2697's committed bucket alone). Each
    /// middlebox, so each direction of the lab, has its own bucket per
    /// rule.
    PoliceUdp {
        /// The rate tokens accrue at.
        rate: BitsPerSecond,
        /// The bucket's depth: how many bytes may pass at once after a
        /// quiet time ([`udp::default_burst_bytes`] when not given).
        burst_bytes: u64,
    },
}

impl Action {
    /// The protocol the action applies to.
    pub fn protocol(&self) -> Protocol {
        match self {
            Action::BlockUdp | Action::PoliceUdp { .. } => Protocol::Udp,
            _ => Protocol::Tcp,
        }
    }
}

/// A first-match rule: if `matches` accepts a segment of the rule's
/// [`protocol`](Rule::protocol), apply `actions` in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// Which segments the rule applies to.
    pub matches: Match,
    /// What to do with them, in order.
    pub actions: Vec<Action>,
    /// Whether the rule stands after the link's queue rather than in front
    /// of it (`after-queue`): it then sees the queue's CE marks (which
    /// `clear-ce` can hide) and what it drops has taken its place in the
    /// queue. A [`Middlebox`] holds the rules of one place; the lab builds
    /// one for each.
    #[serde(default)]
    pub after_queue: bool,
}

impl Rule {
    /// The protocol the rule looks at: UDP if any of its actions is a UDP
    /// one (its other actions are then ignored; [`parse_rules`] refuses
    /// such a mix), TCP otherwise.
    pub fn protocol(&self) -> Protocol {
        if self
            .actions
            .iter()
            .any(|action| action.protocol() == Protocol::Udp)
        {
            Protocol::Udp
        } else {
            Protocol::Tcp
        }
    }
}

/// What [`Middlebox::process`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// No rule matched, or the matching rule changed nothing.
    Pass,
    /// The frame was rewritten in place; forward it.
    Rewritten,
    /// The frame must not be forwarded.
    Drop,
}

/// What a middlebox has done so far (counters written before the UDP rules
/// read with theirs at zero).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MiddleboxCounters {
    /// IPv4 TCP segments inspected.
    pub inspected: u64,
    /// TCP segments a rule rewrote.
    pub rewritten: u64,
    /// TCP segments a rule dropped.
    pub dropped: u64,
    /// IPv4 UDP datagrams inspected (first fragments and whole datagrams).
    pub udp_inspected: u64,
    /// UDP datagrams a `block-udp` rule dropped.
    pub udp_blocked: u64,
    /// UDP datagrams a `police-udp` rule dropped for want of tokens.
    pub udp_policed: u64,
}

/// A list of first-match rules applied to raw Ethernet II frames.
#[derive(Debug, Clone)]
pub struct Middlebox {
    rules: Vec<Rule>,
    seed: u64,
    counters: MiddleboxCounters,
    /// The token bucket of each rule that polices, by rule.
    buckets: Vec<Option<udp::TokenBucket>>,
}

/// The parts of a frame a rule looks at (a TCP segment's or a UDP
/// datagram's).
#[derive(Debug, Clone, Copy)]
struct Segment {
    source: [u8; 4],
    destination: [u8; 4],
    source_port: u16,
    destination_port: u16,
}

impl Match {
    fn accepts(&self, segment: &Segment) -> bool {
        match *self {
            Match::Any => true,
            Match::Port(port) => segment.source_port == port || segment.destination_port == port,
            Match::Address(address) => {
                let octets = address.octets();
                segment.source == octets || segment.destination == octets
            }
        }
    }
}

impl Middlebox {
    /// A middlebox with `rules`; `seed` keys the sequence offsets.
    pub fn new(rules: Vec<Rule>, seed: u64) -> Middlebox {
        Middlebox {
            buckets: udp::buckets(&rules),
            rules,
            seed,
            counters: MiddleboxCounters::default(),
        }
    }

    /// The rules, in the order they are tried.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Replaces the rules (while the lab runs): the counters go on, the
    /// sequence offsets stay those of the seed, every `police-udp` rule
    /// starts with a full bucket.
    pub fn set_rules(&mut self, rules: Vec<Rule>) {
        self.buckets = udp::buckets(&rules);
        self.rules = rules;
    }

    /// What the middlebox has done so far.
    pub fn counters(&self) -> &MiddleboxCounters {
        &self.counters
    }

    /// Applies the first matching rule of the frame's protocol to `frame`,
    /// which arrived at `now`, in place. A middlebox without rules looks
    /// at nothing (and counts nothing).
    pub fn process(&mut self, now: Instant, frame: &mut [u8]) -> Verdict {
        if self.rules.is_empty() {
            return Verdict::Pass;
        }
        let FrameKind::Ipv4 { offset } = FrameKind::of(frame) else {
            return Verdict::Pass;
        };
        let Some(ip_bytes) = frame.get_mut(offset..) else {
            return Verdict::Pass;
        };
        let Ok(ip) = Ipv4Packet::new_checked(ip_bytes) else {
            return Verdict::Pass;
        };
        if ip.fragment_offset() != 0 {
            return Verdict::Pass;
        }
        match ip.protocol() {
            PROTOCOL_TCP => {
                let verdict = self.apply_tcp(ip);
                match verdict {
                    Verdict::Pass => {}
                    Verdict::Rewritten => self.counters.rewritten += 1,
                    Verdict::Drop => self.counters.dropped += 1,
                }
                verdict
            }
            PROTOCOL_UDP => self.apply_udp(now, &ip),
            _ => Verdict::Pass,
        }
    }

    /// The UDP rules on an IPv4 packet holding UDP.
    fn apply_udp(&mut self, now: Instant, ip: &Ipv4Packet<&mut [u8]>) -> Verdict {
        let Ok(datagram) = UdpDatagram::new_checked(ip.payload()) else {
            return Verdict::Pass;
        };
        self.counters.udp_inspected += 1;
        let fields = Segment {
            source: ip.source(),
            destination: ip.destination(),
            source_port: datagram.source_port(),
            destination_port: datagram.destination_port(),
        };
        let bytes = u64::from(ip.total_len());
        match udp::judge(&self.rules, &mut self.buckets, now, &fields, bytes) {
            udp::UdpVerdict::Pass => Verdict::Pass,
            udp::UdpVerdict::Blocked => {
                self.counters.udp_blocked += 1;
                Verdict::Drop
            }
            udp::UdpVerdict::Policed => {
                self.counters.udp_policed += 1;
                Verdict::Drop
            }
        }
    }

    /// The TCP rules on an IPv4 packet holding TCP.
    fn apply_tcp(&mut self, mut ip: Ipv4Packet<&mut [u8]>) -> Verdict {
        let (source, destination) = (ip.source(), ip.destination());
        let (ip_header, payload) = ip.split_mut();
        let Ok(mut segment) = TcpSegment::new_checked(payload) else {
            return Verdict::Pass;
        };
        self.counters.inspected += 1;
        let fields = Segment {
            source,
            destination,
            source_port: segment.source_port(),
            destination_port: segment.destination_port(),
        };
        let Some(rule) = self
            .rules
            .iter()
            .find(|rule| rule.protocol() == Protocol::Tcp && rule.matches.accepts(&fields))
        else {
            return Verdict::Pass;
        };
        if rule.actions.contains(&Action::Drop)
            || (rule.actions.contains(&Action::BlockEcnSetup) && is_ecn_setup_syn(segment.flags()))
        {
            return Verdict::Drop;
        }
        let header_len = segment.header_len();
        let mut before = [0u8; 60];
        before[..header_len].copy_from_slice(segment.header());
        let mut ip_changed = false;
        for action in &rule.actions {
            match *action {
                Action::StripSackPermitted => {
                    options::strip(segment.options_mut(), tcp::kind::SACK_PERMITTED, 2)
                }
                Action::StripWindowScale => {
                    options::strip(segment.options_mut(), tcp::kind::WINDOW_SCALE, 3)
                }
                Action::SetWindowScale(shift) => {
                    options::set_window_scale(segment.options_mut(), shift)
                }
                Action::ClampMss(mss) => options::clamp_mss(segment.options_mut(), mss),
                Action::RandomizeSequence { rewrite_sack } => {
                    sequence::shift(&mut segment, self.seed, &fields, rewrite_sack)
                }
                Action::BleachIpEcn => ip_changed |= map_ecn(ip_header, |_| Ecn::NotEct),
                Action::RewriteEcn(to) => ip_changed |= map_ecn(ip_header, |_| to),
                Action::SetCe => {
                    ip_changed |= map_ecn(ip_header, |ecn| match ecn {
                        Ecn::Ect0 | Ecn::Ect1 => Ecn::Ce,
                        other => other,
                    })
                }
                Action::ClearCe => {
                    ip_changed |= map_ecn(ip_header, |ecn| match ecn {
                        Ecn::Ce => Ecn::Ect0,
                        other => other,
                    })
                }
                Action::BleachTcpEcn => {
                    let flags = segment.flags();
                    segment.set_flags(flags & !(tcp::FLAG_ECE | tcp::FLAG_CWR));
                    segment.set_ae(false);
                }
                Action::Drop
                | Action::BlockEcnSetup
                | Action::BlockUdp
                | Action::PoliceUdp { .. } => {}
            }
        }
        let tcp_changed = segment.header() != &before[..header_len];
        if tcp_changed {
            let old_checksum = segment.checksum();
            segment.set_checksum(0);
            before[tcp::CHECKSUM].copy_from_slice(&[0, 0]);
            let new_checksum =
                checksum::update_region(old_checksum, &before[..header_len], segment.header());
            segment.set_checksum(new_checksum);
        }
        if tcp_changed || ip_changed {
            Verdict::Rewritten
        } else {
            Verdict::Pass
        }
    }
}

/// Whether TCP `flags` are those of an ECN-setup SYN (RFC 3168 section
/// 6.1.1): SYN, ECE and CWR, and no ACK.
fn is_ecn_setup_syn(flags: u8) -> bool {
    let setup = tcp::FLAG_SYN | tcp::FLAG_ECE | tcp::FLAG_CWR;
    flags & (setup | tcp::FLAG_ACK) == setup
}

/// Sets the ECN field of the IPv4 header in `header` to `map` of its value
/// (the header checksum updated with it); whether it changed.
fn map_ecn(header: &mut [u8], map: impl Fn(Ecn) -> Ecn) -> bool {
    let Ok(mut header) = Ipv4Packet::new_checked(header) else {
        return false;
    };
    let (before, after) = (header.ecn(), map(header.ecn()));
    if before != after {
        header.set_ecn(after);
    }
    before != after
}

#[cfg(test)]
mod tests;
