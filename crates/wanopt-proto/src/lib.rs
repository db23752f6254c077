//! Sans-IO wire formats of the wanopt tunnel.
//!
//! Everything here is pure: byte buffers in, typed values out, no sockets, no
//! clocks. Formats are read through checked views (`new_checked`) so bytes
//! from the network never reach a panicking index, and each has a fuzz target
//! in `fuzz/`.
//!
//! - [`stream`]: the header that opens each tunnel stream (one per TCP flow)
//!   and the core's reply.
//! - [`control`]: the messages on each node's control stream (services
//!   accepted, byte-cache hello).
//! - [`dup`]: tail duplication under QUIC (which datagrams to send twice,
//!   and when) and the loss monitor that turns it on.
//! - [`fec`]: Reed-Solomon parity datagrams for the end of a transfer, and
//!   the receiver that rebuilds lost datagrams from them.
//! - [`fec_stream`]: continuous, adaptive Reed-Solomon FEC under QUIC
//!   for every datagram (sources, repairs, the receiver's reports) and the
//!   policy that sizes it from the measured loss.
//! - [`codes`]: QUIC application error codes carried by stream resets and
//!   connection closes.
//! - [`udp_flow`]: UDP flows' datagrams in QUIC DATAGRAM frames (flow id,
//!   number, fragments), their bounded reassembly and the receiver's count
//!   of loss and reordering.
//! - [`path`]: several WAN paths to one peer: the authenticated probe
//!   each node sends on every path, the monitor that turns probes into each
//!   path's state, RTT and loss, and the selector of each lane's paths
//!   (failover, duplicate, spread-fec).
//! - [`datagram`]: the datagram layer under QUIC as a state machine
//!   (tail duplication, FEC, paths), driven by the node's socket adapter.
//! - [`dedup`]: the fixed-size filter that drops a datagram's second copy
//!   when it came over two paths.
//! - [`bond`]: one peer's datagrams over every path at once (per-path
//!   headers and acks, the receiver's reorder buffer).
//! - [`carrier`]: the tunnel's QUIC packets framed on a TCP connection,
//!   for networks that block or police UDP.
//! - [`probe`]: the datagrams of `wanopt probe` (RTT, and loss, reordering
//!   and duplication per direction) and the reflector that answers them.

pub mod bond;
pub mod carrier;
pub mod codes;
pub mod control;
pub mod datagram;
pub mod dedup;
pub mod dup;
pub mod fec;
pub mod fec_stream;
pub mod path;
pub mod probe;
pub mod stream;
pub mod udp_flow;

pub use control::{control_len, Control, ControlRepr};
pub use stream::{
    open_header_len, HeaderError, Open, OpenRepr, Reply, ReplyRepr, Services, Status, Target,
};
