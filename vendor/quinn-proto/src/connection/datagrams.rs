use std::collections::VecDeque;

use bytes::Bytes;
use thiserror::Error;
use tracing::{debug, trace};

use super::{Connection, Event};
use crate::{
    Duration, Instant, TransportError,
    frame::{Datagram, FrameStruct},
};

/// API to control datagram traffic
pub struct Datagrams<'a> {
    pub(super) conn: &'a mut Connection,
}

impl Datagrams<'_> {
    /// Queue an unreliable, unordered datagram for immediate transmission
    ///
    /// If `drop` is true, previously queued datagrams which are still unsent may be discarded to
    /// make space for this datagram, in order of oldest to newest. If `drop` is false, and there
    /// isn't enough space due to previously queued datagrams, this function will return
    /// `SendDatagramError::Blocked`. `Event::DatagramsUnblocked` will be emitted once datagrams
    /// have been sent.
    ///
    /// Returns `Err` iff a `len`-byte datagram cannot currently be sent.
    pub fn send(&mut self, data: Bytes, drop: bool) -> Result<(), SendDatagramError> {
        self.send_marked(data, drop, true)
    }

    /// [`Datagrams::send`], with the datagram marked or not: the packets
    /// that carry a marked datagram are the bits of
    /// [`crate::Transmit::datagram_segments`] and the ones whose losses
    /// [`crate::Connection::set_datagram_packets_apart`] keeps apart.
    /// `send` marks every datagram.
    ///
    /// (wanopt patch: the application picks which datagrams its paths
    /// duplicate.)
    pub fn send_marked(
        &mut self,
        data: Bytes,
        drop: bool,
        marked: bool,
    ) -> Result<(), SendDatagramError> {
        if self.conn.config.datagram_receive_buffer_size.is_none() {
            return Err(SendDatagramError::Disabled);
        }
        let max = self
            .max_size()
            .ok_or(SendDatagramError::UnsupportedByPeer)?;
        let send_buffer_size = self.conn.config.datagram_send_buffer_size;
        let Some(max_buffer_payload) = send_buffer_size.checked_sub(size_of::<Datagram>()) else {
            return Err(SendDatagramError::TooLarge);
        };
        if data.len() > Ord::min(max, max_buffer_payload) {
            return Err(SendDatagramError::TooLarge);
        }
        if drop {
            self.conn
                .datagrams
                .make_space_for(data.len(), send_buffer_size);
        } else if !self
            .conn
            .datagrams
            .has_send_buffer_space(data.len(), send_buffer_size)
        {
            self.conn.datagrams.send_blocked = true;
            return Err(SendDatagramError::Blocked(data));
        }
        // The time is taken here (the API has no `now`) only when datagrams
        // expire: `TransportConfig::datagram_max_age`.
        let queued = self.conn.config.datagram_max_age.map(|_| Instant::now());
        self.conn
            .datagrams
            .outgoing
            .push_back_marked(Datagram { data }, queued, marked);
        Ok(())
    }

    /// Discard queued datagrams that no longer fit the active path, waking blocked senders.
    pub(super) fn drop_oversized(&mut self) {
        let Some(max_datagram_size) = self.max_size() else {
            return;
        };
        if !self.conn.datagrams.drop_oversized(max_datagram_size)
            || !self.conn.datagrams.send_blocked
        {
            return;
        }

        self.conn.datagrams.send_blocked = false;
        self.conn.events.push_back(Event::DatagramsUnblocked);
    }

    /// Compute the maximum size of datagrams that may passed to `send_datagram`
    ///
    /// Returns `None` if datagrams are unsupported by the peer or disabled locally.
    ///
    /// This may change over the lifetime of a connection according to variation in the path MTU
    /// estimate. The peer can also enforce an arbitrarily small fixed limit, but if the peer's
    /// limit is large this is guaranteed to be a little over a kilobyte at minimum.
    ///
    /// Not necessarily the maximum size of received datagrams.
    pub fn max_size(&self) -> Option<usize> {
        // We use the conservative overhead bound for any packet number, reducing the budget by at
        // most 3 bytes, so that PN size fluctuations don't cause users sending maximum-size
        // datagrams to suffer avoidable packet loss.
        let max_size = self.conn.path.current_mtu() as usize
            - self.conn.predict_1rtt_overhead(None)
            - Datagram::SIZE_BOUND;
        let limit = self
            .conn
            .peer_params
            .max_datagram_frame_size?
            .into_inner()
            .saturating_sub(Datagram::SIZE_BOUND as u64);
        Some(limit.min(max_size as u64) as usize)
    }

    /// Receive an unreliable, unordered datagram
    pub fn recv(&mut self) -> Option<Bytes> {
        self.conn.datagrams.recv()
    }

    /// Bytes available in the outgoing datagram buffer
    ///
    /// When greater than zero, [`send`](Self::send)ing a datagram of at most this size is
    /// guaranteed not to cause older datagrams to be dropped.
    pub fn send_buffer_space(&self) -> usize {
        self.conn
            .config
            .datagram_send_buffer_size
            .saturating_sub(self.conn.datagrams.outgoing.memory_used())
            .saturating_sub(size_of::<Datagram>())
    }
}

