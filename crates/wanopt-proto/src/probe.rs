//! `wanopt probe`: numbered UDP datagrams sent to a reflector and echoed
//! back, to measure a path's round-trip time and, separately for each
//! direction, its loss, reordering and duplication.
//!
//! Every datagram starts with a 44-byte header (big-endian), then padding
//! up to the size the prober chose:
//!
//! ```text
//! magic "WOPR" | version 1 | kind | 2 reserved (0) | seq u32 | echo_seq u32
//! | sent_ns u64 | received u32 | duplicates u32 | reordered u32 | run_id u64
//! ```
//!
//! - `Probe` (prober to reflector): `seq` numbers the probes from 0,
//!   `sent_ns` is the prober's clock, `run_id` a random number per run
//!   (one `wanopt probe`: its probes and trains).
//! - `Echo` (reflector to prober), one per probe received: `seq` and
//!   `sent_ns` copied, `echo_seq` numbers the echoes of the run from 0,
//!   the counters are the reflector's so far.
//! - `Report?` (prober) asks for the reflector's final counters; `Report`
//!   carries them, with `echo_seq` = echoes sent.
//!
//! Forward loss is probes sent minus distinct probes the reflector
//! received; reverse loss is echoes sent minus distinct echoes received.
//! A packet "reordered" arrived after one with a higher number.
//!
//! # Packet trains: the bottleneck rate each way
//!
//! - `Train` (prober to reflector): a burst of datagrams sent back to
//!   back; `seq` is the index in the train, `echo_seq` the train's number,
//!   `received` the train's length (2 to [`MAX_TRAIN`]).
//! - `TrainEnd` (prober, a bare header after the train): answer now, even
//!   if the train's last datagram was lost.
//! - `TrainBack` (reflector to prober): once the train's last datagram or
//!   its `TrainEnd` arrived, one per train datagram received, sent back to
//!   back, each as long as the datagram it answers: `seq` and `echo_seq`
//!   copied, `sent_ns` the reflector's receive time of that datagram
//!   (nanoseconds on its own clock), `received` the train datagrams it got,
//!   `duplicates` the nanoseconds between sending the train's first answer
//!   and this one (written as it is sent, [`set_send_offset`]: how fast the
//!   reflector itself could send).
//!
//! The bottleneck spaces a back-to-back train out: the forward rate comes
//! from the reflector's receive times, the reverse rate from the prober's
//! receive times of the `TrainBack`s. A reflector never sends more bytes
//! for a train than it received, so it cannot be used to amplify traffic
//! toward a forged source; it keeps one train per run, of at most
//! [`MAX_TRAIN`] entries.

use std::collections::HashMap;

use thiserror::Error;

/// The first bytes of every probe datagram.
pub const MAGIC: [u8; 4] = *b"WOPR";
/// The format's version.
pub const VERSION: u8 = 1;
/// Header bytes; a datagram may carry padding after them.
pub const HEADER_LEN: usize = 44;
/// The highest probe number a reflector tracks (a run of a million
/// probes); higher numbers are ignored.
pub const MAX_SEQ: u32 = 1 << 20;
/// Runs a reflector keeps counters for; the least recently heard
/// one is forgotten first.
pub const MAX_RUNS: usize = 64;
/// The longest packet train a reflector answers.
pub const MAX_TRAIN: u32 = 64;

/// What a datagram is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Prober to reflector.
    Probe = 0,
    /// Reflector to prober, one per probe received.
    Echo = 1,
    /// Prober to reflector: send the final counters.
    ReportRequest = 2,
    /// Reflector to prober: the final counters.
    Report = 3,
    /// Prober to reflector: one datagram of a back-to-back train.
    Train = 4,
    /// Reflector to prober: a train's datagram answered, with its receive time.
    TrainBack = 5,
    /// Prober to reflector: the train is over, answer it.
    TrainEnd = 6,
}

