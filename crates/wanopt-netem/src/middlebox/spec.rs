//! Parsing of middlebox rules from text, for command lines and scenario files.
//!
//! Rules are separated by `;` and tried in order (first match of the
//! packet's protocol wins). A rule is an optional matcher followed by one
//! or more actions. A rule with `block-udp` or `police-udp` is a UDP rule
//! and has that one action; every other rule is a TCP rule:
//!
//! | token | meaning |
//! | --- | --- |
//! | `port N` | match segments (datagrams, for a UDP rule) from or to port N (default: every one of the rule's protocol) |
//! | `address A.B.C.D` | match segments (datagrams) from or to this IPv4 address |
//! | `after-queue` | the rule stands after the link's queue, not in front of it ([`Rule::after_queue`]) |
//! | `strip-sack-permitted` | [`Action::StripSackPermitted`] |
//! | `strip-wscale` | [`Action::StripWindowScale`] |
//! | `wscale N` | [`Action::SetWindowScale`] (0 to 14) |
//! | `mss N` | [`Action::ClampMss`] |
//! | `randomize-seq` | [`Action::RandomizeSequence`], SACK blocks fixed |
//! | `randomize-seq-broken-sack` | [`Action::RandomizeSequence`], SACK blocks left wrong |
//! | `bleach-ecn` | [`Action::BleachIpEcn`] and [`Action::BleachTcpEcn`] |
//! | `bleach-ip-ecn`, `bleach-tcp-ecn` | one of the two |
//! | `block-ecn-setup` | [`Action::BlockEcnSetup`] |
//! | `set-ce` | [`Action::SetCe`] |
//! | `clear-ce` | [`Action::ClearCe`] |
//! | `rewrite-ecn V` | [`Action::RewriteEcn`]: `not-ect`, `ect0`, `ect1`, `ce` (or the bits `00`, `10`, `01`, `11`) |
//! | `drop` | [`Action::Drop`] (TCP segments) |
//! | `block-udp` | [`Action::BlockUdp`]: drop UDP datagrams, TCP untouched |
//! | `police-udp RATE` | [`Action::PoliceUdp`]: a token bucket on UDP at RATE (`2mbit`, `500kbit`, as `rate` in a link spec), as deep as 50 ms of the rate and at least 3000 bytes; what it cannot pass is dropped |
//! | `burst SIZE` | after `police-udp RATE`: the bucket's depth instead (`15kb`, `64kib`, `20000b`; at least 1500 bytes) |
//!
//! ```
//! use wanopt_netem::middlebox::{parse_rules, Protocol};
//!
//! let rules = parse_rules("port 22 drop; port 443 block-udp; police-udp 2mbit burst 20kb").unwrap();
//! assert_eq!(rules.len(), 3);
//! assert_eq!(rules[1].protocol(), Protocol::Udp);
//! ```

use std::net::Ipv4Addr;

use thiserror::Error;

use crate::middlebox::udp::default_burst_bytes;
use crate::middlebox::{Action, Match, Protocol, Rule};
use crate::units::{parse_queue_limit, parse_rate, ParseRateError, QueueLimit};
use crate::wire::Ecn;

/// The smallest `burst` of `police-udp`: one full-size Ethernet datagram.
pub const MIN_BURST_BYTES: u64 = 1500;

