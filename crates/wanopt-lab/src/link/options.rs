//! Link options of `wanopt lab up`, turned into one emulator spec per direction.
//!
//! The options read like netem's but always carry units (`--rtt 100ms`,
//! `--rate 250mbit`, `--queue 2bdp`). They become two spec strings, one per
//! direction ("up" is client to server, "down" server to client), in the
//! grammar of `wanopt_netem::units` (`"rtt 100ms rate 250mbit queue 2bdp"`:
//! `rtt` gives each direction half the round trip as delay);
//! `--up "..."` and `--down "..."` are appended to their direction, so their
//! keys override the shared ones.

use clap::Args;
use serde::{Deserialize, Serialize};

/// Errors in link options.
#[derive(Debug, thiserror::Error)]
pub enum LinkOptionError {
    /// A value has no unit, a bad unit or is out of range.
    #[error("bad value for --{option}: {message}")]
    Value {
        /// The option, without dashes.
        option: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The middlebox rules do not parse.
    #[error("bad --middlebox `{rules}`: {message}")]
    Middlebox {
        /// The rules as given.
        rules: String,
        /// What is wrong with them.
        message: String,
    },
    /// A direction's spec was rejected by the emulator model.
    #[error("bad {direction} link spec `{spec}`: {message}")]
    Spec {
        /// `up` or `down`.
        direction: &'static str,
        /// The spec.
        spec: String,
        /// What is wrong with it.
        message: String,
    },
    /// A direction of link 2's spec (`--link2`) was rejected by the
    /// emulator model.
    #[error("bad --link2 {direction} spec `{spec}`: {message}")]
    Link2 {
        /// `up` or `down`.
        direction: &'static str,
        /// The spec.
        spec: String,
        /// What is wrong with it.
        message: String,
    },
}

/// The emulated link's options (shared by `lab up` and scenarios).
#[derive(Debug, Clone, Default, Args, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LinkOptions {
    /// Round-trip propagation delay, split evenly over both directions (e.g. `100ms`).
    #[arg(long)]
    pub rtt: Option<String>,
    /// Bottleneck rate counting IP packet bytes (e.g. `250mbit`); unlimited if absent.
    #[arg(long)]
    pub rate: Option<String>,
    /// Bottleneck queue: `2bdp`, `500kb` or `1000p` (not counting the delay line).
    #[arg(long)]
    pub queue: Option<String>,
    /// Random loss (e.g. `1%`).
    #[arg(long)]
    pub loss: Option<String>,
    /// Bursty loss, Gilbert-Elliott `P,R` (e.g. `1%,25%`).
    #[arg(long = "loss-burst")]
    #[serde(rename = "loss-burst", alias = "loss_burst")]
    pub loss_burst: Option<String>,
    /// Delay jitter (e.g. `5ms`); order-preserving unless `--reorder` is given.
    #[arg(long)]
    pub jitter: Option<String>,
    /// Reordering (e.g. `1%`).
    #[arg(long)]
    pub reorder: Option<String>,
    /// Duplication (e.g. `0.1%`).
    #[arg(long)]
    pub duplicate: Option<String>,
    /// Time the bottleneck spends on each packet beyond its bytes at
    /// `--rate` (e.g. `2us`): a firewall that forwards a bounded number of
    /// packets per second.
    #[arg(long = "per-packet", value_name = "TIME")]
    #[serde(
        rename = "per-packet",
        alias = "per_packet",
        skip_serializing_if = "Option::is_none"
    )]
    pub per_packet: Option<String>,
    /// MTU of every interface of the lab's path (client, edge, core,
    /// server), 576 to 9000 (default 1500; e.g. 8500 for jumbo frames).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u16).range(576..=9000))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
    /// Active queue management: `red` marks CE on ECN-capable packets instead of dropping.
    #[arg(long)]
    pub ecn: Option<String>,
    /// The server-to-client capacity follows this recorded trace of
    /// delivery opportunities (Mahimahi's format: one line per 1500-byte
    /// opportunity, in milliseconds, repeating) instead of `--rate`.
    #[arg(long = "trace-down", value_name = "FILE")]
    #[serde(rename = "trace-down", alias = "trace_down")]
    pub trace_down: Option<String>,
    /// The client-to-server capacity follows this trace (as `--trace-down`).
    #[arg(long = "trace-up", value_name = "FILE")]
    #[serde(rename = "trace-up", alias = "trace_up")]
    pub trace_up: Option<String>,
    /// Seed of every random draw (same seed, same drops).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Extra spec for the client-to-server direction (e.g. `"rate 2mbit delay 75ms"`).
    #[arg(long)]
    pub up: Option<String>,
    /// Extra spec for the server-to-client direction.
    #[arg(long)]
    pub down: Option<String>,
    /// Middlebox rules that rewrite TCP segments both ways before the link
    /// (first match wins, `;` between rules; e.g. `strip-sack-permitted`,
    /// `port 5201 strip-wscale; mss 1200`, `randomize-seq-broken-sack`,
    /// `bleach-ecn`; see docs/lab.md).
    #[arg(long, value_name = "RULES")]
    pub middlebox: Option<String>,
}