#[derive(Default)]
pub(super) struct DatagramState {
    pub(super) incoming: DatagramBuffer,
    pub(super) outgoing: DatagramBuffer,
    pub(super) send_blocked: bool,
    /// Marked datagrams written so far ([`Datagrams::send_marked`]).
    pub(super) marked_written: u64,
    /// Datagram bytes written beyond their share, in bytes x 100
    /// (`TransportConfig::datagram_share`): positive, streams go first.
    pub(super) debt: i64,
}

/// How far `DatagramState::debt` may run either way, in bytes x 100: at an
/// even share, four full packets, so neither kind banks more than about
/// four packets of priority while the other had nothing to send.
const DEBT_LIMIT: i64 = 4 * 1500 * 50;

impl DatagramState {
    /// Whether datagrams go ahead of stream frames in the next packet.
    pub(super) fn first(&self, share: Option<u8>, streams_waiting: bool) -> bool {
        share.is_none() || !streams_waiting || self.debt <= 0
    }

    /// Drops the queued datagrams older than `max_age` at `now`; returns
    /// how many.
    pub(super) fn expire(&mut self, now: Instant, max_age: Duration) -> u64 {
        let mut expired = 0;
        while let Some(&(_, Some(at), _)) = self.outgoing.queue.front() {
            if now.saturating_duration_since(at) < max_age {
                break;
            }
            self.outgoing.pop_front();
            expired += 1;
        }
        expired
    }

    /// Books a packet's datagram and stream bytes against `share`.
    pub(super) fn account(
        &mut self,
        share: Option<u8>,
        datagram_bytes: usize,
        stream_bytes: usize,
    ) {
        let Some(p) = share else { return };
        let p = i64::from(p);
        let change = datagram_bytes as i64 * (100 - p) - stream_bytes as i64 * p;
        self.debt = (self.debt + change).clamp(-DEBT_LIMIT, DEBT_LIMIT);
    }
}

impl DatagramState {
    pub(super) fn received(
        &mut self,
        datagram: Datagram,
        window: &Option<usize>,
    ) -> Result<bool, TransportError> {
        let window = match window {
            None => {
                return Err(TransportError::PROTOCOL_VIOLATION(
                    "unexpected DATAGRAM frame",
                ));
            }
            Some(x) => *x,
        };

        let size_with_overhead = datagram.data.len() + size_of::<Datagram>();

        if size_with_overhead > window {
            return Err(TransportError::PROTOCOL_VIOLATION("oversized datagram"));
        }

        let was_empty = self.incoming.is_empty();
        while self.incoming.memory_used() + size_with_overhead > window {
            debug!("dropping stale datagram");
            self.recv();
        }

        self.incoming.push_back(datagram);
        Ok(was_empty)
    }

    fn make_space_for(&mut self, datagram_len: usize, send_buffer_size: usize) {
        while !self.has_send_buffer_space(datagram_len, send_buffer_size) {
            let Some(prev) = self.outgoing.pop_front() else {
                break;
            };
            trace!(len = prev.data.len(), "dropping outgoing datagram");
        }
    }

    fn has_send_buffer_space(&self, datagram_len: usize, send_buffer_size: usize) -> bool {
        let Some(total) = self
            .outgoing
            .memory_used()
            .checked_add(datagram_len)
            .and_then(|total| total.checked_add(size_of::<Datagram>()))
        else {
            return false;
        };

        total <= send_buffer_size
    }

    /// Discard outgoing datagrams with a payload larger than `max_payload` bytes
    ///
    /// Returns whether any datagrams were dropped.
    ///
    /// Used to ensure that reductions in MTU don't get us stuck in a state where we have a datagram
    /// queued but can't send it.
    pub(super) fn drop_oversized(&mut self, max_payload: usize) -> bool {
        let mut dropped_any = false;
        self.outgoing.queue.retain(|(datagram, _, _)| {
            let result = datagram.data.len() <= max_payload;
            if !result {
                trace!(
                    "dropping {} byte datagram violating {} byte limit",
                    datagram.data.len(),
                    max_payload
                );
                self.outgoing.payload_bytes -= datagram.data.len();
                dropped_any = true;
            }
            result
        });
        dropped_any
    }

