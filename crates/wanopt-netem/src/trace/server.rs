//! The queue's server of a link whose capacity follows a trace.

use super::{DeliveryTrace, OPPORTUNITY_BYTES};

/// A FIFO server that delivers its queue at a trace's opportunities, the
/// way `mm-link` does: the state of the one opportunity being used (its
/// index and the bytes it has left) and when the last accepted packet
/// leaves. The link's shaper, and a bottleneck for simulations of senders
/// on a virtual clock (times are nanoseconds from the trace's start).
#[derive(Debug, Clone)]
pub struct TraceServer {
    trace: DeliveryTrace,
    /// The opportunity the next byte can use.
    index: u64,
    /// Bytes left in opportunity `index`.
    left: u32,
    /// When the last packet accepted leaves (the queue is empty from then).
    free_ns: u64,
    /// Whether any packet was accepted yet.
    started: bool,
}

impl TraceServer {
    /// A server that starts its trace at time 0.
    pub fn new(trace: DeliveryTrace) -> TraceServer {
        TraceServer {
            trace,
            index: 0,
            left: OPPORTUNITY_BYTES,
            free_ns: 0,
            started: false,
        }
    }

    /// A packet of `bytes` joins the queue at `now_ns`: the time the
    /// opportunity carrying its last byte comes. Opportunities that came
    /// while the queue was empty are lost.
    pub fn depart(&mut self, now_ns: u64, bytes: u64) -> u64 {
        if !self.started || now_ns >= self.free_ns {
            // The queue is empty: what was left of earlier opportunities
            // went unused.
            let first = self.trace.first_after(now_ns);
            if !self.started || first > self.index {
                self.index = first;
                self.left = OPPORTUNITY_BYTES;
            }
            self.started = true;
        }
        let mut remaining = bytes.max(1);
        loop {
            let take = remaining.min(u64::from(self.left));
            remaining -= take;
            // `take` is at most `left`, a u32.
            self.left -= take as u32;
            let time = self.trace.time_ns(self.index);
            if self.left == 0 {
                self.index += 1;
                self.left = OPPORTUNITY_BYTES;
            }
            if remaining == 0 {
                self.free_ns = time;
                return time;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::NANOS_PER_MS;
    use super::*;

    /// `mm-link`'s queue, one millisecond at a time: the reference the
    /// server is checked against.
    fn mahimahi(trace: &DeliveryTrace, arrivals: &[(u64, u32)]) -> Vec<u64> {
        let mut departures = vec![0; arrivals.len()];
        let mut queue: std::collections::VecDeque<(usize, u32)> = Default::default();
        let mut in_transit: Option<(usize, u32)> = None;
        let mut next = 0u64;
        let mut arrivals = arrivals.iter().enumerate().peekable();
        let last_arrival = arrivals.clone().last().map_or(0, |(_, a)| a.0);
        let mut ms = 0u64;
        while departures.contains(&0) && ms < last_arrival + 1_000_000 {
            // rationalize(now): every opportunity up to now.
            while trace.time_ns(next) <= ms * NANOS_PER_MS {
                let mut budget = OPPORTUNITY_BYTES;
                next += 1;
                while budget > 0 {
                    if in_transit.is_none() {
                        match queue.pop_front() {
                            Some(packet) => in_transit = Some(packet),
                            None => break,
                        }
                    }
                    if let Some((id, left)) = in_transit.as_mut() {
                        let take = budget.min(*left);
                        *left -= take;
                        budget -= take;
                        if *left == 0 {
                            departures[*id] = trace.time_ns(next - 1);
                            in_transit = None;
                        }
                    }
                }
            }
            // Then the packets that arrive in this millisecond are queued.
            while let Some((id, &(at_ms, bytes))) = arrivals.peek().copied() {
                if at_ms != ms {
                    break;
                }
                queue.push_back((id, bytes));
                arrivals.next();
            }
            ms += 1;
        }
        departures
    }

    proptest::proptest! {
        /// The server gives every packet the departure Mahimahi's queue
        /// gives it, for any trace and arrivals on whole milliseconds.
        #[test]
        fn the_server_departs_as_mahimahi_does(
            gaps in proptest::collection::vec(0u32..4, 1..40),
            arrivals in proptest::collection::vec((0u64..6, 40u32..=3000), 0..60),
        ) {
            let mut ms = 0;
            let times: Vec<u32> = gaps.iter().map(|g| { ms += g; ms }).collect();
            proptest::prop_assume!(ms > 0);
            let t = DeliveryTrace::try_from(times).unwrap();
            let mut at = 0;
            let arrivals: Vec<(u64, u32)> =
                arrivals.iter().map(|&(gap, bytes)| { at += gap; (at, bytes) }).collect();
            let expected = mahimahi(&t, &arrivals);
            let mut server = TraceServer::new(t);
            let got: Vec<u64> = arrivals
                .iter()
                .map(|&(at_ms, bytes)| server.depart(at_ms * NANOS_PER_MS, u64::from(bytes)))
                .collect();
            proptest::prop_assert_eq!(got, expected);
        }
    }
}
