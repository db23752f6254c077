//! Parsing of user-facing values, always with explicit units.
//!
//! Every parser accepts the unit forms listed on it, case-insensitively, and
//! rejects a bare number (except `0` where zero makes sense) with a message
//! that shows the expected form. Decimal fractions are parsed exactly, without
//! going through floating point, wherever the result is an integer count
//! (nanoseconds, bits per second, bytes, packets).
//!
//! | value | accepted | rejected with a hint |
//! | --- | --- | --- |
//! | duration | `100ms`, `1.5ms`, `250us`, `250µs`, `10ns`, `2s`, `0` | `100` |
//! | rate | `64000bit`, `500kbit`, `250mbit`, `1gbit` (also `Mbit`, `/s` suffix) | `10mbps`, `10mb`, `10m`, `10` |
//! | queue limit | `2bdp`, `0.5bdp`, `64000b`, `500kb`, `1mb`, `64kib`, `1000p` | `1000` |
//! | percentage | `1%`, `0.1%`, `0` | `1`, `0.01` |
//! | Gilbert-Elliott | `1%,30%`, `0.01,0.3`, `1%,30%,100%,0%` | `1%` |
//!
//! Multipliers are decimal (SI) as in `tc`: `kbit` = 1000 bit/s, `kb` = 1000
//! bytes; `kib`/`mib`/`gib` are the binary byte sizes. [`spec`] parses a whole
//! per-direction option string such as `"rate 2mbit delay 75ms loss 1%"`.

pub mod spec;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use spec::{apply_spec, apply_spec_with, ParseSpecError, TraceLoader};

/// The limit of the bottleneck queue in front of the shaper.
///
/// The queue holds only frames waiting for (or in) serialization, never the
/// frames in the propagation delay line, so the limit does not shrink the
/// throughput of a long link (netem's `limit` counts both; see the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum QueueLimit {
    /// At most this many IP bytes (frame length minus the Ethernet header).
    Bytes(u64),
    /// At most this many frames.
    Packets(u64),
    /// This multiple of the bandwidth-delay product, `rate × RTT`, in bytes;
    /// resolved by [`crate::LinkConfig::resolve_queue`].
    Bdp(f64),
}

/// A two-state Gilbert-Elliott burst-loss model (netem's `gemodel`).
///
/// Once per IP frame the chain first moves (good to bad with probability
/// `good_to_bad`, bad to good with `bad_to_good`), then the frame is lost with
/// the loss probability of the new state. With the defaults (100% loss in the
/// bad state, 0% in the good state) bursts are geometric with mean length
/// `1 / bad_to_good` frames and the long-run loss rate is
/// `good_to_bad / (good_to_bad + bad_to_good)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GilbertElliott {
    /// P: probability of moving from the good to the bad state.
    pub good_to_bad: Probability,
    /// R: probability of moving from the bad to the good state.
    pub bad_to_good: Probability,
    /// Loss probability in the bad state (netem's `1-h`), 100% by default.
    pub loss_in_bad: Probability,
    /// Loss probability in the good state (netem's `1-k`), 0% by default.
    pub loss_in_good: Probability,
}

impl GilbertElliott {
    /// The long-run fraction of frames lost.
    pub fn mean_loss(&self) -> f64 {
        let p = self.good_to_bad.value();
        let r = self.bad_to_good.value();
        if p + r == 0.0 {
            return self.loss_in_good.value();
        }
        let bad = p / (p + r);
        bad * self.loss_in_bad.value() + (1.0 - bad) * self.loss_in_good.value()
    }
}

/// A link rate in bits per second (decimal: 1 kbit/s = 1000 bit/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BitsPerSecond(pub u64);

impl fmt::Display for BitsPerSecond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = self.0;
        for (factor, unit) in [
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
        ] {
            if bits >= factor && bits % factor == 0 {
                return write!(f, "{}{unit}", bits / factor);
            }
        }
        write!(f, "{bits}bit")
    }
}

/// A probability in `[0, 1]` (read back from serde only in that range).
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64")]
pub struct Probability(f64);

impl TryFrom<f64> for Probability {
    type Error = &'static str;

    fn try_from(fraction: f64) -> Result<Probability, &'static str> {
        Probability::new(fraction).ok_or("a probability must be between 0 and 1")
    }
}

