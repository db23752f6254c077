//! When a flow's held bytes go out: the idle flush and the compressor's
//! release of a quiet source ([`Quiet`]), and the pieces of a trickling one
//! ([`Trickle`]). Sans-IO: the uplink passes the times and the encoder.

use std::time::Duration;

use wanopt_codec::Encoder;

/// How long a partial chunk may wait for more bytes from a quiet socket.
pub const IDLE_FLUSH: Duration = Duration::from_millis(2);

/// How long a flow keeps its stream compressor (7-13 MiB with LZMA2 and
/// the slow zstd levels) once its socket went quiet: an idle keep-alive
/// connection holds none, and a flow sending again starts a new stream.
pub const COMPRESSOR_IDLE: Duration = Duration::from_secs(1);

/// What a flow's uplink does while its socket is quiet. [`IDLE_FLUSH`]
/// after a read, the bytes held back for their chunk's end go: flushed
/// (the chunk is cut there), or, when all of them already went as pieces,
/// only what was decided before them (the chunk stays open, its end is
/// still where its content says). [`COMPRESSOR_IDLE`] after that, the
/// flow's stream compressor is freed ([`Encoder::release_compressor`]),
/// whether or not a chunk is open.
///
/// Sans-IO: the uplink waits up to [`Quiet::wait`] for a read, tells
/// [`Quiet::on_read`] of each one, and calls [`Quiet::step`] when none
/// came in time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet {
    /// Bytes were read since the last step.
    pending: bool,
    /// The flow holds a stream compressor, memory reserved for one, or a
    /// large read buffer.
    holds_compressor: bool,
}

impl Quiet {
    /// How long to wait for the next read before [`Quiet::step`]; `None`:
    /// nothing is due however long the socket stays quiet.
    pub fn wait(&self) -> Option<Duration> {
        if self.pending {
            Some(IDLE_FLUSH)
        } else if self.holds_compressor {
            Some(COMPRESSOR_IDLE)
        } else {
            None
        }
    }

    /// A read was pushed into the encoder.
    pub fn on_read(&mut self) {
        self.pending = true;
    }

    /// Whether the flow holds what it gives back after [`COMPRESSOR_IDLE`]:
    /// a stream compressor, memory reserved for one, or a large read
    /// buffer (after a read, or a step).
    pub fn holding(&mut self, holds_compressor: bool) {
        self.holds_compressor = holds_compressor;
    }

    /// The socket stayed quiet for [`Quiet::wait`]: what is due goes to
    /// `out`. True when the stream compressor was freed (the flow gives
    /// its reservation back).
    pub fn step(&mut self, encoder: &mut Encoder, out: &mut Vec<u8>) -> bool {
        let pending = std::mem::take(&mut self.pending);
        if pending && encoder.held_len() == 0 {
            // All it holds went as pieces: the chunk stays open (no cut,
            // no datagram of its own behind a request's, which tail
            // duplication covers only when it is the last one); what was
            // decided before goes now.
            encoder.send_held(out);
            false
        } else if pending {
            encoder.flush(out);
            false
        } else {
            encoder.release_compressor(out);
            true
        }
    }
}

/// A trickling source's held bytes go out early only while its rate is
/// below this share of the tunnel's, or below [`TRICKLE_FLOOR_BPS`]: what
/// its pieces cost (bytes that might have crossed as references) is then
/// bounded by that share of the link, and a source faster than that (a
/// bulk transfer from a slow LAN client over a slower WAN) keeps the whole
/// of its reduction.
pub const TRICKLE_RATE_SHARE: f64 = 0.125;

/// A source slower than this may trickle whatever the tunnel's rate is
/// thought to be: a tunnel that carried nothing but the trickle knows no
/// rate above the trickle's own (BBR measures what it is given), and
/// interactive traffic (terminals, market data, remote desktops) sits
/// below it. Pieces still wait while the tunnel's sender has data queued.
pub const TRICKLE_FLOOR_BPS: f64 = 2e6;

/// Time constant of a flow's source rate (an exponential average).
const SOURCE_RATE_WINDOW: Duration = Duration::from_millis(100);

/// A read of at most this many bytes that ends a quiet (the flow's first,
/// or one the flow waited [`IDLE_FLUSH`] for), leaving at most this many
/// held, goes at once as a piece: a request, a reply, a keystroke. It
/// used to wait out the idle flush, 2 ms at each end of every exchange.
/// A bulk source's first read is larger and keeps its bytes for its run.
pub const PROMPT_MAX: usize = 4096;

