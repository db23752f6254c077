//! Forwards as the command line gives them: `LISTEN=DEST`, where DEST is
//! `IP:PORT`, `[IPv6]:PORT` or `NAME:PORT` (resolved by the core); and
//! the edge's WAN paths, `LOCAL=REMOTE[,rate=R][,up=R][,down=R]`
//! (`--path`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use wanopt_proto::Target;

/// An explicit forward: connections accepted on `listen` go to `destination`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    /// Local TCP address to accept on.
    pub listen: SocketAddr,
    /// Where the core connects.
    pub destination: Target,
}

impl std::str::FromStr for Forward {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            format!("bad forward {s:?} (expected LISTEN=DEST, e.g. 127.0.0.1:8080=198.51.100.7:80 or :8080=server.example:80)")
        };
        let (listen, dest) = s.split_once('=').ok_or_else(usage)?;
        let listen: SocketAddr = match listen.strip_prefix(':') {
            Some(port) => SocketAddr::new(
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                port.parse().map_err(|_| usage())?,
            ),
            None => listen.parse().map_err(|_| usage())?,
        };
        let destination = parse_target(dest).ok_or_else(usage)?;
        let port = match &destination {
            Target::Addr(addr) => addr.port(),
            Target::Domain(_, port) => *port,
        };
        if port == 0 {
            return Err(format!(
                "bad forward {s:?}: the destination's port is 0 (give the port it listens on)"
            ));
        }
        Ok(Forward {
            listen,
            destination,
        })
    }
}

/// Parses `IP:PORT`, `[IPv6]:PORT` or `NAME:PORT`.
pub fn parse_target(text: &str) -> Option<Target> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(Target::Addr(addr));
    }
    let (name, port) = text.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let valid = !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    valid.then(|| Target::Domain(name.to_owned(), port))
}

/// One WAN path to the core (`--path LOCAL=REMOTE[,rate=R][,up=R][,down=R]`):
/// datagrams leave from the local address `local` to the core's address
/// `remote` on it, and each way at most at its declared rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WanPath {
    /// A local IP address of this host.
    pub local: IpAddr,
    /// The core's UDP address on this path.
    pub remote: SocketAddr,
    /// What the link carries from the edge to the core, bits per second
    /// of IP packets (`up=`, or `rate=`): the tunnel never sends faster on
    /// it. `None`: what the controller finds.
    pub up_bps: Option<u64>,
    /// What the link carries from the core to the edge (`down=`, or
    /// `rate=`): the edge asks the core never to send faster on it.
    pub down_bps: Option<u64>,
}

/// Most `--path`s an edge may have (the probe's path number).
pub const MAX_PATHS: usize = wanopt_proto::path::wire::MAX_PATH as usize;

/// The least rate a path may be declared at, bits per second: below it a
/// path carries too few datagrams a second to be worth its probes.
pub const MIN_PATH_RATE: u64 = 64_000;

impl std::str::FromStr for WanPath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(',');
        let addresses = parts.next().unwrap_or_default();
        let (local, remote) = addresses.split_once('=').ok_or_else(|| {
            format!("--path {s:?}: expected LOCAL=REMOTE, e.g. 192.0.2.10=198.51.100.7:4433")
        })?;
        let local = local.trim().parse::<IpAddr>().map_err(|_| {
            format!("--path {s:?}: LOCAL {local:?} is not an IP address (e.g. 192.0.2.10)")
        })?;
        let remote = remote.trim().parse::<SocketAddr>().map_err(|_| {
            format!("--path {s:?}: REMOTE {remote:?} is not an IP:PORT address (e.g. 198.51.100.7:4433)")
        })?;
        if local.is_ipv4() != remote.is_ipv4() {
            return Err(format!(
                "--path {s:?}: LOCAL and REMOTE are of different address families"
            ));
        }
        let (mut rate, mut up, mut down) = (None, None, None);
        for option in parts {
            let (key, value) = option.split_once('=').unwrap_or((option, ""));
            if value.trim().is_empty() && matches!(key.trim(), "rate" | "up" | "down") {
                return Err(format!(
                    "--path {s:?}: {}= needs a rate (e.g. {}=20mbit)",
                    key.trim(),
                    key.trim()
                ));
            }
            let slot = match key.trim() {
                "rate" => &mut rate,
                "up" => &mut up,
                "down" => &mut down,
                other => {
                    return Err(format!(
                        "--path {s:?}: unknown option {other:?} (expected rate=, up= or down=, e.g. rate=20mbit)"
                    ))
                }
            };
            if slot.is_some() {
                return Err(format!("--path {s:?}: {} given twice", key.trim()));
            }
            *slot = Some(parse_rate(value.trim()).map_err(|e| format!("--path {s:?}: {e}"))?);
        }
        Ok(WanPath {
            local,
            remote,
            up_bps: up.or(rate),
            down_bps: down.or(rate),
        })
    }
}

