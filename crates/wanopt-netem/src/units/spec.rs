//! Parsing of a whole per-direction link specification, the value of the
//! lab's `--up "..."` and `--down "..."` options.
//!
//! A spec is a whitespace-separated list of `key value` pairs, applied in
//! order on top of an existing [`LinkConfig`] (so `--up` can override only
//! what differs from the symmetric options):
//!
//! | key | value | sets |
//! | --- | --- | --- |
//! | `rate` | a rate (`2mbit`) or `unlimited` | [`LinkConfig::rate`] (and no trace) |
//! | `trace` | a trace of delivery opportunities, by name (a file, for the lab) | [`LinkConfig::trace`] |
//! | `delay` | a duration (`75ms`) | [`LinkConfig::delay`] |
//! | `rtt` | a duration: delay = rtt/2, BDP from rtt | [`LinkConfig::delay`], [`LinkConfig::rtt_for_bdp`] |
//! | `jitter` | a duration | [`LinkConfig::jitter`] |
//! | `loss` | a percentage (`1%`) | [`LinkConfig::loss`] |
//! | `loss-burst` | `P,R` Gilbert-Elliott (`1%,30%`) or `off` | [`LinkConfig::loss_burst`] |
//! | `queue` | `2bdp`, `500kb`, `1000p` | [`LinkConfig::queue`] |
//! | `reorder` | a percentage | [`LinkConfig::reorder`] |
//! | `reorder-gap` | a duration | [`LinkConfig::reorder_gap`] |
//! | `duplicate` | a percentage | [`LinkConfig::duplicate`] |
//! | `per-packet` | a duration (`2us`): time on each frame beyond its bytes, with a `rate` | [`LinkConfig::per_packet`] |
//! | `ecn` | `red` or `off` | [`LinkConfig::discipline`] |
//!
//! `rate` and `trace` set the bottleneck's capacity: the later one wins.
//! This crate reads no files, so a `trace` is loaded by the caller's
//! [`TraceLoader`] ([`apply_spec_with`]); [`apply_spec`] refuses it.
//!
//! ```
//! use wanopt_netem::{units, DeliveryTrace, LinkConfig};
//!
//! let mut config = LinkConfig::default();
//! units::apply_spec(&mut config, "rate 2mbit delay 75ms loss 1% ecn red").unwrap();
//! assert_eq!(config.delay, std::time::Duration::from_millis(75));
//!
//! let load = |name: &str| match name {
//!     "steady" => DeliveryTrace::parse("1").map_err(|e| e.to_string()),
//!     _ => Err("no such trace".to_string()),
//! };
//! units::apply_spec_with(&mut config, "trace steady queue 500kb", &load).unwrap();
//! assert_eq!(config.capacity().map(|rate| rate.0), Some(12_000_000));
//! ```

use std::str::FromStr;

use thiserror::Error;

use crate::config::{LinkConfig, QueueDiscipline, RedParams};
use crate::trace::DeliveryTrace;
use crate::units::{
    parse_duration, parse_gilbert_elliott, parse_percent, parse_queue_limit, parse_rate,
    ParseDurationError, ParseGilbertElliottError, ParsePercentError, ParseQueueLimitError,
    ParseRateError,
};

/// The keys [`apply_spec`] understands, in the order the docs list them.
pub const SPEC_KEYS: &[&str] = &[
    "rate",
    "trace",
    "delay",
    "rtt",
    "jitter",
    "loss",
    "loss-burst",
    "queue",
    "reorder",
    "reorder-gap",
    "duplicate",
    "per-packet",
    "ecn",
];

