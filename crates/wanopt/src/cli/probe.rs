//! `wanopt probe`: a path's round-trip time and, for each direction, its
//! loss, reordering, duplication and bottleneck rate, measured with
//! numbered UDP datagrams echoed by `wanopt probe --listen` at the far end
//! (the format and the reflector's bookkeeping are `wanopt_proto::probe`).
//!
//! The rate comes from packet trains: datagrams sent back to back leave
//! the path's narrowest link spaced by their transmission time there, so
//! a train's bytes over the time between its first and last arrival is
//! that link's rate (IP bytes, like `wanopt window --rate`). Arrival times
//! are the kernel's receive timestamps (`SO_TIMESTAMPNS`) at each end, and
//! the median over several trains discards the ones cross traffic spread
//! out or squeezed together.

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::io::{ErrorKind, IoSliceMut};
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use wanopt_netem::units::parse_duration;
use wanopt_proto::probe::{
    set_send_offset, Arrivals, Kind, Packet, Reflector, HEADER_LEN, MAX_SEQ, MAX_TRAIN,
};

use super::path::rate_text;

/// Arguments of `wanopt probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The reflector to probe (`HOST:PORT`, where `wanopt probe --listen`
    /// runs).
    #[arg(required_unless_present = "listen", conflicts_with = "listen")]
    pub target: Option<String>,
    /// Be the reflector: answer probes on this UDP address
    /// (`0.0.0.0:7009`) until interrupted.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Probes to send.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub count: u32,
    /// Time between probes (`10ms`).
    #[arg(long, default_value = "10ms", value_name = "TIME")]
    pub interval: String,
    /// UDP payload bytes of each probe and echo (44 to 1472).
    #[arg(long, default_value_t = 200, value_name = "BYTES")]
    pub size: usize,
    /// Packet trains sent each way after the probes, to measure the
    /// bottleneck rate (0: none).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub trains: u32,
    /// Datagrams in each train (2 to 64); a train should fit the path's
    /// smallest queue, or it measures drops.
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub train_len: u32,
    /// UDP payload bytes of each train datagram (44 to 1472).
    #[arg(long, default_value_t = 1472, value_name = "BYTES")]
    pub train_size: usize,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One direction's arrivals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    /// Datagrams sent.
    pub sent: u32,
    /// Distinct datagrams that arrived.
    pub received: u32,
    /// Sent minus received.
    pub lost: u32,
    /// Lost as a share of sent, percent.
    pub loss_percent: f64,
    /// Arrivals after a higher-numbered datagram.
    pub reordered: u32,
    /// Datagrams that arrived more than once.
    pub duplicated: u32,
}

impl Direction {
    fn new(sent: u32, received: u32, reordered: u32, duplicated: u32) -> Direction {
        let lost = sent.saturating_sub(received);
        Direction {
            sent,
            received,
            lost,
            loss_percent: if sent == 0 {
                0.0
            } else {
                f64::from(lost) * 100.0 / f64::from(sent)
            },
            reordered,
            duplicated,
        }
    }
}

/// Round-trip times of the probes that came back, milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rtt {
    /// Smallest.
    pub min_ms: f64,
    /// Median.
    pub median_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Mean difference between consecutive probes' RTTs.
    pub jitter_ms: f64,
}

/// What `wanopt probe` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The reflector.
    pub target: String,
    /// Probes sent.
    pub probes: u32,
    /// Payload bytes per datagram.
    pub size: usize,
    /// Time between probes, milliseconds.
    pub interval_ms: f64,
    /// Round-trip times (absent when no probe came back).
    pub rtt: Option<Rtt>,
    /// Here to the reflector (absent when the reflector's final counters
    /// never arrived).
    pub forward: Option<Direction>,
    /// The reflector to here.
    pub reverse: Option<Direction>,
    /// The bottleneck rate each way (absent with `--trains 0`).
    pub rate: Option<Rates>,
    /// What may make these figures the probe's own rather than the
    /// path's (probes that load a bottleneck the trains measured).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// What the packet trains measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Trains sent.
    pub trains: u32,
    /// Datagrams per train.
    pub train_len: u32,
    /// UDP payload bytes per train datagram.
    pub train_size: usize,
    /// Here to the reflector (absent when no train gave an estimate).
    pub forward: Option<RateEstimate>,
    /// The reflector to here.
    pub reverse: Option<RateEstimate>,
}

