//! The pump of a flow with the `reduce` service: TCP bytes pass through a
//! [`wanopt_codec::Encoder`] on their way to the tunnel stream, and stream
//! bytes through a [`wanopt_codec::Decoder`] on their way to TCP.
//!
//! Three cooperating futures per flow (one task):
//!
//! - **uplink** reads the TCP socket and encodes. A partial chunk waits in
//!   the chunker for more bytes, but never longer than [`IDLE_FLUSH`] once
//!   the socket goes quiet, so interactive traffic is not held back; a
//!   short read that ends a quiet (a request, a reply) goes at once as a
//!   piece ([`PROMPT_MAX`]), and a source that trickles (reads keep
//!   coming, each too soon for the idle flush) gets its held bytes sent
//!   as pieces once it has kept the flow waiting that long ([`Trickle`]).
//! - **downlink** reads the stream (unordered, reassembled), decodes, writes
//!   the plain bytes to TCP, hands the peer decoder's control frames (acks,
//!   repair requests, done) to the local encoder, and queues the local
//!   decoder's own control frames.
//! - **writer** owns the stream's send side and interleaves whole frames:
//!   control first (an unbounded queue, so the downlink never waits on the
//!   send direction; control is a fraction of a percent of the data it
//!   answers), then data (a bounded queue: back-pressure to the socket).
//!
//! The send side is finished only when the uplink ended (`End` written),
//! the peer confirmed everything (`Done`, so no repair can be asked for),
//! and the local decoder delivered everything up to the peer's `End` (so
//! our last acks and `Done` are out). Each end's finish depends only on
//! frames from the other end, never on the other end's finish.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, trace};

use wanopt_codec::{Decoder, DecoderConfig, Encoder, EncoderConfig};

use super::abort::{Abort, CodecFailure, LocalFailure, TunnelFailure};
use super::pump::{abort_on_error, directions, until_idle, Direction, Facing, ReadBuffer};
use super::read_ahead::{payload_reassembler, read_ahead};
use super::table::Flow;
use super::urgency::Urgency;
use crate::reduce::compression::CodecChoice;
use crate::reduce::Reduction;
use crate::transport::datagram::StreamEnds;
use crate::transport::model;

mod quiet;

pub use quiet::{
    Quiet, Trickle, COMPRESSOR_IDLE, IDLE_FLUSH, PROMPT_MAX, TRICKLE_FLOOR_BPS, TRICKLE_RATE_SHARE,
};

/// Wire bytes decoded at a time (references expand: this bounds the plain
/// bytes produced by one call to a few MB).
const DECODE_SLICE: usize = 16 * 1024;

/// Decoded bytes written to the LAN socket (and counted) at a time.
const LAN_WRITE: usize = 64 * 1024;

/// Most bytes of tunnel pieces decoded before their output is written.
const DECODE_BATCH: usize = 128 * 1024;

/// Referenced chunk bytes each flow keeps to answer the peer's repair
/// requests (a damaged or just-evicted record at the peer). Bounds memory:
/// 200 flows hold at most 1.6 GB. Older chunks are read back from the
/// local store; a request for one that is not there either (evicted,
/// damaged) resets that flow, never delivers a wrong byte.
const RETAIN_BYTES: usize = 8 << 20;

/// Encoded messages queued for the writer.
const DATA_QUEUE: usize = 4;

fn lock(enc: &Mutex<Encoder>) -> std::sync::MutexGuard<'_, Encoder> {
    enc.lock().unwrap_or_else(|e| e.into_inner())
}

fn writer_gone() -> Abort {
    Abort::Remote(TunnelFailure::WriterStopped)
}