/// The two validated direction specs and the seed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LinkSpecs {
    /// Client-to-server spec.
    pub up: String,
    /// Server-to-client spec.
    pub down: String,
    /// Seed; the down direction uses `seed + 1`.
    pub seed: u64,
    /// Middlebox rules for both directions (empty: none), keyed by `seed`.
    #[serde(default)]
    pub middlebox: String,
    /// MTU of the path's interfaces (`None`: 1500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
}

/// The MTU of the lab's interfaces when none is given.
pub const DEFAULT_MTU: u16 = 1500;
/// The largest MTU `--mtu` takes (the emulator's frames hold 9000 bytes of IP).
pub const MAX_MTU: u16 = 9000;
/// The smallest MTU `--mtu` takes (IPv4's minimum datagram every host accepts).
pub const MIN_MTU: u16 = 576;

/// Default seed when `--seed` is not given.
pub const DEFAULT_SEED: u64 = 1;

impl LinkOptions {
    /// Builds and validates the spec of each direction.
    pub fn specs(&self) -> Result<LinkSpecs, LinkOptionError> {
        let mut shared = Vec::new();
        let simple: [(&str, &Option<String>); 10] = [
            ("rtt", &self.rtt),
            ("rate", &self.rate),
            ("queue", &self.queue),
            ("loss", &self.loss),
            ("loss-burst", &self.loss_burst),
            ("jitter", &self.jitter),
            ("reorder", &self.reorder),
            ("duplicate", &self.duplicate),
            ("per-packet", &self.per_packet),
            ("ecn", &self.ecn),
        ];
        for (key, value) in simple {
            if let Some(v) = value {
                if v.trim().is_empty() || v.split_whitespace().count() != 1 {
                    return Err(LinkOptionError::Value {
                        option: option_name(key),
                        message: format!("`{v}` must be one word with a unit"),
                    });
                }
                shared.push(format!("{key} {}", v.trim()));
            }
        }
        let base = shared.join(" ");
        let join = |extra: &Option<String>| match extra {
            Some(e) if !base.is_empty() => format!("{base} {}", e.trim()),
            Some(e) => e.trim().to_string(),
            None => base.clone(),
        };
        let with_trace = |spec: String, option: &'static str, trace: &Option<String>| match trace {
            Some(file) => Ok(format!("{spec} trace {}", trace_path(option, file)?)
                .trim()
                .to_string()),
            None => Ok(spec),
        };
        let specs = LinkSpecs {
            up: with_trace(join(&self.up), "trace-up", &self.trace_up)?,
            down: with_trace(join(&self.down), "trace-down", &self.trace_down)?,
            seed: self.seed.unwrap_or(DEFAULT_SEED),
            middlebox: self.middlebox.as_deref().unwrap_or("").trim().to_string(),
            mtu: self.mtu,
        };
        if let Some(mtu) = self.mtu.filter(|m| !(MIN_MTU..=MAX_MTU).contains(m)) {
            return Err(LinkOptionError::Value {
                option: "mtu",
                message: format!("{mtu} bytes is outside {MIN_MTU} to {MAX_MTU}"),
            });
        }
        wanopt_netem::middlebox::parse_rules(&specs.middlebox).map_err(|e| {
            LinkOptionError::Middlebox {
                rules: specs.middlebox.clone(),
                message: e.to_string(),
            }
        })?;
        crate::model::validate(&specs.up).map_err(|e| LinkOptionError::Spec {
            direction: "up",
            spec: specs.up.clone(),
            message: e.to_string(),
        })?;
        crate::model::validate(&specs.down).map_err(|e| LinkOptionError::Spec {
            direction: "down",
            spec: specs.down.clone(),
            message: e.to_string(),
        })?;
        Ok(specs)
    }
}