/// Why a link specification did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseSpecError {
    /// A key that is not in [`SPEC_KEYS`].
    #[error("unknown link option `{key}`: expected one of rate, trace, delay, rtt, jitter, loss, loss-burst, queue, reorder, reorder-gap, duplicate, per-packet, ecn")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
    /// A key at the end of the spec with no value after it.
    #[error("link option `{key}` needs a value, like `{key} {example}`")]
    MissingValue {
        /// The key as written.
        key: String,
        /// An example value for the key.
        example: &'static str,
    },
    /// A duration value did not parse.
    #[error("link option `{key}`: {source}")]
    Duration {
        /// The key the value belongs to.
        key: String,
        /// What is wrong with the value.
        source: ParseDurationError,
    },
    /// A rate value did not parse.
    #[error("link option `{key}`: {source}")]
    Rate {
        /// The key the value belongs to.
        key: String,
        /// What is wrong with the value.
        source: ParseRateError,
    },
    /// A queue limit did not parse.
    #[error("link option `{key}`: {source}")]
    QueueLimit {
        /// The key the value belongs to.
        key: String,
        /// What is wrong with the value.
        source: ParseQueueLimitError,
    },
    /// A percentage did not parse.
    #[error("link option `{key}`: {source}")]
    Percent {
        /// The key the value belongs to.
        key: String,
        /// What is wrong with the value.
        source: ParsePercentError,
    },
    /// A Gilbert-Elliott model did not parse.
    #[error("link option `{key}`: {source}")]
    GilbertElliott {
        /// The key the value belongs to.
        key: String,
        /// What is wrong with the value.
        source: ParseGilbertElliottError,
    },
    /// A trace could not be loaded.
    #[error("link option `trace`: {message}")]
    Trace {
        /// The trace's name as written.
        name: String,
        /// Why it could not be loaded (one line).
        message: String,
    },
    /// `per-packet` on a link without a fixed `rate` (none, or a trace).
    #[error("link option `per-packet` is time the bottleneck spends on each frame beyond its bytes: it needs a `rate` (and no `trace`)")]
    PerPacketWithoutRate,
    /// `ecn` with something other than `red` or `off`.
    #[error("link option `ecn`: `{value}` is not a queue discipline: write `ecn red` (mark CE instead of dropping) or `ecn off`")]
    Ecn {
        /// The value as written.
        value: String,
    },
}

fn example(key: &str) -> &'static str {
    match key {
        "rate" => "250mbit",
        "delay" | "rtt" => "50ms",
        "jitter" => "5ms",
        "reorder-gap" => "1ms",
        "loss" => "1%",
        "loss-burst" => "1%,30%",
        "queue" => "2bdp",
        "reorder" => "1%",
        "duplicate" => "0.1%",
        "per-packet" => "2us",
        "ecn" => "red",
        "trace" => "lte.down",
        _ => "VALUE",
    }
}

/// Loads the trace a spec's `trace NAME` names; its error is one line.
pub type TraceLoader<'a> = dyn Fn(&str) -> Result<DeliveryTrace, String> + 'a;

/// Applies the `key value` pairs of `spec` to `config`, in order. On error
/// `config` may hold the pairs before the faulty one; parse into a copy if
/// that matters. A `trace` is refused: see [`apply_spec_with`].
pub fn apply_spec(config: &mut LinkConfig, spec: &str) -> Result<(), ParseSpecError> {
    apply_spec_with(config, spec, &|_| {
        Err("traces are read from files, which this parser does not read".to_string())
    })
}

/// [`apply_spec`], with `load` to read the traces `trace NAME` names.
pub fn apply_spec_with(
    config: &mut LinkConfig,
    spec: &str,
    load: &TraceLoader<'_>,
) -> Result<(), ParseSpecError> {
    let mut tokens = spec.split_whitespace();
    while let Some(key) = tokens.next() {
        let key_lower = key.to_ascii_lowercase();
        if !SPEC_KEYS.contains(&key_lower.as_str()) {
            return Err(ParseSpecError::UnknownKey {
                key: key.to_owned(),
            });
        }
        let value = tokens.next().ok_or_else(|| ParseSpecError::MissingValue {
            key: key.to_owned(),
            example: example(&key_lower),
        })?;
        if key_lower == "trace" {
            let trace = load(value).map_err(|message| ParseSpecError::Trace {
                name: value.to_owned(),
                message,
            })?;
            config.trace = Some(trace);
            continue;
        }
        apply_one(config, &key_lower, value)?;
    }
    if !config.per_packet.is_zero() && (config.trace.is_some() || config.capacity().is_none()) {
        return Err(ParseSpecError::PerPacketWithoutRate);
    }
    Ok(())
}

