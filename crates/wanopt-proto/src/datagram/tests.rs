//! Unit tests of the layer as a whole, on a virtual clock.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::*;
use crate::fec;

/// A sample of the 3G downlink (150 ms, 2 Mbit/s): packets sent and
/// lost, UDP bytes sent, all since the connection began.
fn sample(sent: u64, lost: u64, tx: u64) -> PathSample {
    PathSample {
        sent_packets: sent,
        lost_packets: lost,
        srtt: Duration::from_millis(150),
        rate_estimate: Some(250_000.0),
        udp_tx_bytes: tx,
        udp_rx_bytes: 0,
        mtu: 1472,
        datagrams_sent: 0,
        congested_rounds: None,
        filled_rounds: None,
        random_loss: None,
        startup: false,
    }
}

/// A few microseconds: the time between two calls in a row.
const TICK: Duration = Duration::from_micros(5);

#[test]
fn a_path_reports_its_remembered_capacity_to_its_flows() {
    let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
    let mut now = Instant::now();
    // Kept whatever the mode: flows use it too.
    let mut dup = DatagramLayer::new(DuplicationMode::Off, 1);
    assert_eq!(dup.capacity_bps(now, peer), None);
    dup.handle_sample(now, peer, &sample(1000, 0, 1_000_000));
    now += TICK;
    let c = dup.capacity_bps(now, peer).unwrap();
    assert!((c - 2e6).abs() < 1e3, "{c}");
    // The traffic turns sparse: BBR's estimate falls, the capacity
    // does not.
    let mut sparse = sample(1100, 0, 1_100_000);
    sparse.rate_estimate = Some(1_000.0);
    now += TICK;
    dup.handle_sample(now, peer, &sparse);
    now += TICK;
    let c = dup.capacity_bps(now, peer).unwrap();
    assert!(c > 1.99e6, "{c}");
    assert_eq!(
        dup.capacity_bps(now, "192.0.2.2:4433".parse().unwrap()),
        None
    );
}

#[test]
fn auto_repeats_tails_on_a_lossy_path_unless_it_carries_bulk_traffic() {
    let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
    let mut now = Instant::now();
    let mut dup = DatagramLayer::new(DuplicationMode::Auto, 1);
    // Clean so far: off.
    dup.handle_sample(now, peer, &sample(1000, 0, 1_000_000));
    assert!(!dup.duplication_status(peer).active);
    // 1% loss, and the path sent 1.4 MB since the last sample a few
    // microseconds ago: bulk, so still off.
    now += TICK;
    dup.handle_sample(now, peer, &sample(2000, 20, 2_400_000));
    let s = dup.duplication_status(peer);
    assert!(!s.active && s.bulk, "{s:?}");
    assert!(s.loss_percent > 0.9, "{s:?}");
    // Nothing sent since: sparse, lossy: on, sized for the path.
    now += Duration::from_millis(20);
    dup.handle_sample(now, peer, &sample(2000, 20, 2_400_000));
    let s = dup.duplication_status(peer);
    assert!(s.active && !s.bulk, "{s:?}");
    assert_eq!(s.tail_bytes, Some(7_500));
    assert_eq!(s.quiet_ms, Some(37.5));
    // `off` never, `tails` always.
    let mut off = DatagramLayer::new(DuplicationMode::Off, 1);
    off.handle_sample(now, peer, &sample(2000, 20, 0));
    assert!(!off.duplication_status(peer).active);
    let mut tails = DatagramLayer::new(DuplicationMode::Tails, 1);
    tails.handle_sample(now, peer, &sample(10, 0, 0));
    assert!(tails.duplication_status(peer).active);
    tails.remove_peer(peer);
    assert!(!tails.duplication_status(peer).active);
}

#[test]
fn a_stream_ending_on_a_bulk_path_switches_its_tails_on_until_acknowledged() {
    let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
    let mut now = Instant::now();
    let mut dup = DatagramLayer::new(DuplicationMode::Auto, 1);
    // Before the first sample a stream end is not counted.
    assert!(!dup.handle_stream_end(now, peer, true));
    dup.handle_sample(now, peer, &sample(1000, 10, 1_000_000));
    now += TICK;
    dup.handle_sample(now, peer, &sample(2000, 20, 2_400_000));
    let s = dup.duplication_status(peer);
    assert!(!s.active && s.bulk && s.ending_streams == 0, "{s:?}");
    // A flow wrote its last bytes: tails on at once, busy or not.
    assert!(dup.handle_stream_end(now, peer, true));
    let s = dup.duplication_status(peer);
    assert!(s.active && s.bulk && s.ending_streams == 1, "{s:?}");
    assert_eq!(s.tail_bytes, Some(7_500));
    assert!(dup.tails_active());
    // Samples keep them on while the end is awaited, even bulk ones.
    now += TICK;
    dup.handle_sample(now, peer, &sample(3000, 30, 3_800_000));
    let s = dup.duplication_status(peer);
    assert!(s.active && s.bulk, "{s:?}");
    // Acknowledged: the next bulk sample switches the tails off again.
    assert!(dup.handle_stream_end(now, peer, false));
    assert_eq!(dup.duplication_status(peer).ending_streams, 0);
    now += TICK;
    dup.handle_sample(now, peer, &sample(4000, 40, 5_200_000));
    let s = dup.duplication_status(peer);
    assert!(!s.active && s.bulk, "{s:?}");
    // `off` never counts a stream end.
    let mut off = DatagramLayer::new(DuplicationMode::Off, 1);
    off.handle_sample(now, peer, &sample(2000, 20, 0));
    assert!(!off.handle_stream_end(now, peer, true));
    let s = off.duplication_status(peer);
    assert!(!s.active && s.ending_streams == 0, "{s:?}");
}

