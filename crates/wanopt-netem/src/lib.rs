//! Sans-IO model of an emulated WAN link, one direction at a time.
//!
//! The lab's emulator is a bump in the wire: a driver in `wanopt-lab` reads
//! raw Ethernet II frames from one interface of the `wan` namespace, hands
//! them to a [`Link`] with the time they arrived, and writes what the link
//! gives back to the other interface when it is due. The model never reads
//! the clock, never touches a socket and draws every random number from a
//! ChaCha8 generator seeded by the caller, so the same seed and the same
//! arrival sequence give the same drops, marks and departure times.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use wanopt_netem::{units, Link, LinkConfig};
//!
//! let mut config = LinkConfig::from_rtt(Duration::from_millis(100));
//! units::apply_spec(&mut config, "rate 250mbit queue 2bdp loss 0.1% ecn red").unwrap();
//! let mut link = Link::new(config, 42);
//!
//! let start = Instant::now();
//! let frame = vec![0u8; 60]; // an Ethernet II frame from the wire
//! link.handle_frame(start, frame);
//! // The driver sleeps until `poll_timeout`, then drains what is due.
//! if let Some(due) = link.poll_timeout() {
//!     while let Some(frame) = link.poll_transmit(due) {
//!         // write `frame` to the other interface
//!         # let _ = frame;
//!     }
//! }
//! println!("{}", link.counters().frames_out);
//! ```
//!
//! # The pipeline
//!
//! Each IP frame goes through these stages, in order:
//!
//! 1. **Loss.** Independent (Bernoulli) loss with [`LinkConfig::loss`], and
//!    Gilbert-Elliott burst loss with [`LinkConfig::loss_burst`]; a lost frame
//!    counts as `dropped_loss`.
//! 2. **Duplication** with [`LinkConfig::duplicate`]: the copy follows the
//!    original through every later stage, taking its own place in the queue.
//! 3. **Bottleneck queue and shaper** (only with a [`LinkConfig::rate`]). The
//!    rate counts IP bytes (frame length minus the Ethernet header and any
//!    VLAN tags). A frame leaves the shaper at
//!    `max(arrival, previous departure) + bytes × 8 / rate`, in integer
//!    nanoseconds with the remainder carried, so N back-to-back frames take
//!    exactly `floor(N × bits / rate)` ns with no rounding drift. The queue
//!    holds only frames waiting for or in serialization, never the delay
//!    line; a frame that would push it beyond [`LinkConfig::queue`] (bytes or
//!    packets; a BDP multiple is resolved by [`LinkConfig::resolve_queue`])
//!    is dropped as `dropped_queue`. With a [`LinkConfig::trace`] instead
//!    of a rate, the queue drains at the trace's delivery opportunities,
//!    1500 bytes each, as Mahimahi's `mm-link` drains it ([`trace`]): a
//!    cellular link whose capacity moves every few milliseconds. The time
//!    the queue spent at each level and the wait of each frame are kept as
//!    histograms ([`Counters::queue_bytes_time`], [`Counters::queue_delay_ns`]).
//! 4. **RED/ECN** ([`QueueDiscipline::Red`]): on the instantaneous backlog,
//!    between thresholds derived from the queue limit, ECN-capable frames
//!    are marked CE (IPv4 TOS byte with an RFC 1624 checksum update, IPv6
//!    traffic class) and other IP frames are dropped as `dropped_red`.
//! 5. **Delay line**: departure = shaper departure + [`LinkConfig::delay`] +
//!    a jitter sample uniform in `[0, jitter]`. Jitter preserves order: a
//!    frame never leaves before the frame ahead of it (the departure is
//!    raised to that frame's), so under load the effective delay tends to
//!    `delay + jitter`. Reordering happens only through
//!    [`LinkConfig::reorder`]: a selected frame is held back
//!    [`LinkConfig::reorder_gap`] after its in-order departure and does not
//!    hold back the frames behind it, which overtake it. No frame ever leaves
//!    before its arrival plus `delay`.
//!
//! **Non-IP frames** (ARP, LLDP, runts: anything whose EtherType, after up
//! to two VLAN tags, is not IPv4 or IPv6) take a priority lane: they are
//! never lost, duplicated, queued, shaped or marked and leave exactly
//! `delay` after arrival, so the lab's neighbour discovery never flaps and
//! ARP never consumes the rate budget.
//!
//! # Gaps in other emulators this closes
//!
//! - netem's `limit` counts every packet in the delay line, so at 200 ms a
//!   default limit caps throughput (1.1 Gbit/s fell to about 100 Mbit/s);
//!   here the queue limit counts only the bottleneck backlog.
//! - netem's jitter silently reorders packets; here jitter preserves order
//!   and reordering is a separate, counted, opt-in choice.
//! - Mahimahi works at millisecond granularity (about 300 Mbit/s of a
//!   720 Mbit/s trace at 80 ms); here time is integer nanoseconds and the
//!   shaper is byte-accurate. VPP nsim does not pace at all; here every
//!   frame is serialized at the configured rate.
//!
//! # Cost
//!
//! Per frame: O(1) work with two `VecDeque`s (the shaper backlog and the
//! in-order delay line), O(log n) only for the rare reordered or non-IP frames
//! in a `BinaryHeap`, no allocation beyond the frame's own `Vec` (except the
//! copy a duplication makes), no clock reads.
//!
//! [`middlebox`] holds first-match rules that rewrite TCP/IPv4 headers the
//! way path-breaking middleboxes do (apply them before `handle_frame`);
//! [`units`] parses the user-facing values; [`wire`] holds the checked views
//! every parser of network bytes goes through.

pub mod config;
pub mod counters;
pub mod histogram;
pub mod link;
mod loss;
pub mod middlebox;
mod red;
pub mod trace;
pub mod units;
pub mod wire;

pub use config::{
    GilbertElliott, LinkConfig, QueueDiscipline, QueueLimit, RedParams, ResolvedQueueLimit,
};
pub use counters::Counters;
pub use histogram::LogHistogram;
pub use link::Link;
pub use trace::DeliveryTrace;
pub use units::{BitsPerSecond, Probability};
