//! A probing run's flags as given, and checked into a configuration
//! before anything is sent.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use thiserror::Error;
use wanopt_netem::units::{parse_duration, ParseDurationError};
use wanopt_proto::probe::{HEADER_LEN, MAX_SEQ, MAX_TRAIN};

/// The largest UDP payload of a probe or train datagram: a 1500-byte MTU
/// less IPv4 and UDP headers.
pub const MAX_DATAGRAM: usize = 1472;

/// The most packet trains a run sends.
pub const MAX_TRAINS: u32 = 1000;

/// The flags of `wanopt probe HOST:PORT`, as given.
#[derive(Debug, Clone, Copy)]
pub struct ProbeFlags<'a> {
    /// The reflector (`HOST:PORT`).
    pub target: &'a str,
    /// Probes to send.
    pub count: u32,
    /// Time between probes (`10ms`).
    pub interval: &'a str,
    /// UDP payload bytes of each probe and echo.
    pub size: usize,
    /// Packet trains sent each way after the probes (0: none).
    pub trains: u32,
    /// Datagrams in each train.
    pub train_len: u32,
    /// UDP payload bytes of each train datagram.
    pub train_size: usize,
}

/// A probing run, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeConfig {
    /// The reflector's address.
    pub target: SocketAddr,
    /// Probes to send (1 to [`MAX_SEQ`]).
    pub count: u32,
    /// Time between probes.
    pub interval: Duration,
    /// UDP payload bytes of each probe and echo ([`HEADER_LEN`] to
    /// [`MAX_DATAGRAM`]).
    pub size: usize,
    /// Packet trains sent each way (0 to [`MAX_TRAINS`]).
    pub trains: u32,
    /// Datagrams in each train (2 to [`MAX_TRAIN`]).
    pub train_len: u32,
    /// UDP payload bytes of each train datagram.
    pub train_size: usize,
}

/// A flag of `wanopt probe` that is not what it should be.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The target is not `HOST:PORT`, or its host does not resolve.
    #[error("probe target {target:?} (expected HOST:PORT): {source}")]
    Target {
        /// The target as given.
        target: String,
        /// Why it is not an address.
        source: std::io::Error,
    },
    /// The target resolves to no address.
    #[error("probe target {target:?} resolves to no address")]
    NoAddress {
        /// The target as given.
        target: String,
    },
    /// `--interval` is not a time.
    #[error("--interval: {0}")]
    Interval(#[source] ParseDurationError),
    /// `--size` is outside what a probe can be.
    #[error("--size: {0} bytes is outside {HEADER_LEN}..={MAX_DATAGRAM}")]
    Size(usize),
    /// `--count` is zero or beyond what a reflector tracks.
    #[error("--count: {0} is outside 1..={MAX_SEQ}")]
    Count(u32),
    /// `--trains` is more than [`MAX_TRAINS`].
    #[error("--trains: {0} is more than {MAX_TRAINS}")]
    Trains(u32),
    /// `--train-len` is outside what a reflector answers.
    #[error("--train-len: {0} is outside 2..={MAX_TRAIN}")]
    TrainLen(u32),
    /// `--train-size` is outside what a train datagram can be.
    #[error("--train-size: {0} bytes is outside {HEADER_LEN}..={MAX_DATAGRAM}")]
    TrainSize(usize),
}

impl ProbeConfig {
    /// Checks `flags`: the target resolves, the interval is a time, the
    /// sizes and counts are within their ranges.
    pub fn new(flags: &ProbeFlags<'_>) -> Result<ProbeConfig, ConfigError> {
        let target = flags.target;
        let addr = target
            .to_socket_addrs()
            .map_err(|source| ConfigError::Target {
                target: target.to_string(),
                source,
            })?
            .next()
            .ok_or_else(|| ConfigError::NoAddress {
                target: target.to_string(),
            })?;
        let interval = parse_duration(flags.interval).map_err(ConfigError::Interval)?;
        if !(HEADER_LEN..=MAX_DATAGRAM).contains(&flags.size) {
            return Err(ConfigError::Size(flags.size));
        }
        if flags.count == 0 || flags.count > MAX_SEQ {
            return Err(ConfigError::Count(flags.count));
        }
        if flags.trains > MAX_TRAINS {
            return Err(ConfigError::Trains(flags.trains));
        }
        if !(2..=MAX_TRAIN).contains(&flags.train_len) {
            return Err(ConfigError::TrainLen(flags.train_len));
        }
        if !(HEADER_LEN..=MAX_DATAGRAM).contains(&flags.train_size) {
            return Err(ConfigError::TrainSize(flags.train_size));
        }
        Ok(ProbeConfig {
            target: addr,
            count: flags.count,
            interval,
            size: flags.size,
            trains: flags.trains,
            train_len: flags.train_len,
            train_size: flags.train_size,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Flags of a short run: `count` probes of `size` bytes every
    /// `interval`, three trains of eight 1000-byte datagrams.
    pub(crate) fn flags<'a>(
        target: &'a str,
        interval: &'a str,
        size: usize,
        count: u32,
    ) -> ProbeFlags<'a> {
        ProbeFlags {
            target,
            count,
            interval,
            size,
            trains: 3,
            train_len: 8,
            train_size: 1000,
        }
    }

    #[test]
    fn bad_flags_are_errors() {
        for (f, needle) in [
            (flags("nowhere", "10ms", 200, 10), "expected HOST:PORT"),
            (flags("127.0.0.1:9", "often", 200, 10), "--interval"),
            (flags("127.0.0.1:9", "10ms", 20, 10), "--size"),
            (flags("127.0.0.1:9", "10ms", 2000, 10), "--size"),
            (flags("127.0.0.1:9", "10ms", 200, 0), "--count"),
            (
                ProbeFlags {
                    train_len: 1,
                    ..flags("127.0.0.1:9", "10ms", 200, 10)
                },
                "--train-len",
            ),
            (
                ProbeFlags {
                    train_len: 65,
                    ..flags("127.0.0.1:9", "10ms", 200, 10)
                },
                "--train-len",
            ),
            (
                ProbeFlags {
                    train_size: 1500,
                    ..flags("127.0.0.1:9", "10ms", 200, 10)
                },
                "--train-size",
            ),
            (
                ProbeFlags {
                    trains: 5000,
                    ..flags("127.0.0.1:9", "10ms", 200, 10)
                },
                "--trains",
            ),
        ] {
            let e = ProbeConfig::new(&f)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(needle), "{needle:?} not in {e:?}");
        }
        let config = ProbeConfig::new(&flags("127.0.0.1:9", "10ms", 200, 10));
        assert_eq!(
            config.map(|c| (c.target.port(), c.interval)).ok(),
            Some((9, Duration::from_millis(10)))
        );
    }
}
