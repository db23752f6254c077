//! Read-ahead: a tunnel stream read unordered as fast as quinn delivers,
//! reassembled, and handed in order to the pump that writes it to TCP.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, Semaphore};

use super::abort::{Abort, LocalFailure, TunnelFailure};
use super::pump::CHUNK;
use super::reassembly::Reassembler;

/// Reads the core's reply at the start of a stream (edge side); returns
/// its length, or the refusal.
pub(crate) async fn read_reply(recv: &mut quinn::RecvStream) -> Result<u64, Abort> {
    let mut reply = [0u8; wanopt_proto::stream::REPLY_LEN];
    recv.read_exact(&mut reply)
        .await
        .map_err(|e| Abort::Remote(TunnelFailure::NoReply(e)))?;
    let status = wanopt_proto::Reply::new_checked(&reply[..])
        .and_then(|view| wanopt_proto::ReplyRepr::parse(&view))
        .map_err(|e| Abort::Remote(TunnelFailure::BadReply(e)))?
        .status;
    if status != wanopt_proto::Status::Connected {
        return Err(Abort::Refused(status));
    }
    Ok(reply.len() as u64)
}

/// Reads the core's reply first if `expect_reply` (edge side), then returns
/// the reassembler for the payload, which starts at stream offset `start`
/// plus the reply. Payload is read unordered: that keeps quinn's receive
/// buffer from fragmenting under heavy loss; the reassembler restores the
/// order (see `reassembly`).
pub(crate) async fn payload_reassembler(
    recv: &mut quinn::RecvStream,
    start: u64,
    expect_reply: bool,
) -> Result<Reassembler, Abort> {
    let reply = if expect_reply {
        read_reply(recv).await?
    } else {
        0
    };
    Ok(Reassembler::new(start + reply))
}

/// How many in-order bytes a flow may hold for its TCP side beyond what
/// TCP took. The stream is read ahead of TCP (unordered, so quinn's
/// receive buffer keeps no islands while TCP is slow) up to this bound.
/// It is small because every byte read counts as consumed for the
/// stream's flow control: the window grows only while reads keep up, so a
/// read-ahead as large as the window (32 MiB before) let a flow whose
/// client had stopped reading take its window and the read-ahead again,
/// and grow the window to the read-ahead's size. The reader need not
/// drain quinn for quinn's sake: the vendored quinn-proto allows 65,536
/// islands per stream, more than the largest window holds.
pub(crate) const READ_AHEAD: usize = 1 << 20;

/// The in-order payload of a stream, read ahead of its consumer.
pub(crate) struct Incoming {
    rx: mpsc::UnboundedReceiver<Vec<Bytes>>,
    budget: Arc<Semaphore>,
    /// Pieces of a batch received but not yet handed out.
    left: std::vec::IntoIter<Bytes>,
}

fn permits(len: usize) -> u32 {
    u32::try_from(len.div_ceil(1024)).unwrap_or(u32::MAX)
}

impl Incoming {
    /// Waits for the next in-order pieces, then takes every piece already
    /// queued behind them, up to about `max` bytes, into `out`; false once
    /// the stream ended cleanly and nothing is left. Pieces are as quinn
    /// hands them (one packet's frame each), so a consumer that writes a
    /// batch at once makes one system call where it would make dozens.
    pub(crate) async fn next_batch(&mut self, out: &mut Vec<Bytes>, max: usize) -> bool {
        let mut taken = 0;
        loop {
            for bytes in self.left.by_ref() {
                taken += bytes.len();
                out.push(bytes);
                if taken >= max || out.len() >= BATCH_PIECES {
                    return true;
                }
            }
            let batch = if out.is_empty() {
                match self.rx.recv().await {
                    Some(batch) => batch,
                    None => return false,
                }
            } else {
                match self.rx.try_recv() {
                    Ok(batch) => batch,
                    Err(_) => return true,
                }
            };
            let len: usize = batch.iter().map(Bytes::len).sum();
            self.budget.add_permits(permits(len) as usize);
            self.left = batch.into_iter();
        }
    }
}

/// Most pieces [`Incoming::next_batch`] takes at once (one vectored write:
/// well under the kernel's 1024 slices).
pub(crate) const BATCH_PIECES: usize = 256;

/// The output of `future` if it is ready at once (polled once, with a
/// waker that does nothing: the caller awaits it properly when it is
/// not, which registers the task's own waker again).
fn ready_now<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(output) => Some(output),
        std::task::Poll::Pending => None,
    }
}

/// Reads `recv` unordered as fast as quinn delivers, reassembles, and hands
/// in-order pieces to an [`Incoming`] (at most [`READ_AHEAD`] bytes queued).
/// Every chunk quinn holds ready goes in one batch (of up to [`CHUNK`]
/// bytes): one wake-up of the consumer for a train of packets, not one per
/// packet. Returns the reader (to run, joined with the consumer) and the
/// receiver.
pub(crate) fn read_ahead(
    recv: &mut quinn::RecvStream,
    mut reassembler: Reassembler,
) -> (
    impl std::future::Future<Output = Result<(), Abort>> + '_,
    Incoming,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    // A batch is at most CHUNK bytes plus one chunk (of at most CHUNK).
    let budget = Arc::new(Semaphore::new((READ_AHEAD / 1024).max(2 * CHUNK / 1024)));
    let reader_budget = budget.clone();
    let reader = async move {
        let mut ready: Vec<Bytes> = Vec::new();
        loop {
            let mut next = Some(recv.read_chunk(CHUNK, false).await);
            let (mut ended, mut held) = (false, 0);
            while let Some(read) = next.take() {
                match read {
                    Ok(Some(chunk)) => {
                        reassembler.insert(chunk.offset, chunk.bytes, |b| {
                            held += b.len();
                            ready.push(b);
                        });
                        if held < CHUNK {
                            next = ready_now(recv.read_chunk(CHUNK, false));
                        }
                    }
                    Ok(None) => {
                        if reassembler.buffered() != 0 {
                            return Err(Abort::Remote(TunnelFailure::Gap));
                        }
                        ended = true;
                    }
                    Err(e) => return Err(Abort::from_read(e)),
                }
            }
            // In batches of at most CHUNK bytes and one piece, each
            // waiting for its share of the read-ahead.
            let mut pieces = ready.drain(..).peekable();
            while pieces.peek().is_some() {
                let mut batch = Vec::new();
                let mut len = 0;
                while len < CHUNK {
                    let Some(bytes) = pieces.next() else {
                        break;
                    };
                    len += bytes.len();
                    batch.push(bytes);
                }
                reader_budget
                    .acquire_many(permits(len))
                    .await
                    .map_err(|_| Abort::Local(LocalFailure::Closed))?
                    .forget();
                if tx.send(batch).is_err() {
                    // The consumer stopped; its own result tells why.
                    return Ok(());
                }
            }
            drop(pieces);
            if ended {
                return Ok(());
            }
        }
    };
    (
        reader,
        Incoming {
            rx,
            budget,
            left: Vec::new().into_iter(),
        },
    )
}