/// The absolute path of the trace `file` given to `option`, checked by
/// reading it (a path with whitespace cannot go in a spec).
fn trace_path(option: &'static str, file: &str) -> Result<String, LinkOptionError> {
    let error = |message: String| LinkOptionError::Value { option, message };
    let path = std::path::absolute(file.trim())
        .map_err(|e| error(format!("`{file}`: {e}")))?
        .to_string_lossy()
        .into_owned();
    if path.chars().any(char::is_whitespace) {
        return Err(error(format!(
            "`{path}`: a trace's path cannot hold whitespace; rename or link the file"
        )));
    }
    crate::model::read_trace(&path).map_err(error)?;
    Ok(path)
}

fn option_name(key: &str) -> &'static str {
    match key {
        "rate" => "rate",
        "queue" => "queue",
        "loss" => "loss",
        "loss-burst" => "loss-burst",
        "jitter" => "jitter",
        "reorder" => "reorder",
        "duplicate" => "duplicate",
        "rtt" => "rtt",
        "per-packet" => "per-packet",
        _ => "ecn",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_packet_cost_and_an_mtu_are_part_of_the_link() {
        let options = LinkOptions {
            rate: Some("703mbit".into()),
            per_packet: Some("1920ns".into()),
            mtu: Some(8500),
            ..LinkOptions::default()
        };
        let specs = options.specs().ok();
        assert_eq!(
            specs.as_ref().map(|s| (s.up.as_str(), s.mtu)),
            Some(("rate 703mbit per-packet 1920ns", Some(8500)))
        );
        let e = |options: LinkOptions| options.specs().err().map(|e| e.to_string());
        assert_eq!(
            e(LinkOptions {
                mtu: Some(9216),
                ..LinkOptions::default()
            }),
            Some("bad value for --mtu: 9216 bytes is outside 576 to 9000".into())
        );
        assert!(e(LinkOptions {
            per_packet: Some("2us".into()),
            ..LinkOptions::default()
        })
        .is_some_and(|e| e.contains("needs a `rate`")));
    }

    #[test]
    fn shared_options_then_overrides() {
        let options = LinkOptions {
            rtt: Some("100ms".into()),
            rate: Some("250mbit".into()),
            up: Some("rate 2mbit".into()),
            ..LinkOptions::default()
        };
        let specs = options.specs().ok();
        assert_eq!(
            specs.as_ref().map(|s| s.up.as_str()),
            Some("rtt 100ms rate 250mbit rate 2mbit")
        );
        assert_eq!(
            specs.as_ref().map(|s| s.down.as_str()),
            Some("rtt 100ms rate 250mbit")
        );
    }

    #[test]
    fn bad_values_are_rejected() {
        for bad in [
            LinkOptions {
                rtt: Some("100".into()),
                ..LinkOptions::default()
            },
            LinkOptions {
                rate: Some("fast".into()),
                ..LinkOptions::default()
            },
            LinkOptions {
                loss: Some("150%".into()),
                ..LinkOptions::default()
            },
            LinkOptions {
                up: Some("warp 9".into()),
                ..LinkOptions::default()
            },
            LinkOptions {
                queue: Some("2 bdp".into()),
                ..LinkOptions::default()
            },
        ] {
            assert!(bad.specs().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn middlebox_rules_are_checked_and_kept() {
        let options = LinkOptions {
            middlebox: Some(" port 5201 strip-wscale; mss 1200 ".into()),
            ..LinkOptions::default()
        };
        let specs = options.specs().ok();
        assert_eq!(
            specs.map(|s| s.middlebox),
            Some("port 5201 strip-wscale; mss 1200".to_string())
        );
        assert_eq!(
            LinkOptions::default().specs().ok().map(|s| s.middlebox),
            Some(String::new())
        );
        for (rules, needle) in [
            (
                "strip-everything",
                "unknown middlebox action `strip-everything`",
            ),
            ("mss", "needs a value"),
            ("wscale 15", "wscale 15"),
            ("port 80", "has no action"),
        ] {
            let options = LinkOptions {
                middlebox: Some(rules.into()),
                ..LinkOptions::default()
            };
            let e = options
                .specs()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                e.starts_with(&format!("bad --middlebox `{rules}`: ")) && e.contains(needle),
                "{rules}: {e}"
            );
            assert!(!e.contains('\n'), "{e}");
        }
    }

    /// Settings written by a lab without middleboxes still read.
    #[test]
    fn specs_without_a_middlebox_still_read() {
        let specs: Result<LinkSpecs, _> =
            serde_json::from_str(r#"{"up": "rtt 10ms", "down": "rtt 10ms", "seed": 4}"#);
        assert_eq!(
            specs.ok().map(|s| (s.seed, s.middlebox)),
            Some((4, String::new()))
        );
    }
}
