//! Parsing of middlebox rules from text, for command lines and scenario files.
//!
//! Rules are separated by `;` and tried in order (first match wins). A rule
//! is an optional matcher followed by one or more actions:
//!
//! | token | meaning |
//! | --- | --- |
//! | `port N` | match segments from or to TCP port N (default: every TCP segment) |
//! | `address A.B.C.D` | match segments from or to this IPv4 address |
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
//! | `drop` | [`Action::Drop`] |
//!
//! ```
//! use wanopt_netem::middlebox::parse_rules;
//!
//! let rules = parse_rules("port 22 drop; strip-sack-permitted mss 1200").unwrap();
//! assert_eq!(rules.len(), 2);
//! ```

use std::net::Ipv4Addr;

use thiserror::Error;

use crate::middlebox::{Action, Match, Rule};
use crate::wire::Ecn;

/// Why a middlebox rule list did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseRulesError {
    /// A word that is neither a matcher nor an action.
    #[error("unknown middlebox action `{token}`: expected strip-sack-permitted, strip-wscale, wscale N, mss N, randomize-seq, randomize-seq-broken-sack, bleach-ecn, bleach-ip-ecn, bleach-tcp-ecn, block-ecn-setup, set-ce, clear-ce, rewrite-ecn V or drop")]
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
    let mut matches = Match::AnyTcp;
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
                    matches: Match::AnyTcp,
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
            "unknown middlebox action `strip-sack`: expected strip-sack-permitted, strip-wscale, wscale N, mss N, randomize-seq, randomize-seq-broken-sack, bleach-ecn, bleach-ip-ecn, bleach-tcp-ecn, block-ecn-setup, set-ce, clear-ce, rewrite-ecn V or drop"
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
}
