//! Feeds arbitrary bytes to the datagram layer under QUIC as what the
//! socket received, cut into GRO buffers a few ways, from a peer it
//! samples and sends FEC to and from a stranger: it must never panic,
//! never grow a buffer, and hand on nothing longer than the buffer it is
//! given; whatever it then sends of its own is non-empty.
#![no_main]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use wanopt_proto::datagram::{DatagramLayer, DuplicationMode, PathSample, Received};
use wanopt_proto::fec_stream::FecMode;
use wanopt_proto::path::wire::EXPORTER_LEN;
use wanopt_proto::path::{PathKey, Side};

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let peer: SocketAddr = "192.0.2.1:4433".parse().unwrap();
    let stranger: SocketAddr = "203.0.113.9:5000".parse().unwrap();
    let mut layer = DatagramLayer::new(DuplicationMode::Tails, 1);
    layer.set_fec(FecMode::Auto, 0.25);
    let key = PathKey::from_exporter(&[5; EXPORTER_LEN]);
    layer.bind_paths(now, peer, None, key, Side::Server);
    let sample = PathSample {
        sent_packets: 1000,
        lost_packets: 20,
        srtt: Duration::from_millis(40),
        rate_estimate: Some(1e6),
        udp_tx_bytes: 0,
        udp_rx_bytes: 0,
        mtu: 1472,
        datagrams_sent: 0,
        congested_rounds: None,
        filled_rounds: None,
        random_loss: None,
        startup: false,
    };
    layer.handle_sample(now, peer, &sample);
    let mut out = vec![0u8; 1500];
    for (i, stride) in [1usize, 9, 64, 300, 1500].into_iter().enumerate() {
        let at = now + Duration::from_millis(30 * i as u64);
        let mut buf = data.to_vec();
        let addr = if i % 2 == 0 { peer } else { stranger };
        let mut meta = [Received {
            addr,
            len: buf.len(),
            stride,
            ecn: None,
            dst_ip: None,
        }];
        layer.handle_received(at, &mut [buf.as_mut_slice()], &mut meta);
        assert!(meta[0].len <= data.len());
        while let Some(m) = layer.poll_received(&mut out) {
            assert!(m.len <= out.len() && m.stride == m.len);
        }
        layer.handle_timeout(at);
        while let Some(t) = layer.poll_transmit(at) {
            assert!(!t.contents.is_empty());
        }
        while layer.poll_event().is_some() {}
    }
});
