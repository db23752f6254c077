//! A reduced flow both ways, as two nodes' uplinks drive their encoders
//! ([`Quiet`] for the idle flush and the compressor's release,
//! [`Trickle`] for pieces), on a virtual clock: random reads in either
//! direction (fresh, compressible, or bytes that crossed before), quiet
//! gaps of 0-5 s, and the wire delivered at random moments (control
//! frames and replies cross in the other direction meanwhile). Every byte
//! must arrive, in order, and no decoder may fail: an interactive session
//! that paused for a second with a chunk open as pieces was reset ("pieces
//! of a chunk out of order") before the decoder let a `StreamEnd` come
//! between a chunk's pieces.

use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;
use wanopt_codec::{
    CacheConfig, CacheId, Compression, Decoder, DecoderConfig, Encoder, EncoderConfig, PeerCache,
    StoreConfig,
};
use wanopt_node::flow::codec_pump::{Quiet, Trickle};

/// What happens next on the virtual clock.
#[derive(Debug, Clone)]
enum Op {
    /// The source on side `side` (0: client, 1: server) gives `len` bytes
    /// read at once: fresh text, fresh random bytes, or bytes it sent
    /// before (from `seed`'s offset).
    Read {
        side: usize,
        len: usize,
        kind: u8,
        seed: u64,
    },
    /// Nothing is read for this long; the uplinks' timers run.
    Gap(Duration),
    /// What side `side`'s node wrote so far reaches the other node.
    Deliver { side: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2usize, prop_oneof![1..600usize, 1..40_000usize], 0..3u8, any::<u64>())
            .prop_map(|(side, len, kind, seed)| Op::Read { side, len, kind, seed }),
        3 => prop_oneof![0..5u64, 0..5_000u64, 950..1_100u64]
            .prop_map(|ms| Op::Gap(Duration::from_millis(ms))),
        3 => (0..2usize).prop_map(|side| Op::Deliver { side }),
    ]
}

/// A small deterministic generator (the test's bytes only).
struct Bytes(u64);

impl Bytes {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn text(&mut self, len: usize) -> Vec<u8> {
        const WORDS: &[&str] = &[
            "share",
            "file",
            "open",
            "save",
            "lock",
            "oplock",
            "credit",
            "tree",
            "session",
            "negotiate",
            "create",
            "close",
            "read",
            "write",
            "the",
            "of",
            "document",
            "\r\n",
        ];
        let mut out = Vec::with_capacity(len + 16);
        while out.len() < len {
            out.extend_from_slice(WORDS[(self.next() % WORDS.len() as u64) as usize].as_bytes());
            out.push(b' ');
        }
        out.truncate(len);
        out
    }