/// Decides when the bytes a flow's encoder holds back for their chunk's
/// content-defined end go out early, as pieces
/// ([`wanopt_codec::Encoder::send_held`]).
///
/// A short read that ends a quiet goes at once ([`PROMPT_MAX`]): a
/// request or a reply does not wait to see whether more follows (when a
/// body does follow, its chunks are cut where they always are, and the
/// chunk the piece begins completes as a reference, a delta or in the
/// flow's compression stream, as it would have without the piece).
///
/// The idle flush covers a source that goes quiet. A source that trickles
/// (a 200-byte message every millisecond: market data, a terminal, a
/// remote desktop) never does, and each of its bytes waited for its
/// chunk's end: 27 ms one-way on loopback at 1.6 Mbit/s (median; p99 124
/// ms, max 153). Here the time the flow spent waiting for reads while
/// bytes were held adds up, and once it reaches [`IDLE_FLUSH`] they go,
/// provided the source is slow next to the tunnel ([`TRICKLE_RATE_SHARE`]
/// of the higher of BBR's estimate and the path's remembered capacity, or
/// [`TRICKLE_FLOOR_BPS`]) and the tunnel's sender has nothing waiting for
/// its window or pacer (a piece never queues behind the link). Time spent
/// encoding or waiting for the tunnel (back-pressure) does not count: a
/// source that the tunnel holds back is not trickling. Sans-IO: the
/// caller passes the times and asks the tunnel only when the rest holds.
#[derive(Debug, Clone, Default)]
pub struct Trickle {
    /// Time spent waiting for reads since the oldest held byte arrived.
    waited: Duration,
    /// Source bytes, exponentially averaged, as of `at`.
    recent: f64,
    at: Option<tokio::time::Instant>,
    /// The last read was short and ended a quiet.
    prompt: bool,
}

impl Trickle {
    /// A read of `n` bytes arrived at `now` after the flow waited `waited`
    /// for it; `held_before` and `held_after` are the encoder's held
    /// bytes ([`wanopt_codec::Encoder::held_len`]) around the push.
    pub fn on_read(
        &mut self,
        now: tokio::time::Instant,
        waited: Duration,
        n: usize,
        held_before: usize,
        held_after: usize,
    ) {
        let quiet = self.at.is_none() || waited >= IDLE_FLUSH;
        self.prompt = quiet && n <= PROMPT_MAX && held_after <= PROMPT_MAX;
        let tau = SOURCE_RATE_WINDOW.as_secs_f64();
        let dt = self
            .at
            .map_or(0.0, |at| now.saturating_duration_since(at).as_secs_f64());
        self.recent = self.recent * (-dt / tau).exp() + n as f64;
        self.at = Some(now);
        if held_after < held_before + n {
            // A chunk was cut: what is held arrived with this read.
            self.waited = Duration::ZERO;
        } else if held_before > 0 {
            self.waited += waited;
        }
    }

    /// The source's recent rate, bits per second.
    pub fn source_rate_bps(&self) -> f64 {
        self.recent * 8.0 / SOURCE_RATE_WINDOW.as_secs_f64()
    }

    /// Whether held bytes should go out now, given the tunnel's rate
    /// (`None`: unknown) and whether its sender has data waiting, both
    /// asked only when the rest holds.
    pub fn due(&self, held: usize, tunnel: impl FnOnce() -> (Option<f64>, bool)) -> bool {
        if held == 0 {
            return false;
        }
        if self.prompt {
            return true;
        }
        if self.waited < IDLE_FLUSH {
            return false;
        }
        let (rate, busy) = tunnel();
        let limit = rate.map_or(0.0, |r| TRICKLE_RATE_SHARE * r);
        !busy && self.source_rate_bps() < limit.max(TRICKLE_FLOOR_BPS)
    }