/// One direction's rate over the trains that gave an estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateEstimate {
    /// Median, bits per second of IP packets.
    pub median_bps: f64,
    /// Smallest train estimate.
    pub min_bps: f64,
    /// Largest train estimate.
    pub max_bps: f64,
    /// Trains that gave an estimate (at least two datagrams arrived, at
    /// different times).
    pub trains: u32,
    /// The sender (this host forward, the reflector reverse) put the
    /// trains on the wire about this fast or slower: the path may be
    /// faster.
    pub sender_limited: bool,
}

impl RateEstimate {
    /// The estimate of per-train rates (`None` without any).
    fn of(mut rates: Vec<f64>, sender_limited: bool) -> Option<RateEstimate> {
        if rates.is_empty() {
            return None;
        }
        rates.sort_by(f64::total_cmp);
        Some(RateEstimate {
            median_bps: quantile(&rates, 0.5).round(),
            min_bps: rates[0].round(),
            max_bps: rates[rates.len() - 1].round(),
            trains: rates.len() as u32,
            sender_limited,
        })
    }
}

/// Bits per second of `n` datagrams of `wire` IP bytes each that arrived
/// `span_ns` apart from first to last: the first one's own transmission
/// ended when the clock started, so `n - 1` of them count.
pub fn train_rate(n: usize, wire: usize, span_ns: u64) -> Option<f64> {
    (n >= 2 && span_ns > 0).then(|| ((n - 1) * wire * 8) as f64 * 1e9 / span_ns as f64)
}

/// Quantile `q` of sorted values (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// RTT statistics of per-probe round trips (`None`: never came back).
pub fn rtt_stats(rtts: &[Option<f64>]) -> Option<Rtt> {
    let mut sorted: Vec<f64> = rtts.iter().flatten().copied().collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let pairs: Vec<f64> = rtts
        .windows(2)
        .filter_map(|w| match (w[0], w[1]) {
            (Some(a), Some(b)) => Some((b - a).abs()),
            _ => None,
        })
        .collect();
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    Some(Rtt {
        min_ms: round(sorted[0]),
        median_ms: round(quantile(&sorted, 0.5)),
        p90_ms: round(quantile(&sorted, 0.9)),
        p99_ms: round(quantile(&sorted, 0.99)),
        max_ms: round(sorted[sorted.len() - 1]),
        jitter_ms: if pairs.is_empty() {
            0.0
        } else {
            round(pairs.iter().sum::<f64>() / pairs.len() as f64)
        },
    })
}

fn random_session() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Checks the flags of a probing run: the target, the interval.
pub fn parse(args: &ProbeArgs) -> Result<(SocketAddr, Duration)> {
    let target = args.target.as_deref().unwrap_or_default();
    let addr = target
        .to_socket_addrs()
        .with_context(|| format!("probe target {target:?} (expected HOST:PORT)"))?
        .next()
        .with_context(|| format!("probe target {target:?} resolves to no address"))?;
    let interval = parse_duration(&args.interval).context("--interval")?;
    if !(HEADER_LEN..=1472).contains(&args.size) {
        bail!("--size: {} bytes is outside {HEADER_LEN}..=1472", args.size);
    }
    if args.count == 0 || args.count > MAX_SEQ {
        bail!("--count: {} is outside 1..={MAX_SEQ}", args.count);
    }
    if args.trains > 1000 {
        bail!("--trains: {} is more than 1000", args.trains);
    }
    if !(2..=MAX_TRAIN).contains(&args.train_len) {
        bail!("--train-len: {} is outside 2..={MAX_TRAIN}", args.train_len);
    }
    if !(HEADER_LEN..=1472).contains(&args.train_size) {
        bail!(
            "--train-size: {} bytes is outside {HEADER_LEN}..=1472",
            args.train_size
        );
    }
    Ok((addr, interval))
}

/// Runs a reflector on `addr` until the process is interrupted.
pub fn listen(addr: SocketAddr) -> Result<()> {
    let sock = UdpSocket::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    eprintln!(
        "wanopt probe: answering probes on {}",
        sock.local_addr().unwrap_or(addr)
    );
    reflect(&sock)
}

