//! The link model: one direction of an emulated WAN link.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{LinkConfig, QueueDiscipline, ResolvedQueueLimit};
use crate::counters::{Counters, PeakWindow};
use crate::loss::LossModel;
use crate::red::Red;
use crate::wire::{frame_ecn, set_frame_ecn, Ecn, FrameKind};

mod shaper;

use shaper::Shaper;

/// One direction of an emulated link, sans-IO: frames go in with
/// [`Link::handle_frame`] and come out, at their departure times, from
/// [`Link::poll_transmit`]. See the crate docs for the pipeline.
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    shaper: Shaper,
    queue_limit: Option<ResolvedQueueLimit>,
    red: Option<Red>,
    delay_ns: u64,
    jitter_ns: u64,
    reorder_gap_ns: u64,
    reorder: f64,
    duplicate: f64,
    loss: LossModel,
    rng: ChaCha8Rng,
    /// The first `now` seen; all times are nanoseconds since then.
    epoch: Option<Instant>,
    /// When the queue last changed: the time-weighted occupancy is
    /// counted up to here.
    queue_changed_ns: u64,
    /// Frames in the shaper (waiting or in serialization), oldest first.
    backlog: VecDeque<Backlogged>,
    /// The delay line of in-order frames; departures never decrease.
    in_order: VecDeque<InFlight>,
    /// Departure of the last in-order frame: no later frame leaves before it.
    order_barrier_ns: u64,
    /// Frames that do not keep their place: reordered and non-IP frames.
    out_of_order: BinaryHeap<Reverse<OutOfOrder>>,
    out_of_order_sequence: u64,
    counters: Counters,
    /// The arrivals behind [`Counters::peak_ip_bytes_100ms`].
    peak: PeakWindow,
}

#[derive(Debug, Clone, Copy)]
struct Backlogged {
    departure_ns: u64,
    bytes: u64,
}

#[derive(Debug)]
struct InFlight {
    departure_ns: u64,
    frame: Vec<u8>,
}

#[derive(Debug)]
struct OutOfOrder {
    departure_ns: u64,
    sequence: u64,
    frame: Vec<u8>,
}

impl PartialEq for OutOfOrder {
    fn eq(&self, other: &OutOfOrder) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for OutOfOrder {}

impl PartialOrd for OutOfOrder {
    fn partial_cmp(&self, other: &OutOfOrder) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OutOfOrder {
    fn cmp(&self, other: &OutOfOrder) -> Ordering {
        (self.departure_ns, self.sequence).cmp(&(other.departure_ns, other.sequence))
    }
}

fn duration_ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

impl Link {
    /// A link with `config` whose random draws all come from a ChaCha8
    /// generator seeded with `seed`. A [`crate::QueueLimit::Bdp`] limit is
    /// resolved here, once, by [`LinkConfig::resolve_queue`].
    pub fn new(config: LinkConfig, seed: u64) -> Link {
        let shaper = Shaper::new(
            config.rate.map(|rate| rate.0),
            duration_ns(config.per_packet),
            config.trace.as_ref(),
        );
        let queue_limit = if shaper.is_limited() {
            config.resolve_queue()
        } else {
            None
        };
        let red = match (config.discipline, queue_limit) {
            (QueueDiscipline::Red(params), Some(limit)) => Some(Red::new(params, limit.amount())),
            _ => None,
        };
        Link {
            shaper,
            queue_limit,
            red,
            delay_ns: duration_ns(config.delay),
            jitter_ns: duration_ns(config.jitter),
            reorder_gap_ns: duration_ns(config.reorder_gap),
            reorder: config.reorder.value(),
            duplicate: config.duplicate.value(),
            loss: LossModel::new(config.loss.value(), config.loss_burst),
            rng: ChaCha8Rng::seed_from_u64(seed),
            epoch: None,
            queue_changed_ns: 0,
            backlog: VecDeque::new(),
            in_order: VecDeque::new(),
            order_barrier_ns: 0,
            out_of_order: BinaryHeap::new(),
            out_of_order_sequence: 0,
            counters: Counters::default(),
            peak: PeakWindow::default(),
            config,
        }
    }