/// One datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// What it is.
    pub kind: Kind,
    /// The probe's number.
    pub seq: u32,
    /// The echo's number (echoes sent, in a report).
    pub echo_seq: u32,
    /// The prober's send time, nanoseconds on its own clock.
    pub sent_ns: u64,
    /// Distinct probes the reflector received.
    pub received: u32,
    /// Probes the reflector received more than once.
    pub duplicates: u32,
    /// Probes that reached the reflector after a higher-numbered one.
    pub reordered: u32,
    /// The prober's run: a random number per `wanopt probe`.
    pub run_id: u64,
}

/// Why bytes are not a probe datagram.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProbeError {
    /// Fewer bytes than the header.
    #[error("probe datagram of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Short(usize),
    /// Not our magic.
    #[error("not a wanopt probe datagram (bad magic)")]
    Magic,
    /// Another version.
    #[error("probe format version {0} (this wanopt speaks {VERSION})")]
    Version(u8),
    /// An unknown kind.
    #[error("unknown probe datagram kind {0}")]
    Kind(u8),
    /// Reserved bytes not zero.
    #[error("probe datagram reserved bytes are not zero")]
    Reserved,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(x)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

impl Packet {
    /// Reads a datagram (padding after the header is ignored).
    pub fn parse(b: &[u8]) -> Result<Packet, ProbeError> {
        if b.len() < HEADER_LEN {
            return Err(ProbeError::Short(b.len()));
        }
        if b[0..4] != MAGIC {
            return Err(ProbeError::Magic);
        }
        if b[4] != VERSION {
            return Err(ProbeError::Version(b[4]));
        }
        let kind = match b[5] {
            0 => Kind::Probe,
            1 => Kind::Echo,
            2 => Kind::ReportRequest,
            3 => Kind::Report,
            4 => Kind::Train,
            5 => Kind::TrainBack,
            6 => Kind::TrainEnd,
            k => return Err(ProbeError::Kind(k)),
        };
        if b[6] != 0 || b[7] != 0 {
            return Err(ProbeError::Reserved);
        }
        Ok(Packet {
            kind,
            seq: u32_at(b, 8),
            echo_seq: u32_at(b, 12),
            sent_ns: u64_at(b, 16),
            received: u32_at(b, 24),
            duplicates: u32_at(b, 28),
            reordered: u32_at(b, 32),
            run_id: u64_at(b, 36),
        })
    }

    /// The datagram, padded with zeros to `size` bytes (at least the header).
    pub fn emit(&self, size: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(size.max(HEADER_LEN));
        b.extend_from_slice(&MAGIC);
        b.push(VERSION);
        b.push(self.kind as u8);
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&self.seq.to_be_bytes());
        b.extend_from_slice(&self.echo_seq.to_be_bytes());
        b.extend_from_slice(&self.sent_ns.to_be_bytes());
        b.extend_from_slice(&self.received.to_be_bytes());
        b.extend_from_slice(&self.duplicates.to_be_bytes());
        b.extend_from_slice(&self.reordered.to_be_bytes());
        b.extend_from_slice(&self.run_id.to_be_bytes());
        b.resize(size.max(HEADER_LEN), 0);
        b
    }
}

/// Writes a `TrainBack`'s send offset (nanoseconds since the train's first
/// answer went out, saturating) into its `duplicates` field; a datagram
/// shorter than the header is left alone.
pub fn set_send_offset(datagram: &mut [u8], ns: u64) {
    if let Some(field) = datagram.get_mut(28..32) {
        field.copy_from_slice(&u32::try_from(ns).unwrap_or(u32::MAX).to_be_bytes());
    }
}

/// Arrival bookkeeping of one numbered sequence: distinct, duplicate and
/// late (after a higher number) arrivals.
#[derive(Debug, Clone, Default)]
pub struct Arrivals {
    seen: Vec<u64>,
    highest: Option<u32>,
    /// Distinct numbers received.
    pub received: u32,
    /// Numbers received again.
    pub duplicates: u32,
    /// Arrivals after a higher number.
    pub reordered: u32,
}

