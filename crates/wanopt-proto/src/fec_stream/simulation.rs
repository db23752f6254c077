//! A seeded simulation of one direction of a path: a sender's encoder and
//! policy, the receiver's decoder and its reports, random loss on every
//! datagram, a virtual clock. It measures what a real-time stream (voice
//! and video, as the lab's `realtime` scenario sends them) loses after
//! repair, how late rebuilt datagrams are, and what the repairs cost.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::*;

/// The one-way delay of the simulated path.
const ONE_WAY: Duration = Duration::from_millis(20);
/// The simulation's tick.
const TICK: Duration = Duration::from_micros(100);
/// How often the receiver reports while repairs arrive, and otherwise
/// (the node's intervals).
const REPORT: Duration = Duration::from_millis(20);
const MEASURE_REPORT: Duration = Duration::from_millis(200);

/// xorshift64*: the same losses for the same seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What is sent: each entry a time from the start and a datagram's
/// length; `real_time` marks the datagrams of the stream measured.
struct Traffic {
    sends: Vec<(Duration, usize, bool)>,
}

impl Traffic {
    /// Voice (50 packets/s of 200 B and the tunnel's headers) and video
    /// (30 frames/s of 7 x 1,200 B) for `seconds`.
    fn call(seconds: u64) -> Traffic {
        let mut sends = Vec::new();
        let end = Duration::from_secs(seconds);
        let mut t = Duration::ZERO;
        while t < end {
            sends.push((t, 240, true));
            t += Duration::from_millis(20);
        }
        let mut t = Duration::from_micros(7_300);
        while t < end {
            for i in 0..7u32 {
                sends.push((t + Duration::from_micros(100) * i, 1_250, true));
            }
            t += Duration::from_micros(33_333);
        }
        sends.sort_by_key(|s| s.0);
        Traffic { sends }
    }
}

/// What a run measured, from `warm_up` on.
#[derive(Debug)]
struct Outcome {
    /// Real-time datagrams sent, lost before repair, and lost after.
    sent: u64,
    lost: u64,
    residual: u64,
    /// How late the rebuilt ones were, sorted.
    late: Vec<Duration>,
    /// Repair bytes over source bytes.
    overhead: f64,
}

impl Outcome {
    fn residual_share(&self) -> f64 {
        self.residual as f64 / self.sent as f64
    }

    /// The `q` quantile of every real-time datagram's added delay
    /// (those that arrived as sent add none).
    fn added(&self, q: f64) -> Duration {
        let delivered = self.sent - self.residual;
        let rank = (q * delivered as f64).ceil() as u64;
        let on_time = delivered - self.late.len() as u64;
        if rank <= on_time {
            return Duration::ZERO;
        }
        self.late[(rank - on_time - 1) as usize]
    }
}

/// A datagram on the way to the receiver.
enum InFlight {
    Source(Vec<u8>),
    Repair(Vec<u8>),
}