/// Why a middlebox rule list did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseRulesError {
    /// A word that is neither a matcher nor an action.
    #[error("unknown middlebox action `{token}`: expected strip-sack-permitted, strip-wscale, wscale N, mss N, randomize-seq, randomize-seq-broken-sack, bleach-ecn, bleach-ip-ecn, bleach-tcp-ecn, block-ecn-setup, set-ce, clear-ce, rewrite-ecn V, drop, block-udp or police-udp RATE")]
    UnknownAction {
        /// The word as written.
        token: String,
    },
    /// A matcher or action that needs a value at the end of the rule.
    #[error("middlebox `{token}` needs a value, like `{token} {example}`")]
    MissingValue {
        /// The word as written.
        token: String,
        /// An example value.
        example: &'static str,
    },
    /// A value that does not fit its matcher or action.
    #[error("middlebox `{token} {value}`: {expected}")]
    InvalidValue {
        /// The matcher or action.
        token: String,
        /// The value as written.
        value: String,
        /// What is expected instead.
        expected: &'static str,
    },
    /// The rate of `police-udp` does not parse.
    #[error("middlebox `police-udp {value}`: {cause}")]
    Rate {
        /// The rate as written.
        value: String,
        /// Why it does not parse.
        #[source]
        cause: ParseRateError,
    },
    /// A UDP action beside another action in one rule.
    #[error("middlebox rule `{rule}` mixes actions: block-udp and police-udp stand alone in a rule (with a matcher); write separate rules, like `port 443 block-udp; mss 1200`")]
    MixedUdpRule {
        /// The rule as written.
        rule: String,
    },
    /// A rule with a matcher but no action, or nothing between two `;`.
    #[error("middlebox rule `{rule}` has no action: add one, like `{rule} strip-sack-permitted`")]
    NoAction {
        /// The rule as written.
        rule: String,
    },
}

/// Parses `;`-separated first-match rules (see the module docs). An empty
/// spec is no rules.
pub fn parse_rules(spec: &str) -> Result<Vec<Rule>, ParseRulesError> {
    spec.split(';')
        .filter(|rule| !rule.trim().is_empty())
        .map(parse_rule)
        .collect()
}