    /// Attempt to write a datagram frame into `buf`, consuming it from `self.outgoing`
    ///
    /// Returns whether a frame was written, and then whether its datagram was marked. At most
    /// `max_size` bytes will be written, including framing.
    pub(super) fn write(&mut self, buf: &mut Vec<u8>, max_size: usize) -> Option<bool> {
        let (datagram, queued, marked) = self.outgoing.pop_front_marked()?;

        if buf.len() + datagram.size(true) > max_size {
            // Future work: we could be more clever about cramming small datagrams into
            // mostly-full packets when a larger one is queued first
            self.outgoing.push_front_marked(datagram, queued, marked);
            return None;
        }

        trace!(len = datagram.data.len(), "DATAGRAM");
        datagram.encode(true, buf);
        self.marked_written += u64::from(marked);
        Some(marked)
    }

    pub(super) fn recv(&mut self) -> Option<Bytes> {
        let x = self.incoming.pop_front()?.data;
        Some(x)
    }
}

#[derive(Default)]
pub(super) struct DatagramBuffer {
    /// Each datagram, when it was queued (when datagrams expire) and
    /// whether it is marked ([`Datagrams::send_marked`]).
    queue: VecDeque<(Datagram, Option<Instant>, bool)>,
    payload_bytes: usize,
}

impl DatagramBuffer {
    fn push_back(&mut self, datagram: Datagram) {
        self.push_back_marked(datagram, None, true);
    }

    #[cfg(test)]
    fn push_back_at(&mut self, datagram: Datagram, queued: Option<Instant>) {
        self.push_back_marked(datagram, queued, true);
    }

    fn push_back_marked(&mut self, datagram: Datagram, queued: Option<Instant>, marked: bool) {
        self.payload_bytes += datagram.data.len();
        self.queue.push_back((datagram, queued, marked));
    }

    fn pop_front(&mut self) -> Option<Datagram> {
        self.pop_front_marked().map(|(datagram, _, _)| datagram)
    }

    fn pop_front_marked(&mut self) -> Option<(Datagram, Option<Instant>, bool)> {
        let (datagram, queued, marked) = self.queue.pop_front()?;
        self.payload_bytes -= datagram.data.len();
        Some((datagram, queued, marked))
    }

    fn push_front_marked(&mut self, datagram: Datagram, queued: Option<Instant>, marked: bool) {
        self.payload_bytes += datagram.data.len();
        self.queue.push_front((datagram, queued, marked));
    }

    fn memory_used(&self) -> usize {
        self.payload_bytes
            .saturating_add(self.queue.len() * size_of::<Datagram>())
    }

