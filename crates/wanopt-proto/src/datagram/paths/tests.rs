//! The path table's unit tests.

use super::*;
use crate::path::wire::{EXPORTER_LEN, PROBE_RATE_LEN};
use crate::path::PROBE_LEN;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn key(seed: u8) -> PathKey {
    PathKey::from_exporter(&[seed; EXPORTER_LEN])
}

/// A client probe on `path` with sequence number `seq`, BIND set.
fn client_probe(path: u8, seq: u32, key: &PathKey) -> ProbeBytes {
    client_repr(path, seq).emit(key)
}

/// The fields of [`client_probe`]'s probe (sent at `1000 * seq` µs).
fn client_repr(path: u8, seq: u32) -> ProbeRepr {
    ProbeRepr {
        bind: true,
        from_client: true,
        answer: false,
        path: PathId::new(path).unwrap(),
        mode: PathMode::Failover,
        seq,
        sent_us: 1000 * seq,
        echo_us: 0,
        hold_us: 0,
        received: 0,
        rate_kbit: None,
        realtime: false,
    }
}

#[test]
fn the_edge_sends_on_its_first_path_and_maps_every_path_back() {
    let now = Instant::now();
    let canonical = addr("192.0.2.1:4433");
    let mut table = PathTable::default();
    assert!(!table.has_routes());
    table.configure(
        now,
        canonical,
        &[
            PathSpec::new("10.0.0.1".parse().unwrap(), canonical),
            PathSpec::new("10.1.0.1".parse().unwrap(), addr("198.51.100.1:4433")),
        ],
        PathMode::Failover,
    );
    assert!(table.has_routes());
    // Before any connection: the first path.
    let hop = table
        .route(now, canonical, 1200, 0, &mut Vec::new())
        .unwrap();
    assert_eq!(hop.destination, canonical);
    assert_eq!(hop.src_ip, Some("10.0.0.1".parse().unwrap()));
    // Another destination is sent unchanged.
    assert_eq!(
        table.route(now, addr("203.0.113.9:53"), 100, 0, &mut Vec::new()),
        None
    );
    // Both paths map back to the canonical address; a stranger does not.
    let second = addr("198.51.100.1:4433");
    assert_eq!(
        table.map(second, Some("10.1.0.1".parse().unwrap()), 1300),
        Some((canonical, None))
    );
    assert_eq!(table.map(canonical, None, 10).map(|m| m.0), Some(canonical));
    assert_eq!(table.map(addr("203.0.113.9:4433"), None, 10), None);
    let status = table.status(canonical).unwrap();
    assert_eq!(status.paths.len(), 2);
    assert!(status.paths[0].data && !status.paths[1].data);
    assert_eq!(status.paths[0].sent_bytes, 1200);
    assert_eq!(status.paths[1].received_bytes, 1300);
    // A failed handshake moves the next one to path 2, then back.
    table.rotate_fallback(canonical);
    assert_eq!(
        table
            .route(now, canonical, 0, 0, &mut Vec::new())
            .unwrap()
            .destination,
        second
    );
    table.rotate_fallback(canonical);
    assert_eq!(
        table
            .route(now, canonical, 0, 0, &mut Vec::new())
            .unwrap()
            .destination,
        canonical
    );
}