impl Probability {
    /// Probability zero: the event never happens.
    pub const ZERO: Probability = Probability(0.0);
    /// Probability one: the event always happens.
    pub const ONE: Probability = Probability(1.0);

    /// A probability from a fraction; `None` unless `0 <= fraction <= 1`.
    pub fn new(fraction: f64) -> Option<Probability> {
        (0.0..=1.0)
            .contains(&fraction)
            .then_some(Probability(fraction))
    }

    /// A probability from a percentage; `None` unless `0 <= percent <= 100`.
    pub fn from_percent(percent: f64) -> Option<Probability> {
        Probability::new(percent / 100.0)
    }

    /// The probability as a fraction in `[0, 1]`.
    pub fn value(self) -> f64 {
        self.0
    }

    /// Whether the event can never happen.
    pub fn is_zero(self) -> bool {
        self.0 == 0.0
    }
}

impl fmt::Display for Probability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0 * 100.0)
    }
}

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseDurationError {
    /// The text does not start with a decimal number.
    #[error("`{input}` is not a duration: write a number with a unit, like `100ms`, `1.5ms`, `250us` or `2s`")]
    InvalidNumber {
        /// The rejected text.
        input: String,
    },
    /// A non-zero number without a unit.
    #[error("`{input}` has no unit: write `{input}ms` for milliseconds (or use `us`, `ns`, `s`)")]
    MissingUnit {
        /// The rejected text.
        input: String,
    },
    /// The unit is not one of `ns`, `us`, `µs`, `ms`, `s`.
    #[error("`{input}` has an unknown unit `{unit}`: use `ns`, `us`, `ms` or `s`")]
    UnknownUnit {
        /// The rejected text.
        input: String,
        /// The unit as written.
        unit: String,
    },
    /// More precise than a nanosecond, or too large.
    #[error("`{input}` is finer than 1 ns or too large")]
    OutOfRange {
        /// The rejected text.
        input: String,
    },
}

/// Parses a duration with an explicit unit: `100ms`, `1.5ms`, `250us`,
/// `250µs`, `10ns`, `2s`, or a bare `0`.
pub fn parse_duration(input: &str) -> Result<Duration, ParseDurationError> {
    let text = input.trim();
    let (number, unit) = split_number(text);
    let decimal = Decimal::parse(number).ok_or_else(|| ParseDurationError::InvalidNumber {
        input: text.to_owned(),
    })?;
    let nanos_per_unit: u128 = match unit.to_ascii_lowercase().as_str() {
        "" if decimal.is_zero() => return Ok(Duration::ZERO),
        "" => {
            return Err(ParseDurationError::MissingUnit {
                input: text.to_owned(),
            })
        }
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => {
            return Err(ParseDurationError::UnknownUnit {
                input: text.to_owned(),
                unit: unit.to_owned(),
            })
        }
    };
    decimal
        .times_exact(nanos_per_unit)
        .and_then(|nanos| u64::try_from(nanos).ok())
        .map(Duration::from_nanos)
        .ok_or_else(|| ParseDurationError::OutOfRange {
            input: text.to_owned(),
        })
}

/// Why a rate did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseRateError {
    /// The text does not start with a decimal number.
    #[error("`{input}` is not a rate: write a number with a unit, like `250mbit`, `500kbit`, `1gbit` or `64000bit`")]
    InvalidNumber {
        /// The rejected text.
        input: String,
    },
    /// A number without a unit.
    #[error("`{input}` has no unit: write `{input}mbit` for megabits per second (or use `bit`, `kbit`, `gbit`)")]
    MissingUnit {
        /// The rejected text.
        input: String,
    },
    /// A unit that people read as bits or as bytes depending on the tool.
    #[error("`{input}` is ambiguous (`{unit}` means bytes to tc but bits to most people): write `{number}{prefix}bit` for {prefix}bit/s, or multiply by 8 for bytes per second")]
    Ambiguous {
        /// The rejected text.
        input: String,
        /// The unit as written.
        unit: String,
        /// The number as written.
        number: String,
        /// The decimal prefix of the unit (`k`, `m`, `g` or empty).
        prefix: String,
    },
    /// A unit that is not a rate at all.
    #[error("`{input}` has an unknown unit `{unit}`: use `bit`, `kbit`, `mbit` or `gbit`")]
    UnknownUnit {
        /// The rejected text.
        input: String,
        /// The unit as written.
        unit: String,
    },
    /// Zero, a fraction of a bit per second, or too large.
    #[error(
        "`{input}` is out of range: a rate must be a whole number of bits per second above zero"
    )]
    OutOfRange {
        /// The rejected text.
        input: String,
    },
}

