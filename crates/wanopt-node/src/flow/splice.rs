//! The plain pumps: one TCP flow over one QUIC stream as it is, or over a
//! second TCP connection when a flow is passed through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::abort::{reset_tcp, Abort, TunnelFailure};
use super::pump::{abort_on_error, directions, until_idle, Direction, Facing, ReadBuffer, CHUNK};
use super::read_ahead::{payload_reassembler, read_ahead};
use super::table::{Flow, FlowState};
use super::urgency::Urgency;
use crate::transport::datagram::StreamEnds;

async fn tcp_to_stream(
    rd: &mut (impl AsyncRead + Unpin),
    send: &mut quinn::SendStream,
    dir: &Direction<'_>,
    flow: &Flow,
    ends: &StreamEnds,
) -> Result<(), Abort> {
    let mut urgency = Urgency::new(send.priority().unwrap_or(0), Instant::now());
    // One buffer, read into again once quinn let go of what was sent from
    // it (acknowledged), else a new one: no allocation per read.
    let mut buf = BytesMut::with_capacity(CHUNK);
    loop {
        buf.reserve(CHUNK);
        match dir.waits.on_lan(rd.read_buf(&mut buf)).await {
            Ok(0) => {
                let end = ends.expect();
                let _ = send.finish();
                end.release_when(send.stopped());
                flow.set_state(dir.done);
                return Ok(());
            }
            Ok(n) => {
                dir.lan.fetch_add(n as u64, Ordering::Relaxed);
                dir.wan.fetch_add(n as u64, Ordering::Relaxed);
                if let Some(level) = urgency.on_write(Instant::now(), n) {
                    let _ = send.set_priority(level);
                }
                dir.waits
                    .on_tunnel(send.write_chunk(buf.split().freeze()))
                    .await
                    .map_err(Abort::from_write)?;
            }
            Err(e) => return Err(Abort::socket(e)),
        }
    }
}

async fn stream_to_tcp(
    recv: &mut quinn::RecvStream,
    wr: &mut (impl AsyncWrite + Unpin),
    dir: &Direction<'_>,
    flow: &Flow,
    start: u64,
    expect_reply: bool,
) -> Result<(), Abort> {
    let reassembler = payload_reassembler(recv, start, expect_reply).await?;
    let (reader, mut incoming) = read_ahead(recv, reassembler);
    let writer = async {
        let mut batch = Vec::new();
        while dir
            .waits
            .on_tunnel(incoming.next_batch(&mut batch, CHUNK))
            .await
        {
            let len: usize = batch.iter().map(Bytes::len).sum();
            dir.wan.fetch_add(len as u64, Ordering::Relaxed);
            dir.waits
                .on_lan(write_all_vectored(wr, &mut batch))
                .await
                .map_err(Abort::socket)?;
            dir.lan.fetch_add(len as u64, Ordering::Relaxed);
        }
        let _ = wr.shutdown().await;
        flow.set_state(dir.done);
        Ok(())
    };
    tokio::try_join!(reader, writer).map(|_| ())
}

/// Writes every piece of `pieces` to `wr`, as few system calls as the
/// socket allows (vectored writes), and leaves `pieces` empty.
pub(crate) async fn write_all_vectored(
    wr: &mut (impl AsyncWrite + Unpin),
    pieces: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    let mut first = 0;
    loop {
        while pieces.get(first).is_some_and(Bytes::is_empty) {
            first += 1;
        }
        if first == pieces.len() {
            break;
        }
        let slices: Vec<std::io::IoSlice<'_>> = pieces[first..]
            .iter()
            .map(|b| std::io::IoSlice::new(b))
            .collect();
        let mut n = wr.write_vectored(&slices).await?;
        drop(slices);
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let piece = &mut pieces[first];
            if n >= piece.len() {
                n -= piece.len();
                first += 1;
            } else {
                piece.advance(n);
                n = 0;
            }
        }
    }
    pieces.clear();
    Ok(())
}