#[test]
fn two_paths_to_one_remote_are_told_apart_by_the_local_address() {
    let now = Instant::now();
    let canonical = addr("192.0.2.1:4433");
    let mut table = PathTable::default();
    table.configure(
        now,
        canonical,
        &[
            PathSpec::new("10.0.0.1".parse().unwrap(), canonical),
            PathSpec::new("10.1.0.1".parse().unwrap(), canonical),
        ],
        PathMode::Failover,
    );
    let second = table.find(canonical, Some("10.1.0.1".parse().unwrap()));
    assert_eq!(second, Some((0, PathId::new(2).unwrap())));
    let first = table.find(canonical, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(first, Some((0, PathId::new(1).unwrap())));
}

#[test]
fn only_a_keyed_fresh_bind_probe_binds_a_path_at_the_core() {
    let now = Instant::now();
    let canonical = addr("192.0.2.7:50000");
    let mut table = PathTable::default();
    let k = key(7);
    table.bind(now, canonical, None, k.clone(), Side::Server);
    assert!(!table.has_routes());
    // A connection whose edge does not probe is no peer of the table:
    // its datagrams are looked up among path peers only.
    assert!(table.peers.is_empty());
    let other = addr("198.51.100.7:40000");
    // Unkeyed (another connection's key), forged (a flipped tag bit),
    // truncated: nothing bound.
    let wrong = client_probe(2, 1, &key(8));
    assert!(matches!(
        table.on_probe(now, other, None, &wrong),
        Err(ProbeDropped::UnknownToken(_))
    ));
    let mut forged = client_probe(2, 1, &k);
    forged[PROBE_LEN - 1] ^= 1;
    assert!(matches!(
        table.on_probe(now, other, None, &forged),
        Err(ProbeDropped::Verify(_))
    ));
    assert!(table.on_probe(now, other, None, &forged[..20]).is_err());
    assert!(!table.has_routes());
    assert_eq!(table.map(other, None, 10), None);
    assert_eq!(table.probes_dropped, 3);
    // The real one binds path 2 to its source.
    let good = client_probe(2, 1, &k);
    table.on_probe(now, other, None, &good).unwrap();
    assert_eq!(table.map(other, None, 10), Some((canonical, None)));
    // Its replay from elsewhere moves nothing.
    let third = addr("203.0.113.7:40000");
    assert!(matches!(
        table.on_probe(now, third, None, &good),
        Err(ProbeDropped::Rejected(_))
    ));
    assert_eq!(table.map(third, None, 10), None);
    // The server answers on the bound path (return routability).
    let mut out = Vec::new();
    table.poll(now, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.destination, other);
    // The connection goes: so does everything it bound.
    table.unbind(canonical);
    assert_eq!(table.map(other, None, 10), None);
    assert!(table
        .on_probe(now, other, None, &client_probe(2, 2, &k))
        .is_err());
}

#[test]
fn declared_rates_cap_the_edge_and_its_probes_ask_the_core_for_the_down_rate() {
    let now = Instant::now();
    let (canonical, second) = (addr("192.0.2.1:4433"), addr("198.51.100.1:4433"));
    let mut edge = PathTable::default();
    edge.configure(
        now,
        canonical,
        &[
            PathSpec {
                up_bps: Some(20_000_000),
                down_bps: Some(40_000_000),
                ..PathSpec::new("10.0.0.1".parse().unwrap(), canonical)
            },
            PathSpec::new("10.1.0.1".parse().unwrap(), second),
        ],
        PathMode::Failover,
    );
    let k = key(5);
    edge.bind(now, canonical, None, k.clone(), Side::Client);
    // The edge's QUIC is capped under path 1's up rate, in UDP payload.
    let cap = edge.rate_cap(canonical).unwrap();
    assert_eq!(cap, (20e6 / 8.0 * QUIC_SHARE) as u64);
    assert!(cap < 2_500_000 && cap > 2_200_000);
    // Its probes on path 1 ask for 40 Mbit/s; those on path 2 for nothing.
    let mut out = Vec::new();
    edge.poll(now, &mut out);
    let on = |to: SocketAddr| out.iter().find(|(hop, _)| hop.destination == to).unwrap();
    assert_eq!(on(canonical).1.len(), PROBE_RATE_LEN);
    assert_eq!(on(second).1.len(), PROBE_LEN);
    // The core learns it from the probe and caps its own sending.
    let mut core = PathTable::default();
    let edge_addr = addr("203.0.113.9:50000");
    core.bind(now, edge_addr, None, k, Side::Server);
    core.on_probe(now, edge_addr, None, &on(canonical).1)
        .unwrap();
    let status = core.status(edge_addr).unwrap();
    assert_eq!(status.paths[0].send_mbps, Some(40.0));
    assert_eq!(
        core.rate_cap(edge_addr),
        Some((40e6 / 8.0 * QUIC_SHARE) as u64)
    );
    assert_eq!(
        edge.status(canonical).unwrap().paths[0].send_mbps,
        Some(20.0)
    );
    assert_eq!(edge.status(canonical).unwrap().paths[1].send_mbps, None);
    // A rate of 0 is none; one under 64 kbit/s is taken as 64.
    assert_eq!(shape::from_kbit(0), None);
    assert_eq!(shape::from_kbit(1), Some(64_000));
    assert_eq!(shape::from_kbit(19_400), Some(19_400_000));
}

#[test]
fn the_core_sends_real_time_datagrams_on_the_path_the_edge_s_newest_probes_name() {
    let now = Instant::now();
    let canonical = addr("192.0.2.7:50000");
    let (one, two) = (addr("198.51.100.7:40000"), addr("203.0.113.7:40000"));
    let mut table = PathTable::default();
    let k = key(7);
    table.bind(now, canonical, None, k.clone(), Side::Server);
    let realtime = |table: &PathTable| table.status(canonical)?.realtime.map(|r| r.path);
    let mut probe = |path: u8, seq: u32, bit: bool, from: SocketAddr| {
        let bytes = ProbeRepr {
            realtime: bit,
            ..client_repr(path, seq)
        }
        .emit(&k);
        table.on_probe(now, from, None, &bytes).unwrap();
        realtime(&table)
    };
    assert_eq!(probe(1, 1, false, one), None);
    assert_eq!(probe(2, 1, false, two), None);
    assert_eq!(probe(2, 2, true, two), Some(2));
    // The edge moves them to path 1 (sent at 5 ms); path 2's last probe
    // with the bit (sent at 3 ms) comes after it: stale, not followed.
    assert_eq!(probe(1, 5, true, one), Some(1));
    assert_eq!(probe(2, 3, true, two), Some(1));
    assert_eq!(probe(2, 4, false, two), Some(1));
    // The edge's SLA is gone: path 1's probes no longer name it.
    assert_eq!(probe(1, 6, false, one), None);
}
