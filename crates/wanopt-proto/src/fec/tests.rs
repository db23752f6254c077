use proptest::prelude::*;

use super::*;

/// A datagram of `len` bytes whose content (and last four bytes) depend on
/// `n`, like an encrypted QUIC packet.
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

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

#[test]
fn parity_datagrams_fit_the_path_and_parse_back() {
    let sources: Vec<Vec<u8>> = (0..32).map(|n| datagram(n, 1472)).collect();
    let parity = parity(7, &refs(&sources), 4).unwrap();
    assert_eq!(parity.len(), 4);
    for (i, p) in parity.iter().enumerate() {
        // 10 + 32 x 6 + 736: well under a 1472-byte datagram.
        assert_eq!(p.len(), 938);
        assert!(is_parity(p));
        // Not a QUIC packet: the fixed bit is clear.
        assert_eq!(p[0] & 0x40, 0);
        let parsed = Parity::parse(p).unwrap();
        assert_eq!((parsed.group, parsed.parity_count, parsed.index), (7, 4, i));
        assert_eq!(parsed.sources.len(), 32);
        assert_eq!(parsed.sources[3], (datagram_id(&sources[3]), 1472));
    }
    // QUIC packets are never taken for parity: long and short headers
    // both have the fixed bit set.
    assert!(!is_parity(&[0xC0, 0, 0]) && !is_parity(&[0x40, 1]) && !is_parity(&[]));
}

#[test]
fn the_receiver_rebuilds_up_to_half_as_many_sources_as_parity_shards() {
    let sources: Vec<Vec<u8>> = (0..20)
        .map(|n| datagram(n, if n == 19 { 148 } else { 1472 }))
        .collect();
    let parity = parity(1, &refs(&sources), 4).unwrap();
    // Two lost (one of them the short last one): rebuilt once the second
    // parity shard of each arrives.
    let mut rx = Receiver::new();
    for (n, d) in sources.iter().enumerate() {
        if n != 5 && n != 19 {
            rx.on_datagram(d);
        }
    }
    assert_eq!(rx.on_parity(&parity[0]).unwrap(), Vec::<Vec<u8>>::new());
    assert_eq!(rx.on_parity(&parity[2]).unwrap(), Vec::<Vec<u8>>::new());
    let mut rebuilt = rx.on_parity(&parity[3]).unwrap();
    assert_eq!(rebuilt.len(), 0, "three shards: not yet two sources' worth");
    rebuilt = rx.on_parity(&parity[1]).unwrap();
    assert_eq!(rebuilt, vec![sources[5].clone(), sources[19].clone()]);
    // The group is done: a repeated shard rebuilds nothing more.
    assert!(rx.on_parity(&parity[1]).unwrap().is_empty());
    let s = rx.stats();
    assert_eq!((s.parity, s.rebuilt, s.unrecoverable), (5, 2, 0));

    // One lost: two shards suffice.
    let mut rx = Receiver::new();
    for (n, d) in sources.iter().enumerate() {
        if n != 11 {
            rx.on_datagram(d);
        }
    }
    assert!(rx.on_parity(&parity[3]).unwrap().is_empty());
    assert_eq!(rx.on_parity(&parity[0]).unwrap(), vec![sources[11].clone()]);

    // Nothing lost: nothing rebuilt, the group counted complete.
    let mut rx = Receiver::new();
    for d in &sources {
        rx.on_datagram(d);
    }
    assert!(rx.on_parity(&parity[0]).unwrap().is_empty());
    assert_eq!(rx.stats().complete, 1);

    // Three lost of four shards' worth (two): not rebuilt, counted.
    let mut rx = Receiver::new();
    for d in &sources[3..] {
        rx.on_datagram(d);
    }
    for p in &parity {
        assert!(rx.on_parity(p).unwrap().is_empty());
    }
    assert_eq!(rx.stats().unrecoverable, 1);
}

