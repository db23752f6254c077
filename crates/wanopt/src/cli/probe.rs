//! `wanopt probe`: a path's round-trip time and, for each direction, its
//! loss, reordering and duplication, measured with numbered UDP datagrams
//! echoed by `wanopt probe --listen` at the far end (the format and the
//! reflector's bookkeeping are `wanopt_proto::probe`).

use std::collections::hash_map::RandomState;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::io::ErrorKind;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use wanopt_netem::units::parse_duration;
use wanopt_proto::probe::{Arrivals, Kind, Packet, Reflector, HEADER_LEN, MAX_SEQ};

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
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One direction's arrivals.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    let mut reflector = Reflector::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            // An ICMP error for an earlier answer; the next datagram is fine.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e).context("receiving probes"),
        };
        if let Ok(Some(answer)) = reflector.handle(&buf[..n]) {
            let _ = sock.send_to(&answer, from);
        }
    }
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
    Ok(Report {
        target: addr.to_string(),
        probes: count,
        size: args.size,
        interval_ms: interval.as_secs_f64() * 1000.0,
        rtt: rtt_stats(&rtts),
        forward,
        reverse,
    })
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
    out
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
