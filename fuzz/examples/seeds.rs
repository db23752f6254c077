//! Writes the seed corpora of the fuzz targets (`fuzz/seeds/<target>/`):
//! a handful of valid inputs per target, made by the real encoders and
//! emitters, so that a bounded run starts past the parsers' first checks.
//!
//! `cargo run --release --manifest-path fuzz/Cargo.toml --example seeds -- fuzz/seeds`
//! (it replaces the files it writes; inputs a run finds go to
//! `fuzz/corpus/`, which git ignores).

use std::fs;
use std::path::Path;

use wanopt_codec::frame::{Codec, DataRepr, Frame};
use wanopt_codec::{
    CacheConfig, CacheId, Compression, Decoder, DecoderConfig, Encoder, EncoderConfig, PeerCache,
    StoreConfig,
};
use wanopt_netem::wire::{Ipv4Packet, TcpSegment};
use wanopt_proto::probe::{Kind, Packet, HEADER_LEN};
use wanopt_proto::stream::{OpenRepr, ReplyRepr, Services, Status, Target};
use wanopt_proto::ControlRepr;

fn main() {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "fuzz/seeds".into());
    let out = Path::new(&out);
    let scratch = std::env::temp_dir().join(format!("wanopt-seeds-{}", std::process::id()));
    let (edge, core) = caches(&scratch);

    let mut hello = Vec::new();
    edge.hello().emit(&mut hello);
    write(out, "stream_header", stream_headers());
    write(out, "control_message", control_messages(&hello));
    write(out, "probe_packet", probe_packets());
    write(out, "fec_parity", parity_datagrams());
    write(out, "fec_stream", fec_stream_datagrams());
    write(out, "udp_flow", udp_flow_inputs());
    write(out, "path_probe", path_probe_inputs());
    write(out, "bond", bond_inputs());
    write(
        out,
        "datagram_layer",
        [
            fec_stream_datagrams(),
            parity_datagrams(),
            path_probe_inputs(),
        ]
        .concat(),
    );
    write(out, "netem_frame", netem_inputs());
    write(out, "carrier_frames", carrier_inputs());
    let frames = codec_inputs(&edge, &core);
    write(out, "codec_wire", codec_wires(&edge, &core, &frames[..4]));
    write(out, "codec_frames", frames);
    write(out, "ppmd_run", ppmd_inputs(&edge));
    drop((edge, core));
    let _ = fs::remove_dir_all(&scratch);
}

/// Replaces `dir/target/seed-*` with `seeds`.
fn write(dir: &Path, target: &str, seeds: Vec<Vec<u8>>) {
    let dir = dir.join(target);
    fs::create_dir_all(&dir).unwrap();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("seed-")
        {
            fs::remove_file(path).unwrap();
        }
    }
    let total: usize = seeds.iter().map(Vec::len).sum();
    for (i, seed) in seeds.iter().enumerate() {
        fs::write(dir.join(format!("seed-{i:02}")), seed).unwrap();
    }
    println!("{target}: {} seeds, {total} bytes", seeds.len());
}

/// Two caches that have exchanged hellos, as the fuzz targets open them.
fn caches(dir: &Path) -> (PeerCache, PeerCache) {
    let config = CacheConfig {
        store: StoreConfig {
            capacity: 64 << 20,
            segment_size: 8 << 20,
        },
        max_peer_entries: 1 << 16,
    };
    let edge = PeerCache::open(&dir.join("edge"), config, CacheId([1; 16])).unwrap();
    let core = PeerCache::open(&dir.join("core"), config, CacheId([2; 16])).unwrap();
    core.handle_hello(&edge.hello());
    edge.handle_hello(&core.hello());
    (edge, core)
}

fn stream_headers() -> Vec<Vec<u8>> {
    let open = |destination: Target, source: &str| {
        OpenRepr {
            flow_id: 0x0102_0304_0506_0708,
            services: Services::REDUCE,
            destination,
            source: source.parse().unwrap(),
        }
        .emit()
        .unwrap()
    };
    vec![
        open(
            Target::Addr("192.0.2.7:443".parse().unwrap()),
            "10.0.0.1:50000",
        ),
        open(
            Target::Addr("[2001:db8::7]:80".parse().unwrap()),
            "[2001:db8::1]:50000",
        ),
        open(Target::Domain("server.example".into(), 8080), "10.0.0.1:1"),
        ReplyRepr {
            status: Status::Connected,
        }
        .emit()
        .to_vec(),
        ReplyRepr {
            status: Status::Refused,
        }
        .emit()
        .to_vec(),
    ]
}

