//! Why a flow runs at the rate it does, on this node: what each of its
//! directions waited on over the last second (its LAN socket, the tunnel
//! stream, the codec's CPU), the LAN socket's own limits as the kernel
//! counts them (`TCP_INFO`: time limited by the receiver's window, by the
//! send buffer, the receiver's window now), and the tunnel's state, read
//! together as the one limit that binds now and its figure.
//!
//! A direction that waits mostly on its source is limited by whoever
//! feeds it: the LAN sender (a slow client or server) or, when it reads
//! the tunnel, the peer's side (whose own `flows --why` names its limit),
//! unless this node's window budget stops the peer. A direction that
//! waits mostly on its sink is limited by whoever drains it: the LAN
//! receiver (its window, or a reader that stopped), this node's send
//! buffer, or, when it writes the tunnel, the tunnel's congestion window
//! and pacing (when the tunnel is full) or the stream's flow-control window
//! (when it is not: the peer's receiver holds it back).

use std::future::Future;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Microseconds since the process's first look at the clock: when a wait
/// began, as one atomic word (0: no wait).
fn micros(at: Instant) -> u64 {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    at.saturating_duration_since(base).as_micros() as u64 + 1
}

/// What one direction of a flow waited on (the LAN socket, the tunnel,
/// the codec), microseconds in all, with the wait under way counted up
/// to now.
#[derive(Debug, Default)]
pub struct Waits {
    done: [AtomicU64; 3],
    began: [AtomicU64; 3],
}

impl Waits {
    const LAN: usize = 0;
    const TUNNEL: usize = 1;
    const CODEC: usize = 2;

    fn begin(&self, which: usize) -> u64 {
        let at = micros(Instant::now());
        self.began[which].store(at, Ordering::Relaxed);
        at
    }

    fn end(&self, which: usize, began: u64) {
        self.began[which].store(0, Ordering::Relaxed);
        let now = micros(Instant::now());
        self.done[which].fetch_add(now.saturating_sub(began), Ordering::Relaxed);
    }

    /// `io` on the LAN socket, its wait counted.
    pub fn on_lan<F: Future>(&self, io: F) -> Timed<'_, F> {
        Timed::new(self, Waits::LAN, io)
    }

    /// `io` on the tunnel stream, its wait counted.
    pub fn on_tunnel<F: Future>(&self, io: F) -> Timed<'_, F> {
        Timed::new(self, Waits::TUNNEL, io)
    }

    /// Runs `work` (encoding or decoding), counting its time.
    pub fn on_codec<T>(&self, work: impl FnOnce() -> T) -> T {
        let began = self.begin(Waits::CODEC);
        let out = work();
        self.end(Waits::CODEC, began);
        out
    }

    /// The waits so far at `now`, the one under way included.
    fn load(&self, now: Instant) -> [u64; 3] {
        let now = micros(now);
        std::array::from_fn(|i| {
            let under_way = match self.began[i].load(Ordering::Relaxed) {
                0 => 0,
                began => now.saturating_sub(began),
            };
            self.done[i].load(Ordering::Relaxed) + under_way
        })
    }
}

pin_project_lite::pin_project! {
    /// A future whose time to complete is counted as one of a direction's
    /// waits. It wraps the future in place (an `async fn` taking it would
    /// hold it twice: a flow's pumps are most of an idle flow's memory).
    pub struct Timed<'a, F> {
        #[pin]
        io: F,
        waits: &'a Waits,
        which: usize,
        began: u64,
    }
}

impl<'a, F: Future> Timed<'a, F> {
    fn new(waits: &'a Waits, which: usize, io: F) -> Timed<'a, F> {
        Timed {
            io,
            waits,
            which,
            began: 0,
        }
    }
}

impl<F: Future> Future for Timed<'_, F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        if *this.began == 0 {
            *this.began = this.waits.begin(*this.which);
        }
        let out = std::task::ready!(this.io.poll(cx));
        this.waits.end(*this.which, *this.began);
        std::task::Poll::Ready(out)
    }
}

/// The kernel's counts of a TCP socket (`TCP_INFO`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpCounts {
    /// Smoothed RTT, microseconds.
    pub rtt_us: u32,
    /// The receiver's window as last advertised, bytes.
    pub receive_window: u32,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes written and not yet sent.
    pub unsent: u32,
    /// Time busy sending, microseconds in all.
    pub busy_us: u64,
    /// Of it, limited by the receiver's window.
    pub rwnd_limited_us: u64,
    /// Of it, limited by the send buffer.
    pub sndbuf_limited_us: u64,
}

