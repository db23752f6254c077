//! Feeds arbitrary bytes to the path probe parser, to a client and a server
//! path monitor, and to a duplicate filter: nothing may panic; bytes that
//! verify must re-emit to the same bytes (and forged ones never verify);
//! the monitors must keep their invariants whatever authenticated probes
//! they get (replayed, reflected, on the wrong path, echoing anything):
//! their probes' sequence numbers rise per path, loss stays within 0 to
//! 1, an RTT is never longer than the run, and once a time is handled
//! and its probes sent, the next timeout lies after it.
#![no_main]

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wanopt_proto::dedup::DuplicateFilter;
use wanopt_proto::path::{
    PathId, PathKey, PathMode, PathMonitor, Probe, ProbeRepr, Side,
};

/// The key the seeds' probes are sealed with (`fuzz/examples/seeds.rs`).
const KEY_MATERIAL: [u8; 36] = [0x5A; 36];
/// Bytes per record of the monitors' part.
const RECORD: usize = 8;

/// The probes one monitor sent, per path (the newest last), so that a
/// record can echo one of them.
#[derive(Default)]
struct Sent {
    by_path: HashMap<PathId, VecDeque<(u32, u32)>>,
}

impl Sent {
    fn record(&mut self, probe: &ProbeRepr) {
        let sent = self.by_path.entry(probe.path).or_default();
        if let Some(&(last_seq, _)) = sent.back() {
            assert!(probe.seq > last_seq, "{probe:?} after {last_seq}");
        }
        if sent.len() == 8 {
            sent.pop_front();
        }
        sent.push_back((probe.seq, probe.sent_us));
    }

    fn echo(&self, path: PathId, back: usize) -> Option<u32> {
        let sent = self.by_path.get(&path)?;
        sent.iter().rev().nth(back).map(|&(_, sent_us)| sent_us)
    }
}

fn drain(monitor: &mut PathMonitor, sent: &mut Sent, now: Instant, t0: Instant) {
    monitor.handle_timeout(now);
    let mut probes = 0;
    while let Some(probe) = monitor.poll_due(now) {
        assert!(monitor.state(probe.path).is_some());
        sent.record(&probe);
        probes += 1;
        assert!(probes <= 15, "more than one probe per path at once");
    }
    while monitor.poll_event().is_some() {}
    if let Some(next) = monitor.next_timeout() {
        assert!(next > now, "next timeout {next:?} not after {now:?}");
    }
    for path in monitor.paths().collect::<Vec<_>>() {
        let loss = monitor.loss(path).unwrap();
        for l in [loss.to_peer, loss.from_peer].into_iter().flatten() {
            assert!((0.0..=1.0).contains(&l), "{loss:?}");
        }
        if let Some(rtt) = monitor.rtt(path) {
            assert!(rtt <= now - t0, "{rtt:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let key = PathKey::from_exporter(&KEY_MATERIAL);
    // The bytes as a probe: anything that verifies re-emits to itself.
    if let Ok(probe) = Probe::new_checked(data) {
        if let Ok(repr) = ProbeRepr::parse(&probe, &key) {
            let emitted = repr.emit(&key);
            assert_eq!(emitted[..], data[..emitted.len()]);
        }
        // Under another key nothing verifies.
        let other = PathKey::from_exporter(&[0xA5; 36]);
        assert!(ProbeRepr::parse(&probe, &other).is_err());
    }

    // The bytes as records of authenticated probes to two monitors.
    let t0 = Instant::now();
    let mut now = t0;
    let mut client = PathMonitor::new(now, Side::Client, PathMode::Duplicate);
    let mut server = PathMonitor::new(now, Side::Server, PathMode::Failover);
    for n in 1..=2 {
        client.add_path(now, PathId::new(n).unwrap());
    }
    let (mut client_sent, mut server_sent) = (Sent::default(), Sent::default());
    drain(&mut client, &mut client_sent, now, t0);
    let mut seqs: HashMap<(bool, PathId), u32> = HashMap::new();
    for record in data.chunks_exact(RECORD) {
        now += Duration::from_millis(2 * u64::from(record[0]));
        let to_server = record[1] & 0x01 != 0;
        let path = PathId::new(record[2] % 15 + 1).unwrap();
        let arrived = if record[2] & 0x80 != 0 {
            PathId::new(path.get() % 15 + 1).unwrap()
        } else {
            path
        };
        // Sequence numbers mostly rise, sometimes go back (replays).
        let last = seqs.entry((to_server, path)).or_insert(0);
        let seq = last.wrapping_add_signed(i32::from(record[4] as i8));
        *last = (*last).max(seq);
        let echoed = if to_server {
            &server_sent
        } else {
            &client_sent
        };
        let echo_us = if record[1] & 0x10 != 0 {
            echoed.echo(path, usize::from(record[1] >> 5)).unwrap_or(0)
        } else {
            u32::from_be_bytes([0, record[1] >> 5, record[6], record[7]])
        };
        let repr = ProbeRepr {
            bind: record[1] & 0x02 != 0,
            from_client: record[1] & 0x04 != 0,
            answer: record[1] & 0x08 != 0,
            path,
            mode: PathMode::from_byte(record[3] % 4).unwrap(),
            seq,
            sent_us: u32::from(record[3]) << 8 | u32::from(record[5]),
            echo_us,
            hold_us: u32::from(record[5]) * 1000,
            received: u32::from_be_bytes([0, 0, record[6], record[7]]),
            rate_kbit: (record[1] & 0x01 != 0).then(|| u32::from(record[4]) << 8 | 1),
            realtime: record[3] & 0x80 != 0,
        };
        // Sealed, it verifies and parses back to itself.
        let bytes = repr.emit(&key);
        let parsed = ProbeRepr::parse(&Probe::new_checked(&bytes[..]).unwrap(), &key).unwrap();
        assert_eq!(parsed, repr);
        let (monitor, sent) = if to_server {
            (&mut server, &mut server_sent)
        } else {
            (&mut client, &mut client_sent)
        };
        let before = monitor.stats(arrived);
        if monitor.on_probe(now, arrived, &repr).is_ok() {
            let after = monitor.stats(arrived).unwrap();
            assert_eq!(after.received, before.map_or(0, |s| s.received) + 1);
        }
        if record[0] & 0x01 != 0 {
            monitor.on_data(now);
        }
        drain(monitor, sent, now, t0);
        assert!(server.paths().count() <= 15);
        assert_eq!(client.paths().count(), 2);
    }

    // The bytes as fingerprints, through a small filter.
    let mut filter = DuplicateFilter::with_capacity(64, 0x5EED);
    for chunk in data.chunks_exact(2) {
        let fingerprint = u64::from(u16::from_be_bytes([chunk[0], chunk[1]]));
        filter.first_seen(fingerprint);
        assert!(!filter.first_seen(fingerprint));
        assert!(filter.len() <= filter.capacity());
    }
});