/// Runs `traffic` through a path losing `loss` of every datagram each way,
/// the sender's policy told whether the path carries datagrams; the path
/// carries `carries` bytes per second.
fn run(traffic: &Traffic, loss: f64, seed: u64, datagrams: bool, carries: f64) -> Outcome {
    let t0 = Instant::now();
    let warm_up = t0 + Duration::from_secs(3);
    let mut rng = Rng(seed.max(1));
    let mut policy = Policy::new(FecMode::Auto, DEFAULT_BUDGET);
    policy.set_datagrams(datagrams);
    let mut enc = Encoder::new();
    enc.set_measuring(true);
    let mut dec = Decoder::new();
    let mut flight: VecDeque<(Instant, InFlight)> = VecDeque::new();
    let mut back: VecDeque<(Instant, Report)> = VecDeque::new();
    // Per datagram id: sent at, real time, arrived (as sent or rebuilt).
    let mut sent: Vec<(Instant, bool, Option<Instant>)> = Vec::new();
    let mut repairs = Vec::new();
    let mut reported_at = t0;
    let mut repairs_reported = 0;
    let mut sent_bytes = 0usize;
    let mut next = 0;
    let end = t0 + traffic.sends.last().map_or(Duration::ZERO, |s| s.0) + Duration::from_secs(1);
    let srtt = 2 * ONE_WAY;
    let mut now = t0;
    let lossy = |rng: &mut Rng| rng.next() < loss;
    while now < end {
        // The sender: reports that arrived, the code they call for.
        while back.front().is_some_and(|(at, _)| *at <= now) {
            let (_, report) = back.pop_front().unwrap();
            policy.on_report(report, false);
            enc.set_params(policy.params(), policy.flush_after(srtt), &mut repairs);
            let sending = sent_bytes as f64 / (now - t0).as_secs_f64().max(0.1);
            enc.set_partial_repairs(
                policy.partial_repairs(),
                policy.repair_rate(carries, sending),
            );
        }
        // Sources due now.
        while let Some(&(at, len, real_time)) = traffic.sends.get(next) {
            if t0 + at > now {
                break;
            }
            let id = sent.len() as u32;
            let mut d = vec![0x40; len];
            d[1..5].copy_from_slice(&id.to_be_bytes());
            let mut wrapped = Vec::new();
            enc.wrap(0, &d, &mut wrapped);
            enc.on_sent(now, &d, &mut repairs);
            sent.push((now, real_time, None));
            sent_bytes += len;
            if !lossy(&mut rng) {
                flight.push_back((now + ONE_WAY, InFlight::Source(wrapped)));
            }
            next += 1;
        }
        enc.flush_due(now, &mut repairs);
        for r in repairs.drain(..) {
            if !lossy(&mut rng) {
                flight.push_back((now + ONE_WAY, InFlight::Repair(r)));
            }
        }
        // The receiver.
        let mut rebuilt = Vec::new();
        while flight.front().is_some_and(|(at, _)| *at <= now) {
            match flight.pop_front().unwrap().1 {
                InFlight::Source(d) => {
                    let payload = dec.on_source(&d).unwrap();
                    let id = u32::from_be_bytes(payload[1..5].try_into().unwrap());
                    sent[id as usize].2.get_or_insert(now);
                }
                InFlight::Repair(r) => {
                    let _ = dec.on_repair(&r, &mut rebuilt);
                }
            }
        }
        for d in rebuilt {
            let id = u32::from_be_bytes(d[1..5].try_into().unwrap());
            sent[id as usize].2.get_or_insert(now);
        }
        let interval = if dec.stats().repairs > repairs_reported {
            REPORT
        } else {
            MEASURE_REPORT
        };
        if now >= reported_at + interval {
            reported_at = now;
            repairs_reported = dec.stats().repairs;
            if !lossy(&mut rng) {
                back.push_back((now + ONE_WAY, dec.report()));
            }
        }
        now += TICK;
    }
    let mut outcome = Outcome {
        sent: 0,
        lost: 0,
        residual: 0,
        late: Vec::new(),
        overhead: enc.stats().repair_bytes as f64 / enc.stats().source_bytes as f64,
    };
    for &(at, real_time, arrived) in &sent {
        if !real_time || at < warm_up || at + Duration::from_secs(1) > end {
            continue;
        }
        outcome.sent += 1;
        match arrived {
            None => outcome.residual += 1,
            Some(t) => {
                let late = t.saturating_duration_since(at + ONE_WAY);
                if !late.is_zero() {
                    outcome.lost += 1;
                    outcome.late.push(late);
                }
            }
        }
    }
    outcome.lost += outcome.residual;
    outcome.late.sort();
    outcome
}

/// The lab's link: 20 Mbit/s.
const CARRIES: f64 = 2.5e6;

#[test]
fn a_call_alone_at_5_percent_loss_loses_under_half_a_percent_after_repair() {
    let call = Traffic::call(20);
    for seed in [1, 2, 3] {
        let o = run(&call, 0.05, seed, true, CARRIES);
        assert!(o.lost as f64 > 0.04 * o.sent as f64, "{o:?}");
        assert!(o.residual_share() < 0.005, "seed {seed}: {o:?}");
        // Rebuilt within the block deadline and a tick: the 99th
        // percentile of every datagram's added delay under 5 ms.
        assert!(
            o.added(0.99) < Duration::from_millis(5),
            "{:?}",
            o.added(0.99)
        );
        // The budget beyond the code's share, and the share (11 of 128).
        assert!(o.overhead < DATAGRAM_BUDGET + 0.1, "{o:?}");
    }
    // Without knowing the path carries datagrams, the policy sizes the
    // repairs for QUIC's streams: most losses stay lost.
    let o = run(&call, 0.05, 1, false, CARRIES);
    assert!(o.residual_share() > 0.02, "{o:?}");
}
