//! Forwards as the command line gives them: `LISTEN=DEST`, where DEST is
//! `IP:PORT`, `[IPv6]:PORT` or `NAME:PORT` (resolved by the core).

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
