//! The tokio runtime of a wanopt node.
//!
//! A node ([`node::run`]) is an edge, a core or both. An **edge** terminates client TCP connections on the LAN,
//! chosen by explicit forwards or transparent interception ([`intercept`])
//! and by policy ([`policy`]), and carries each over one stream of a
//! long-lived QUIC connection to a **core**, which connects
//! to the destination if its allowlist permits. The code is in three wings
//! and a few rooms on top:
//!
//! - [`transport`]: the tunnel endpoint, identity and pinning of Ed25519
//!   keys, handshake admission, wanopt's BBR, the one reader of the
//!   controller's model, and the datagram layer under QUIC (tail
//!   duplication, parity);
//! - [`flow`]: the flow table, the one [`flow::carry()`] both roles call to
//!   pick and run a pump, the plain splice, the codec pump, read-ahead and
//!   reassembly, flow limits;
//! - [`reduce`]: the per-peer byte caches of the `reduce` service, the
//!   cache control stream, compression choice, the compressor memory
//!   budget, the cache directories;
//! - on top: [`edge`], [`core`], [`intercept`], [`control`] (the HTTP API),
//!   [`state`] (what a node knows of itself), [`lifecycle`] (shutdown,
//!   housekeeping, drain), [`process`] and [`error`].
//!
//! A wing uses only the wings below it: `flow` uses `reduce` and
//! `transport`, `reduce` uses `transport`; the rooms on top use the wings.

pub mod class;
pub mod control;
pub mod core;
pub mod edge;
pub mod error;
pub mod flow;
pub mod forward;
pub mod intercept;
pub mod lifecycle;
pub mod node;
pub mod peer_book;
pub mod policy;
pub mod process;
pub mod reduce;
mod restart;
pub mod state;
pub mod transport;

pub use error::NodeError;
pub use intercept::{listen_tcp, original_destination};
pub use lifecycle::{ignore_hangups, shutdown_signal, Shutdown};
pub use process::{hold_hangups, raise_fd_limit, release_free_memory};

// The paths the binary, the lab and the tests name.
pub use flow::{abort, limits};
pub use reduce::budget;
pub use transport::{bbr, datagram, handshakes, identity, tunnel};