/// The kernel's counts of the TCP socket `fd`, which the caller keeps
/// open for the call (the pumps' own socket, read while they run: a
/// descriptor per flow is not spent on it).
pub fn tcp_counts(fd: RawFd) -> Option<TcpCounts> {
    // SAFETY: tcp_info is plain data; getsockopt writes at most `len`
    // bytes into it and says how many; `fd` is open (the caller's).
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then(|| TcpCounts {
        rtt_us: info.tcpi_rtt,
        receive_window: info.tcpi_snd_wnd,
        cwnd: u64::from(info.tcpi_snd_cwnd) * u64::from(info.tcpi_snd_mss),
        unsent: info.tcpi_notsent_bytes,
        busy_us: info.tcpi_busy_time,
        rwnd_limited_us: info.tcpi_rwnd_limited,
        sndbuf_limited_us: info.tcpi_sndbuf_limited,
    })
}

/// Where a direction's bytes come from and go to on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leg {
    /// Read from the LAN socket, written to the tunnel.
    LanToTunnel,
    /// Read from the tunnel, written to the LAN socket.
    TunnelToLan,
}

/// One direction's last second.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Second {
    /// Microseconds waited on the LAN socket, the tunnel and the codec.
    pub waited: [u64; 3],
    /// Bytes carried.
    pub bytes: u64,
    /// How long the second was, microseconds.
    pub span_us: u64,
}

/// What a flow's sampler kept: the counters at the last sample and the
/// second before it, per direction (to server, to client), and the LAN
/// socket's counts.
#[derive(Debug, Default)]
struct Kept {
    at: Option<Instant>,
    totals: [([u64; 3], u64); 2],
    recent: [Second; 2],
    tcp: Option<TcpCounts>,
    tcp_recent: Option<TcpCounts>,
}

/// Why a flow runs at its rate: its waits, its LAN socket and what the
/// sampler kept.
#[derive(Debug, Default)]
pub struct WhyState {
    /// Direction to the server.
    pub to_server: Waits,
    /// Direction to the client.
    pub to_client: Waits,
    /// The LAN socket's descriptor while the flow's pumps run (they
    /// close it only after taking it out of here, under this lock).
    lan: Mutex<Option<RawFd>>,
    /// Whether the LAN socket is the client's (an edge's flow) or the
    /// server's.
    lan_is_client: std::sync::OnceLock<bool>,
    kept: Mutex<Kept>,
}

impl WhyState {
    /// Lends the flow's LAN socket `fd` (the client's or the server's) to
    /// the sampler while the returned guard lives: the pumps hold it while
    /// they run and drop it before the socket is closed.
    pub fn lend_lan(&self, fd: RawFd, lan_is_client: bool) -> LanLoan<'_> {
        let _ = self.lan_is_client.set(lan_is_client);
        *self.lan.lock().unwrap_or_else(|e| e.into_inner()) = Some(fd);
        LanLoan(self)
    }

    /// Takes a sample at `now` of the waits and `bytes` (to server, to
    /// client); called about once a second by the flow table's sampler.
    pub fn sample(&self, now: Instant, bytes: [u64; 2]) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let totals = [
            (self.to_server.load(now), bytes[0]),
            (self.to_client.load(now), bytes[1]),
        ];
        if let Some(at) = kept.at {
            let span_us = now.saturating_duration_since(at).as_micros() as u64;
            for (i, (waited, carried)) in totals.iter().enumerate() {
                let (old_waited, old_bytes) = kept.totals[i];
                kept.recent[i] = Second {
                    waited: std::array::from_fn(|k| waited[k].saturating_sub(old_waited[k])),
                    bytes: carried.saturating_sub(old_bytes),
                    span_us,
                };
            }
        }
        // The kernel's counts, for a direction writing the LAN socket that
        // moved bytes or waited on it (an idle flow's socket is not read).
        let writes_lan = match self.lan_is_client() {
            Some(true) => 1,
            Some(false) => 0,
            None => return self.keep(&mut kept, now, totals, None),
        };
        let written = kept.recent[writes_lan];
        let first = kept.tcp.is_none();
        let tcp = if first || written.bytes > 0 || written.waited[Waits::LAN] > 0 {
            // Under the lock: the pumps close the socket only after taking
            // its descriptor out.
            let lan = self.lan.lock().unwrap_or_else(|e| e.into_inner());
            lan.and_then(tcp_counts)
        } else {
            None
        };
        self.keep(&mut kept, now, totals, tcp);
    }

    fn keep(
        &self,
        kept: &mut Kept,
        now: Instant,
        totals: [([u64; 3], u64); 2],
        tcp: Option<TcpCounts>,
    ) {
        kept.tcp_recent = match (kept.tcp, tcp) {
            (Some(old), Some(new)) => Some(TcpCounts {
                busy_us: new.busy_us.saturating_sub(old.busy_us),
                rwnd_limited_us: new.rwnd_limited_us.saturating_sub(old.rwnd_limited_us),
                sndbuf_limited_us: new.sndbuf_limited_us.saturating_sub(old.sndbuf_limited_us),
                ..new
            }),
            (_, new) => new,
        };
        kept.tcp = tcp;
        kept.totals = totals;
        kept.at = Some(now);
    }

    /// Whether the LAN socket is the client's; `None` before a TCP flow's
    /// pumps began (and for UDP flows).
    pub fn lan_is_client(&self) -> Option<bool> {
        self.lan_is_client.get().copied()
    }

    /// The last second of each direction (to server, to client) and the
    /// LAN socket's counts over it (the times as deltas).
    pub fn recent(&self) -> ([Second; 2], Option<TcpCounts>) {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        (kept.recent, kept.tcp_recent)
    }
}

