//! The flow wing: one TCP flow from admission to its end.
//!
//! - [`table`]: the live flow table, each flow's state and counters, the
//!   node's totals ([`counters`]: data reduction's);
//! - [`limits`]: how many flows a node and each source may carry;
//! - [`mod@carry`]: the one entrance both roles use; it picks the pump and runs
//!   it, and reports how a flow ended ([`abort`]: why, and what each side
//!   is told);
//! - the pumps: [`splice`] (plain: a stream as it is, or TCP to TCP for a
//!   flow passed through) and [`codec_pump`] (through the codec, with a
//!   ready [`crate::reduce::Reduction`]), on what they share ([`pump`]);
//! - [`read_ahead`] and [`reassembly`]: a stream read unordered and handed
//!   on in order;
//! - [`udp`]: UDP flows (`--forward-udp`), carried as QUIC datagrams.
//!
//! TCP semantics survive the split: EOF on one side is a stream finish (a
//! half-close) on the other while the opposite direction keeps flowing; a
//! reset or error on either side becomes a stream reset plus STOP_SENDING,
//! which the far node turns back into a TCP reset.

pub mod abort;
pub mod carry;
pub mod codec_pump;
pub mod counters;
pub mod limits;
pub mod pump;
pub mod read_ahead;
pub mod reassembly;
pub mod splice;
pub mod table;
pub mod udp;
pub(crate) mod urgency;
pub mod why;

pub use abort::{reset_tcp, Abort, ResetCounters, ResetReason};
pub use carry::{carry, report};
pub use counters::{reduction, PeerTraffic, ReduceCounters, ReduceTotals};
pub use pump::{Facing, CHUNK, FIRST_READ};
pub use splice::{splice_stream, splice_tcp};
pub use table::{
    ByteTotals, DatagramCounters, Flow, FlowGuard, FlowInfo, FlowState, FlowTable, LiveTraffic,
    Totals,
};