fn control_messages(cache_hello: &[u8]) -> Vec<Vec<u8>> {
    [
        (true, None, cache_hello.to_vec()),
        (false, None, Vec::new()),
        (false, Some("198.18.5.11:4433"), cache_hello.to_vec()),
        (true, Some("[2001:db8::11]:4433"), Vec::new()),
    ]
    .into_iter()
    .map(|(reply_wanted, advertise, cache_hello)| {
        ControlRepr::Hello {
            services: Services::REDUCE,
            reply_wanted,
            advertise: advertise.and_then(|a| a.parse().ok()),
            cache_hello,
        }
        .emit()
        .unwrap()
    })
    .collect()
}

fn packet(kind: Kind, seq: u32) -> Packet {
    Packet {
        kind,
        seq,
        echo_seq: seq,
        sent_ns: 1_000_000 * u64::from(seq),
        received: seq,
        duplicates: 0,
        reordered: 0,
        run_id: 0x5eed,
    }
}

fn probe_packets() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = [
        (Kind::Probe, 64),
        (Kind::Echo, 64),
        (Kind::ReportRequest, HEADER_LEN),
        (Kind::Report, HEADER_LEN),
    ]
    .into_iter()
    .map(|(kind, size)| packet(kind, 3).emit(size))
    .collect();
    // A train of header-sized datagrams and its end, as the target cuts
    // its input first (HEADER_LEN bytes each): the reflector answers it.
    let mut train = Vec::new();
    for seq in 0..4 {
        train.extend(packet(Kind::Train, seq).emit(HEADER_LEN));
    }
    train.extend(packet(Kind::TrainEnd, 4).emit(HEADER_LEN));
    seeds.push(train);
    seeds
}

