//! Errors that stop a node from starting.

use std::net::SocketAddr;

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
    #[error("cannot resolve {0}")]
    Resolve(String),
    /// The tunnel could not be set up.
    #[error(transparent)]
    Tunnel(#[from] TunnelError),
    /// The configuration is inconsistent.
    #[error("{0}")]
    Config(String),
    /// The control API's token file could not be written.
    #[error(transparent)]
    ControlToken(#[from] TokenError),
    /// A flag or configuration value the node cannot run with (a usage
    /// error: the command line or file must change).
    #[error("{0}")]
    Usage(String),
}
