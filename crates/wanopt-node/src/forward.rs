//! Forwards as the command line gives them: `LISTEN=DEST`, where DEST is
//! `IP:PORT`, `[IPv6]:PORT` or `NAME:PORT` (resolved by the core); and
//! the edge's WAN paths, `LOCAL=REMOTE` (`--path`).

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

/// One WAN path to the core (`--path LOCAL=REMOTE`): datagrams leave
/// from the local address `local` to the core's address `remote` on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WanPath {
    /// A local IP address of this host.
    pub local: IpAddr,
    /// The core's UDP address on this path.
    pub remote: SocketAddr,
}

/// Most `--path`s an edge may have (the probe's path number).
pub const MAX_PATHS: usize = wanopt_proto::path::wire::MAX_PATH as usize;

impl std::str::FromStr for WanPath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (local, remote) = s.split_once('=').ok_or_else(|| {
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
        Ok(WanPath { local, remote })
    }
}

impl std::fmt::Display for WanPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.local, self.remote)
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
        ] {
            let err = bad.parse::<WanPath>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