/// Answers probes arriving on `sock` until an error other than an
/// interruption or a stale ICMP error.
fn reflect(sock: &UdpSocket) -> Result<()> {
    stamp_arrivals(sock);
    let mut reflector = Reflector::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from, at) = match recv_stamped(sock, &mut buf) {
            Ok((n, Some(from), at)) => (n, from, at),
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // An ICMP error for an earlier answer; the next datagram is fine.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e).context("receiving probes"),
        };
        // A train's answers go back to back, as the train came, each
        // saying when it left (after the first) so the prober can tell
        // this host's own pace from the path's.
        let first = Instant::now();
        for mut answer in reflector.handle(&buf[..n], at).unwrap_or_default() {
            if Packet::parse(&answer).is_ok_and(|p| p.kind == Kind::TrainBack) {
                set_send_offset(&mut answer, first.elapsed().as_nanos() as u64);
            }
            let _ = sock.send_to(&answer, from);
        }
    }
}

/// Asks the kernel to stamp each datagram's arrival (`SO_TIMESTAMPNS`);
/// without it [`recv_stamped`] reads the clock itself.
fn stamp_arrivals(sock: &UdpSocket) {
    let _ = setsockopt(sock, sockopt::ReceiveTimestampns, &true);
}

/// Nanoseconds since the Unix epoch now (the kernel stamps arrivals on
/// the same clock).
fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Receives one datagram: its length, sender, and arrival time in
/// nanoseconds since the Unix epoch (the kernel's stamp when it gave one,
/// else the time now). Honours the socket's read timeout.
fn recv_stamped(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<SocketAddr>, u64)> {
    let mut iov = [IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(nix::sys::time::TimeSpec);
    let msg = recvmsg::<SockaddrStorage>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::empty(),
    )
    .map_err(std::io::Error::from)?;
    let mut at = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestampns(t) = c {
                at = Some(t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64);
            }
        }
    }
    let from = msg.address.and_then(|a| {
        a.as_sockaddr_in()
            .map(|v4| SocketAddr::from(std::net::SocketAddrV4::from(*v4)))
            .or_else(|| {
                a.as_sockaddr_in6()
                    .map(|v6| SocketAddr::from(std::net::SocketAddrV6::from(*v6)))
            })
    });
    Ok((msg.bytes, from, at.unwrap_or_else(wall_ns)))
}

/// Probes `addr`: sends the probes, collects the echoes, asks for the
/// reflector's counters.
pub fn probe(args: &ProbeArgs, addr: SocketAddr, interval: Duration) -> Result<Report> {
    let local: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let sock = UdpSocket::bind(local).context("cannot open a UDP socket")?;
    sock.connect(addr)
        .with_context(|| format!("cannot reach {addr}"))?;
    let session = random_session();
    let count = args.count;
    let start = Instant::now();
    // Send times of the probes sent so far, by number.
    let mut sent_at: Vec<Duration> = Vec::with_capacity(count as usize);
    let mut rtts: Vec<Option<f64>> = vec![None; count as usize];
    let mut echoes = Arrivals::default();
    let mut buf = vec![0u8; 65_536];
    let mut next = start;
    let mut seq = 0u32;
    let mut max_rtt = Duration::ZERO;
    let mut refused = false;
    let packet = |kind, seq, sent_ns| Packet {
        kind,
        seq,
        echo_seq: 0,
        sent_ns,
        received: 0,
        duplicates: 0,
        reordered: 0,
        session,
    };
    let mut last_send = start;
    // A run longer than a few seconds says how far it got, on a terminal.
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut next_progress = start + Duration::from_secs(5);
    loop {
        let now = Instant::now();
        if progress && now >= next_progress {
            eprintln!(
                "wanopt probe: {seq} of {count} probes sent, {} echoes back",
                echoes.received
            );
            next_progress += Duration::from_secs(5);
        }
        if seq < count && now >= next {
            let t = now - start;
            let p = packet(Kind::Probe, seq, t.as_nanos() as u64);
            match sock.send(&p.emit(args.size)) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => refused = true,
                Err(e) => return Err(e).context("sending a probe"),
            }
            sent_at.push(t);
            seq += 1;
            next += interval;
            last_send = now;
            continue;
        }
        // After the last probe, wait for stragglers: three of the slowest
        // round trips seen, at least a second.
        let deadline = if seq < count {
            next
        } else {
            last_send + (max_rtt * 3).max(Duration::from_secs(1))
        };
        if seq >= count && now >= deadline {
            break;
        }
        let wait = deadline
            .saturating_duration_since(now)
            .max(Duration::from_micros(50));
        sock.set_read_timeout(Some(wait))?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                let Ok(p) = Packet::parse(&buf[..n]) else {
                    continue;
                };
                if p.session != session || p.kind != Kind::Echo {
                    continue;
                }
                echoes.record(p.echo_seq);
                let i = p.seq as usize;
                if let (Some(at), Some(None)) = (sent_at.get(i), rtts.get(i)) {
                    let rtt = start.elapsed().saturating_sub(*at);
                    max_rtt = max_rtt.max(rtt);
                    rtts[i] = Some(rtt.as_secs_f64() * 1000.0);
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => refused = true,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("receiving echoes"),
        }
    }
    if echoes.received == 0 {
        if refused {
            bail!("{addr} refused the probes (ICMP port unreachable): is `wanopt probe --listen` running there?");
        }
        bail!("no answer from {addr}: is `wanopt probe --listen` running there, and is UDP let through?");
    }
    // The reflector's counters: asked up to five times.
    let wait = (max_rtt * 3).max(Duration::from_millis(500));
    let mut report = None;
    'ask: for _ in 0..5 {
        let _ = sock.send(&packet(Kind::ReportRequest, 0, 0).emit(HEADER_LEN));
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            sock.set_read_timeout(Some(left.max(Duration::from_micros(50))))?;
            if let Ok(n) = sock.recv(&mut buf) {
                if let Ok(p) = Packet::parse(&buf[..n]) {
                    if p.session == session && p.kind == Kind::Report {
                        report = Some(p);
                        break 'ask;
                    }
                }
            }
        }
    }
    let (forward, reverse) = match report {
        Some(r) => (
            Some(Direction::new(count, r.received, r.reordered, r.duplicates)),
            Some(Direction::new(
                r.echo_seq,
                echoes.received,
                echoes.reordered,
                echoes.duplicates,
            )),
        ),
        None => (None, None),
    };
    let rate = (args.trains > 0).then(|| trains(&sock, args, session, addr, max_rtt));
    let mut report = Report {
        target: addr.to_string(),
        probes: count,
        size: args.size,
        interval_ms: interval.as_secs_f64() * 1000.0,
        rtt: rtt_stats(&rtts),
        forward,
        reverse,
        rate,
        warnings: Vec::new(),
    };
    report.warnings = load_warnings(&report, ip_overhead(addr));
    Ok(report)
}

