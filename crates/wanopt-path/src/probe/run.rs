//! A probing run: numbered probes at a steady interval, their echoes and
//! the reflector's counters, then packet trains each way.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::io::ErrorKind;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use thiserror::Error;
use wanopt_proto::probe::{Arrivals, Kind, Packet, HEADER_LEN};

use crate::probe::config::ProbeConfig;
use crate::probe::report::{
    load_warnings, rtt_stats, sender_limited, train_rate, Direction, RateEstimate, Rates, Report,
};
use crate::probe::stamp::{recv_stamped, stamp_arrivals};

/// How often a run says how far it got.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// A probing run that failed.
#[derive(Debug, Error)]
pub enum ProbeError {
    /// No UDP socket could be opened.
    #[error("cannot open a UDP socket: {0}")]
    Socket(#[source] std::io::Error),
    /// The socket could not be connected to the reflector.
    #[error("cannot reach {addr}: {source}")]
    Connect {
        /// The reflector.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The socket's read timeout could not be set.
    #[error("setting a read timeout: {0}")]
    Timeout(#[source] std::io::Error),
    /// A probe could not be sent.
    #[error("sending a probe: {0}")]
    Send(#[source] std::io::Error),
    /// Receiving failed with something other than a timeout.
    #[error("receiving echoes: {0}")]
    Receive(#[source] std::io::Error),
    /// The reflector's host answered with ICMP port unreachable.
    #[error(
        "{0} refused the probes (ICMP port unreachable): is `wanopt probe --listen` running there?"
    )]
    Refused(SocketAddr),
    /// No echo came back.
    #[error(
        "no answer from {0}: is `wanopt probe --listen` running there, and is UDP let through?"
    )]
    NoAnswer(SocketAddr),
}

/// How far a run got, every few seconds of a long one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Sending probes.
    Probes {
        /// Probes sent so far.
        sent: u32,
        /// Probes to send.
        count: u32,
        /// Distinct echoes back so far.
        echoes: u32,
    },
    /// Sending trains.
    Train {
        /// The train being sent, from 0.
        id: u32,
        /// Trains to send.
        trains: u32,
    },
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Probes {
                sent,
                count,
                echoes,
            } => write!(f, "{sent} of {count} probes sent, {echoes} echoes back"),
            Progress::Train { id, trains } => write!(f, "train {id} of {trains}"),
        }
    }
}