/// Parses a rate with an explicit decimal unit like `tc`: `64000bit`,
/// `500kbit`, `250mbit`, `1gbit` (any case, optional `/s`). Ambiguous forms
/// such as `10mbps`, `10mb` or `10m` are rejected with a hint.
pub fn parse_rate(input: &str) -> Result<BitsPerSecond, ParseRateError> {
    let text = input.trim();
    let (number, unit) = split_number(text);
    let decimal = Decimal::parse(number).ok_or_else(|| ParseRateError::InvalidNumber {
        input: text.to_owned(),
    })?;
    let lower = unit.to_ascii_lowercase();
    let lower = lower.strip_suffix("/s").unwrap_or(&lower);
    let bits_per_unit: u128 = match lower {
        "" => {
            return Err(ParseRateError::MissingUnit {
                input: text.to_owned(),
            })
        }
        "bit" | "bits" => 1,
        "kbit" | "kbits" => 1_000,
        "mbit" | "mbits" => 1_000_000,
        "gbit" | "gbits" => 1_000_000_000,
        "tbit" | "tbits" => 1_000_000_000_000,
        "bps" | "kbps" | "mbps" | "gbps" | "b" | "kb" | "mb" | "gb" | "k" | "m" | "g" => {
            return Err(ParseRateError::Ambiguous {
                input: text.to_owned(),
                unit: unit.to_owned(),
                number: number.to_owned(),
                prefix: lower
                    .chars()
                    .next()
                    .filter(|c| matches!(c, 'k' | 'm' | 'g'))
                    .map(String::from)
                    .unwrap_or_default(),
            })
        }
        _ => {
            return Err(ParseRateError::UnknownUnit {
                input: text.to_owned(),
                unit: unit.to_owned(),
            })
        }
    };
    decimal
        .times_exact(bits_per_unit)
        .and_then(|bits| u64::try_from(bits).ok())
        .filter(|&bits| bits > 0)
        .map(BitsPerSecond)
        .ok_or_else(|| ParseRateError::OutOfRange {
            input: text.to_owned(),
        })
}

/// Why a queue limit did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseQueueLimitError {
    /// The text does not start with a decimal number.
    #[error("`{input}` is not a queue limit: write `2bdp` (bandwidth-delay products), `500kb` (bytes) or `1000p` (packets)")]
    InvalidNumber {
        /// The rejected text.
        input: String,
    },
    /// A number without a unit.
    #[error("`{input}` has no unit: write `{input}p` for packets, `{input}b` for bytes or `{input}bdp` for bandwidth-delay products")]
    MissingUnit {
        /// The rejected text.
        input: String,
    },
    /// The unit is not a size.
    #[error(
        "`{input}` has an unknown unit `{unit}`: use `bdp`, `b`, `kb`, `mb`, `kib`, `mib` or `p`"
    )]
    UnknownUnit {
        /// The rejected text.
        input: String,
        /// The unit as written.
        unit: String,
    },
    /// A fraction of a byte or packet, or too large.
    #[error("`{input}` is out of range: bytes and packets must be whole numbers")]
    OutOfRange {
        /// The rejected text.
        input: String,
    },
}