impl WanPath {
    /// The path as the datagram layer takes it.
    pub fn spec(&self) -> wanopt_proto::datagram::PathSpec {
        wanopt_proto::datagram::PathSpec {
            local: self.local,
            remote: self.remote,
            up_bps: self.up_bps,
            down_bps: self.down_bps,
        }
    }
}

/// A rate as `tc` writes it: a number and `bit`, `kbit`, `mbit` or
/// `gbit` (`19.4mbit`), at least [`MIN_PATH_RATE`].
fn parse_rate(text: &str) -> Result<u64, String> {
    let lower = text.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "rate {text:?} is not a number with a unit (e.g. 20mbit)"
        ));
    }
    let scale = match unit.strip_suffix("/s").unwrap_or(unit) {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => {
            return Err(format!(
                "rate {text:?} needs a unit of bit, kbit, mbit or gbit (e.g. 20mbit)"
            ))
        }
    };
    let value = number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * scale)
        .ok_or_else(|| format!("rate {text:?} is not a number with a unit (e.g. 20mbit)"))?;
    if !(MIN_PATH_RATE as f64..=1e12).contains(&value) {
        return Err(format!(
            "rate {text:?} is out of range ({}kbit to 1000gbit)",
            MIN_PATH_RATE / 1000
        ));
    }
    Ok(value.round() as u64)
}

/// `bps` as `--path` takes it back: whole kbit/s, or mbit/s when they are
/// whole.
fn rate_text(bps: u64) -> String {
    match bps {
        b if b % 1_000_000 == 0 => format!("{}mbit", b / 1_000_000),
        b if b % 1000 == 0 => format!("{}kbit", b / 1000),
        b => format!("{b}bit"),
    }
}

impl std::fmt::Display for WanPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.local, self.remote)?;
        match (self.up_bps, self.down_bps) {
            (Some(up), Some(down)) if up == down => write!(f, ",rate={}", rate_text(up)),
            (up, down) => {
                if let Some(up) = up {
                    write!(f, ",up={}", rate_text(up))?;
                }
                if let Some(down) = down {
                    write!(f, ",down={}", rate_text(down))?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_and_bad_ones_say_what_is_wrong() {
        let path: WanPath = "10.0.0.1=192.0.2.1:4433".parse().unwrap();
        assert_eq!(path.local.to_string(), "10.0.0.1");
        assert_eq!(path.remote.to_string(), "192.0.2.1:4433");
        let path: WanPath = "::1=[2001:db8::1]:4433".parse().unwrap();
        assert_eq!(path.to_string(), "::1=[2001:db8::1]:4433");
        for (bad, says) in [
            ("10.0.0.1", "expected LOCAL=REMOTE"),
            ("eth0=192.0.2.1:4433", "not an IP address"),
            ("10.0.0.1=192.0.2.1", "not an IP:PORT address"),
            ("10.0.0.1=[2001:db8::1]:4433", "different address families"),
            (
                "10.0.0.1=192.0.2.1:4433,speed=1mbit",
                "unknown option \"speed\"",
            ),
            ("10.0.0.1=192.0.2.1:4433,rate=20", "needs a unit"),
            ("10.0.0.1=192.0.2.1:4433,rate=20mbps", "needs a unit"),
            ("10.0.0.1=192.0.2.1:4433,rate=fastmbit", "not a number"),
            ("10.0.0.1=192.0.2.1:4433,rate=10kbit", "out of range"),
            ("10.0.0.1=192.0.2.1:4433,rate", "rate= needs a rate"),
            ("10.0.0.1=192.0.2.1:4433,down=", "down= needs a rate"),
            (
                "10.0.0.1=192.0.2.1:4433,up=1mbit,up=2mbit",
                "up given twice",
            ),
        ] {
            let err = bad.parse::<WanPath>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn rates_apply_both_ways_unless_one_way_overrides_and_print_back() {
        let path: WanPath = "10.0.0.1=192.0.2.1:4433,rate=20mbit".parse().unwrap();
        assert_eq!(
            (path.up_bps, path.down_bps),
            (Some(20_000_000), Some(20_000_000))
        );
        assert_eq!(path.to_string(), "10.0.0.1=192.0.2.1:4433,rate=20mbit");
        let path: WanPath = "10.0.0.1=192.0.2.1:4433, rate=19.4Mbit ,up=2mbit"
            .parse()
            .unwrap();
        assert_eq!(
            (path.up_bps, path.down_bps),
            (Some(2_000_000), Some(19_400_000))
        );
        assert_eq!(
            path.to_string(),
            "10.0.0.1=192.0.2.1:4433,up=2mbit,down=19400kbit"
        );
        let path: WanPath = "10.0.0.1=192.0.2.1:4433,down=1gbit".parse().unwrap();
        assert_eq!((path.up_bps, path.down_bps), (None, Some(1_000_000_000)));
        assert_eq!(path.to_string().parse::<WanPath>().unwrap(), path);
        let plain: WanPath = "10.0.0.1=192.0.2.1:4433".parse().unwrap();
        assert_eq!((plain.up_bps, plain.down_bps), (None, None));
    }
}