    /// The configuration the link was built with.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The queue limit in force, `None` without a rate (nothing queues).
    pub fn queue_limit(&self) -> Option<ResolvedQueueLimit> {
        self.queue_limit
    }

    /// What the link has done so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// An Ethernet II frame arrived at `now`. The frame is dropped, or given
    /// its departure time at once (every random draw for it happens here, so
    /// the outcome depends only on the seed and the arrival sequence, not on
    /// when the caller polls).
    pub fn handle_frame(&mut self, now: Instant, frame: Vec<u8>) {
        let now_ns = self.nanos_since_epoch(now);
        self.release_backlog(now_ns);
        self.counters.frames_in += 1;
        self.counters.bytes_in += frame.len() as u64;
        let kind = FrameKind::of(&frame);
        if kind == FrameKind::NonIp {
            // The priority lane: never lost, queued, shaped or marked.
            self.counters.non_ip += 1;
            self.counters.frames_in_flight += 1;
            let departure_ns = now_ns.saturating_add(self.delay_ns);
            self.push_out_of_order(departure_ns, frame);
            return;
        }
        let ip_bytes = frame
            .len()
            .saturating_sub(crate::wire::ethernet::HEADER_LEN) as u64;
        let in_window = self.peak.add(now_ns, ip_bytes);
        self.counters.peak_ip_bytes_100ms = self.counters.peak_ip_bytes_100ms.max(in_window);
        if self.loss.lose(&mut self.rng) {
            self.counters.dropped_loss += 1;
            return;
        }
        if self.duplicate > 0.0 && self.rng.random::<f64>() < self.duplicate {
            self.counters.duplicated += 1;
            let copy = frame.clone();
            self.enqueue(now_ns, frame, kind);
            self.enqueue(now_ns, copy, kind);
        } else {
            self.enqueue(now_ns, frame, kind);
        }
    }