impl Arrivals {
    /// Records number `n`; false when it is above [`MAX_SEQ`] (ignored).
    pub fn record(&mut self, n: u32) -> bool {
        if n >= MAX_SEQ {
            return false;
        }
        let (word, bit) = ((n / 64) as usize, n % 64);
        if self.seen.len() <= word {
            self.seen.resize(word + 1, 0);
        }
        // A peer may repeat a number without end: duplicates saturate.
        // `received` and `reordered` count distinct numbers below MAX_SEQ.
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicates = self.duplicates.saturating_add(1);
            return true;
        }
        self.seen[word] |= 1 << bit;
        self.received += 1;
        match self.highest {
            Some(h) if n < h => self.reordered += 1,
            _ => self.highest = Some(n),
        }
        true
    }

    /// Whether `n` arrived.
    pub fn has(&self, n: u32) -> bool {
        let word = (n / 64) as usize;
        self.seen
            .get(word)
            .is_some_and(|w| w & (1 << (n % 64)) != 0)
    }
}

#[derive(Debug, Default)]
struct Run {
    probes: Arrivals,
    echoes_sent: u32,
    last_heard: u64,
    train: Option<Train>,
}

/// The train a run is sending: what arrived of it, in arrival order.
#[derive(Debug)]
struct Train {
    id: u32,
    len: u32,
    /// (index, receive time, datagram bytes).
    arrivals: Vec<(u32, u64, usize)>,
    answered: bool,
}

impl Train {
    /// One `TrainBack` per datagram received, each as long as it was.
    fn answer(&mut self, run_id: u64) -> Vec<Vec<u8>> {
        self.answered = true;
        let received = self.arrivals.len() as u32;
        self.arrivals
            .iter()
            .map(|&(seq, at, size)| {
                Packet {
                    kind: Kind::TrainBack,
                    seq,
                    echo_seq: self.id,
                    sent_ns: at,
                    received,
                    duplicates: 0,
                    reordered: 0,
                    run_id,
                }
                .emit(size)
            })
            .collect()
    }
}

/// The reflector's side, sans-IO: a datagram in, the answer out.
#[derive(Debug, Default)]
pub struct Reflector {
    runs: HashMap<u64, Run>,
    /// A logical clock for forgetting the least recently heard run.
    tick: u64,
}

impl Reflector {
    /// A reflector with no runs.
    pub fn new() -> Reflector {
        Reflector::default()
    }