/// Carries a TCP connection over a QUIC stream until both directions end.
/// Facing the client (on the edge), the core's reply is read first: a refusal
/// resets the client. `start` is the stream offset of the first payload byte
/// (the length of a header already read from `recv`). `ends` is told when
/// this side's last bytes are written (tail duplication repeats the
/// stream's end).
/// On an abort, the TCP connection is reset and the stream reset and stopped.
pub async fn splice_stream(
    mut tcp: TcpStream,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    flow: &Flow,
    facing: Facing,
    start: u64,
    ends: &StreamEnds,
) -> Result<(), Abort> {
    let (up, down) = directions(flow, facing);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&tcp);
    let result = {
        let (mut rd, mut wr) = tcp.split();
        // The socket stays open while the pumps run: its counts are read.
        let lan = Some((fd, facing == Facing::Client));
        until_idle(flow, lan, async {
            tokio::try_join!(
                tcp_to_stream(&mut rd, &mut send, &up, flow, ends),
                stream_to_tcp(
                    &mut recv,
                    &mut wr,
                    &down,
                    flow,
                    start,
                    facing == Facing::Client
                ),
            )
            .map(|_| ())
        })
        .await
    };
    abort_on_error(result, tcp, send, recv, flow)
}

async fn tcp_to_tcp(
    rd: &mut (impl AsyncRead + Unpin),
    wr: &mut (impl AsyncWrite + Unpin),
    counters: [&AtomicU64; 2],
    flow: &Flow,
    done: FlowState,
) -> Result<(), Abort> {
    let mut buf = ReadBuffer::new();
    loop {
        match rd.read(buf.space()).await {
            Ok(0) => {
                let _ = wr.shutdown().await;
                flow.set_state(done);
                return Ok(());
            }
            Ok(n) => {
                wr.write_all(buf.read(n))
                    .await
                    .map_err(|e| Abort::Remote(TunnelFailure::Socket(e.into())))?;
                for counter in counters {
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            Err(e) => return Err(Abort::socket(e)),
        }
    }
}

/// Carries a flow between two TCP connections (pass-through), with the same
/// half-close and reset semantics as [`splice_stream`].
pub async fn splice_tcp(
    mut client: TcpStream,
    mut server: TcpStream,
    flow: &Flow,
) -> Result<(), Abort> {
    let result = {
        let (mut crd, mut cwr) = client.split();
        let (mut srd, mut swr) = server.split();
        until_idle(flow, None, async {
            tokio::try_join!(
                tcp_to_tcp(
                    &mut crd,
                    &mut swr,
                    [&flow.to_server, &flow.wan_to_server],
                    flow,
                    FlowState::ClientDone
                ),
                tcp_to_tcp(
                    &mut srd,
                    &mut cwr,
                    [&flow.to_client, &flow.wan_to_client],
                    flow,
                    FlowState::ServerDone
                ),
            )
            .map(|_| ())
        })
        .await
    };
    match result {
        Ok(()) => Ok(()),
        Err(abort) => {
            flow.set_state(FlowState::Closing);
            reset_tcp(client);
            reset_tcp(server);
            Err(abort)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short writes (a 7-byte pipe) split pieces anywhere; empty pieces
    /// are skipped; every byte arrives once, in order.
    #[tokio::test]
    async fn vectored_writes_deliver_every_piece_in_order() {
        let pieces: Vec<Bytes> = [
            &b"abc"[..],
            b"",
            b"defghijklmnop",
            b"",
            b"",
            b"q",
            b"rstuvwxyz",
        ]
        .iter()
        .map(|p| Bytes::copy_from_slice(p))
        .collect();
        let want: Vec<u8> = pieces.iter().flat_map(|p| p.to_vec()).collect();
        let (mut wr, mut rd) = tokio::io::duplex(7);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            rd.read_to_end(&mut got).await.unwrap();
            got
        });
        let mut batch = pieces.clone();
        write_all_vectored(&mut wr, &mut batch).await.unwrap();
        assert!(batch.is_empty());
        let mut only_empty = vec![Bytes::new(), Bytes::new()];
        write_all_vectored(&mut wr, &mut only_empty).await.unwrap();
        drop(wr);
        assert_eq!(reader.await.unwrap(), want);
    }
}