/// Parses a bottleneck queue limit: `2bdp` (a multiple of the bandwidth-delay
/// product), `64000b`, `500kb`, `1mb`, `64kib` (bytes, `kb` = 1000 bytes) or
/// `1000p` (packets).
pub fn parse_queue_limit(input: &str) -> Result<QueueLimit, ParseQueueLimitError> {
    let text = input.trim();
    let (number, unit) = split_number(text);
    let decimal = Decimal::parse(number).ok_or_else(|| ParseQueueLimitError::InvalidNumber {
        input: text.to_owned(),
    })?;
    let out_of_range = || ParseQueueLimitError::OutOfRange {
        input: text.to_owned(),
    };
    let bytes = |factor: u128| {
        decimal
            .times_exact(factor)
            .and_then(|n| u64::try_from(n).ok())
            .map(QueueLimit::Bytes)
            .ok_or_else(out_of_range)
    };
    match unit.to_ascii_lowercase().as_str() {
        "" => Err(ParseQueueLimitError::MissingUnit {
            input: text.to_owned(),
        }),
        "bdp" => number
            .parse::<f64>()
            .ok()
            .filter(|k| k.is_finite())
            .map(QueueLimit::Bdp)
            .ok_or_else(out_of_range),
        "p" | "pkt" | "pkts" | "packets" => decimal
            .times_exact(1)
            .and_then(|n| u64::try_from(n).ok())
            .map(QueueLimit::Packets)
            .ok_or_else(out_of_range),
        "b" | "byte" | "bytes" => bytes(1),
        "kb" => bytes(1_000),
        "mb" => bytes(1_000_000),
        "gb" => bytes(1_000_000_000),
        "kib" => bytes(1 << 10),
        "mib" => bytes(1 << 20),
        "gib" => bytes(1 << 30),
        _ => Err(ParseQueueLimitError::UnknownUnit {
            input: text.to_owned(),
            unit: unit.to_owned(),
        }),
    }
}

/// Why a percentage did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParsePercentError {
    /// Not a number followed by `%`.
    #[error("`{input}` is not a percentage: write it with a percent sign, like `1%` or `0.1%`")]
    Invalid {
        /// The rejected text.
        input: String,
    },
    /// A number without the percent sign.
    #[error("`{input}` has no `%`: write `{input}%` for {input} percent")]
    MissingPercentSign {
        /// The rejected text.
        input: String,
    },
    /// Below 0% or above 100%.
    #[error("`{input}` is out of range: a percentage must be between 0% and 100%")]
    OutOfRange {
        /// The rejected text.
        input: String,
    },
}

/// Parses a percentage: `1%`, `0.1%`, `100%` or a bare `0`.
pub fn parse_percent(input: &str) -> Result<Probability, ParsePercentError> {
    let text = input.trim();
    let Some(number) = text.strip_suffix('%') else {
        return match text.parse::<f64>() {
            Ok(0.0) => Ok(Probability::ZERO),
            Ok(_) => Err(ParsePercentError::MissingPercentSign {
                input: text.to_owned(),
            }),
            Err(_) => Err(ParsePercentError::Invalid {
                input: text.to_owned(),
            }),
        };
    };
    let percent = number
        .trim()
        .parse::<f64>()
        .map_err(|_| ParsePercentError::Invalid {
            input: text.to_owned(),
        })?;
    Probability::from_percent(percent).ok_or_else(|| ParsePercentError::OutOfRange {
        input: text.to_owned(),
    })
}

/// Why a Gilbert-Elliott burst-loss specification did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseGilbertElliottError {
    /// Not two to four comma-separated probabilities.
    #[error("`{input}` is not a burst-loss model: write `P,R` like `1%,30%` (P = good to bad, R = bad to good), optionally followed by the loss in the bad and in the good state: `1%,30%,100%,0%`")]
    Shape {
        /// The rejected text.
        input: String,
    },
    /// One of the values is not a probability.
    #[error("`{value}` in `{input}` is not a probability: write a percentage like `30%` or a fraction between 0 and 1 like `0.3`")]
    Value {
        /// The whole rejected text.
        input: String,
        /// The offending value.
        value: String,
    },
    /// The chain can never leave the bad state but the good state can reach it.
    #[error("`{input}` never leaves the bad state (R = 0): every packet after the first burst would be lost")]
    Absorbing {
        /// The rejected text.
        input: String,
    },
}

/// Parses a Gilbert-Elliott model `P,R[,LOSS_IN_BAD[,LOSS_IN_GOOD]]` where each
/// value is a percentage (`30%`) or a fraction in `[0, 1]` (`0.3`). P is the
/// probability of moving from the good to the bad state and R from bad to good,
/// drawn once per packet; the bad state loses 100% and the good state 0%
/// unless the optional third and fourth values say otherwise.
pub fn parse_gilbert_elliott(input: &str) -> Result<GilbertElliott, ParseGilbertElliottError> {
    let text = input.trim();
    let values: Vec<&str> = text.split(',').map(str::trim).collect();
    if !(2..=4).contains(&values.len()) {
        return Err(ParseGilbertElliottError::Shape {
            input: text.to_owned(),
        });
    }
    let mut parsed = [
        Probability::ZERO,
        Probability::ZERO,
        Probability::ONE,
        Probability::ZERO,
    ];
    for (slot, value) in parsed.iter_mut().zip(&values) {
        *slot =
            parse_percent_or_fraction(value).ok_or_else(|| ParseGilbertElliottError::Value {
                input: text.to_owned(),
                value: (*value).to_owned(),
            })?;
    }
    let [good_to_bad, bad_to_good, loss_in_bad, loss_in_good] = parsed;
    if bad_to_good.is_zero() && !good_to_bad.is_zero() {
        return Err(ParseGilbertElliottError::Absorbing {
            input: text.to_owned(),
        });
    }
    Ok(GilbertElliott {
        good_to_bad,
        bad_to_good,
        loss_in_bad,
        loss_in_good,
    })
}