    fn random(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// One direction of the flow: the sending node's encoder and uplink
/// timers, the receiving node's decoder.
struct Direction {
    encoder: Encoder,
    quiet: Quiet,
    trickle: Trickle,
    /// When the uplink last read or acted on a quiet.
    since: Duration,
    decoder: Decoder,
    /// Written by the sending node, not yet delivered.
    wire: Vec<u8>,
    sent: Vec<u8>,
    delivered: Vec<u8>,
}

struct Session {
    sides: [Direction; 2],
    now: Duration,
    t0: Instant,
    _dirs: [tempfile::TempDir; 2],
}

fn config() -> CacheConfig {
    CacheConfig {
        store: StoreConfig {
            capacity: 64 << 20,
            segment_size: 4 << 20,
        },
        max_peer_entries: 1 << 20,
    }
}

impl Session {
    fn new(compression: Compression) -> Session {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let edge = PeerCache::open(dirs[0].path(), config(), CacheId([1; 16])).unwrap();
        let core = PeerCache::open(dirs[1].path(), config(), CacheId([2; 16])).unwrap();
        core.handle_hello(&edge.hello());
        edge.handle_hello(&core.hello());
        let encoder = EncoderConfig {
            compression,
            ..EncoderConfig::default()
        };
        let direction = |from: &PeerCache, to: &PeerCache| {
            let mut encoder = Encoder::new(from.clone(), encoder).unwrap();
            let mut wire = Vec::new();
            encoder.start(&mut wire);
            Direction {
                encoder,
                quiet: Quiet::default(),
                trickle: Trickle::default(),
                since: Duration::ZERO,
                decoder: Decoder::new(to.clone(), DecoderConfig::default()),
                wire,
                sent: Vec::new(),
                delivered: Vec::new(),
            }
        };
        Session {
            sides: [direction(&edge, &core), direction(&core, &edge)],
            now: Duration::ZERO,
            t0: Instant::now(),
            _dirs: dirs,
        }
    }

    /// The uplinks' timers up to `now`: each steps whenever it waited its
    /// [`Quiet::wait`] without a read.
    fn advance(&mut self, by: Duration) {
        self.now += by;
        for d in &mut self.sides {
            while let Some(wait) = d.quiet.wait() {
                if d.since + wait > self.now {
                    break;
                }
                d.since += wait;
                d.quiet.step(&mut d.encoder, &mut d.wire);
                d.quiet.holding(d.encoder.compressor_bytes() > 0);
                d.trickle.sent();
            }
        }
    }

    fn read(&mut self, side: usize, data: &[u8]) {
        let now = self.now;
        let at = self.t0 + now;
        let d = &mut self.sides[side];
        let waited = now - d.since;
        d.since = now;
        let held = d.encoder.held_len();
        d.encoder.push(data, &mut d.wire);
        d.trickle
            .on_read(at, waited, data.len(), held, d.encoder.held_len());
        if d.trickle.due(d.encoder.held_len(), || (Some(2e6), false)) {
            d.encoder.send_held(&mut d.wire);
            d.trickle.sent();
        }
        d.quiet.on_read();
        d.quiet.holding(d.encoder.compressor_bytes() > 0);
        d.sent.extend_from_slice(data);
    }

    /// Side `side`'s wire reaches the other node: decoded, its control
    /// frames answered on the other direction's wire (after what that
    /// node wrote already, as its writer sends whole frames in order).
    fn deliver(&mut self, side: usize) -> Result<(), String> {
        let [a, b] = &mut self.sides;
        let (this, other) = if side == 0 { (a, b) } else { (b, a) };
        let wire = std::mem::take(&mut this.wire);
        this.decoder
            .push(&wire, &mut this.delivered)
            .map_err(|e| format!("side {side}'s data: {e}"))?;
        // The receiving node's encoder (the other direction) answers the
        // peer control (repairs), and its decoder's control goes back.
        while let Some(message) = this.decoder.poll_peer_control() {
            other
                .encoder
                .handle_peer(&message, &mut other.wire)
                .map_err(|e| format!("side {side}'s peer control: {e}"))?;
        }
        this.decoder.emit_control(&mut other.wire);
        Ok(())
    }

    fn finish(&mut self) -> Result<(), String> {
        for d in &mut self.sides {
            d.encoder.finish(&mut d.wire);
        }
        for _ in 0..16 {
            if self.sides.iter().all(|d| d.wire.is_empty()) {
                break;
            }
            self.deliver(0)?;
            self.deliver(1)?;
        }
        for (side, d) in self.sides.iter().enumerate() {
            if d.delivered != d.sent {
                return Err(format!(
                    "side {side}: {} bytes delivered of {} sent, first difference at {:?}",
                    d.delivered.len(),
                    d.sent.len(),
                    d.delivered.iter().zip(&d.sent).position(|(a, b)| a != b)
                ));
            }
            if !d.decoder.is_finished() {
                return Err(format!("side {side}'s decoder did not finish"));
            }
        }
        Ok(())
    }
}

fn run(compression: Compression, ops: &[Op]) -> Result<(), String> {
    let mut session = Session::new(compression);
    for op in ops {
        match *op {
            Op::Read {
                side,
                len,
                kind,
                seed,
            } => {
                let mut gen = Bytes(seed | 1);
                let sent = &session.sides[side].sent;
                let data = match kind {
                    0 => gen.text(len),
                    1 => gen.random(len),
                    // Bytes that crossed before (a file saved after it was
                    // opened): references, deltas, pieces completed by
                    // reference.
                    _ if sent.len() > 1 => {
                        let start = (gen.next() as usize) % (sent.len() - 1);
                        let end = (start + len).min(sent.len());
                        sent[start..end].to_vec()
                    }
                    _ => gen.text(len),
                };
                session.read(side, &data);
            }
            Op::Gap(gap) => session.advance(gap),
            Op::Deliver { side } => session.deliver(side)?,
        }
    }
    // The last reads' timers run out before the sockets close.
    session.advance(Duration::from_secs(5));
    session.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn reads_quiet_gaps_and_replies_in_any_order_deliver_every_byte(
        ops in proptest::collection::vec(op(), 1..48),
        compression in prop_oneof![
            Just(Compression::Lz4),
            Just(Compression::Zstd { level: 9 }),
            Just(Compression::Lzma { preset: 6 }),
            Just(Compression::Max { preset: 6 }),
        ],
    ) {
        if let Err(e) = run(compression, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// The session that SMB clients hit: a file down (the flow's compression
/// stream carries it), a short request up and its reply as pieces, a pause
/// of 0.2 to 5 s, the next command (a file up), and a quiet of 5 s before
/// the sockets close (a pause over 1 s, or that quiet, released the
/// compressors with the requests' chunks open).
#[test]
fn get_pause_put() {
    for compression in [
        Compression::Zstd { level: 9 },
        Compression::Max { preset: 6 },
    ] {
        for pause_ms in [200, 1_000, 1_200, 1_500, 2_000, 3_000, 5_000] {
            let ops = [
                Op::Read {
                    side: 0,
                    len: 200,
                    kind: 0,
                    seed: 1,
                },
                Op::Deliver { side: 0 },
                Op::Read {
                    side: 1,
                    len: 100_000,
                    kind: 0,
                    seed: 2,
                },
                Op::Read {
                    side: 1,
                    len: 120,
                    kind: 0,
                    seed: 3,
                },
                Op::Gap(Duration::from_millis(3)),
                Op::Deliver { side: 1 },
                Op::Read {
                    side: 0,
                    len: 150,
                    kind: 0,
                    seed: 4,
                },
                Op::Read {
                    side: 1,
                    len: 90,
                    kind: 0,
                    seed: 5,
                },
                Op::Deliver { side: 0 },
                Op::Deliver { side: 1 },
                Op::Gap(Duration::from_millis(pause_ms)),
                Op::Deliver { side: 0 },
                Op::Deliver { side: 1 },
                Op::Read {
                    side: 0,
                    len: 100_000,
                    kind: 2,
                    seed: 6,
                },
                Op::Deliver { side: 0 },
                Op::Read {
                    side: 1,
                    len: 100,
                    kind: 0,
                    seed: 7,
                },
            ];
            if let Err(e) = run(compression, &ops) {
                panic!("{compression:?}, pause {pause_ms} ms: {e}");
            }
        }
    }
}
