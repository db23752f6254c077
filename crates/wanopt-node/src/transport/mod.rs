//! The transport wing: everything between a flow's QUIC stream and the
//! wire.
//!
//! - [`tunnel`]: the QUIC endpoint and its configuration (client, server,
//!   windows, the node-wide receive budget);
//! - [`identity`]: Ed25519 keys, certificates and pinning;
//! - [`handshakes`]: admission of incoming tunnel handshakes (a core's);
//! - [`bbr`]: quinn's adapter of wanopt's congestion controller
//!   (`wanopt_cc`);
//! - [`model`]: the one reader of the controller's model of the path;
//! - [`carrier`]: the tunnel's packets on a TCP connection, where UDP is
//!   blocked or policed;
//! - [`datagram`]: the socket adapter over the datagram layer under QUIC
//!   (tail duplication, FEC, paths: `wanopt_proto::datagram`).

pub mod bbr;
pub mod carrier;
pub mod datagram;
pub mod handshakes;
pub mod identity;
pub mod model;
pub mod tunnel;
