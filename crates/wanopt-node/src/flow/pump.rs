//! What every pump shares: the read buffer of a TCP socket, the two
//! directions of a flow and their counters, the idle timeout, and the reset
//! of everything when a pump fails.

use std::sync::atomic::AtomicU64;

use tokio::net::TcpStream;

use super::abort::{reset_tcp, Abort};
use super::table::{Flow, FlowState};
use super::why::Waits;

/// Bytes read from a socket at a time. Large enough to amortise per-call
/// costs, small enough that a flow never holds much beyond the stream window.
pub const CHUNK: usize = 128 * 1024;

/// A flow's first read buffer: an idle or interactive flow holds no more
/// than this per direction (10,000 idle flows held 128 KiB each).
pub const FIRST_READ: usize = 4 * 1024;

/// A flow's buffer for reads from its TCP socket: [`FIRST_READ`] while the
/// flow is idle or interactive, [`CHUNK`] once a read fills it (a bulk
/// transfer), small again when the caller finds the flow quiet.
#[derive(Debug)]
pub(crate) struct ReadBuffer(Vec<u8>);

impl ReadBuffer {
    pub(crate) fn new() -> ReadBuffer {
        ReadBuffer(vec![0; FIRST_READ])
    }

    /// Where the next read goes.
    pub(crate) fn space(&mut self) -> &mut [u8] {
        &mut self.0
    }

    /// The bytes of a read of `n`; a read that filled a small buffer makes
    /// it [`CHUNK`] for the next.
    pub(crate) fn read(&mut self, n: usize) -> &[u8] {
        if n == self.0.len() && n < CHUNK {
            // Copy what was read: the caller uses it now.
            let mut big = vec![0; CHUNK];
            big[..n].copy_from_slice(&self.0[..n]);
            self.0 = big;
        }
        &self.0[..n]
    }

    /// Whether it holds more than [`FIRST_READ`].
    pub(crate) fn is_large(&self) -> bool {
        self.0.len() > FIRST_READ
    }

    /// Back to [`FIRST_READ`] (the flow went quiet).
    pub(crate) fn shrink(&mut self) {
        if self.is_large() {
            *self = ReadBuffer::new();
        }
    }
}

/// Which end of the flow a node's TCP socket faces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Facing {
    /// The TCP socket is the client's (edge side).
    Client,
    /// The TCP socket is the server's (core side).
    Server,
}

/// Counters and end state of one direction of a flow.
pub(crate) struct Direction<'a> {
    /// LAN payload bytes.
    pub(crate) lan: &'a AtomicU64,
    /// WAN bytes.
    pub(crate) wan: &'a AtomicU64,
    /// What it waits on.
    pub(crate) waits: &'a Waits,
    /// State once this direction ends.
    pub(crate) done: FlowState,
}

/// The (up, down) directions of `flow` as seen from a node facing `facing`:
/// up is what this node reads from its TCP socket.
pub(crate) fn directions(flow: &Flow, facing: Facing) -> (Direction<'_>, Direction<'_>) {
    let to_server = Direction {
        lan: &flow.to_server,
        wan: &flow.wan_to_server,
        waits: &flow.why.to_server,
        done: FlowState::ClientDone,
    };
    let to_client = Direction {
        lan: &flow.to_client,
        wan: &flow.wan_to_client,
        waits: &flow.why.to_client,
        done: FlowState::ServerDone,
    };
    match facing {
        Facing::Client => (to_server, to_client),
        Facing::Server => (to_client, to_server),
    }
}

/// Runs a flow's `pumps` until they end, or until the flow is idle for the
/// node's `--flow-idle-timeout` ([`Abort::Idle`]: the caller resets both
/// sides as for any abort). With `lan` (its LAN socket's descriptor, and
/// whether it is the client's), the socket is lent to the flow's sampler
/// meanwhile (the caller keeps it open until this returns).
pub(crate) async fn until_idle(
    flow: &Flow,
    lan: Option<(std::os::fd::RawFd, bool)>,
    pumps: impl std::future::Future<Output = Result<(), Abort>>,
) -> Result<(), Abort> {
    let _loan = lan.map(|(fd, is_client)| flow.why.lend_lan(fd, is_client));
    tokio::select! {
        biased;
        result = pumps => result,
        idle = flow.idle_out() => idle,
        revoked = flow.revoked_out() => revoked,
    }
}

/// Resets everything of a flow whose pumps failed.
pub(crate) fn abort_on_error(
    result: Result<(), Abort>,
    tcp: TcpStream,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    flow: &Flow,
) -> Result<(), Abort> {
    match result {
        Ok(()) => Ok(()),
        Err(abort) => {
            flow.set_state(FlowState::Closing);
            let code = quinn::VarInt::from_u32(abort.stream_code());
            let _ = send.reset(code);
            let _ = recv.stop(code);
            reset_tcp(tcp);
            Err(abort)
        }
    }
}
