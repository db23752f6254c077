//! The tokio runtime of a wanopt node.
//!
//! An **edge** ([`edge::run`]) terminates client TCP connections on the LAN,
//! chosen by explicit forwards or transparent interception and by policy, and
//! carries each over one stream of a long-lived QUIC connection ([`tunnel`])
//! to a **core** ([`core::run`]), which connects to the destination if its
//! allowlist ([`policy`]) permits. Nodes authenticate each other by pinned
//! Ed25519 keys ([`identity`]). Each node keeps a flow table ([`flow`]) and
//! its state ([`state`]), served by the control API ([`control`]). Flows
//! with the `reduce` service run through the codec ([`reduced`]) against a
//! persistent per-peer byte cache ([`reduce`]), private to the node's user
//! on disk ([`cache_dir`]). Under QUIC, the tunnel's
//! socket repeats the tails of bursts on lossy paths ([`dupsock`]).
//! Transparently redirected flows arrive on a listener that closes while the
//! tunnel is down under `--fail open` (`intercept`).

pub mod abort;
pub mod budget;
pub mod cache_dir;
pub mod control;
pub mod core;
pub mod edge;
pub mod error;
pub mod flow;
pub mod intercept;
pub mod lifecycle;
pub mod limits;
pub mod policy;
pub mod process;
pub mod reassembly;
pub mod reduce;
pub mod reduced;
pub mod state;
pub mod transport;

pub use error::NodeError;
pub use intercept::{listen_tcp, original_destination};
pub use lifecycle::{ignore_hangups, shutdown_signal, Shutdown};
pub use process::{raise_fd_limit, release_free_memory};

// The paths the binary, the lab and the tests name.
pub use transport::udp as dupsock;
pub use transport::{bbr, handshakes, identity, tunnel};