/// A datagram like a QUIC packet (fixed bit set), `len` bytes.
fn quic_like(n: u8, len: usize) -> Vec<u8> {
    let mut d: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(n) ^ n).collect();
    d[0] = 0x40 | (n & 0x3F);
    d
}

#[test]
fn parity_is_taken_out_of_received_batches_and_lost_datagrams_handed_on() {
    let now = Instant::now();
    let mut layer = DatagramLayer::new(DuplicationMode::Auto, 1);
    let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
    let sources: Vec<Vec<u8>> = (1..=10).map(|n| quic_like(n, 1000)).collect();
    let refs: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
    let parity = fec::parity(0, &refs, 4).unwrap();
    let p_len = parity[0].len();

    // A first group only makes the layer start remembering this peer.
    let mut storage = vec![vec![0u8; 4 * 1500]; 2];
    let mut meta = [Received {
        addr: peer,
        len: 0,
        stride: 0,
        ecn: None,
        dst_ip: None,
    }; 2];
    let fill = |storage: &mut Vec<Vec<u8>>, meta: &mut [Received; 2], batches: &[Vec<&[u8]>]| {
        for (i, batch) in batches.iter().enumerate() {
            let mut at = 0;
            for d in batch {
                storage[i][at..at + d.len()].copy_from_slice(d);
                at += d.len();
            }
            meta[i] = Received {
                addr: peer,
                len: at,
                stride: batch[0].len(),
                ecn: None,
                dst_ip: None,
            };
        }
    };
    let received =
        |layer: &mut DatagramLayer, storage: &mut Vec<Vec<u8>>, meta: &mut [Received; 2]| {
            let mut bufs: Vec<&mut [u8]> = storage.iter_mut().map(|b| b.as_mut_slice()).collect();
            layer.handle_received(now, &mut bufs, meta);
        };
    fill(
        &mut storage,
        &mut meta,
        &[vec![&parity[0]], vec![&sources[0]]],
    );
    received(&mut layer, &mut storage, &mut meta);
    assert_eq!(meta[0].len, 0, "parity never reaches quinn");
    assert_eq!(meta[1].len, 1000);

    // Now the sources arrive in GRO batches, two of them lost (the
    // third and the ninth),
    // then the parity: first as a GRO batch of its own, then one shard
    // in the middle of a batch of datagrams the same size.
    fill(
        &mut storage,
        &mut meta,
        &[
            vec![&sources[0], &sources[1], &sources[3]],
            vec![
                &sources[4],
                &sources[5],
                &sources[6],
                &sources[7],
                &sources[9],
            ],
        ],
    );
    received(&mut layer, &mut storage, &mut meta);
    let same_size = quic_like(60, p_len);
    let short = quic_like(61, 100);
    fill(
        &mut storage,
        &mut meta,
        &[
            vec![&parity[0], &parity[1], &parity[2]],
            vec![&same_size, &parity[3], &short],
        ],
    );
    received(&mut layer, &mut storage, &mut meta);
    assert_eq!(meta[0].len, 0);
    // The rest moved up: still `stride` apart, the short one last.
    assert_eq!((meta[1].len, meta[1].stride), (p_len + 100, p_len));
    assert_eq!(&storage[1][..p_len], &same_size[..]);
    assert_eq!(&storage[1][p_len..p_len + 100], &short[..]);

    // The next polls hand the two rebuilt datagrams over, byte exact.
    let mut buf = vec![0u8; 1500];
    let mut got = Vec::new();
    while let Some(m) = layer.poll_received(&mut buf) {
        assert!(m.addr == peer && m.stride == m.len);
        got.push(buf[..m.len].to_vec());
    }
    assert_eq!(got.len(), 2);
    got.sort();
    let mut lost = vec![sources[2].clone(), sources[8].clone()];
    lost.sort();
    assert_eq!(got, lost);
    assert_eq!(layer.duplication_status(peer).rebuilt, 2);
    assert_eq!(layer.poll_received(&mut buf), None);
}