/// The flow's LAN socket lent to the sampler; taken back when dropped.
#[derive(Debug)]
pub struct LanLoan<'a>(&'a WhyState);

impl Drop for LanLoan<'_> {
    fn drop(&mut self) {
        *self.0.lan.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// What binds a direction's rate now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Nothing moves and nobody waits on anything but the sender.
    Idle,
    /// The LAN sender (client or server) sends no faster.
    Sender,
    /// The LAN receiver stopped reading (its window is 0).
    Reader,
    /// The LAN receiver's window.
    ReceiveWindow,
    /// This node's socket send buffer.
    SendBuffer,
    /// The LAN hop's own congestion window.
    LanCongestion,
    /// The tunnel's congestion window and pacing (the tunnel is full).
    Tunnel,
    /// The stream's flow-control window (the tunnel has room; the peer's
    /// receiver holds the flow back).
    StreamWindow,
    /// This node's window budget (`--window-budget`) is spent: its peer
    /// may send no more to it.
    WindowBudget,
    /// The peer's side: what arrives from the tunnel (the peer's own
    /// `flows --why` says why).
    Peer,
    /// The codec's CPU on this node.
    Codec,
    /// The flow is passed through, not optimized.
    Policy,
}

impl Limit {
    /// Its name in `/flows` and `flows --why`.
    pub fn name(self) -> &'static str {
        match self {
            Limit::Idle => "idle",
            Limit::Sender => "sender",
            Limit::Reader => "reader",
            Limit::ReceiveWindow => "receive_window",
            Limit::SendBuffer => "send_buffer",
            Limit::LanCongestion => "lan_congestion",
            Limit::Tunnel => "tunnel",
            Limit::StreamWindow => "stream_window",
            Limit::WindowBudget => "window_budget",
            Limit::Peer => "peer",
            Limit::Codec => "codec",
            Limit::Policy => "policy",
        }
    }
}

/// The tunnel as the judge needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TunnelView {
    /// Whether the tunnel's sender had data waiting for its window in the
    /// last second (its controller's rounds were full).
    pub full: bool,
    /// This node's budget of receive windows is spent.
    pub budget_spent: bool,
}

/// The share of a second the codec must take to be a direction's limit.
const CODEC_BUSY: f64 = 0.3;

/// The limit that binds a direction whose bytes take `leg`, over `second`,
/// given the LAN socket's `tcp` counts (deltas over the second) and the
/// tunnel's state.
pub fn judge(leg: Leg, second: &Second, tcp: Option<&TcpCounts>, tunnel: &TunnelView) -> Limit {
    let span = second.span_us.max(1) as f64;
    let [lan, tunnel_wait, codec] = second.waited.map(|w| w as f64 / span);
    if codec > CODEC_BUSY && codec >= lan && codec >= tunnel_wait {
        return Limit::Codec;
    }
    let lan_bound = lan >= tunnel_wait;
    match (leg, lan_bound) {
        (Leg::LanToTunnel, true) if second.bytes == 0 => Limit::Idle,
        (Leg::LanToTunnel, true) => Limit::Sender,
        (Leg::LanToTunnel, false) if tunnel.full => Limit::Tunnel,
        (Leg::LanToTunnel, false) => Limit::StreamWindow,
        (Leg::TunnelToLan, false) if tunnel.budget_spent => Limit::WindowBudget,
        (Leg::TunnelToLan, false) if second.bytes == 0 => Limit::Idle,
        (Leg::TunnelToLan, false) => Limit::Peer,
        (Leg::TunnelToLan, true) => lan_sink(tcp, second),
    }
}