fn parse_rule(text: &str) -> Result<Rule, ParseRulesError> {
    let mut tokens = text.split_whitespace().peekable();
    let mut matches = Match::Any;
    let mut actions = Vec::new();
    let mut after_queue = false;
    while let Some(token) = tokens.next() {
        let lower = token.to_ascii_lowercase();
        let mut value = |example: &'static str| {
            tokens.next().ok_or_else(|| ParseRulesError::MissingValue {
                token: token.to_owned(),
                example,
            })
        };
        let invalid = |value: &str, expected: &'static str| ParseRulesError::InvalidValue {
            token: token.to_owned(),
            value: value.to_owned(),
            expected,
        };
        match lower.as_str() {
            "after-queue" => after_queue = true,
            "port" => {
                let text = value("443")?;
                matches = Match::Port(
                    text.parse()
                        .map_err(|_| invalid(text, "a port is a number from 0 to 65535"))?,
                );
            }
            "address" => {
                let text = value("10.0.0.1")?;
                matches = Match::Address(
                    text.parse::<Ipv4Addr>()
                        .map_err(|_| invalid(text, "write an IPv4 address like 10.0.0.1"))?,
                );
            }
            "wscale" => {
                let text = value("2")?;
                let shift = text
                    .parse::<u8>()
                    .ok()
                    .filter(|&shift| shift <= 14)
                    .ok_or_else(|| invalid(text, "a window scale is a shift from 0 to 14"))?;
                actions.push(Action::SetWindowScale(shift));
            }
            "mss" => {
                let text = value("1200")?;
                let mss = text
                    .parse::<u16>()
                    .map_err(|_| invalid(text, "an MSS is a number of bytes from 0 to 65535"))?;
                actions.push(Action::ClampMss(mss));
            }
            "strip-sack-permitted" => actions.push(Action::StripSackPermitted),
            "strip-wscale" => actions.push(Action::StripWindowScale),
            "randomize-seq" => actions.push(Action::RandomizeSequence { rewrite_sack: true }),
            "randomize-seq-broken-sack" => actions.push(Action::RandomizeSequence {
                rewrite_sack: false,
            }),
            "bleach-ecn" => actions.extend([Action::BleachIpEcn, Action::BleachTcpEcn]),
            "bleach-ip-ecn" => actions.push(Action::BleachIpEcn),
            "bleach-tcp-ecn" => actions.push(Action::BleachTcpEcn),
            "block-ecn-setup" => actions.push(Action::BlockEcnSetup),
            "set-ce" => actions.push(Action::SetCe),
            "clear-ce" => actions.push(Action::ClearCe),
            "rewrite-ecn" => {
                let text = value("ce")?;
                let ecn = match text.to_ascii_lowercase().as_str() {
                    "not-ect" | "00" => Ecn::NotEct,
                    "ect1" | "01" => Ecn::Ect1,
                    "ect0" | "10" => Ecn::Ect0,
                    "ce" | "11" => Ecn::Ce,
                    _ => {
                        return Err(invalid(
                            text,
                            "an ECN codepoint is not-ect, ect0, ect1 or ce (or 00, 10, 01, 11)",
                        ))
                    }
                };
                actions.push(Action::RewriteEcn(ecn));
            }
            "drop" => actions.push(Action::Drop),
            "block-udp" => actions.push(Action::BlockUdp),
            "police-udp" => {
                let text = value("2mbit")?;
                let rate = parse_rate(text).map_err(|cause| ParseRulesError::Rate {
                    value: text.to_owned(),
                    cause,
                })?;
                actions.push(Action::PoliceUdp {
                    rate,
                    burst_bytes: default_burst_bytes(rate),
                });
            }
            "burst" => {
                let text = value("15kb")?;
                let bytes =
                    match parse_queue_limit(text) {
                        Ok(QueueLimit::Bytes(bytes)) if bytes >= MIN_BURST_BYTES => bytes,
                        _ => return Err(invalid(
                            text,
                            "a burst is a size of at least 1500 bytes, like 15kb, 64kib or 20000b",
                        )),
                    };
                match actions.last_mut() {
                    Some(Action::PoliceUdp { burst_bytes, .. }) => *burst_bytes = bytes,
                    _ => {
                        return Err(invalid(
                            text,
                            "`burst` follows `police-udp RATE`, like `police-udp 2mbit burst 15kb`",
                        ))
                    }
                }
            }
            _ => {
                return Err(ParseRulesError::UnknownAction {
                    token: token.to_owned(),
                })
            }
        }
    }
    if actions.is_empty() {
        return Err(ParseRulesError::NoAction {
            rule: text.trim().to_owned(),
        });
    }
    let udp_actions = actions
        .iter()
        .filter(|action| action.protocol() == Protocol::Udp)
        .count();
    if udp_actions > 0 && actions.len() > 1 {
        return Err(ParseRulesError::MixedUdpRule {
            rule: text.trim().to_owned(),
        });
    }
    Ok(Rule {
        matches,
        actions,
        after_queue,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_in_order_with_their_matchers() {
        let rules = parse_rules(
            "port 22 drop; address 10.0.0.2 randomize-seq-broken-sack; strip-sack-permitted wscale 0 mss 1200 bleach-ecn",
        )
        .unwrap();
        assert_eq!(
            rules,
            [
                Rule {
                    after_queue: false,
                    matches: Match::Port(22),
                    actions: vec![Action::Drop],
                },
                Rule {
                    after_queue: false,
                    matches: Match::Address(Ipv4Addr::new(10, 0, 0, 2)),
                    actions: vec![Action::RandomizeSequence {
                        rewrite_sack: false
                    }],
                },
                Rule {
                    after_queue: false,
                    matches: Match::Any,
                    actions: vec![
                        Action::StripSackPermitted,
                        Action::SetWindowScale(0),
                        Action::ClampMss(1200),
                        Action::BleachIpEcn,
                        Action::BleachTcpEcn,
                    ],
                },
            ]
        );
        assert_eq!(parse_rules("  ; ").unwrap(), []);
        assert_eq!(
            parse_rules(
                "block-ecn-setup; set-ce; after-queue clear-ce; rewrite-ecn 11; rewrite-ecn Ect1"
            )
            .unwrap()
            .into_iter()
            .flat_map(|rule| rule.actions)
            .collect::<Vec<_>>(),
            [
                Action::BlockEcnSetup,
                Action::SetCe,
                Action::ClearCe,
                Action::RewriteEcn(Ecn::Ce),
                Action::RewriteEcn(Ecn::Ect1),
            ]
        );
        let after: Vec<bool> =
            parse_rules("clear-ce; after-queue clear-ce; port 80 after-queue drop")
                .unwrap()
                .iter()
                .map(|rule| rule.after_queue)
                .collect();
        assert_eq!(after, [false, true, true]);
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        assert_eq!(
            parse_rules("strip-sack").unwrap_err().to_string(),
            "unknown middlebox action `strip-sack`: expected strip-sack-permitted, strip-wscale, wscale N, mss N, randomize-seq, randomize-seq-broken-sack, bleach-ecn, bleach-ip-ecn, bleach-tcp-ecn, block-ecn-setup, set-ce, clear-ce, rewrite-ecn V, drop, block-udp or police-udp RATE"
        );
        assert_eq!(
            parse_rules("mss").unwrap_err().to_string(),
            "middlebox `mss` needs a value, like `mss 1200`"
        );
        assert_eq!(
            parse_rules("wscale 15").unwrap_err().to_string(),
            "middlebox `wscale 15`: a window scale is a shift from 0 to 14"
        );
        assert_eq!(
            parse_rules("port 80").unwrap_err().to_string(),
            "middlebox rule `port 80` has no action: add one, like `port 80 strip-sack-permitted`"
        );
        assert_eq!(
            parse_rules("rewrite-ecn 2").unwrap_err().to_string(),
            "middlebox `rewrite-ecn 2`: an ECN codepoint is not-ect, ect0, ect1 or ce (or 00, 10, 01, 11)"
        );
        assert!(matches!(
            parse_rules("address 10.0.0 drop"),
            Err(ParseRulesError::InvalidValue { .. })
        ));
        assert!(matches!(
            parse_rules("port 70000 drop"),
            Err(ParseRulesError::InvalidValue { .. })
        ));
    }

    #[test]
    fn udp_rules_parse_with_their_matchers_and_bursts() {
        let rules = parse_rules(
            "port 443 block-udp; address 10.0.0.2 police-udp 2mbit; police-udp 500kbit burst 20kb; after-queue POLICE-UDP 1gbit",
        )
        .unwrap();
        let summary: Vec<(Match, Action, bool)> = rules
            .iter()
            .map(|rule| (rule.matches, rule.actions[0], rule.after_queue))
            .collect();
        let police = |bits: u64, burst_bytes: u64| Action::PoliceUdp {
            rate: crate::units::BitsPerSecond(bits),
            burst_bytes,
        };
        assert_eq!(
            summary,
            [
                (Match::Port(443), Action::BlockUdp, false),
                (
                    Match::Address(Ipv4Addr::new(10, 0, 0, 2)),
                    police(2_000_000, 12_500),
                    false
                ),
                (Match::Any, police(500_000, 20_000), false),
                (Match::Any, police(1_000_000_000, 6_250_000), true),
            ]
        );
        assert!(rules.iter().all(|rule| rule.protocol() == Protocol::Udp));
        assert_eq!(
            parse_rules("port 22 drop").unwrap()[0].protocol(),
            Protocol::Tcp
        );
    }

    #[test]
    fn bad_udp_rules_say_what_is_wrong() {
        let error = |rules: &str| parse_rules(rules).unwrap_err().to_string();
        assert_eq!(
            error("police-udp"),
            "middlebox `police-udp` needs a value, like `police-udp 2mbit`"
        );
        assert!(error("police-udp 2mbps")
            .starts_with("middlebox `police-udp 2mbps`: `2mbps` is ambiguous"));
        assert!(error("police-udp 2").starts_with("middlebox `police-udp 2`: `2` has no unit"));
        let too_small = "a burst is a size of at least 1500 bytes, like 15kb, 64kib or 20000b";
        assert_eq!(
            error("police-udp 2mbit burst 100b"),
            format!("middlebox `burst 100b`: {too_small}")
        );
        assert_eq!(
            error("police-udp 2mbit burst 10p"),
            format!("middlebox `burst 10p`: {too_small}")
        );
        assert_eq!(
            error("block-udp burst 15kb"),
            "middlebox `burst 15kb`: `burst` follows `police-udp RATE`, like `police-udp 2mbit burst 15kb`"
        );
        for mixed in [
            "port 443 block-udp drop",
            "mss 1200 police-udp 1mbit",
            "block-udp police-udp 1mbit",
        ] {
            assert_eq!(
                error(mixed),
                format!("middlebox rule `{mixed}` mixes actions: block-udp and police-udp stand alone in a rule (with a matcher); write separate rules, like `port 443 block-udp; mss 1200`")
            );
        }
        for rules in [
            "block-udp x",
            "police-udp 2mbit x",
            "police-udp 1mbit burst",
        ] {
            assert!(!error(rules).contains('\n'), "{rules}");
        }
    }
}
