//! The path table's unit tests.

use super::*;
use crate::path::wire::EXPORTER_LEN;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn key(seed: u8) -> PathKey {
    PathKey::from_exporter(&[seed; EXPORTER_LEN])
}

/// A client probe on `path` with sequence number `seq`, BIND set.
fn client_probe(path: u8, seq: u32, key: &PathKey) -> [u8; PROBE_LEN] {
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
    }
    .emit(key)
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
            ("10.0.0.1".parse().unwrap(), canonical),
            ("10.1.0.1".parse().unwrap(), addr("198.51.100.1:4433")),
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
            ("10.0.0.1".parse().unwrap(), canonical),
            ("10.1.0.1".parse().unwrap(), canonical),
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