fn parse_percent_or_fraction(value: &str) -> Option<Probability> {
    match value.strip_suffix('%') {
        Some(percent) => Probability::from_percent(percent.trim().parse().ok()?),
        None => Probability::new(value.parse().ok()?),
    }
}

/// Splits `"1.5ms"` into `("1.5", "ms")`.
fn split_number(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    (number, unit.trim())
}

/// A non-negative decimal number `mantissa / 10^scale`, parsed exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decimal {
    mantissa: u128,
    scale: u32,
}

impl Decimal {
    /// Parses `123`, `1.5`, `.5` or `5.`; at most 30 digits.
    fn parse(number: &str) -> Option<Decimal> {
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        if whole.len() + fraction.len() > 30 {
            return None;
        }
        let mut mantissa: u128 = 0;
        for c in whole.chars().chain(fraction.chars()) {
            let digit = c.to_digit(10)?;
            mantissa = mantissa.checked_mul(10)?.checked_add(u128::from(digit))?;
        }
        Some(Decimal {
            mantissa,
            scale: u32::try_from(fraction.len()).ok()?,
        })
    }

    fn is_zero(self) -> bool {
        self.mantissa == 0
    }

    /// `self * factor` if that is a whole number that fits.
    fn times_exact(self, factor: u128) -> Option<u128> {
        let product = self.mantissa.checked_mul(factor)?;
        let divisor = 10u128.checked_pow(self.scale)?;
        (product % divisor == 0).then_some(product / divisor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units_parse_exactly() {
        let cases = [
            ("100ms", Duration::from_millis(100)),
            ("1.5ms", Duration::from_micros(1500)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("2s", Duration::from_secs(2)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("10ns", Duration::from_nanos(10)),
            ("0", Duration::ZERO),
            ("0ms", Duration::ZERO),
            (" 75MS ", Duration::from_millis(75)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn durations_without_units_or_with_bad_units_are_rejected_with_a_hint() {
        let error = parse_duration("100").unwrap_err();
        assert_eq!(
            error.to_string(),
            "`100` has no unit: write `100ms` for milliseconds (or use `us`, `ns`, `s`)"
        );
        assert!(matches!(
            parse_duration("5min"),
            Err(ParseDurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_duration("ms"),
            Err(ParseDurationError::InvalidNumber { .. })
        ));
        assert!(matches!(
            parse_duration("1.2.3ms"),
            Err(ParseDurationError::InvalidNumber { .. })
        ));
        assert!(matches!(
            parse_duration("-1ms"),
            Err(ParseDurationError::InvalidNumber { .. })
        ));
        assert!(matches!(
            parse_duration("1.5ns"),
            Err(ParseDurationError::OutOfRange { .. })
        ));
    }

    #[test]
    fn rates_parse_like_tc_with_decimal_prefixes() {
        let cases = [
            ("250mbit", 250_000_000),
            ("250Mbit", 250_000_000),
            ("1gbit", 1_000_000_000),
            ("1.5gbit", 1_500_000_000),
            ("500kbit", 500_000),
            ("64000bit", 64_000),
            ("10Mbit/s", 10_000_000),
        ];
        for (text, bits) in cases {
            assert_eq!(parse_rate(text), Ok(BitsPerSecond(bits)), "{text}");
        }
    }

    #[test]
    fn ambiguous_or_bare_rates_are_rejected_with_a_hint() {
        let error = parse_rate("10mbps").unwrap_err();
        assert!(matches!(error, ParseRateError::Ambiguous { .. }));
        assert!(error.to_string().contains("write `10mbit`"), "{error}");
        for text in ["10MB", "10m", "100bps", "10kbps"] {
            assert!(
                matches!(parse_rate(text), Err(ParseRateError::Ambiguous { .. })),
                "{text}"
            );
        }
        assert_eq!(
            parse_rate("100").unwrap_err().to_string(),
            "`100` has no unit: write `100mbit` for megabits per second (or use `bit`, `kbit`, `gbit`)"
        );
        assert!(matches!(
            parse_rate("0mbit"),
            Err(ParseRateError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_rate("0.5bit"),
            Err(ParseRateError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_rate("5furlong"),
            Err(ParseRateError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn queue_limits_parse_bdp_bytes_and_packets() {
        assert_eq!(parse_queue_limit("2bdp"), Ok(QueueLimit::Bdp(2.0)));
        assert_eq!(parse_queue_limit("0.5BDP"), Ok(QueueLimit::Bdp(0.5)));
        assert_eq!(parse_queue_limit("500kb"), Ok(QueueLimit::Bytes(500_000)));
        assert_eq!(parse_queue_limit("1mb"), Ok(QueueLimit::Bytes(1_000_000)));
        assert_eq!(parse_queue_limit("1.5mb"), Ok(QueueLimit::Bytes(1_500_000)));
        assert_eq!(parse_queue_limit("64kib"), Ok(QueueLimit::Bytes(65_536)));
        assert_eq!(parse_queue_limit("64000b"), Ok(QueueLimit::Bytes(64_000)));
        assert_eq!(parse_queue_limit("1000p"), Ok(QueueLimit::Packets(1000)));
        assert_eq!(
            parse_queue_limit("1000").unwrap_err().to_string(),
            "`1000` has no unit: write `1000p` for packets, `1000b` for bytes or `1000bdp` for bandwidth-delay products"
        );
        assert!(matches!(
            parse_queue_limit("1.5p"),
            Err(ParseQueueLimitError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_queue_limit("3furlongs"),
            Err(ParseQueueLimitError::UnknownUnit { .. })
        ));
    }

    #[test]
    fn percentages_need_a_percent_sign_except_zero() {
        assert!((parse_percent("1%").unwrap().value() - 0.01).abs() < 1e-15);
        assert!((parse_percent("0.1%").unwrap().value() - 0.001).abs() < 1e-15);
        assert_eq!(parse_percent("0"), Ok(Probability::ZERO));
        assert_eq!(parse_percent("100%"), Ok(Probability::ONE));
        assert_eq!(
            parse_percent("1").unwrap_err().to_string(),
            "`1` has no `%`: write `1%` for 1 percent"
        );
        assert!(matches!(
            parse_percent("101%"),
            Err(ParsePercentError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_percent("abc%"),
            Err(ParsePercentError::Invalid { .. })
        ));
    }

    #[test]
    fn gilbert_elliott_accepts_percent_or_fraction_pairs() {
        let model = parse_gilbert_elliott("1%,30%").unwrap();
        assert!((model.good_to_bad.value() - 0.01).abs() < 1e-12);
        assert!((model.bad_to_good.value() - 0.3).abs() < 1e-12);
        assert_eq!(model.loss_in_bad, Probability::ONE);
        assert_eq!(model.loss_in_good, Probability::ZERO);
        let model = parse_gilbert_elliott("0.01, 0.3, 50%, 0.1%").unwrap();
        assert!((model.loss_in_bad.value() - 0.5).abs() < 1e-12);
        assert!((model.loss_in_good.value() - 0.001).abs() < 1e-12);
        assert!(matches!(
            parse_gilbert_elliott("1%"),
            Err(ParseGilbertElliottError::Shape { .. })
        ));
        let error = parse_gilbert_elliott("1%,3").unwrap_err();
        assert!(error
            .to_string()
            .starts_with("`3` in `1%,3` is not a probability"));
        assert!(matches!(
            parse_gilbert_elliott("1%,0%"),
            Err(ParseGilbertElliottError::Absorbing { .. })
        ));
    }

    #[test]
    fn rates_display_with_the_largest_exact_unit() {
        assert_eq!(BitsPerSecond(250_000_000).to_string(), "250mbit");
        assert_eq!(BitsPerSecond(1_500).to_string(), "1500bit");
        assert_eq!(BitsPerSecond(1_000_000_000).to_string(), "1gbit");
    }
}