#[test]
fn malformed_or_inconsistent_parity_is_refused() {
    let sources: Vec<Vec<u8>> = (0..4).map(|n| datagram(n, 600)).collect();
    let parity = parity(9, &refs(&sources), 2).unwrap();
    let good = &parity[0];
    assert_eq!(Parity::parse(&good[..5]), Err(FecError::Truncated));
    assert_eq!(
        Parity::parse(&good[..good.len() - 1]),
        Err(FecError::Truncated)
    );
    let mut long = good.clone();
    long.push(0);
    assert_eq!(Parity::parse(&long), Err(FecError::Invalid("length")));
    let mut odd = good.clone();
    odd[6] = 3;
    assert_eq!(Parity::parse(&odd), Err(FecError::Invalid("parity count")));
    let mut index = good.clone();
    index[7] = 2;
    assert_eq!(Parity::parse(&index), Err(FecError::Invalid("shard index")));
    let mut none = good.clone();
    none[5] = 0;
    assert_eq!(Parity::parse(&none), Err(FecError::Invalid("source count")));
    assert_eq!(Parity::parse(&[0x40; 20]), Err(FecError::NotParity));
    // A second shard of the same group that lists other sources.
    let mut rx = Receiver::new();
    rx.on_datagram(&sources[0]);
    assert!(rx.on_parity(&parity[0]).unwrap().is_empty());
    let mut other = parity[1].clone();
    other[HEADER_LEN] ^= 1;
    assert!(rx.on_parity(&other).is_err());
    assert_eq!(rx.stats().refused, 1);
    // The sender refuses what it cannot protect.
    assert!(super::parity(0, &[], 2).is_err());
    assert!(super::parity(0, &refs(&sources), 3).is_err());
    assert!(super::parity(0, &[&[1, 2][..]], 2).is_err());
    let huge = vec![0u8; 2 * MAX_SHARD + 1];
    assert!(super::parity(0, &[&huge[..]], 2).is_err());
}

#[test]
fn a_wrong_source_with_the_same_identifier_is_not_passed_off_as_rebuilt() {
    let sources: Vec<Vec<u8>> = (0..6).map(|n| datagram(n, 1000)).collect();
    let parity = parity(3, &refs(&sources), 2).unwrap();
    // The receiver holds, under source 4's identifier and length, other
    // bytes (a CRC collision), and lost source 1: the parity rebuilds
    // wrong bytes for source 1, whose checksum gives them away.
    let mut rx = Receiver::new();
    for (n, d) in sources.iter().enumerate() {
        if n != 1 && n != 4 {
            rx.on_datagram(d);
        }
    }
    let mut impostor = sources[4].clone();
    impostor[10] ^= 0xFF;
    rx.recent.push_back((datagram_id(&sources[4]), impostor));
    assert!(rx.on_parity(&parity[0]).unwrap().is_empty());
    assert!(rx.on_parity(&parity[1]).unwrap().is_empty());
    let s = rx.stats();
    assert_eq!((s.rebuilt, s.unrecoverable), (0, 0));
    assert_eq!(s.wrong, 1);
    // Without the impostor it would have been rebuilt.
    let mut rx = Receiver::new();
    for (n, d) in sources.iter().enumerate() {
        if n != 1 {
            rx.on_datagram(d);
        }
    }
    assert!(rx.on_parity(&parity[0]).unwrap().is_empty());
    assert_eq!(rx.on_parity(&parity[1]).unwrap(), vec![sources[1].clone()]);
}

proptest! {
    /// Any sources, any losses within what the parity covers, any order of
    /// parity shards: exactly the lost sources come back, byte for byte.
    #[test]
    fn lost_sources_come_back_byte_exact(
        lens in proptest::collection::vec(4usize..1500, 1..=MAX_SOURCES),
        parity_pairs in 1usize..=MAX_PARITY / 2,
        lost_seed in any::<u64>(),
        order_seed in any::<u64>(),
        other_traffic in 0usize..40,
    ) {
        let sources: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(n, &len)| datagram(n as u32 + 1000, len))
            .collect();
        let parity_count = 2 * parity_pairs;
        let shards = parity(42, &refs(&sources), parity_count).unwrap();
        let max_lost = parity_pairs.min(sources.len());
        let lost: Vec<usize> = (0..sources.len())
            .filter(|i| (lost_seed >> (i % 64)) & 1 == 1)
            .take(max_lost)
            .collect();
        let mut rx = Receiver::new();
        for (i, d) in sources.iter().enumerate() {
            if !lost.contains(&i) {
                rx.on_datagram(d);
            }
        }
        for n in 0..other_traffic {
            rx.on_datagram(&datagram(n as u32 + 50_000, 200));
        }
        let mut order: Vec<usize> = (0..parity_count).collect();
        order.sort_by_key(|i| (order_seed.rotate_left(*i as u32 * 7)) & 0xFF);
        let mut rebuilt = Vec::new();
        for i in order {
            rebuilt.extend(rx.on_parity(&shards[i]).unwrap());
        }
        let mut expected: Vec<Vec<u8>> = lost.iter().map(|&i| sources[i].clone()).collect();
        expected.sort();
        rebuilt.sort();
        prop_assert_eq!(rebuilt, expected);
    }

    /// Arbitrary bytes never panic the parser or the receiver.
    #[test]
    fn arbitrary_parity_bytes_are_harmless(
        bytes in proptest::collection::vec(any::<u8>(), 0..1200),
        marked in any::<bool>(),
    ) {
        let mut bytes = bytes;
        if marked && !bytes.is_empty() {
            bytes[0] = MARKER;
        }
        let mut rx = Receiver::new();
        rx.on_datagram(&datagram(1, 500));
        let _ = rx.on_parity(&bytes);
    }
}