/// `len` bytes that depend on `n`, like an encrypted QUIC packet.
fn datagram(n: u32, len: usize) -> Vec<u8> {
    let mut state = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

fn parity_datagrams() -> Vec<Vec<u8>> {
    use wanopt_proto::fec::parity;
    let mut seeds = Vec::new();
    for (count, len, parity_count) in [(2, 40, 2), (3, 100, 4)] {
        let sources: Vec<Vec<u8>> = (0..count).map(|n| datagram(n, len)).collect();
        let refs: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
        seeds.extend(parity(7, &refs, parity_count).unwrap().into_iter().take(2));
    }
    // Two 64-byte datagrams, then a parity datagram over them (the target
    // cuts its input into 64-byte datagrams first, every third one parity).
    let sources: Vec<Vec<u8>> = (0..2).map(|n| datagram(n, 64)).collect();
    let refs: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
    let mut cut = sources.concat();
    cut.extend(&parity(1, &refs, 2).unwrap()[0]);
    seeds.push(cut);
    seeds
}

/// A source, a repair and a report of continuous FEC, and a run the
/// target cuts into 64-byte datagrams (source, repair, report in turn).
fn fec_stream_datagrams() -> Vec<Vec<u8>> {
    use std::time::{Duration, Instant};
    use wanopt_proto::fec_stream::{Encoder, Params, Report};
    let mut enc = Encoder::new();
    let mut repairs = Vec::new();
    let params = Params::new(2, 1, 1).unwrap();
    enc.set_params(Some(params), Duration::from_millis(5), &mut repairs);
    let mut seeds = Vec::new();
    for n in 0..2 {
        let d = datagram(n, 59);
        let mut w = Vec::new();
        enc.wrap(0, &d, &mut w);
        enc.on_sent(Instant::now(), &d, &mut repairs);
        seeds.push(w);
    }
    seeds.push(repairs[0].clone());
    let report = Report {
        received: 100,
        lost: 3,
        recovered: 2,
        runs: 3,
        repairs: 4,
    };
    seeds.push(report.to_bytes().to_vec());
    let mut cut: Vec<u8> = seeds[0].clone();
    cut.resize(64, 0);
    seeds.push(cut);
    seeds
}

/// UDP flow frames as the target cuts its input (7, 40 and 300 bytes):
/// whole one-byte datagrams; a 170-byte datagram in five 40-byte
/// fragments; a 1,470-byte one in five 300-byte fragments; a run of
/// numbers.
fn udp_flow_inputs() -> Vec<Vec<u8>> {
    use wanopt_proto::udp_flow::split;
    let mut seeds = Vec::new();
    for (payload, frame) in [(1usize, 7usize), (170, 40), (1470, 300)] {
        let mut frames = Vec::new();
        for seq in 0..3u32 {
            let bytes: Vec<u8> = (0..payload).map(|i| (i as u32 + seq) as u8).collect();
            split(u64::from(seq) + 1, seq, &bytes, frame, &mut frames).unwrap();
        }
        seeds.push(frames.concat());
    }
    seeds.push(
        [0u32, 1, 3, 2, 2, 9, u32::MAX]
            .iter()
            .flat_map(|n| n.to_be_bytes())
            .collect(),
    );
    seeds
}

/// A probe sealed with the target's key (it parses), and records of
/// probes to its monitors (8 bytes each: time step, flags, path, mode,
/// sequence step, hold, received): a clean exchange on two paths, then
/// one with replays, reflections and a probe on the wrong path.
/// A data datagram, an ack, and records of two paths' arrivals for the
/// reorder buffer (`fuzz/fuzz_targets/bond.rs`: 0.1 ms steps, path, the up
/// set, the `gseq` step).
fn bond_inputs() -> Vec<Vec<u8>> {
    use wanopt_proto::bond::{AckRepr, DataRepr};
    use wanopt_proto::path::PathId;
    let data = DataRepr {
        path: PathId::new(2).unwrap(),
        hold_exempt: false,
        reinjected: true,
        alone: false,
        gseq: 1000,
        pseq: 400,
        tx_us: 123_456,
    };
    let ack = AckRepr {
        path: PathId::new(1).unwrap(),
        largest: 399,
        received: 390,
        ack_delay: 125,
        sack: 0xFFFF_FFFF_FFFF_FF7F,
    };
    let mut records = vec![30, 0x80, 0b110, 0, 0, 0];
    for n in 0..60u8 {
        // Two paths, path 2 behind; now and then a gap or a repeat.
        let step = match n % 11 {
            5 => 2,
            9 => 0xFF,
            _ => 1,
        };
        records.extend([10, 1 + n % 2, 0, step, 0, 1]);
    }
    vec![data.emit(b"a QUIC packet"), ack.emit().to_vec(), records]
}

fn path_probe_inputs() -> Vec<Vec<u8>> {
    use wanopt_proto::path::{PathId, PathKey, PathMode, ProbeRepr};
    let key = PathKey::from_exporter(&[0x5A; 36]);
    let probe = ProbeRepr {
        bind: true,
        from_client: true,
        answer: false,
        path: PathId::new(1).unwrap(),
        mode: PathMode::Duplicate,
        seq: 7,
        sent_us: 140_000,
        echo_us: 120_000,
        hold_us: 1_000,
        received: 6,
        rate_kbit: None,
        realtime: false,
    };
    let mut seeds = vec![
        probe.emit(&key).to_vec(),
        ProbeRepr {
            rate_kbit: Some(19_400),
            ..probe
        }
        .emit(&key)
        .to_vec(),
        ProbeRepr {
            mode: PathMode::Bond,
            realtime: true,
            ..probe
        }
        .emit(&key)
        .to_vec(),
    ];
    // Flags byte: 0x01 to the server, 0x02 BIND, 0x04 FROM_CLIENT,
    // 0x08 ANSWER, 0x10 echo the newest probe the receiver sent.
    let to_server = 0x01 | 0x02 | 0x04 | 0x10;
    let to_client = 0x10;
    let mut clean = Vec::new();
    for n in 0..24u8 {
        for path in [0, 1] {
            clean.extend([10, to_server, path, 2, 1, 1, 0, n]);
            clean.extend([10, to_client, path, 0, 1, 1, 0, n]);
        }
    }
    seeds.push(clean.clone());
    let mut mangled = clean;
    for (i, record) in mangled.chunks_exact_mut(8).enumerate() {
        match i % 7 {
            // A replay, a reflection, a probe on the wrong path.
            1 => record[4] = 0xFF,
            3 => record[1] ^= 0x04,
            5 => record[2] |= 0x80,
            _ => {}
        }
    }
    seeds.push(mangled);
    seeds
}

/// A TCP/IPv4 Ethernet frame with valid checksums.
fn tcp_frame(flags: u8, options: &[u8], payload: &[u8]) -> Vec<u8> {
    let (client, server) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let options_len = options.len().div_ceil(4) * 4;
    let ip_len = 20 + 20 + options_len + payload.len();
    let mut frame = vec![0u8; 14 + ip_len];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (ip_len as u16).to_be_bytes();
    frame[14..34].copy_from_slice(&[
        0x45, 0x02, total[0], total[1], 0, 0, 0x40, 0, 64, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    frame[26..30].copy_from_slice(&client);
    frame[30..34].copy_from_slice(&server);
    Ipv4Packet::new_checked(&mut frame[14..])
        .unwrap()
        .fill_checksum();
    let tcp = &mut frame[34..];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
    tcp[12] = (((20 + options_len) / 4) as u8) << 4;
    tcp[13] = flags;
    tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
    tcp[20..20 + options.len()].copy_from_slice(options);
    tcp[20 + options_len..].copy_from_slice(payload);
    TcpSegment::new_checked(&mut frame[34..])
        .unwrap()
        .fill_checksum_v4(client, server);
    frame
}

/// A UDP/IPv4 frame from 10.0.0.1:40000 to 10.0.0.2:`port` with `payload`.
fn udp_frame(port: u16, payload: &[u8]) -> Vec<u8> {
    let ip_len = 20 + 8 + payload.len();
    let mut frame = vec![0u8; 14 + ip_len];
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (ip_len as u16).to_be_bytes();
    frame[14..34].copy_from_slice(&[
        0x45, 0, total[0], total[1], 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    Ipv4Packet::new_checked(&mut frame[14..])
        .unwrap()
        .fill_checksum();
    frame[34..36].copy_from_slice(&40000u16.to_be_bytes());
    frame[36..38].copy_from_slice(&port.to_be_bytes());
    frame[38..40].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    frame[42..].copy_from_slice(payload);
    frame
}

fn netem_inputs() -> Vec<Vec<u8>> {
    const SYN: u8 = 0x02;
    const ACK: u8 = 0x10;
    // MSS 1460, SACK permitted, timestamps, NOP, window scale 7.
    let syn_options = [
        2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
    ];
    // NOP, NOP, SACK block.
    let sack = [1, 1, 5, 10, 0, 0, 0x03, 0xe8, 0, 0, 0x07, 0xd0];
    let frames = [
        tcp_frame(SYN | 0xc0, &syn_options, b""),
        tcp_frame(ACK, &sack, b""),
        tcp_frame(ACK, b"", &[0x55; 300]),
    ];
    // Knob byte, then records: gap (x10 us), length (big-endian), frame.
    let records = |knobs: u8, gap: u8| {
        let mut input = vec![knobs];
        for frame in &frames {
            input.push(gap);
            input.extend((frame.len() as u16).to_be_bytes());
            input.extend(frame);
        }
        input
    };
    let mut whole = vec![0x10];
    whole.extend(&frames[0]);
    // UDP: knob 0x01 polices 10.0.0.1 (the source) to 48 kbit/s with a
    // 1510-byte bucket, so a burst of 1000-byte datagrams is cut; knob
    // 0x33 blocks port 53 (0x33 + 2) and lets TCP beside it through.
    let datagrams = |knobs: u8, port: u16, count: usize| {
        let mut input = vec![knobs];
        for i in 0..count {
            let frame = if i % 4 == 3 {
                frames[2].clone()
            } else {
                udp_frame(port, &[i as u8; 1000])
            };
            input.push(if i % 8 == 0 { 200 } else { 0 });
            input.extend((frame.len() as u16).to_be_bytes());
            input.extend(frame);
        }
        input
    };
    let mut whole_udp = vec![0x33];
    whole_udp.extend(udp_frame(53, b"query"));
    vec![
        records(0x00, 1),
        records(0x35, 20),
        records(0xff, 0),
        whole,
        datagrams(0x01, 4433, 12),
        datagrams(0x33, 53, 6),
        whole_udp,
    ]
}

/// Some text, as a node carries it (PPMd takes it, LZ4 and zstd compress it).
fn text(lines: u32) -> Vec<u8> {
    let line = b"GET /reports/latency?office=3&month=11 HTTP/1.1 200 OK ";
    let mut text = Vec::new();
    for i in 0..lines {
        text.extend_from_slice(&line[(i * 7) as usize % 20..]);
        text.extend_from_slice(format!("{} ", i * 13).as_bytes());
    }
    text
}

/// The wire of one flow: `pieces` pushed, flushed after each, finished.
fn encode(cache: &PeerCache, compression: Compression, pieces: &[&[u8]]) -> Vec<u8> {
    let config = EncoderConfig {
        compression,
        ..EncoderConfig::default()
    };
    let mut enc = Encoder::new(cache.clone(), config).unwrap();
    let mut wire = Vec::new();
    for piece in pieces {
        enc.push(piece, &mut wire);
        enc.flush(&mut wire);
    }
    enc.finish(&mut wire);
    wire
}

fn codec_inputs(edge: &PeerCache, core: &PeerCache) -> Vec<Vec<u8>> {
    // The target decodes its input as it is and after a preamble: the
    // encoder's wire without its preamble (9 bytes) serves the second.
    let preamble = 9;
    let short = text(6);
    let long = text(14);
    let mut seeds = Vec::new();
    for compression in [
        Compression::Lz4,
        Compression::ZSTD,
        Compression::Lzma { preset: 5 },
        Compression::Max { preset: 5 },
    ] {
        let wire = encode(edge, compression, &[&short, &long]);
        let mut out = Vec::new();
        Decoder::new(core.clone(), DecoderConfig::default())
            .push(&wire, &mut out)
            .unwrap();
        assert_eq!(out, [&short[..], &long[..]].concat());
        seeds.push(wire[preamble..].to_vec());
    }
    // Plain bytes for the round trips: the first bytes are the knobs.
    seeds.push(short);
    seeds.push(b"\x05\x01\x01\x01 two pieces, released".to_vec());
    seeds
}

/// `codec_wire`'s seeds: `codec_frames`' wires without their preamble,
/// a whole wire, and one whose second half is references to its first.
fn codec_wires(edge: &PeerCache, core: &PeerCache, stripped: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut seeds = stripped.to_vec();
    let short = text(6);
    let big = text(120);
    let flows: [&[&[u8]]; 2] = [&[&short], &[&big, &big]];
    for pieces in flows {
        let wire = encode(edge, Compression::Lz4, pieces);
        let mut out = Vec::new();
        Decoder::new(core.clone(), DecoderConfig::default())
            .push(&wire, &mut out)
            .unwrap();
        assert_eq!(out, pieces.concat());
        seeds.push(wire);
    }
    seeds
}

fn ppmd_inputs(edge: &PeerCache) -> Vec<Vec<u8>> {
    // A StreamRun's raw length (2 bytes, big-endian), then its bytes.
    let wire = encode(
        edge,
        Compression::Max { preset: 5 },
        &[&text(10), &text(25)],
    );
    let mut seeds = Vec::new();
    let mut rest = &wire[..];
    while let Ok(frame) = Frame::new_checked(rest) {
        if let Ok(Some(DataRepr::StreamRun { run, .. })) = DataRepr::parse(&frame) {
            assert_eq!(run.codec, Codec::Ppmd);
            if let [0, 0, high, low] = run.lengths {
                let mut seed = vec![*high, *low];
                seed.extend_from_slice(run.bytes);
                seeds.push(seed);
            }
        }
        rest = &rest[frame.total_len()..];
    }
    assert!(!seeds.is_empty(), "text goes through PPMd");
    seeds
}

/// A step byte, then frames as the TCP carrier writes them (the last one
/// cut short), and a stream that is not a carrier's (a zero length).
fn carrier_inputs() -> Vec<Vec<u8>> {
    use wanopt_proto::carrier::encode;
    let mut wire = vec![7];
    for len in [1, 40, 1200, 1472] {
        encode(&vec![0xC3; len], &mut wire).expect("frames encode");
    }
    let mut cut = wire.clone();
    cut.truncate(wire.len() - 100);
    vec![wire, cut, vec![1, 0, 0, 0, 5]]
}