    /// Runs it keeps counters for.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The answers to datagram `b`, received at `now_ns` on the
    /// reflector's clock, in the order to send them: an echo or a report,
    /// a train's answers, or nothing (echoes, reports and train answers are
    /// not answered; bytes that are not a probe datagram are an error).
    pub fn handle(&mut self, b: &[u8], now_ns: u64) -> Result<Vec<Vec<u8>>, ProbeError> {
        let p = Packet::parse(b)?;
        if !matches!(
            p.kind,
            Kind::Probe | Kind::ReportRequest | Kind::Train | Kind::TrainEnd
        ) {
            return Ok(Vec::new());
        }
        self.tick += 1;
        if !self.runs.contains_key(&p.run_id) && self.runs.len() >= MAX_RUNS {
            if let Some(oldest) = self
                .runs
                .iter()
                .min_by_key(|(_, s)| s.last_heard)
                .map(|(k, _)| *k)
            {
                self.runs.remove(&oldest);
            }
        }
        let s = self.runs.entry(p.run_id).or_default();
        s.last_heard = self.tick;
        if p.kind == Kind::Train {
            let len = p.received;
            if !(2..=MAX_TRAIN).contains(&len) || p.seq >= len {
                return Ok(Vec::new());
            }
            let train = match &mut s.train {
                Some(t) if t.id == p.echo_seq => t,
                other => other.insert(Train {
                    id: p.echo_seq,
                    len,
                    arrivals: Vec::with_capacity(len as usize),
                    answered: false,
                }),
            };
            if train.answered || p.seq >= train.len || train.arrivals.iter().any(|a| a.0 == p.seq) {
                return Ok(Vec::new());
            }
            train.arrivals.push((p.seq, now_ns, b.len()));
            if p.seq + 1 < train.len {
                return Ok(Vec::new());
            }
            return Ok(train.answer(p.run_id));
        }
        if p.kind == Kind::TrainEnd {
            return Ok(match &mut s.train {
                Some(t) if t.id == p.echo_seq && !t.answered => t.answer(p.run_id),
                _ => Vec::new(),
            });
        }
        let mut answer = Packet {
            kind: Kind::Echo,
            echo_seq: s.echoes_sent,
            ..p
        };
        match p.kind {
            Kind::Probe => {
                if !s.probes.record(p.seq) {
                    return Ok(Vec::new());
                }
                s.echoes_sent = s.echoes_sent.saturating_add(1);
            }
            _ => {
                answer.kind = Kind::Report;
            }
        }
        answer.received = s.probes.received;
        answer.duplicates = s.probes.duplicates;
        answer.reordered = s.probes.reordered;
        // An echo is as long as its probe, so both directions carry the
        // same sizes; a report is a bare header.
        let size = if p.kind == Kind::Probe {
            b.len()
        } else {
            HEADER_LEN
        };
        Ok(vec![answer.emit(size)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn probe(seq: u32, run_id: u64) -> Packet {
        Packet {
            kind: Kind::Probe,
            seq,
            echo_seq: 0,
            sent_ns: 1_000 + u64::from(seq),
            received: 0,
            duplicates: 0,
            reordered: 0,
            run_id,
        }
    }

    /// The reflector's answer to `datagram` (empty when none).
    fn answer(r: &mut Reflector, datagram: &[u8]) -> Vec<u8> {
        let mut answers = r.handle(datagram, 0).unwrap_or_default();
        assert!(answers.len() <= 1, "one answer to a probe");
        answers.pop().unwrap_or_default()
    }

    #[test]
    fn rejects_what_is_not_a_probe() {
        let good = probe(7, 9).emit(100);
        assert_eq!(good.len(), 100);
        assert_eq!(Packet::parse(&good), Ok(probe(7, 9)));
        assert_eq!(Packet::parse(&good[..43]), Err(ProbeError::Short(43)));
        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(Packet::parse(&bad), Err(ProbeError::Magic));
        let mut bad = good.clone();
        bad[4] = 2;
        assert_eq!(Packet::parse(&bad), Err(ProbeError::Version(2)));
        let mut bad = good.clone();
        bad[5] = 7;
        assert_eq!(Packet::parse(&bad), Err(ProbeError::Kind(7)));
        let mut bad = good;
        bad[7] = 1;
        assert_eq!(Packet::parse(&bad), Err(ProbeError::Reserved));
    }

    #[test]
    fn the_reflector_counts_each_direction_of_arrivals() {
        let mut r = Reflector::new();
        let mut echoes = Vec::new();
        // 0, 2, 1 (late), 2 again (duplicate), 5.
        for seq in [0, 2, 1, 2, 5] {
            let out = answer(&mut r, &probe(seq, 1).emit(64));
            assert_eq!(out.len(), 64, "an echo is as long as its probe");
            echoes.push(Packet::parse(&out).unwrap_or(probe(0, 0)));
        }
        assert_eq!(
            echoes
                .iter()
                .map(|e| (e.kind, e.seq, e.echo_seq))
                .collect::<Vec<_>>(),
            vec![
                (Kind::Echo, 0, 0),
                (Kind::Echo, 2, 1),
                (Kind::Echo, 1, 2),
                (Kind::Echo, 2, 3),
                (Kind::Echo, 5, 4),
            ]
        );
        assert_eq!(echoes[4].sent_ns, 1_005, "the prober's time comes back");
        let ask = Packet {
            kind: Kind::ReportRequest,
            ..probe(0, 1)
        };
        let report = answer(&mut r, &ask.emit(HEADER_LEN));
        let report = Packet::parse(&report).unwrap_or(probe(0, 0));
        assert_eq!(report.kind, Kind::Report);
        assert_eq!(
            (
                report.echo_seq,
                report.received,
                report.duplicates,
                report.reordered
            ),
            (5, 4, 1, 1)
        );
        // Another run has its own counters; echoes are not answered;
        // garbage is an error, not an answer.
        let other = answer(&mut r, &probe(0, 2).emit(44));
        assert_eq!(Packet::parse(&other).map(|p| p.received), Ok(1));
        assert_eq!(r.handle(&echoes[0].emit(44), 0), Ok(vec![]));
        assert!(r.handle(b"hello", 0).is_err());
        // Numbers beyond MAX_SEQ are ignored.
        assert_eq!(r.handle(&probe(MAX_SEQ, 1).emit(44), 0), Ok(vec![]));
    }

    #[test]
    fn runs_are_bounded() {
        let mut r = Reflector::new();
        for run_id in 0..(MAX_RUNS as u64 + 10) {
            let _ = r.handle(&probe(0, run_id).emit(44), 0);
        }
        assert_eq!(r.runs(), MAX_RUNS);
        // The oldest went first: run 0 starts again from nothing.
        let out = answer(&mut r, &probe(1, 0).emit(44));
        assert_eq!(Packet::parse(&out).map(|p| p.received), Ok(1));
    }

    fn train(seq: u32, id: u32, len: u32) -> Packet {
        Packet {
            kind: Kind::Train,
            echo_seq: id,
            received: len,
            ..probe(seq, 3)
        }
    }

    fn train_end(id: u32) -> Packet {
        Packet {
            kind: Kind::TrainEnd,
            echo_seq: id,
            ..probe(0, 3)
        }
    }

    /// (index, receive time, size) of each answer.
    fn backs(answers: &[Vec<u8>]) -> Vec<(u32, u64, usize)> {
        answers
            .iter()
            .map(|a| {
                let p = Packet::parse(a).unwrap_or(probe(0, 0));
                assert_eq!((p.kind, p.run_id), (Kind::TrainBack, 3));
                (p.seq, p.sent_ns, a.len())
            })
            .collect()
    }

    #[test]
    fn a_train_is_answered_at_its_end_with_receive_times() {
        let mut r = Reflector::new();
        for seq in 0..4 {
            let out = r.handle(&train(seq, 1, 5).emit(1000), 100 + u64::from(seq));
            assert_eq!(out, Ok(vec![]), "nothing before the end");
        }
        let out = r
            .handle(&train(4, 1, 5).emit(1000), 200)
            .unwrap_or_default();
        assert_eq!(
            backs(&out),
            vec![
                (0, 100, 1000),
                (1, 101, 1000),
                (2, 102, 1000),
                (3, 103, 1000),
                (4, 200, 1000)
            ]
        );
        assert_eq!(
            Packet::parse(&out[0]).map(|p| (p.echo_seq, p.received)),
            Ok((1, 5))
        );
        let mut sent = out[1].clone();
        set_send_offset(&mut sent, 12_345);
        assert_eq!(Packet::parse(&sent).map(|p| p.duplicates), Ok(12_345));
        set_send_offset(&mut sent, 1 << 40);
        assert_eq!(Packet::parse(&sent).map(|p| p.duplicates), Ok(u32::MAX));
        set_send_offset(&mut sent[..20], 1);
        // Answered once: a repeated last datagram or the end gets nothing.
        assert_eq!(r.handle(&train(4, 1, 5).emit(1000), 300), Ok(vec![]));
        assert_eq!(r.handle(&train_end(1).emit(HEADER_LEN), 300), Ok(vec![]));
    }

    #[test]
    fn a_train_whose_end_was_lost_is_answered_on_train_end() {
        let mut r = Reflector::new();
        // 0, 3, 1 (late), 3 again (ignored); 2 and 4 lost.
        for (seq, at) in [(0, 10), (3, 11), (1, 12), (3, 13)] {
            assert_eq!(r.handle(&train(seq, 7, 5).emit(500), at), Ok(vec![]));
        }
        // Another train's end does not answer this one.
        assert_eq!(r.handle(&train_end(6).emit(HEADER_LEN), 14), Ok(vec![]));
        let out = r
            .handle(&train_end(7).emit(HEADER_LEN), 15)
            .unwrap_or_default();
        assert_eq!(backs(&out), vec![(0, 10, 500), (3, 11, 500), (1, 12, 500)]);
        assert_eq!(r.handle(&train_end(7).emit(HEADER_LEN), 16), Ok(vec![]));
        // A new train replaces it.
        assert_eq!(r.handle(&train(0, 8, 2).emit(64), 20), Ok(vec![]));
        assert_eq!(
            backs(&r.handle(&train(1, 8, 2).emit(64), 21).unwrap_or_default()).len(),
            2
        );
    }

    #[test]
    fn trains_out_of_bounds_are_ignored() {
        let mut r = Reflector::new();
        for p in [
            train(0, 1, 1),
            train(0, 1, MAX_TRAIN + 1),
            train(5, 1, 5),
            train(0, 1, 0),
        ] {
            assert_eq!(r.handle(&p.emit(100), 0), Ok(vec![]), "{p:?}");
        }
        // None of them started a train.
        assert_eq!(r.handle(&train_end(1).emit(HEADER_LEN), 0), Ok(vec![]));
        // A train's datagrams keep the length its first one gave.
        assert_eq!(r.handle(&train(0, 2, 3).emit(100), 0), Ok(vec![]));
        assert_eq!(r.handle(&train(3, 2, 4).emit(100), 0), Ok(vec![]));
        assert_eq!(
            backs(&r.handle(&train(2, 2, 3).emit(100), 0).unwrap_or_default()).len(),
            2
        );
    }

    proptest! {
        /// Whatever a peer sends, the reflector answers a train with no
        /// more bytes than the train brought, and every answer parses.
        #[test]
        fn trains_never_amplify(ops in proptest::collection::vec(
            (any::<bool>(), 0u32..3, 0u32..70, 0u32..70, 44usize..300), 0..300)) {
            let mut r = Reflector::new();
            let (mut sent, mut back) = (0usize, 0usize);
            for (i, (is_end, id, seq, len, size)) in ops.into_iter().enumerate() {
                let datagram = if is_end {
                    train_end(id).emit(size)
                } else {
                    train(seq, id, len).emit(size)
                };
                if !is_end {
                    sent += datagram.len();
                }
                for a in r.handle(&datagram, i as u64).unwrap_or_default() {
                    prop_assert_eq!(Packet::parse(&a).map(|p| p.kind), Ok(Kind::TrainBack));
                    back += a.len();
                }
                prop_assert!(back <= sent, "{} bytes back for {} sent", back, sent);
            }
        }

        #[test]
        fn round_trip(seq: u32, echo_seq: u32, sent_ns: u64, received: u32, duplicates: u32,
                      reordered: u32, run_id: u64, kind in 0u8..7, pad in 0usize..200) {
            let kind = [Kind::Probe, Kind::Echo, Kind::ReportRequest, Kind::Report, Kind::Train,
                        Kind::TrainBack, Kind::TrainEnd][kind as usize];
            let p = Packet { kind, seq, echo_seq, sent_ns, received, duplicates, reordered, run_id };
            let bytes = p.emit(HEADER_LEN + pad);
            prop_assert_eq!(bytes.len(), HEADER_LEN + pad);
            prop_assert_eq!(Packet::parse(&bytes), Ok(p));
        }

        #[test]
        fn arrivals_match_a_naive_model(seq in proptest::collection::vec(0u32..300, 0..400)) {
            let mut a = Arrivals::default();
            let mut seen = std::collections::BTreeSet::new();
            let (mut dups, mut late, mut highest) = (0, 0, None::<u32>);
            for n in &seq {
                a.record(*n);
                if !seen.insert(*n) {
                    dups += 1;
                } else if highest.is_some_and(|h| *n < h) {
                    late += 1;
                } else {
                    highest = Some(*n);
                }
            }
            prop_assert_eq!(a.received as usize, seen.len());
            prop_assert_eq!(a.duplicates, dups);
            prop_assert_eq!(a.reordered, late);
            for n in 0..300 {
                prop_assert_eq!(a.has(n), seen.contains(&n));
            }
        }
    }
}
