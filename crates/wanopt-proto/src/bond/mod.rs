//! Bonding: one peer's datagrams striped over every healthy path, so that
//! one flow gets the sum of the links.
//!
//! Each path has its own sequence numbers, acks and congestion controller,
//! so a path of another delay or loss never confuses another's; the
//! receiver puts what the paths delivered back in the sender's order before
//! QUIC sees it, so QUIC's one connection over the bond sees a single path
//! that does not reorder.
//!
//! - [`wire`]: the data header every bonded datagram wears and the ack each
//!   path's receiver sends back on that path.
//! - [`reorder`]: the receiver's reorder buffer.
//! - [`sender`]: which path each datagram takes, each path's pacer,
//!   controller and loss detection, and a stalled path's datagrams sent
//!   again on the others.
//! - [`receiver`]: each path's acks, the paths' skew and jitter, and the
//!   reorder buffer's hold time from them.
//!
//! Everything here is sans-IO: the caller passes `now` and the datagrams,
//! and sends what the polls return.

mod path;
pub mod receiver;
pub mod reorder;
pub mod sender;
#[cfg(test)]
mod sim;
pub mod wire;

pub use path::PathStats;
pub use receiver::{BondReceiver, ReceivedPath};
pub use reorder::{Order, ReorderBuffer, ReorderStats};
pub use sender::{BondSender, BondStats, Dropped};
pub use wire::{Ack, AckRepr, BondWireError, Data, DataRepr, ACK_LEN, DATA_HEADER_LEN};