fn apply_one(config: &mut LinkConfig, key: &str, value: &str) -> Result<(), ParseSpecError> {
    let duration = |value: &str| {
        parse_duration(value).map_err(|source| ParseSpecError::Duration {
            key: key.to_owned(),
            source,
        })
    };
    let percent = |value: &str| {
        parse_percent(value).map_err(|source| ParseSpecError::Percent {
            key: key.to_owned(),
            source,
        })
    };
    match key {
        "rate" if value.eq_ignore_ascii_case("unlimited") => {
            config.rate = None;
            config.trace = None;
        }
        "rate" => {
            config.rate = Some(parse_rate(value).map_err(|source| ParseSpecError::Rate {
                key: key.to_owned(),
                source,
            })?);
            config.trace = None;
        }
        "delay" => config.delay = duration(value)?,
        "rtt" => {
            let rtt = duration(value)?;
            config.delay = rtt / 2;
            config.rtt_for_bdp = Some(rtt);
        }
        "jitter" => config.jitter = duration(value)?,
        "reorder-gap" => config.reorder_gap = duration(value)?,
        "loss" => config.loss = percent(value)?,
        "reorder" => config.reorder = percent(value)?,
        "duplicate" => config.duplicate = percent(value)?,
        "per-packet" => config.per_packet = duration(value)?,
        "loss-burst" if value.eq_ignore_ascii_case("off") => config.loss_burst = None,
        "loss-burst" => {
            config.loss_burst = Some(parse_gilbert_elliott(value).map_err(|source| {
                ParseSpecError::GilbertElliott {
                    key: key.to_owned(),
                    source,
                }
            })?);
        }
        "queue" => {
            config.queue =
                parse_queue_limit(value).map_err(|source| ParseSpecError::QueueLimit {
                    key: key.to_owned(),
                    source,
                })?;
        }
        "ecn" => {
            config.discipline = match value.to_ascii_lowercase().as_str() {
                "red" => QueueDiscipline::Red(RedParams::default()),
                "off" | "none" => QueueDiscipline::DropTail,
                _ => {
                    return Err(ParseSpecError::Ecn {
                        value: value.to_owned(),
                    })
                }
            };
        }
        _ => {
            return Err(ParseSpecError::UnknownKey {
                key: key.to_owned(),
            })
        }
    }
    Ok(())
}

impl FromStr for LinkConfig {
    type Err = ParseSpecError;

