//! In-place rewriting of TCP options.

use crate::wire::tcp::{kind, TcpOptions};

/// Replaces every well-formed option of `kind` and length `len` with NOPs.
pub(super) fn strip(options: &mut [u8], option_kind: u8, len: usize) {
    // TCP options are at most 40 bytes, so at most 20 options of length >= 2.
    let mut offsets = [0usize; 20];
    let mut count = 0;
    for option in TcpOptions::new(options) {
        if option.kind == option_kind && option.len == len && count < offsets.len() {
            offsets[count] = option.offset;
            count += 1;
        }
    }
    for &offset in &offsets[..count] {
        if let Some(bytes) = options.get_mut(offset..offset + len) {
            bytes.fill(kind::NOP);
        }
    }
}

/// Sets the shift count of every well-formed window-scale option.
pub(super) fn set_window_scale(options: &mut [u8], shift: u8) {
    for_each(options, kind::WINDOW_SCALE, 3, |value| {
        if let Some(byte) = value.get_mut(0) {
            *byte = shift;
        }
    });
}

/// Lowers every well-formed MSS option above `mss` to `mss`.
pub(super) fn clamp_mss(options: &mut [u8], mss: u16) {
    for_each(options, kind::MSS, 4, |value| {
        if let Some(field) = value.get_mut(0..2) {
            let current = u16::from_be_bytes([field[0], field[1]]);
            if current > mss {
                field.copy_from_slice(&mss.to_be_bytes());
            }
        }
    });
}

/// Calls `edit` with the value bytes (after kind and length) of every
/// well-formed option of `option_kind` whose length is `len` (or any length
/// if `len` is 0).
pub(super) fn for_each(
    options: &mut [u8],
    option_kind: u8,
    len: usize,
    mut edit: impl FnMut(&mut [u8]),
) {
    // TCP options are at most 40 bytes, so at most 20 options of length >= 2.
    let mut found = [(0usize, 0usize); 20];
    let mut count = 0;
    for option in TcpOptions::new(options) {
        if option.kind == option_kind && (len == 0 || option.len == len) && count < found.len() {
            found[count] = (option.offset, option.len);
            count += 1;
        }
    }
    for &(offset, option_len) in &found[..count] {
        if let Some(value) = options.get_mut(offset + 2..offset + option_len) {
            edit(value);
        }
    }
}