    /// The held bytes went out (as pieces, or flushed).
    pub fn sent(&mut self) {
        self.waited = Duration::ZERO;
        self.prompt = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_trickle_is_due_after_the_idle_time_spent_waiting_for_reads() {
        let t0 = tokio::time::Instant::now();
        let mut trickle = Trickle::default();
        let idle = || (Some(100e6), false);
        // 200 bytes a millisecond (1.6 Mbit/s once the average settles),
        // held by the chunker: each read kept the flow waiting 1 ms. The
        // first ends a quiet and goes at once.
        trickle.on_read(t0 + MS, MS, 200, 0, 200);
        assert!(trickle.due(200, || unreachable!()));
        trickle.sent();
        let mut held = 200;
        let mut due_at = None;
        for i in 2..=1000u32 {
            trickle.on_read(t0 + i * MS, MS, 200, held, held + 200);
            held += 200;
            if due_at.is_none() && trickle.due(held, idle) {
                due_at = Some(i);
                trickle.sent();
            }
        }
        // The first read found nothing held: waiting for it did not count.
        assert_eq!(due_at, Some(3));
        let rate = trickle.source_rate_bps();
        assert!((1.5e6..1.7e6).contains(&rate), "{rate}");
        trickle.on_read(t0 + 1001 * MS, 5 * MS, 200, held, held + 200);
        held += 200;
        assert!(trickle.due(held, idle));
        // Nothing held, or the tunnel's sender has data waiting: no.
        assert!(!trickle.due(0, idle));
        assert!(!trickle.due(held, || (Some(100e6), true)));
        // Below the floor, whatever the tunnel's rate (or none known).
        assert!(trickle.due(held, || (None, false)));
        assert!(trickle.due(held, || (Some(1e6), false)));
    }

    #[test]
    fn a_short_read_that_ends_a_quiet_goes_at_once() {
        let t0 = tokio::time::Instant::now();
        let busy = || (Some(1e6), true);
        // A request: the flow's first read, whatever the tunnel does.
        let mut trickle = Trickle::default();
        trickle.on_read(t0, Duration::ZERO, 120, 0, 120);
        assert!(trickle.due(120, busy));
        trickle.sent();
        assert!(!trickle.due(120, busy));
        // The next, 1 ms later: not a quiet's end.
        trickle.on_read(t0 + MS, MS, 120, 120, 240);
        assert!(!trickle.due(240, busy));
        // A reply after a wait of the idle time: at once.
        trickle.on_read(t0 + 50 * MS, IDLE_FLUSH, 300, 0, 300);
        assert!(trickle.due(300, busy));
        // A bulk source's first read (or one leaving much held) waits for
        // its chunk's end like any other.
        let mut bulk = Trickle::default();
        bulk.on_read(t0, Duration::ZERO, 65536, 0, 3000);
        assert!(!bulk.due(3000, busy));
        let mut bulk = Trickle::default();
        bulk.on_read(t0, Duration::ZERO, 100, 5000, 5100);
        assert!(!bulk.due(5100, busy));
        // Nothing held: nothing to send.
        let mut empty = Trickle::default();
        empty.on_read(t0, Duration::ZERO, 100, 0, 0);
        assert!(!empty.due(0, busy));
    }

    #[test]
    fn a_source_fast_next_to_the_tunnel_keeps_its_bytes_held() {
        let t0 = tokio::time::Instant::now();
        let mut trickle = Trickle::default();
        // 20 Mbit/s from a slow LAN client, each read waited for.
        let mut held = 0;
        for i in 1..=1000u32 {
            trickle.on_read(t0 + i * MS, MS, 2500, held, held + 2500);
            held += 2500;
        }
        let rate = trickle.source_rate_bps();
        assert!((19e6..21e6).contains(&rate), "{rate}");
        // Over a 2 Mbit/s WAN (or one whose rate is unknown) it stays held;
        // over one eight times as fast as it, it may go.
        assert!(!trickle.due(held, || (Some(2e6), false)));
        assert!(!trickle.due(held, || (None, false)));
        assert!(!trickle.due(held, || (Some(8.0 * rate), false)));
        assert!(trickle.due(held, || (Some(8.5 * rate), false)));
    }

    #[test]
    fn a_cut_or_a_send_restarts_the_wait_and_back_pressure_does_not_count() {
        let t0 = tokio::time::Instant::now();
        let mut trickle = Trickle::default();
        let idle = || (Some(1e9), false);
        trickle.on_read(t0, MS, 100, 0, 100);
        trickle.on_read(t0 + MS, MS, 100, 100, 200);
        assert!(!trickle.due(200, idle));
        // This read completed a chunk: only its own tail is held now.
        trickle.on_read(t0 + 2 * MS, MS, 100, 200, 50);
        trickle.on_read(t0 + 3 * MS, MS, 100, 50, 150);
        assert!(!trickle.due(150, idle));
        trickle.on_read(t0 + 4 * MS, MS, 100, 150, 250);
        assert!(trickle.due(250, idle));
        trickle.sent();
        assert!(!trickle.due(250, idle));
        // A flow that waited on the tunnel (back-pressure) between reads
        // that found data at once: wall time passes, no waiting counts.
        for i in 0..50u32 {
            trickle.on_read(t0 + (10 + 10 * i) * MS, Duration::ZERO, 100, 250, 350);
        }
        assert!(!trickle.due(350, idle));
    }
}