/// IP and UDP header bytes of a datagram to `addr`.
fn ip_overhead(addr: SocketAddr) -> usize {
    if addr.is_ipv4() {
        28
    } else {
        48
    }
}

/// Share of a bottleneck the probes may take before their own queue shows
/// in the RTT and loss once other traffic shares the link.
const PROBE_LOAD_WARN: f64 = 0.5;

/// Share of the slower bottleneck the suggested `--interval` loads.
const PROBE_LOAD_SUGGESTED: f64 = 0.25;

/// Warnings for each direction whose bottleneck (as the trains measured
/// it, and not the trains' sender) the probes, `overhead` IP and UDP
/// bytes on top of their payload, load to [`PROBE_LOAD_WARN`] or more:
/// probes above the bottleneck's rate queue behind each other until the
/// queue overflows, and the RTT and loss measured are then the probe's.
/// Echoes are as large as probes, so both directions carry the same load.
pub fn load_warnings(r: &Report, overhead: usize) -> Vec<String> {
    let Some(rates) = &r.rate else {
        return Vec::new();
    };
    if r.interval_ms.is_nan() || r.interval_ms <= 0.0 {
        return Vec::new();
    }
    let wire = (r.size + overhead) as f64;
    let load = wire * 8.0 * 1000.0 / r.interval_ms;
    let measured: Vec<(&str, f64)> = [("forward", &rates.forward), ("reverse", &rates.reverse)]
        .into_iter()
        .filter_map(|(name, e)| {
            let e = e.as_ref()?;
            (!e.sender_limited && e.median_bps > 0.0).then_some((name, e.median_bps))
        })
        .collect();
    let slowest = measured
        .iter()
        .map(|&(_, bps)| bps)
        .fold(f64::INFINITY, f64::min);
    // The interval that loads the slower bottleneck to PROBE_LOAD_SUGGESTED,
    // rounded up to a whole millisecond.
    let suggested_ms = (wire * 8.0 * 1000.0 / (PROBE_LOAD_SUGGESTED * slowest)).ceil();
    measured
        .iter()
        .filter(|&&(_, bps)| load >= PROBE_LOAD_WARN * bps)
        .map(|&(name, bps)| {
            let what = if load >= bps {
                "exceed it: they queue behind each other until the queue overflows, so the RTT and this direction's loss are mostly the probe's own"
            } else {
                "queue behind each other as soon as other traffic shares it: the RTT and this direction's loss may include the probe's own queueing"
            };
            format!(
                "the probes ({} of {} bytes every {} ms) are {:.0}% of the {name} bottleneck ({}) and {what}; probe with --interval {suggested_ms}ms or more",
                rate_text(load),
                r.size,
                r.interval_ms,
                load * 100.0 / bps,
                rate_text(bps),
            )
        })
        .collect()
}

