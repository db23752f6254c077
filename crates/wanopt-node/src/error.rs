//! Errors that stop a node from starting.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::control::token::TokenError;
use crate::transport::tunnel::TunnelError;

/// Errors that stop a node from starting.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A listening socket could not be bound.
    #[error("cannot listen on {addr} for the {what}: {source}")]
    Bind {
        /// What the socket was for.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A name did not resolve.
    #[error("cannot resolve {name}: {why}")]
    Resolve {
        /// The name, as given (`HOST:PORT`).
        name: String,
        /// What the resolver said.
        why: ResolveFailure,
    },
    /// The tunnel's endpoint could not tell its own address.
    #[error("cannot read the tunnel's local address: {0}")]
    LocalAddress(std::io::Error),
    /// The tunnel could not be set up.
    #[error(transparent)]
    Tunnel(#[from] TunnelError),
    /// The byte caches' directory cannot be used.
    #[error(
        "cannot use cache directory {}: {source} (give --cache-dir DIR, or --no-reduce)",
        dir.display()
    )]
    CacheDir {
        /// The directory (`--cache-dir`).
        dir: PathBuf,
        /// Why not.
        source: std::io::Error,
    },
    /// The control API's token file could not be written.
    #[error(transparent)]
    ControlToken(#[from] TokenError),
    /// A flag or configuration value the node cannot run with (a usage
    /// error: the command line or file must change).
    #[error(transparent)]
    Usage(#[from] UsageError),
}

/// Why a name did not resolve.
#[derive(Debug, thiserror::Error)]
pub enum ResolveFailure {
    /// The lookup failed.
    #[error("{0}")]
    Lookup(std::io::Error),
    /// The lookup found no address.
    #[error("no address")]
    NoAddress,
}

/// A node configuration that cannot run, whatever the network does.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// An edge with neither an explicit forward nor a transparent listener.
    #[error("the edge has nothing to accept: give --forward LISTEN=DEST, --forward-udp LISTEN=DEST or --transparent LISTEN")]
    NothingToAccept,
    /// A configuration that neither accepts tunnels nor dials a peer.
    #[error("nothing to run: give `listen` to accept tunnels, or a peer to dial (--core, or a [[peer]] with an endpoint)")]
    NothingToRun,
    /// A core that pins no edge key.
    #[error("the core pins no edge: give at least one --peer-key")]
    NoPeerKey,
    /// A byte cache too small to run with (`--cache-size`, bytes).
    #[error("--cache-size {0} bytes is too small: give at least 64MiB")]
    CacheTooSmall(u64),
    /// A `--path` whose local address is not this host's.
    #[error("--path {0}: {1} is not an address of this host; give one of its own addresses")]
    PathNotLocal(String, std::net::IpAddr),
    /// A `--path` of another address family than the core's address.
    #[error(
        "--path {0}: the core {1} is of another address family; give paths of the core's family"
    )]
    PathFamily(String, SocketAddr),
    /// `--path`s with other than one dialed peer.
    #[error("--path needs exactly one dialed peer (--core, or one [[peer]] with an endpoint); this configuration has {0}")]
    PathsNeedOnePeer(usize),
    /// An edge that dials no peer.
    #[error("the edge dials no peer: give --core HOST:PORT, or a [[peer]] with an endpoint")]
    NoUpstream,
    /// A reload that changes what only a restart can.
    #[error("{0} cannot change on reload: restart the node")]
    NeedsRestart(&'static str),
    /// A reload that changes settings read only at start, named by their
    /// keys.
    #[error("{0} cannot change on reload: restart the node to apply them (nothing was changed)")]
    RestartKeys(String),
}
