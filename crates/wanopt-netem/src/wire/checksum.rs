//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).

/// Adds `data` as big-endian 16-bit words (an odd last byte is padded with
/// zero) to the one's-complement running sum `sum`, without folding.
pub fn accumulate(mut sum: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(2);
    for pair in &mut chunks {
        sum += u64::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(u16::from_be_bytes([*last, 0]));
    }
    sum
}

/// Folds a running sum to 16 bits (one's-complement addition of the carries).
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Folds a running sum to 16 bits and complements it: the checksum field value.
pub fn finish(sum: u64) -> u16 {
    !fold(sum)
}

/// The new checksum after the bytes it covers changed from `old` to `new`
/// (two equally long regions, at an even offset, whose checksum field, if
/// inside, is zero in both): RFC 1624 equation 3 over the whole region.
pub fn update_region(old_checksum: u16, old: &[u8], new: &[u8]) -> u16 {
    let old_sum = fold(accumulate(0, old));
    let new_sum = fold(accumulate(0, new));
    finish(u64::from(!old_checksum) + u64::from(!old_sum) + u64::from(new_sum))
}

/// The checksum of `data` (RFC 1071).
pub fn checksum(data: &[u8]) -> u16 {
    finish(accumulate(0, data))
}

/// The new checksum after one 16-bit word covered by `old_checksum` changed
/// from `old_word` to `new_word`: RFC 1624 equation 3, `HC' = ~(~HC + ~m + m')`.
pub fn update(old_checksum: u16, old_word: u16, new_word: u16) -> u16 {
    let sum = u64::from(!old_checksum) + u64::from(!old_word) + u64::from(new_word);
    finish(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_sums() {
        // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn incremental_update_matches_recomputation() {
        let mut data = [0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06];
        let before = checksum(&data);
        let old_word = u16::from_be_bytes([data[0], data[1]]);
        data[1] = 0x03;
        let new_word = u16::from_be_bytes([data[0], data[1]]);
        assert_eq!(update(before, old_word, new_word), checksum(&data));
    }
}