    pub(super) fn can_send_1rtt(&self, max_size: usize) -> bool {
        self.queue
            .front()
            .is_some_and(|(x, _, _)| x.size(true) <= max_size)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packets of 1,200 bytes for `n` rounds, each all datagrams when they
    /// go first, else all stream data: how many carried datagrams.
    fn datagram_packets(share: Option<u8>, streams_waiting: bool, n: usize) -> usize {
        let mut state = DatagramState::default();
        let mut datagrams = 0;
        for _ in 0..n {
            if state.first(share, streams_waiting) {
                datagrams += 1;
                state.account(share, 1200, 0);
            } else {
                state.account(share, 0, 1200);
            }
        }
        datagrams
    }

    #[test]
    fn datagrams_older_than_the_max_age_are_dropped_oldest_first() {
        let mut state = DatagramState::default();
        let t0 = Instant::now();
        for (i, at) in [0u64, 10, 20, 30].into_iter().enumerate() {
            let data = Bytes::from(vec![i as u8; 100]);
            let queued = t0 + Duration::from_millis(at);
            state.outgoing.push_back_at(Datagram { data }, Some(queued));
        }
        let max_age = Duration::from_millis(50);
        assert_eq!(state.expire(t0 + Duration::from_millis(49), max_age), 0);
        // Those queued at 0 and 10 ms are 50 ms old or older at 60 ms.
        assert_eq!(state.expire(t0 + Duration::from_millis(60), max_age), 2);
        assert_eq!(state.outgoing.queue.len(), 2);
        assert_eq!(state.outgoing.payload_bytes, 200);
        assert_eq!(state.outgoing.queue[0].0.data[0], 2);
        // Datagrams queued without a time never expire.
        state.outgoing.push_back(Datagram {
            data: Bytes::from_static(&[9]),
        });
        assert_eq!(state.expire(t0 + Duration::from_secs(60), max_age), 2);
        assert_eq!(state.outgoing.queue.len(), 1);
    }

    #[test]
    fn a_share_splits_the_packets_while_streams_wait() {
        // Upstream's order: datagrams always first.
        assert_eq!(datagram_packets(None, true, 100), 100);
        // Half each, alternating within a packet.
        assert_eq!(datagram_packets(Some(50), true, 100), 50);
        assert_eq!(datagram_packets(Some(25), true, 100), 25);
        // Nothing waits in the streams: datagrams take every packet.
        assert_eq!(datagram_packets(Some(50), false, 100), 100);
        // Banked priority is bounded: after 1,000 packets of datagrams
        // alone, waiting streams go first for five packets (four of 1,500
        // bytes), then the two alternate.
        let mut state = DatagramState::default();
        for _ in 0..1000 {
            state.account(Some(50), 1200, 0);
        }
        let mut order = String::new();
        for _ in 0..9 {
            let first = state.first(Some(50), true);
            order.push(if first { 'd' } else { 's' });
            match first {
                true => state.account(Some(50), 1200, 0),
                false => state.account(Some(50), 0, 1200),
            }
        }
        assert_eq!(order, "sssssdsds");
    }

    #[test]
    fn make_space_for_accounts_for_new_datagram() {
        let mut state = DatagramState::default();
        state.outgoing.push_back(Datagram {
            data: Bytes::from_static(&[0; 7]),
        });
        state.outgoing.push_back(Datagram {
            data: Bytes::from_static(&[0; 2]),
        });
        state.make_space_for(4, 10 + 2 * size_of::<Datagram>());

        assert_eq!(state.outgoing.queue.len(), 1);
        assert_eq!(state.outgoing.queue[0].0.data.len(), 2);
        assert_eq!(state.outgoing.payload_bytes, 2);
    }

    #[test]
    fn make_space_for_handles_overflowing_capacity_check() {
        let mut state = DatagramState::default();
        state.outgoing.queue.push_back((
            Datagram {
                data: Bytes::from_static(&[0]),
            },
            None,
            true,
        ));
        state.outgoing.payload_bytes = usize::MAX - 1;

        state.make_space_for(2, usize::MAX);

        assert!(state.outgoing.is_empty());
        assert_eq!(state.outgoing.payload_bytes, usize::MAX - 2);
    }

    #[test]
    fn make_space_for_accounts_for_empty_datagram_metadata() {
        let mut state = DatagramState::default();
        for _ in 0..2 {
            state.outgoing.push_back(Datagram { data: Bytes::new() });
        }
        let window = 2 * size_of::<Datagram>();

        assert!(!state.has_send_buffer_space(0, window));
        state.make_space_for(0, window);
        assert_eq!(state.outgoing.queue.len(), 1);
        assert!(state.has_send_buffer_space(0, window));
        state.outgoing.push_back(Datagram { data: Bytes::new() });
        assert_eq!(state.outgoing.memory_used(), window);
    }

    #[test]
    fn send_buffer_space_handles_metadata_overflow() {
        assert!(!DatagramState::default().has_send_buffer_space(usize::MAX, usize::MAX));
    }

    #[test]
    fn drop_oversized_keeps_datagrams_at_limit() {
        let mut state = DatagramState::default();
        state.outgoing.push_back(Datagram {
            data: Bytes::from_static(&[0; 10]),
        });
        state.outgoing.push_back(Datagram {
            data: Bytes::from_static(&[0; 11]),
        });

        assert!(state.drop_oversized(10));

        assert_eq!(state.outgoing.queue.len(), 1);
        assert_eq!(state.outgoing.queue[0].0.data.len(), 10);
        assert_eq!(state.outgoing.payload_bytes, 10);
    }
}

/// Errors that can arise when sending a datagram
#[derive(Debug, Error, Clone, Eq, PartialEq, Ord, PartialOrd, Hash)]
pub enum SendDatagramError {
    /// The peer does not support receiving datagram frames
    #[error("datagrams not supported by peer")]
    UnsupportedByPeer,
    /// Datagram support is disabled locally
    #[error("datagram support disabled")]
    Disabled,
    /// The datagram is larger than the connection can currently accommodate
    ///
    /// Indicates that the path MTU minus overhead or the limit advertised by the peer has been
    /// exceeded.
    #[error("datagram too large")]
    TooLarge,
    /// Send would block
    #[error("datagram send blocked")]
    Blocked(Bytes),
}