/// Carries a TCP connection over a QUIC stream with data reduction, until
/// both directions end; same semantics as [`super::splice::splice_stream`].
/// `ends` is told when this side's last frames are written (tail
/// duplication repeats the stream's end).
#[allow(clippy::too_many_arguments)]
pub async fn splice_reduced(
    mut tcp: TcpStream,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    flow: &Flow,
    facing: Facing,
    start: u64,
    reduction: Reduction,
    ends: StreamEnds,
) -> Result<(), Abort> {
    let (up, down) = directions(flow, facing);
    let Reduction {
        cache,
        compression,
        connection,
        budget,
    } = reduction;
    let mut choice = CodecChoice::new(compression, Some(connection), budget);
    let config = EncoderConfig {
        retain_bytes: RETAIN_BYTES,
        compression: compression.pick(None),
        ..EncoderConfig::default()
    };
    let mut encoder = match Encoder::new(cache.clone(), config) {
        Ok(encoder) => encoder,
        Err(e) => {
            let abort = Abort::Local(LocalFailure::Encoder(Arc::new(e)));
            return abort_on_error(Err(abort), tcp, send, recv, flow);
        }
    };
    let decoder = Decoder::new(cache, DecoderConfig::default());
    choice.update(&mut encoder);
    let mut preamble = Vec::new();
    encoder.start(&mut preamble);
    let encoder = Mutex::new(encoder);
    let (data_tx, data_rx) = mpsc::channel(DATA_QUEUE);
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
    let result = {
        let (mut rd, mut wr) = tcp.split();
        // The socket stays open while the pumps run: its counts are read.
        let lan = Some((fd, facing == Facing::Client));
        until_idle(flow, lan, async {
            tokio::try_join!(
                uplink(&mut rd, &encoder, choice, data_tx, &up, flow, &ends),
                downlink(
                    &mut recv,
                    &mut wr,
                    decoder,
                    &encoder,
                    control_tx,
                    &down,
                    flow,
                    start,
                    facing == Facing::Client,
                ),
                writer(&mut send, preamble, data_rx, control_rx, &up, &ends),
            )
            .map(|_| ())
        })
        .await
    };
    abort_on_error(result, tcp, send, recv, flow)
}