    /// Parses a whole per-direction spec (`"rate 2mbit delay 75ms loss 1%"`)
    /// on top of [`LinkConfig::default`]; see [this module](self).
    fn from_str(spec: &str) -> Result<LinkConfig, ParseSpecError> {
        let mut config = LinkConfig::default();
        apply_spec(&mut config, spec)?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::QueueLimit;
    use crate::units::{BitsPerSecond, Probability};

    #[test]
    fn a_full_spec_overlays_every_field() {
        let mut config = LinkConfig::default();
        apply_spec(
            &mut config,
            "rate 2mbit delay 75ms loss 1% queue 100p jitter 5ms reorder 1% duplicate 0.1% ecn red loss-burst 1%,30%",
        )
        .unwrap();
        assert_eq!(config.rate, Some(BitsPerSecond(2_000_000)));
        assert_eq!(config.delay, Duration::from_millis(75));
        assert_eq!(config.loss, Probability::from_percent(1.0).unwrap());
        assert_eq!(config.queue, QueueLimit::Packets(100));
        assert_eq!(config.jitter, Duration::from_millis(5));
        assert_eq!(config.reorder, Probability::from_percent(1.0).unwrap());
        assert_eq!(config.duplicate, Probability::from_percent(0.1).unwrap());
        assert_eq!(
            config.discipline,
            QueueDiscipline::Red(RedParams::default())
        );
        let burst = config.loss_burst.unwrap();
        assert_eq!(burst.bad_to_good, Probability::from_percent(30.0).unwrap());
    }

    #[test]
    fn a_spec_overrides_only_what_it_names() {
        let mut config = LinkConfig {
            rate: Some(BitsPerSecond(250_000_000)),
            ..LinkConfig::from_rtt(Duration::from_millis(100))
        };
        apply_spec(&mut config, "rate 3mbit").unwrap();
        assert_eq!(config.rate, Some(BitsPerSecond(3_000_000)));
        assert_eq!(config.delay, Duration::from_millis(50));
        apply_spec(&mut config, "rate unlimited ecn off loss-burst off").unwrap();
        assert_eq!(config.rate, None);
        apply_spec(&mut config, "").unwrap();
    }

    #[test]
    fn rate_and_trace_the_later_wins() {
        let load = |name: &str| {
            if name == "two" {
                DeliveryTrace::parse("1\n1").map_err(|e| e.to_string())
            } else {
                Err(format!("cannot read `{name}`: no such file"))
            }
        };
        let mut config = LinkConfig::default();
        apply_spec_with(&mut config, "rate 5mbit trace two", &load).unwrap();
        assert_eq!(config.capacity(), Some(BitsPerSecond(24_000_000)));
        apply_spec_with(&mut config, "rate 5mbit", &load).unwrap();
        assert_eq!(config.trace, None);
        assert_eq!(config.capacity(), Some(BitsPerSecond(5_000_000)));
        apply_spec_with(&mut config, "trace two rate unlimited", &load).unwrap();
        assert_eq!(config.capacity(), None);
        assert_eq!(
            apply_spec_with(&mut config, "trace nope", &load)
                .unwrap_err()
                .to_string(),
            "link option `trace`: cannot read `nope`: no such file"
        );
        assert!(matches!(
            apply_spec(&mut config, "trace two"),
            Err(ParseSpecError::Trace { .. })
        ));
    }

    #[test]
    fn bad_specs_say_which_option_is_wrong() {
        let mut config = LinkConfig::default();
        assert_eq!(
            apply_spec(&mut config, "speed 2mbit").unwrap_err().to_string(),
            "unknown link option `speed`: expected one of rate, trace, delay, rtt, jitter, loss, loss-burst, queue, reorder, reorder-gap, duplicate, per-packet, ecn"
        );
        assert_eq!(
            apply_spec(&mut config, "delay 5ms loss")
                .unwrap_err()
                .to_string(),
            "link option `loss` needs a value, like `loss 1%`"
        );
        assert_eq!(
            apply_spec(&mut config, "delay 75").unwrap_err().to_string(),
            "link option `delay`: `75` has no unit: write `75ms` for milliseconds (or use `us`, `ns`, `s`)"
        );
        assert!(matches!(
            apply_spec(&mut config, "rate 10mbps"),
            Err(ParseSpecError::Rate { .. })
        ));
        assert!(matches!(
            apply_spec(&mut config, "ecn codel"),
            Err(ParseSpecError::Ecn { .. })
        ));
        assert!(matches!(
            apply_spec(&mut config, "queue 100"),
            Err(ParseSpecError::QueueLimit { .. })
        ));
        assert!(matches!(
            apply_spec(&mut config, "loss-burst 1%"),
            Err(ParseSpecError::GilbertElliott { .. })
        ));
    }

    #[test]
    fn a_per_packet_cost_needs_a_fixed_rate() {
        let mut config = LinkConfig::default();
        apply_spec(&mut config, "rate 703mbit per-packet 1920ns").unwrap();
        assert_eq!(config.per_packet, Duration::from_nanos(1920));
        let mut no_rate = LinkConfig::default();
        assert_eq!(
            apply_spec(&mut no_rate, "per-packet 2us").unwrap_err(),
            ParseSpecError::PerPacketWithoutRate
        );
        let load = |_: &str| DeliveryTrace::parse("1").map_err(|e| e.to_string());
        let mut traced = LinkConfig::default();
        assert_eq!(
            apply_spec_with(&mut traced, "trace steady per-packet 2us", &load).unwrap_err(),
            ParseSpecError::PerPacketWithoutRate
        );
        assert!(matches!(
            apply_spec(&mut config, "per-packet 2"),
            Err(ParseSpecError::Duration { .. })
        ));
    }
}
