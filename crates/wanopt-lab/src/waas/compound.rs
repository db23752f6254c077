//! The compound-file skeleton of Office 97-2003 files (a 512-byte
//! header, streams on whole sectors, the sector allocation table and a
//! directory of 128-byte entries with UTF-16 names), the byte helpers of
//! the builders, and the parts every kind shares: already-compressed
//! pictures and a summary-information stream.

use super::text::NAMES;
use crate::rng::Rng;

/// Compound-file sector size.
pub(crate) const SECTOR: usize = 512;
/// Sector-chain markers of the allocation table.
const END_OF_CHAIN: u32 = 0xffff_fffe;
const FREE_SECTOR: u32 = 0xffff_ffff;
const FAT_SECTOR: u32 = 0xffff_fffd;

/// One named stream of a compound file.
pub(crate) struct Stream {
    /// Its directory name.
    pub(crate) name: &'static str,
    /// Its bytes.
    pub(crate) data: Vec<u8>,
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_utf16(out: &mut Vec<u8>, text: &str) {
    for unit in text.encode_utf16() {
        put_u16(out, unit);
    }
}

/// Truncates or zero-pads `data` to exactly `len` bytes.
pub(crate) fn fit(mut data: Vec<u8>, len: usize) -> Vec<u8> {
    data.resize(len, 0);
    data
}

/// Rounds `n` down to whole sectors.
pub(crate) fn sectors_floor(n: usize) -> usize {
    n / SECTOR * SECTOR
}

/// An already-compressed picture (JPEG or PNG header, random body) of
/// exactly `len` bytes.
pub(crate) fn picture(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    if rng.chance(0.7) {
        out.extend_from_slice(&[0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]);
        out.extend_from_slice(b"JFIF\0\x01\x01\x01\x00\x48\x00\x48\x00\x00");
    } else {
        out.extend_from_slice(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR");
        put_u32(&mut out, rng.range(200, 1600) as u32);
        put_u32(&mut out, rng.range(200, 1200) as u32);
    }
    let start = out.len().min(len);
    out.resize(len, 0);
    if let Some(body) = out.get_mut(start..) {
        rng.fill(body);
    }
    out
}

/// Pictures of `min..=max` bytes each, back to back, exactly `len` bytes.
pub(crate) fn pictures(rng: &mut Rng, len: usize, min: u64, max: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let size = (rng.range(min, max) as usize).min(len - out.len());
        // A small record header before each picture, as the containers have.
        put_u16(&mut out, 0x0000);
        put_u16(&mut out, 0xf01d);
        put_u32(&mut out, size as u32);
        out.extend(picture(rng, size));
    }
    fit(out, len)
}

/// A property-set stream (SummaryInformation): title, author, company,
/// timestamps; exactly `len` bytes (mostly zero padding, as in real files).
pub(crate) fn summary(rng: &mut Rng, len: usize, title: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    put_u16(&mut out, 0xfffe);
    put_u16(&mut out, 0);
    put_u32(&mut out, 0x0002_0105);
    out.extend_from_slice(&[0u8; 16]);
    put_u32(&mut out, 1);
    out.extend_from_slice(&[
        0xe0, 0x85, 0x9f, 0xf2, 0xf9, 0x4f, 0x68, 0x10, 0xab, 0x91, 0x08, 0x00, 0x2b, 0x27, 0xb3,
        0xd9,
    ]);
    put_u32(&mut out, 48);
    let author = format!(
        "{} {}",
        NAMES[rng.zipf(NAMES.len())],
        NAMES[rng.zipf(NAMES.len())]
    );
    for (id, value) in [
        (2u32, title.to_string()),
        (4, author.clone()),
        (8, author),
        (18, "Microsoft Office Word".to_string()),
    ] {
        put_u32(&mut out, id);
        put_u32(&mut out, 0x1e);
        put_u32(&mut out, value.len() as u32 + 1);
        out.extend(value.bytes());
        out.push(0);
        while out.len() % 4 != 0 {
            out.push(0);
        }
    }
    for id in [12u32, 13] {
        put_u32(&mut out, id);
        put_u32(&mut out, 0x40);
        // A FILETIME in 2009.
        out.extend_from_slice(&(128_750_000_000_000_000u64 + rng.below(1 << 44)).to_le_bytes());
    }
    fit(out, len)
}

/// Lays `streams` out as a compound file of exactly `size` bytes: header,
/// streams on whole sectors, allocation table, directory.
pub(crate) fn compound(size: usize, streams: Vec<Stream>) -> Vec<u8> {
    let total_sectors = size.saturating_sub(SECTOR) / SECTOR;
    let fat_sectors = total_sectors.div_ceil(128).max(1);
    let dir_sectors = ((streams.len() + 1) * 128).div_ceil(SECTOR);
    let mut sector_of_stream = Vec::new();
    let mut body = Vec::with_capacity(size);
    let mut fat: Vec<u32> = Vec::with_capacity(total_sectors);
    for stream in &streams {
        let start = body.len() / SECTOR;
        sector_of_stream.push((start, stream.data.len()));
        body.extend_from_slice(&stream.data);
        body.resize(body.len().div_ceil(SECTOR) * SECTOR, 0);
        let end = body.len() / SECTOR;
        for s in start..end {
            fat.push(if s + 1 == end {
                END_OF_CHAIN
            } else {
                s as u32 + 1
            });
        }
    }
    let fat_start = body.len() / SECTOR;
    let dir_start = fat_start + fat_sectors;
    // Free sectors fill whatever the streams left.
    let used = dir_start + dir_sectors;
    fat.extend(std::iter::repeat_n(FAT_SECTOR, fat_sectors));
    for s in 0..dir_sectors {
        fat.push(if s + 1 == dir_sectors {
            END_OF_CHAIN
        } else {
            (dir_start + s + 1) as u32
        });
    }
    fat.resize(total_sectors.max(used), FREE_SECTOR);

    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
    out.extend_from_slice(&[0u8; 16]);
    put_u16(&mut out, 0x003e);
    put_u16(&mut out, 0x0003);
    put_u16(&mut out, 0xfffe);
    put_u16(&mut out, 9);
    put_u16(&mut out, 6);
    out.extend_from_slice(&[0u8; 10]);
    put_u32(&mut out, fat_sectors as u32);
    put_u32(&mut out, dir_start as u32);
    put_u32(&mut out, 0);
    put_u32(&mut out, 4096);
    put_u32(&mut out, END_OF_CHAIN);
    put_u32(&mut out, 0);
    put_u32(&mut out, END_OF_CHAIN);
    put_u32(&mut out, 0);
    for i in 0..109 {
        put_u32(
            &mut out,
            if i < fat_sectors {
                (fat_start + i) as u32
            } else {
                FREE_SECTOR
            },
        );
    }
    out.extend_from_slice(&body);
    for entry in fat.iter().take(fat_sectors * 128) {
        put_u32(&mut out, *entry);
    }
    out.resize(SECTOR + dir_start * SECTOR, 0xff);
    let mut dir = Vec::with_capacity(dir_sectors * SECTOR);
    let entries = std::iter::once(("Root Entry", 5u8, END_OF_CHAIN as usize, 0usize)).chain(
        streams
            .iter()
            .zip(&sector_of_stream)
            .map(|(s, (start, len))| (s.name, 2u8, *start, *len)),
    );
    for (i, (name, kind, start, len)) in entries.enumerate() {
        let mut entry = Vec::with_capacity(128);
        put_utf16(&mut entry, name);
        entry.resize(64, 0);
        put_u16(&mut entry, ((name.len() + 1) * 2) as u16);
        entry.push(kind);
        entry.push(1);
        // Siblings: a simple right-leaning chain; the root's child is entry 1.
        put_u32(&mut entry, FREE_SECTOR);
        put_u32(
            &mut entry,
            if i > 0 && i < streams.len() {
                i as u32 + 1
            } else {
                FREE_SECTOR
            },
        );
        put_u32(&mut entry, if i == 0 { 1 } else { FREE_SECTOR });
        entry.resize(116, 0);
        put_u32(&mut entry, start as u32);
        put_u32(&mut entry, len as u32);
        put_u32(&mut entry, 0);
        dir.extend(entry);
    }
    dir.resize(dir_sectors * SECTOR, 0);
    out.extend(dir);
    fit(out, size)
}

/// The capacity of a compound file of `size` bytes with `streams` streams,
/// in whole sectors.
pub(crate) fn capacity(size: usize, streams: usize) -> usize {
    let total_sectors = size.saturating_sub(SECTOR) / SECTOR;
    let fat_sectors = total_sectors.div_ceil(128).max(1);
    let dir_sectors = ((streams + 1) * 128).div_ceil(SECTOR);
    total_sectors.saturating_sub(fat_sectors + dir_sectors) * SECTOR
}