/// Sends `--trains` trains, one at a time, and estimates each
/// direction's rate from their arrival times.
fn trains(
    sock: &UdpSocket,
    args: &ProbeArgs,
    session: u64,
    addr: SocketAddr,
    max_rtt: Duration,
) -> Rates {
    stamp_arrivals(sock);
    // IP and UDP headers: the bytes a link carries per datagram.
    let wire = args.train_size + if addr.is_ipv4() { 28 } else { 48 };
    let len = args.train_len;
    // A train is over when nothing of it arrived for this long.
    let quiet = (max_rtt * 3).max(Duration::from_secs(1));
    let packet = |kind, seq, id| Packet {
        kind,
        seq,
        echo_seq: id,
        sent_ns: 0,
        received: len,
        duplicates: 0,
        reordered: 0,
        session,
    };
    let mut buf = vec![0u8; 65_536];
    let (mut forward, mut reverse) = (Vec::new(), Vec::new());
    // How fast each end put its trains on the wire.
    let (mut sent_here, mut sent_there) = (Vec::new(), Vec::new());
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let started = Instant::now();
    let mut next_progress = started + Duration::from_secs(5);
    for id in 0..args.trains {
        if progress && Instant::now() >= next_progress {
            eprintln!("wanopt probe: train {id} of {}", args.trains);
            next_progress += Duration::from_secs(5);
        }
        let datagrams: Vec<Vec<u8>> = (0..len)
            .map(|i| packet(Kind::Train, i, id).emit(args.train_size))
            .collect();
        let first = Instant::now();
        for d in &datagrams {
            let _ = sock.send(d);
        }
        let send_span = first.elapsed();
        let _ = sock.send(&packet(Kind::TrainEnd, 0, id).emit(HEADER_LEN));
        // (reflector's receive time, ours) of each answer of this train.
        let mut seen = vec![false; len as usize];
        let (mut there, mut here) = (Vec::new(), Vec::new());
        let mut there_send_span = 0u64;
        let mut expected = len as usize;
        let mut last_heard = Instant::now();
        let give_up = last_heard + Duration::from_secs(30);
        while here.len() < expected {
            let now = Instant::now();
            let until = (last_heard + quiet).min(give_up);
            if now >= until {
                break;
            }
            let _ = sock.set_read_timeout(Some((until - now).max(Duration::from_micros(50))));
            let Ok((n, _, at)) = recv_stamped(sock, &mut buf) else {
                continue;
            };
            let Ok(p) = Packet::parse(&buf[..n]) else {
                continue;
            };
            let fresh = seen.get(p.seq as usize).is_some_and(|s| !s);
            if p.session != session || p.kind != Kind::TrainBack || p.echo_seq != id || !fresh {
                continue;
            }
            seen[p.seq as usize] = true;
            last_heard = Instant::now();
            expected = (p.received as usize).min(len as usize);
            there.push(p.sent_ns);
            here.push(at);
            there_send_span = there_send_span.max(u64::from(p.duplicates));
        }
        let span = |t: &[u64]| {
            let (lo, hi) = (t.iter().min(), t.iter().max());
            lo.zip(hi).map_or(0, |(lo, hi)| hi - lo)
        };
        if let Some(r) = train_rate(there.len(), wire, span(&there)) {
            forward.push(r);
        }
        if let Some(r) = train_rate(here.len(), wire, span(&here)) {
            reverse.push(r);
        }
        sent_here.push(
            train_rate(len as usize, wire, send_span.as_nanos() as u64).unwrap_or(f64::INFINITY),
        );
        if here.len() >= 2 {
            sent_there.push(train_rate(here.len(), wire, there_send_span).unwrap_or(f64::INFINITY));
        }
    }
    let (forward_limited, reverse_limited) = (
        sender_limited(&forward, &sent_here),
        sender_limited(&reverse, &sent_there),
    );
    Rates {
        trains: args.trains,
        train_len: len,
        train_size: args.train_size,
        forward: RateEstimate::of(forward, forward_limited),
        reverse: RateEstimate::of(reverse, reverse_limited),
    }
}