/// A random number for this run, so that the reflector keeps its
/// counters apart from other runs' and this run ignores their answers.
fn random_run_id() -> u64 {
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

/// IP and UDP header bytes of a datagram to `addr`.
fn ip_overhead(addr: SocketAddr) -> usize {
    if addr.is_ipv4() {
        28
    } else {
        48
    }
}

/// A header of `kind` for this run, its other fields zero.
fn packet(kind: Kind, run_id: u64) -> Packet {
    Packet {
        kind,
        seq: 0,
        echo_seq: 0,
        sent_ns: 0,
        received: 0,
        duplicates: 0,
        reordered: 0,
        run_id,
    }
}

/// Probes `config.target`: sends the probes, collects the echoes, asks
/// for the reflector's counters, then sends the trains; `progress` hears
/// how far it got every few seconds.
pub fn probe(
    config: &ProbeConfig,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report, ProbeError> {
    let addr = config.target;
    let local: SocketAddr = if addr.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).map_err(ProbeError::Socket)?;
    sock.connect(addr)
        .map_err(|source| ProbeError::Connect { addr, source })?;
    let run_id = random_run_id();
    let probes = send_probes(&sock, config, run_id, progress)?;
    if probes.echoes.received == 0 {
        if probes.refused {
            return Err(ProbeError::Refused(addr));
        }
        return Err(ProbeError::NoAnswer(addr));
    }
    let counters = ask_counters(&sock, run_id, probes.max_rtt)?;
    let (forward, reverse) = match counters {
        Some(r) => (
            Some(Direction::new(
                config.count,
                r.received,
                r.reordered,
                r.duplicates,
            )),
            Some(Direction::new(
                r.echo_seq,
                probes.echoes.received,
                probes.echoes.reordered,
                probes.echoes.duplicates,
            )),
        ),
        None => (None, None),
    };
    let rate = (config.trains > 0).then(|| trains(&sock, config, run_id, probes.max_rtt, progress));
    let mut report = Report {
        target: addr.to_string(),
        probes: config.count,
        size: config.size,
        interval_ms: config.interval.as_secs_f64() * 1000.0,
        rtt: rtt_stats(&probes.rtts),
        forward,
        reverse,
        rate,
        warnings: Vec::new(),
    };
    report.warnings = load_warnings(&report, ip_overhead(addr));
    Ok(report)
}

/// What the probes brought back.
struct Probes {
    /// Each probe's round trip, milliseconds (`None`: never came back).
    rtts: Vec<Option<f64>>,
    /// The echoes' arrivals.
    echoes: Arrivals,
    /// The slowest round trip.
    max_rtt: Duration,
    /// An ICMP port unreachable came back.
    refused: bool,
}

/// Sends `config.count` probes every `config.interval` and collects their
/// echoes, waiting for stragglers after the last.
fn send_probes(
    sock: &UdpSocket,
    config: &ProbeConfig,
    run_id: u64,
    progress: &mut dyn FnMut(Progress),
) -> Result<Probes, ProbeError> {
    let (count, interval) = (config.count, config.interval);
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
    let mut last_send = start;
    // A run longer than a few seconds says how far it got.
    let mut next_progress = start + PROGRESS_EVERY;
    loop {
        let now = Instant::now();
        if now >= next_progress {
            progress(Progress::Probes {
                sent: seq,
                count,
                echoes: echoes.received,
            });
            next_progress += PROGRESS_EVERY;
        }
        if seq < count && now >= next {
            let t = now - start;
            let p = Packet {
                seq,
                sent_ns: t.as_nanos() as u64,
                ..packet(Kind::Probe, run_id)
            };
            match sock.send(&p.emit(config.size)) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => refused = true,
                Err(e) => return Err(ProbeError::Send(e)),
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
        sock.set_read_timeout(Some(wait))
            .map_err(ProbeError::Timeout)?;
        match sock.recv(&mut buf) {
            Ok(n) => {
                let Ok(p) = Packet::parse(&buf[..n]) else {
                    continue;
                };
                if p.run_id != run_id || p.kind != Kind::Echo {
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
            Err(e) => return Err(ProbeError::Receive(e)),
        }
    }
    Ok(Probes {
        rtts,
        echoes,
        max_rtt,
        refused,
    })
}

/// The reflector's counters for this run, asked up to five times (`None`
/// when they never came).
fn ask_counters(
    sock: &UdpSocket,
    run_id: u64,
    max_rtt: Duration,
) -> Result<Option<Packet>, ProbeError> {
    let wait = (max_rtt * 3).max(Duration::from_millis(500));
    let mut buf = vec![0u8; 65_536];
    for _ in 0..5 {
        let _ = sock.send(&packet(Kind::ReportRequest, run_id).emit(HEADER_LEN));
        let until = Instant::now() + wait;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            sock.set_read_timeout(Some(left.max(Duration::from_micros(50))))
                .map_err(ProbeError::Timeout)?;
            if let Ok(n) = sock.recv(&mut buf) {
                if let Ok(p) = Packet::parse(&buf[..n]) {
                    if p.run_id == run_id && p.kind == Kind::Report {
                        return Ok(Some(p));
                    }
                }
            }
        }
    }
    Ok(None)
}

/// Sends `--trains` trains, one at a time, and estimates each
/// direction's rate from their arrival times.
fn trains(
    sock: &UdpSocket,
    config: &ProbeConfig,
    run_id: u64,
    max_rtt: Duration,
    progress: &mut dyn FnMut(Progress),
) -> Rates {
    stamp_arrivals(sock);
    // IP and UDP headers: the bytes a link carries per datagram.
    let wire = config.train_size + ip_overhead(config.target);
    let len = config.train_len;
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
        run_id,
    };
    let mut buf = vec![0u8; 65_536];
    let (mut forward, mut reverse) = (Vec::new(), Vec::new());
    // How fast each end put its trains on the wire.
    let (mut sent_here, mut sent_there) = (Vec::new(), Vec::new());
    let started = Instant::now();
    let mut next_progress = started + PROGRESS_EVERY;
    for id in 0..config.trains {
        if Instant::now() >= next_progress {
            progress(Progress::Train {
                id,
                trains: config.trains,
            });
            next_progress += PROGRESS_EVERY;
        }
        let datagrams: Vec<Vec<u8>> = (0..len)
            .map(|i| packet(Kind::Train, i, id).emit(config.train_size))
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
            if p.run_id != run_id || p.kind != Kind::TrainBack || p.echo_seq != id || !fresh {
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
        trains: config.trains,
        train_len: len,
        train_size: config.train_size,
        forward: RateEstimate::of(forward, forward_limited),
        reverse: RateEstimate::of(reverse, reverse_limited),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::config::tests::flags;
    use crate::probe::reflect::UdpReflector;
    use crate::probe::report::text;

    /// A loopback UDP address nothing listens on (bound, then released).
    fn free_addr() -> SocketAddr {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        sock.local_addr().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn probing_a_reflector_on_loopback() {
        // Bound here, so nothing else can take the port before it answers.
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let addr = sock.local_addr().unwrap_or_else(|e| panic!("{e}"));
        std::thread::spawn(move || UdpReflector::from_socket(sock).run());
        let target = addr.to_string();
        let config =
            ProbeConfig::new(&flags(&target, "1ms", 100, 200)).unwrap_or_else(|e| panic!("{e}"));
        let r = probe(&config, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
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
    fn no_reflector_is_a_clear_error() {
        let addr = free_addr();
        let target = addr.to_string();
        let config =
            ProbeConfig::new(&flags(&target, "1ms", 100, 5)).unwrap_or_else(|e| panic!("{e}"));
        let e = probe(&config, &mut |_| {})
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("wanopt probe --listen"), "{e}");
    }
}
