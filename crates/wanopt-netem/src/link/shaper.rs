//! The bottleneck's server: when a frame that joins the queue leaves it.

use crate::trace::{DeliveryTrace, TraceServer};

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// How the bottleneck drains its queue.
#[derive(Debug, Clone)]
pub(crate) enum Shaper {
    /// No bottleneck: frames never queue.
    Unlimited,
    /// A fixed rate: a frame leaves at `max(arrival, previous departure) +
    /// bytes × 8 / rate + per_frame_ns`, in integer nanoseconds with the
    /// remainder carried, so N back-to-back frames take exactly
    /// `floor(N × bits / rate) + N × per_frame_ns` ns with no rounding
    /// drift.
    Rate {
        /// Bits per second, above 0.
        bits_per_second: u64,
        /// Time spent on each frame whatever its size (the link's
        /// `per_packet`), nanoseconds.
        per_frame_ns: u64,
        /// When the shaper finishes serializing what it has accepted.
        free_ns: u64,
        /// Sub-nanosecond remainder of the serialization times of the
        /// current busy period, in units of 1 / rate nanoseconds.
        remainder: u128,
    },
    /// A recorded trace of delivery opportunities ([`crate::trace`]).
    Trace(TraceServer),
}

impl Shaper {
    /// The shaper of a link with a fixed `rate` (bits per second) and
    /// `per_frame_ns` on each frame, or a `trace`; the trace wins when both
    /// are given.
    pub(crate) fn new(
        rate: Option<u64>,
        per_frame_ns: u64,
        trace: Option<&DeliveryTrace>,
    ) -> Shaper {
        match (trace, rate.filter(|&bits| bits > 0)) {
            (Some(trace), _) => Shaper::Trace(TraceServer::new(trace.clone())),
            (None, Some(bits_per_second)) => Shaper::Rate {
                bits_per_second,
                per_frame_ns,
                free_ns: 0,
                remainder: 0,
            },
            (None, None) => Shaper::Unlimited,
        }
    }

    /// Whether frames queue at all.
    pub(crate) fn is_limited(&self) -> bool {
        !matches!(self, Shaper::Unlimited)
    }

    /// A frame of `bytes` IP bytes joins the queue at `now_ns`: when it
    /// leaves the bottleneck (`now_ns` itself without one).
    pub(crate) fn depart(&mut self, now_ns: u64, bytes: u64) -> u64 {
        match self {
            Shaper::Unlimited => now_ns,
            Shaper::Rate {
                bits_per_second,
                per_frame_ns,
                free_ns,
                remainder,
            } => {
                let start_ns = if now_ns > *free_ns {
                    *remainder = 0;
                    now_ns
                } else {
                    *free_ns
                };
                let numerator = u128::from(bytes) * 8 * NANOS_PER_SECOND + *remainder;
                let rate = u128::from(*bits_per_second);
                let nanos = u64::try_from(numerator / rate).unwrap_or(u64::MAX);
                *remainder = numerator % rate;
                *free_ns = start_ns.saturating_add(nanos).saturating_add(*per_frame_ns);
                *free_ns
            }
            Shaper::Trace(server) => server.depart(now_ns, bytes),
        }
    }
}