/// Whether arrivals came about as fast as their sender sent (medians
/// within 20%): then they measured the sender, and the path is at least
/// that fast.
fn sender_limited(arrived: &[f64], sent: &[f64]) -> bool {
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        quantile(&v, 0.5)
    };
    !arrived.is_empty() && !sent.is_empty() && median(arrived) >= 0.8 * median(sent)
}

fn direction_line(d: &Direction) -> String {
    format!(
        "{} of {} lost ({:.2}%), {} reordered, {} duplicated",
        d.lost, d.sent, d.loss_percent, d.reordered, d.duplicated
    )
}

/// The report for people.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "probe {}: {} probes of {} bytes every {} ms",
        r.target, r.probes, r.size, r.interval_ms
    );
    if let Some(t) = &r.rtt {
        let _ = writeln!(
            out,
            "rtt: min {:.2} ms, median {:.2}, p90 {:.2}, p99 {:.2}, max {:.2}; jitter {:.2} ms",
            t.min_ms, t.median_ms, t.p90_ms, t.p99_ms, t.max_ms, t.jitter_ms
        );
    }
    match (&r.forward, &r.reverse) {
        (Some(f), Some(b)) => {
            let _ = writeln!(out, "forward (here to {}): {}", r.target, direction_line(f));
            let _ = writeln!(out, "reverse ({} to here): {}", r.target, direction_line(b));
        }
        _ => {
            let _ = writeln!(
                out,
                "loss per direction: unknown (the reflector's counters never arrived)"
            );
        }
    }
    if let Some(rates) = &r.rate {
        let _ = writeln!(out, "{}", rate_line(rates));
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

fn estimate_text(e: &Option<RateEstimate>) -> String {
    match e {
        None => "unknown".into(),
        Some(e) => format!(
            "{}{} ({} to {})",
            if e.sender_limited { "at least " } else { "" },
            rate_text(e.median_bps),
            rate_text(e.min_bps),
            rate_text(e.max_bps)
        ),
    }
}

/// The bottleneck-rate line of the report.
fn rate_line(r: &Rates) -> String {
    if r.forward.is_none() && r.reverse.is_none() {
        return format!(
            "bottleneck rate: unknown (none of {} trains came back: a reflector older than packet trains does not answer them)",
            r.trains
        );
    }
    let count = |e: &Option<RateEstimate>| e.as_ref().map_or(0, |e| e.trains);
    format!(
        "bottleneck rate (IP bytes; median of {} and {} trains of {} x {} bytes, range): forward {}, reverse {}",
        count(&r.forward),
        count(&r.reverse),
        r.train_len,
        r.train_size,
        estimate_text(&r.forward),
        estimate_text(&r.reverse)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_statistics() {
        let rtts = [Some(10.0), Some(12.0), None, Some(11.0), Some(30.0)];
        let s = rtt_stats(&rtts).unwrap_or_else(|| panic!("four round trips"));
        assert_eq!((s.min_ms, s.median_ms, s.max_ms), (10.0, 11.0, 30.0));
        assert_eq!((s.p90_ms, s.p99_ms), (30.0, 30.0));
        // |12-10| and |30-11|; the pairs around the lost probe do not count.
        assert_eq!(s.jitter_ms, 10.5);
        assert_eq!(rtt_stats(&[None, None]), None);
    }

    #[test]
    fn directions_count_losses() {
        let d = Direction::new(1000, 970, 2, 1);
        assert_eq!((d.lost, d.loss_percent), (30, 3.0));
        assert_eq!(Direction::new(0, 0, 0, 0).loss_percent, 0.0);
        assert_eq!(Direction::new(5, 6, 0, 0).lost, 0);
        assert_eq!(
            direction_line(&d),
            "30 of 1000 lost (3.00%), 2 reordered, 1 duplicated"
        );
    }

    /// A report of the waas-3g link (384 kbit/s up, 2 Mbit/s down) probed
    /// with 200-byte probes every `interval_ms`.
    fn three_g(interval_ms: f64, reverse_sender_limited: bool) -> Report {
        let estimate = |bps: f64, sender_limited| RateEstimate {
            median_bps: bps,
            min_bps: bps,
            max_bps: bps,
            trains: 10,
            sender_limited,
        };
        Report {
            target: "192.0.2.7:7009".into(),
            probes: 1000,
            size: 200,
            interval_ms,
            rtt: rtt_stats(&[Some(150.0)]),
            forward: Some(Direction::new(1000, 560, 0, 0)),
            reverse: Some(Direction::new(560, 560, 0, 0)),
            rate: Some(Rates {
                trains: 10,
                train_len: 16,
                train_size: 1472,
                forward: Some(estimate(384e3, false)),
                reverse: Some(estimate(2e6, reverse_sender_limited)),
            }),
            warnings: Vec::new(),
        }
    }

    /// Probes above a bottleneck's rate are warned about, with the
    /// interval that would not load it; probes well under it are not.
    #[test]
    fn probes_that_load_a_bottleneck_are_warned_about() {
        // 228 IP bytes every 2 ms: 912 kbit/s, 237% of the uplink and 46%
        // of the downlink.
        let w = load_warnings(&three_g(2.0, false), 28);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(
            w[0],
            "the probes (912 kbit/s of 200 bytes every 2 ms) are 238% of the forward bottleneck \
             (384 kbit/s) and exceed it: they queue behind each other until the queue overflows, \
             so the RTT and this direction's loss are mostly the probe's own; probe with \
             --interval 19ms or more"
        );
        // Every 4 ms: 456 kbit/s, still above the uplink.
        assert!(load_warnings(&three_g(4.0, false), 28)[0].contains("119% of the forward"));
        // Every 6 ms: 304 kbit/s, 79% of the uplink: queues with others.
        let w = load_warnings(&three_g(6.0, false), 28);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("79% of the forward") && w[0].contains("may include"),
            "{w:?}"
        );
        // The default 10 ms: 182 kbit/s, under half of either.
        assert!(load_warnings(&three_g(10.0, false), 28).is_empty());
        // Every 0.5 ms loads the downlink too (3.6 Mbit/s).
        let w = load_warnings(&three_g(0.5, false), 28);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[1].contains("of the reverse bottleneck (2 Mbit/s)"),
            "{w:?}"
        );
        // A sender-limited estimate is not the bottleneck's: no warning on
        // it, and the interval is suggested from the uplink alone.
        let w = load_warnings(&three_g(0.5, true), 28);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("--interval 19ms"), "{w:?}");
        // Without trains there is no rate to compare with.
        let mut no_trains = three_g(2.0, false);
        no_trains.rate = None;
        assert!(load_warnings(&no_trains, 28).is_empty());
        // The text report ends with them.
        let mut r = three_g(2.0, false);
        r.warnings = load_warnings(&r, 28);
        assert!(
            text(&r).ends_with("--interval 19ms or more\n"),
            "{}",
            text(&r)
        );
        assert!(text(&r).contains("\nwarning: the probes (912 kbit/s"));
    }

    /// Without the reflector's counters the report still says what was
    /// sent, and that the per-direction loss is unknown.
    #[test]
    fn a_report_without_the_reflectors_counters() {
        let r = Report {
            target: "192.0.2.1:7009".into(),
            probes: 1000,
            size: 200,
            interval_ms: 10.0,
            rtt: rtt_stats(&[Some(60.0)]),
            forward: None,
            reverse: None,
            rate: None,
            warnings: Vec::new(),
        };
        let t = text(&r);
        assert!(
            t.starts_with("probe 192.0.2.1:7009: 1000 probes of 200 bytes every 10 ms\n"),
            "{t}"
        );
        assert!(t.contains("loss per direction: unknown"), "{t}");
    }

    fn args(target: &str, interval: &str, size: usize, count: u32) -> ProbeArgs {
        ProbeArgs {
            target: Some(target.into()),
            listen: None,
            count,
            interval: interval.into(),
            size,
            trains: 3,
            train_len: 8,
            train_size: 1000,
            json: false,
        }
    }

    /// A loopback UDP address nothing listens on (bound, then released).
    fn free_addr() -> SocketAddr {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        sock.local_addr().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn bad_flags_are_errors() {
        for (a, needle) in [
            (args("nowhere", "10ms", 200, 10), "expected HOST:PORT"),
            (args("127.0.0.1:9", "often", 200, 10), "--interval"),
            (args("127.0.0.1:9", "10ms", 20, 10), "--size"),
            (args("127.0.0.1:9", "10ms", 2000, 10), "--size"),
            (args("127.0.0.1:9", "10ms", 200, 0), "--count"),
            (
                ProbeArgs {
                    train_len: 1,
                    ..args("127.0.0.1:9", "10ms", 200, 10)
                },
                "--train-len",
            ),
            (
                ProbeArgs {
                    train_len: 65,
                    ..args("127.0.0.1:9", "10ms", 200, 10)
                },
                "--train-len",
            ),
            (
                ProbeArgs {
                    train_size: 1500,
                    ..args("127.0.0.1:9", "10ms", 200, 10)
                },
                "--train-size",
            ),
            (
                ProbeArgs {
                    trains: 5000,
                    ..args("127.0.0.1:9", "10ms", 200, 10)
                },
                "--trains",
            ),
        ] {
            let e = parse(&a)
                .err()
                .map(|e| format!("{e:#}"))
                .unwrap_or_default();
            assert!(e.contains(needle), "{needle:?} not in {e:?}");
        }
    }

    /// A reflector on loopback: nothing lost, nothing reordered, every
    /// counter agrees.
    #[test]
    fn probing_a_reflector_on_loopback() {
        // Bound here, so nothing else can take the port before it answers.
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = sock.local_addr().unwrap_or_else(|e| panic!("{e}"));
        std::thread::spawn(move || reflect(&sock));
        let args = args(&addr.to_string(), "1ms", 100, 200);
        let (addr, interval) = parse(&args).unwrap_or_else(|e| panic!("{e}"));
        let r = probe(&args, addr, interval).unwrap_or_else(|e| panic!("{e}"));
        let f = r.forward.clone().unwrap_or_else(|| panic!("no report"));
        let b = r.reverse.clone().unwrap_or_else(|| panic!("no report"));
        assert_eq!((f.sent, f.received, f.lost, f.duplicated), (200, 200, 0, 0));
        assert_eq!((b.sent, b.received, b.lost, b.duplicated), (200, 200, 0, 0));
        let rtt = r.rtt.clone().unwrap_or_else(|| panic!("no rtt"));
        assert!(rtt.min_ms > 0.0 && rtt.max_ms < 100.0, "{rtt:?}");
        assert!(
            text(&r).contains("forward (here to 127.0.0.1:"),
            "{}",
            text(&r)
        );
        // Every train came back whole; loopback is fast but not infinitely.
        let rates = r.rate.clone().unwrap_or_else(|| panic!("no rates"));
        for e in [&rates.forward, &rates.reverse] {
            let e = e
                .clone()
                .unwrap_or_else(|| panic!("no estimate: {rates:?}"));
            assert_eq!(e.trains, 3, "{rates:?}");
            assert!(
                e.min_bps > 1e6 && e.min_bps <= e.median_bps && e.median_bps <= e.max_bps,
                "{e:?}"
            );
        }
        assert!(
            text(&r)
                .contains("bottleneck rate (IP bytes; median of 3 and 3 trains of 8 x 1000 bytes"),
            "{}",
            text(&r)
        );
    }

    #[test]
    fn train_rates_count_the_gaps_between_arrivals() {
        // 16 datagrams of 1500 bytes, 6 ms apart: 2 Mbit/s.
        assert_eq!(train_rate(16, 1500, 15 * 6_000_000), Some(2e6));
        assert_eq!(train_rate(1, 1500, 0), None);
        assert_eq!(train_rate(5, 1500, 0), None);
        let e = RateEstimate::of(vec![3e6, 1e6, 2e6], false).unwrap_or_else(|| panic!("three"));
        assert_eq!(
            (e.median_bps, e.min_bps, e.max_bps, e.trains),
            (2e6, 1e6, 3e6, 3)
        );
        assert_eq!(RateEstimate::of(vec![], false), None);
        let rates = Rates {
            trains: 10,
            train_len: 16,
            train_size: 1472,
            forward: RateEstimate::of(vec![384e3], true),
            reverse: None,
        };
        assert_eq!(
            rate_line(&rates),
            "bottleneck rate (IP bytes; median of 1 and 0 trains of 16 x 1472 bytes, range): forward at least 384 kbit/s (384 kbit/s to 384 kbit/s), reverse unknown"
        );
        let none = Rates {
            forward: None,
            ..rates
        };
        assert!(rate_line(&none).contains("none of 10 trains came back"));
        // Arrivals as fast as the sends measured the sender.
        assert!(sender_limited(&[9e9, 8e9, 1e9], &[9.5e9, 9e9]));
        assert!(!sender_limited(&[2e6, 2e6], &[9e9]));
        assert!(!sender_limited(&[], &[1.0]));
        assert!(!sender_limited(&[2e6], &[f64::INFINITY]));
    }

    #[test]
    fn no_reflector_is_a_clear_error() {
        let addr = free_addr();
        let args = args(&addr.to_string(), "1ms", 100, 5);
        let e = probe(&args, addr, Duration::from_millis(1))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("wanopt probe --listen"), "{e}");
    }
}