async fn uplink(
    rd: &mut (impl AsyncRead + Unpin),
    encoder: &Mutex<Encoder>,
    mut choice: CodecChoice,
    tx: mpsc::Sender<Vec<u8>>,
    dir: &Direction<'_>,
    flow: &Flow,
    ends: &StreamEnds,
) -> Result<(), Abort> {
    let mut buf = ReadBuffer::new();
    let mut quiet = Quiet::default();
    let mut trickle = Trickle::default();
    // Whether the tunnel's sender has data waiting (wanopt's BBR says).
    let sender = choice
        .connection
        .as_ref()
        .and_then(|c| model::bbr(c).map(|bbr| bbr.sender_blocked));
    // The codec was picked (and its memory reserved) when the flow began:
    // a flow whose socket stays silent gives it back after the idle time.
    quiet.holding(choice.reservation.bytes() > 0);
    loop {
        // Quiet for IDLE_FLUSH with bytes held back: they go. Quiet for
        // COMPRESSOR_IDLE after that: free the stream compressor (a
        // StreamEnd tells the peer's decoder to free its context too) and
        // give its memory back to the node's budget.
        let waiting = tokio::time::Instant::now();
        let read = match quiet.wait() {
            None => dir.waits.on_lan(rd.read(buf.space())).await,
            Some(idle) => match dir
                .waits
                .on_lan(tokio::time::timeout(idle, rd.read(buf.space())))
                .await
            {
                Ok(read) => read,
                Err(_) => {
                    let mut out = Vec::new();
                    {
                        let mut encoder = lock(encoder);
                        if quiet.step(&mut encoder, &mut out) {
                            choice.release();
                            buf.shrink();
                        }
                        flow.reduce.record_encoder(&encoder);
                        quiet.holding(
                            encoder.compressor_bytes() > 0
                                || choice.reservation.bytes() > 0
                                || buf.is_large(),
                        );
                    }
                    trickle.sent();
                    if !out.is_empty() {
                        tx.send(out).await.map_err(|_| writer_gone())?;
                    }
                    continue;
                }
            },
        };
        match read {
            Ok(0) => {
                let mut out = Vec::new();
                {
                    let mut encoder = lock(encoder);
                    encoder.finish(&mut out);
                    flow.reduce.record_encoder(&encoder);
                }
                tx.send(out).await.map_err(|_| writer_gone())?;
                flow.set_state(dir.done);
                return Ok(());
            }
            Ok(n) => {
                let arrived = tokio::time::Instant::now();
                dir.lan.fetch_add(n as u64, Ordering::Relaxed);
                let mut out = Vec::with_capacity(n + n / 64 + 64);
                let encode = || {
                    let mut encoder = lock(encoder);
                    choice.update(&mut encoder);
                    let held = encoder.held_len();
                    encoder.push(buf.read(n), &mut out);
                    let waited = arrived.saturating_duration_since(waiting);
                    trickle.on_read(arrived, waited, n, held, encoder.held_len());
                    let tunnel = || {
                        let rate = match (choice.tunnel_bps, ends.capacity_bps()) {
                            (Some(a), Some(b)) => Some(a.max(b)),
                            (a, b) => a.or(b),
                        };
                        let busy = sender.as_ref().is_some_and(|s| s.load(Ordering::Relaxed));
                        (rate, busy)
                    };
                    if trickle.due(encoder.held_len(), tunnel) {
                        encoder.send_held(&mut out);
                        trickle.sent();
                    }
                    flow.reduce.record_encoder(&encoder);
                    encoder.compressor_bytes() > 0
                };
                // The slow zstd levels spend tens of milliseconds on a
                // read: off the runtime's worker, so the tunnel's other
                // flows and its connection driver are not held up.
                let multi_thread = tokio::runtime::Handle::current().runtime_flavor()
                    == tokio::runtime::RuntimeFlavor::MultiThread;
                let slow = lock(encoder).compression().is_slow();
                let began = std::time::Instant::now();
                let compressing = if multi_thread && slow {
                    dir.waits.on_codec(|| tokio::task::block_in_place(encode))
                } else {
                    dir.waits.on_codec(encode)
                };
                trace!(read = n, wan = out.len(), took = ?began.elapsed(), "encoded");
                // A reservation not yet used for a compressor (the reads
                // so far were references or did not compress) is given
                // back after the same idle time.
                quiet.on_read();
                quiet.holding(compressing || choice.reservation.bytes() > 0 || buf.is_large());
                if !out.is_empty() {
                    dir.waits
                        .on_tunnel(tx.send(out))
                        .await
                        .map_err(|_| writer_gone())?;
                    // The writer shares this task: after a slow encode, let
                    // it hand the frames to the tunnel now, not once the
                    // socket's backlog has filled its queue (with LZMA2 on
                    // 2 Mbit/s, four reads held the first byte 80 ms). Fast
                    // codecs fill the queue in well under a millisecond and
                    // skip the extra wake-up.
                    if slow {
                        tokio::task::yield_now().await;
                    }
                }
            }
            Err(e) => return Err(Abort::socket(e)),
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn downlink(
    recv: &mut quinn::RecvStream,
    wr: &mut (impl AsyncWrite + Unpin),
    mut decoder: Decoder,
    encoder: &Mutex<Encoder>,
    control_tx: mpsc::UnboundedSender<Vec<u8>>,
    dir: &Direction<'_>,
    flow: &Flow,
    start: u64,
    expect_reply: bool,
) -> Result<(), Abort> {
    let reassembler = payload_reassembler(recv, start, expect_reply).await?;
    let (reader, mut incoming) = read_ahead(recv, reassembler);
    let multi_thread = tokio::runtime::Handle::current().runtime_flavor()
        == tokio::runtime::RuntimeFlavor::MultiThread;
    let consumer = async {
        let mut control_tx = Some(control_tx);
        let mut plain = Vec::new();
        let mut shut = false;
        let mut batch = Vec::new();
        loop {
            if !dir
                .waits
                .on_tunnel(incoming.next_batch(&mut batch, DECODE_BATCH))
                .await
            {
                if !decoder.is_finished() {
                    return Err(Abort::Remote(TunnelFailure::EndedEarly));
                }
                return Ok(());
            }
            for bytes in batch.drain(..) {
                dir.wan.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                for slice in bytes.chunks(DECODE_SLICE) {
                    // A PPMd or LZMA2 run takes milliseconds to decode (6 ms
                    // for 128 KiB of PPMd): off the runtime's worker, as the
                    // uplink encodes, so the tunnel's other flows and its
                    // connection driver are not held up. Pieces that only add
                    // to a partial frame stay here, and so does a stream's
                    // first run (its engine is known once it started).
                    let off_worker = multi_thread
                        && decoder.decodes_slowly()
                        && decoder.push_completes_frame(slice);
                    let decode = || decoder.push(slice, &mut plain);
                    let decoded = if off_worker {
                        dir.waits.on_codec(|| tokio::task::block_in_place(decode))
                    } else {
                        dir.waits.on_codec(decode)
                    };
                    decoded.map_err(|e| Abort::Codec(CodecFailure::BadData(Arc::new(e))))?;
                    let mut control = Vec::new();
                    {
                        let mut encoder = lock(encoder);
                        let mut unavailable = Vec::new();
                        while let Some(message) = decoder.poll_peer_control() {
                            if let Err(e) = encoder.handle_peer(&message, &mut control) {
                                unavailable.push(e);
                            }
                        }
                        let count = unavailable.len();
                        if let Some(first) = unavailable.into_iter().next() {
                            // Both byte caches lost chunks (damaged disks): this
                            // flow cannot go on. Every request was still handled,
                            // so the next flow sends all the chunks asked for so
                            // far whole instead of failing on them one by one.
                            return Err(Abort::Codec(CodecFailure::Unavailable {
                                first: Arc::new(first),
                                count,
                            }));
                        }
                        // Repairs go out here, in answer to the peer.
                        flow.reduce.record_encoder(&encoder);
                    }
                    decoder.emit_control(&mut control);
                    if !control.is_empty() {
                        match &control_tx {
                            Some(tx) => tx.send(control).map_err(|_| writer_gone())?,
                            None => debug!(
                                "flow {}: {} bytes of control after the end, dropped",
                                flow.id,
                                control.len()
                            ),
                        }
                    }
                    // Decoded bytes gather over a batch of pieces (one write
                    // for many packets' worth); references expand to
                    // megabytes: written and counted a piece at a time, so the
                    // flow table shows a slow reader's progress (and rate) as
                    // it goes.
                    if plain.len() >= LAN_WRITE {
                        write_plain(wr, &mut plain, dir).await?;
                    }
                }
            }
            write_plain(wr, &mut plain, dir).await?;
            flow.reduce.record_decoder(&decoder);
            if decoder.is_finished() && !shut {
                let _ = wr.shutdown().await;
                flow.set_state(dir.done);
                shut = true;
            }
            if shut && control_tx.is_some() && lock(encoder).is_done() {
                // Nothing more to say: let the writer finish the stream.
                control_tx = None;
            }
        }
    };
    tokio::try_join!(reader, consumer).map(|_| ())
}

/// Writes what was decoded to the LAN, [`LAN_WRITE`] at a time, and
/// counts it.
async fn write_plain(
    wr: &mut (impl AsyncWrite + Unpin),
    plain: &mut Vec<u8>,
    dir: &Direction<'_>,
) -> Result<(), Abort> {
    for piece in plain.chunks(LAN_WRITE) {
        dir.waits
            .on_lan(wr.write_all(piece))
            .await
            .map_err(Abort::socket)?;
        dir.lan.fetch_add(piece.len() as u64, Ordering::Relaxed);
    }
    plain.clear();
    Ok(())
}

async fn writer(
    send: &mut quinn::SendStream,
    preamble: Vec<u8>,
    mut data: mpsc::Receiver<Vec<u8>>,
    mut control: mpsc::UnboundedReceiver<Vec<u8>>,
    dir: &Direction<'_>,
    ends: &StreamEnds,
) -> Result<(), Abort> {
    let failed = Abort::from_write;
    dir.wan.fetch_add(preamble.len() as u64, Ordering::Relaxed);
    send.write_all(&preamble).await.map_err(failed)?;
    let (mut data_open, mut control_open) = (true, true);
    let mut urgency = Urgency::new(send.priority().unwrap_or(0), Instant::now());
    // Once the uplink's last frames (its `End`) are written the stream is
    // ending, though control frames may still follow: tail duplication is
    // told until the peer has acknowledged everything (after the finish
    // below), at most `STREAM_END_HOLD`.
    let mut told = false;
    while data_open || control_open {
        let next = tokio::select! {
            biased;
            message = control.recv(), if control_open => {
                control_open = message.is_some();
                message
            }
            message = data.recv(), if data_open => {
                data_open = message.is_some();
                if !data_open {
                    ends.expect().release_when(send.stopped());
                    told = true;
                }
                message
            }
        };
        if let Some(bytes) = next {
            dir.wan.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            if let Some(level) = urgency.on_write(Instant::now(), bytes.len()) {
                let _ = send.set_priority(level);
            }
            send.write_chunk(Bytes::from(bytes)).await.map_err(failed)?;
        }
    }
    if !told {
        ends.expect().release_when(send.stopped());
    }
    let _ = send.finish();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::pin::Pin;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;
    use wanopt_codec::{CacheConfig, CacheId, PeerCache};

    use crate::flow::FlowTable;
    use crate::reduce::budget::CompressorBudget;
    use crate::reduce::CompressionMode;

    /// A socket that always has more office-like text to read (like a
    /// server's response already in the receive buffer), counting reads.
    struct Backlog {
        reads: Arc<AtomicUsize>,
        line: u64,
    }

    impl AsyncRead for Backlog {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            while buf.remaining() > 0 {
                self.line += 1;
                let line = format!(
                    "<row r=\"{}\"><c t=\"n\">{}</c></row>\n",
                    self.line,
                    self.line * 7919 % 100_003
                );
                let n = line.len().min(buf.remaining());
                buf.put_slice(&line.as_bytes()[..n]);
            }
            Poll::Ready(Ok(()))
        }
    }

    /// The writer shares the flow's task with the uplink: with a slow codec
    /// and a socket that always has more to read, the uplink must let the
    /// writer take each encoded read before it reads on, not only once the
    /// writer's queue is full (with LZMA2 on a 2 Mbit/s link that held the
    /// first byte back by four reads, about 80 ms).
    #[tokio::test(flavor = "current_thread")]
    async fn the_writer_gets_each_encoded_read_before_the_uplink_reads_on() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PeerCache::open(dir.path(), CacheConfig::default(), CacheId([5; 16])).unwrap();
        let compression = CompressionMode::Lzma;
        let config = EncoderConfig {
            compression: compression.pick(None),
            ..EncoderConfig::default()
        };
        let encoder = Mutex::new(Encoder::new(cache, config).unwrap());
        let choice = CodecChoice::new(compression, None, CompressorBudget::new(u64::MAX));
        let table = Arc::new(FlowTable::default());
        let guard = table.start(
            None,
            "127.0.0.1:1".parse().unwrap(),
            "x".into(),
            vec![],
            None,
        );
        let flow = &guard.flow;
        let (up, _) = directions(flow, Facing::Server);
        let reads = Arc::new(AtomicUsize::new(0));
        let mut socket = Backlog {
            reads: reads.clone(),
            line: 0,
        };
        let (tx, mut rx) = mpsc::channel(DATA_QUEUE);
        let writer = async move {
            let first: Vec<u8> = rx.recv().await.expect("an encoded read");
            // Dropping the queue ends the uplink (its next send fails).
            (first.len(), reads.load(Ordering::SeqCst))
        };
        let layer = crate::transport::datagram::DatagramHandle::new(
            crate::transport::datagram::DuplicationMode::Off,
        );
        let ends = StreamEnds::new(&layer, "127.0.0.1:4433".parse().unwrap());
        let (ended, (first_len, reads_before_first)) = tokio::join!(
            uplink(&mut socket, &encoder, choice, tx, &up, flow, &ends),
            writer
        );
        assert!(ended.is_err(), "the uplink stops once its writer is gone");
        assert!(first_len > 0);
        assert!(
            reads_before_first <= 2,
            "the writer got its first frames only after {reads_before_first} reads \
             (its queue holds {DATA_QUEUE})"
        );
    }
}