    /// The next frame whose departure time is at or before `now`, in
    /// departure order.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let epoch = self.epoch?;
        let now_ns = nanos_between(epoch, now);
        self.release_backlog(now_ns);
        let in_order_next = self.in_order.front().map(|frame| frame.departure_ns);
        let out_of_order_next = self
            .out_of_order
            .peek()
            .map(|Reverse(frame)| frame.departure_ns);
        let take_out_of_order = match (in_order_next, out_of_order_next) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(in_order), Some(out_of_order)) => out_of_order < in_order,
        };
        let next_ns = if take_out_of_order {
            out_of_order_next
        } else {
            in_order_next
        }?;
        if next_ns > now_ns {
            return None;
        }
        let frame = if take_out_of_order {
            self.out_of_order.pop().map(|Reverse(frame)| frame.frame)
        } else {
            self.in_order.pop_front().map(|frame| frame.frame)
        }?;
        self.counters.frames_out += 1;
        self.counters.bytes_out += frame.len() as u64;
        self.counters.frames_in_flight -= 1;
        Some(frame)
    }

    /// The departure time of the next frame, if any frame is in flight.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let in_order = self.in_order.front().map(|frame| frame.departure_ns);
        let out_of_order = self
            .out_of_order
            .peek()
            .map(|Reverse(frame)| frame.departure_ns);
        let next = match (in_order, out_of_order) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        Some(self.epoch? + Duration::from_nanos(next))
    }

    fn nanos_since_epoch(&mut self, now: Instant) -> u64 {
        let epoch = *self.epoch.get_or_insert(now);
        nanos_between(epoch, now)
    }

    /// Forgets the frames the shaper has finished serializing by `now_ns`,
    /// each at its own departure time.
    fn release_backlog(&mut self, now_ns: u64) {
        while let Some(&front) = self.backlog.front() {
            if front.departure_ns > now_ns {
                break;
            }
            self.queue_changes_at(front.departure_ns);
            self.counters.queue_bytes -= front.bytes;
            self.counters.queue_frames -= 1;
            self.backlog.pop_front();
        }
        self.queue_changes_at(now_ns);
    }

    /// The queue is about to change at `at_ns`: the time since its last
    /// change is counted at its level until now.
    fn queue_changes_at(&mut self, at_ns: u64) {
        let held = at_ns.saturating_sub(self.queue_changed_ns);
        self.counters
            .queue_bytes_time
            .record(self.counters.queue_bytes, held);
        self.queue_changed_ns = self.queue_changed_ns.max(at_ns);
    }

    /// Queue, shaper and delay line for an IP frame that survived loss.
    fn enqueue(&mut self, now_ns: u64, mut frame: Vec<u8>, kind: FrameKind) {
        let ip_offset = kind.ip_offset().unwrap_or(0);
        let ip_bytes = frame.len().saturating_sub(ip_offset) as u64;
        let shaped_ns = if !self.shaper.is_limited() {
            now_ns
        } else {
            if let Some(limit) = self.queue_limit {
                let (backlog, size) = match limit {
                    ResolvedQueueLimit::Bytes(_) => (self.counters.queue_bytes, ip_bytes),
                    ResolvedQueueLimit::Packets(_) => (self.counters.queue_frames, 1),
                };
                if backlog.saturating_add(size) > limit.amount() {
                    self.counters.dropped_queue += 1;
                    return;
                }
                if let Some(red) = &self.red {
                    if red.congested(backlog, &mut self.rng) {
                        match frame_ecn(&frame, kind) {
                            Some(ecn) if ecn.is_capable() => {
                                if ecn != Ecn::Ce {
                                    set_frame_ecn(&mut frame, kind, Ecn::Ce);
                                }
                                self.counters.ce_marked += 1;
                            }
                            _ => {
                                self.counters.dropped_red += 1;
                                return;
                            }
                        }
                    }
                }
            }
            let departure_ns = self.shaper.depart(now_ns, ip_bytes);
            self.counters
                .queue_delay_ns
                .record(departure_ns.saturating_sub(now_ns), 1);
            self.queue_changes_at(now_ns);
            self.backlog.push_back(Backlogged {
                departure_ns,
                bytes: ip_bytes,
            });
            self.counters.queue_bytes += ip_bytes;
            self.counters.queue_frames += 1;
            self.counters.max_queue_bytes =
                self.counters.max_queue_bytes.max(self.counters.queue_bytes);
            departure_ns
        };
        self.counters.frames_in_flight += 1;
        let mut departure_ns = shaped_ns.saturating_add(self.delay_ns);
        if self.jitter_ns > 0 {
            departure_ns = departure_ns.saturating_add(self.rng.random_range(0..=self.jitter_ns));
        }
        // Order-preserving: never before the frame ahead.
        departure_ns = departure_ns.max(self.order_barrier_ns);
        if self.reorder > 0.0 && self.rng.random::<f64>() < self.reorder {
            self.counters.reordered += 1;
            let held_ns = departure_ns.saturating_add(self.reorder_gap_ns);
            self.push_out_of_order(held_ns, frame);
        } else {
            self.order_barrier_ns = departure_ns;
            self.in_order.push_back(InFlight {
                departure_ns,
                frame,
            });
        }
    }

    fn push_out_of_order(&mut self, departure_ns: u64, frame: Vec<u8>) {
        let sequence = self.out_of_order_sequence;
        self.out_of_order_sequence += 1;
        self.out_of_order.push(Reverse(OutOfOrder {
            departure_ns,
            sequence,
            frame,
        }));
    }
}

fn nanos_between(epoch: Instant, now: Instant) -> u64 {
    duration_ns(now.saturating_duration_since(epoch))
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod statistics_tests;

#[cfg(test)]
mod property_tests;

#[cfg(test)]
mod trace_tests;