/// Which of the LAN receiver's limits holds a direction that waits on
/// writing its LAN socket.
fn lan_sink(tcp: Option<&TcpCounts>, second: &Second) -> Limit {
    let Some(tcp) = tcp else {
        return Limit::Reader;
    };
    if tcp.receive_window == 0 || second.bytes == 0 {
        return Limit::Reader;
    }
    let others = tcp
        .busy_us
        .saturating_sub(tcp.rwnd_limited_us + tcp.sndbuf_limited_us);
    if tcp.rwnd_limited_us >= tcp.sndbuf_limited_us && tcp.rwnd_limited_us >= others {
        Limit::ReceiveWindow
    } else if tcp.sndbuf_limited_us >= others {
        Limit::SendBuffer
    } else {
        Limit::LanCongestion
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(lan: u64, tunnel: u64, codec: u64, bytes: u64) -> Second {
        Second {
            waited: [lan, tunnel, codec],
            bytes,
            span_us: 1_000_000,
        }
    }

    #[test]
    fn a_direction_waiting_on_its_lan_source_is_its_sender_or_idle() {
        let t = TunnelView::default();
        let s = second(950_000, 10_000, 0, 125_000);
        assert_eq!(judge(Leg::LanToTunnel, &s, None, &t), Limit::Sender);
        let s = second(1_000_000, 0, 0, 0);
        assert_eq!(judge(Leg::LanToTunnel, &s, None, &t), Limit::Idle);
    }

    #[test]
    fn a_direction_waiting_on_the_tunnel_is_the_tunnel_when_full_else_the_stream_window() {
        let s = second(20_000, 900_000, 0, 5_000_000);
        let full = TunnelView {
            full: true,
            ..TunnelView::default()
        };
        assert_eq!(judge(Leg::LanToTunnel, &s, None, &full), Limit::Tunnel);
        let room = TunnelView::default();
        assert_eq!(
            judge(Leg::LanToTunnel, &s, None, &room),
            Limit::StreamWindow
        );
    }

    #[test]
    fn reading_the_tunnel_waits_on_the_peer_or_this_nodes_budget() {
        let s = second(10_000, 900_000, 0, 5_000_000);
        let t = TunnelView::default();
        assert_eq!(judge(Leg::TunnelToLan, &s, None, &t), Limit::Peer);
        let spent = TunnelView {
            budget_spent: true,
            ..TunnelView::default()
        };
        assert_eq!(
            judge(Leg::TunnelToLan, &s, None, &spent),
            Limit::WindowBudget
        );
    }

    #[test]
    fn writing_the_lan_names_the_receivers_limit_from_tcp_info() {
        let s = second(900_000, 10_000, 0, 1_000_000);
        let t = TunnelView::default();
        let tcp = |window, busy, rwnd, sndbuf| TcpCounts {
            receive_window: window,
            busy_us: busy,
            rwnd_limited_us: rwnd,
            sndbuf_limited_us: sndbuf,
            ..TcpCounts::default()
        };
        let limit = |c: TcpCounts| judge(Leg::TunnelToLan, &s, Some(&c), &t);
        assert_eq!(limit(tcp(0, 900_000, 900_000, 0)), Limit::Reader);
        assert_eq!(limit(tcp(8192, 900_000, 800_000, 0)), Limit::ReceiveWindow);
        assert_eq!(limit(tcp(1 << 20, 900_000, 0, 700_000)), Limit::SendBuffer);
        assert_eq!(limit(tcp(1 << 20, 900_000, 0, 0)), Limit::LanCongestion);
        let stalled = second(1_000_000, 0, 0, 0);
        assert_eq!(
            judge(Leg::TunnelToLan, &stalled, Some(&tcp(65535, 0, 0, 0)), &t),
            Limit::Reader
        );
    }

    #[test]
    fn the_codec_binds_when_it_takes_most_of_the_second() {
        let s = second(100_000, 100_000, 800_000, 2_000_000);
        let t = TunnelView::default();
        assert_eq!(judge(Leg::LanToTunnel, &s, None, &t), Limit::Codec);
        assert_eq!(judge(Leg::TunnelToLan, &s, None, &t), Limit::Codec);
    }

    #[test]
    fn a_sockets_counts_are_read() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let counts = tcp_counts(client.as_raw_fd()).unwrap();
        assert!(counts.receive_window > 0, "{counts:?}");
        assert!(counts.cwnd > 0, "{counts:?}");
    }
}
