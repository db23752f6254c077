//! The `waas-3g` file set: the names and sizes of the reference's Table 1,
//! generated deterministically (see [`super::office`] for what the bytes
//! look like), the "edit" of the open-edit-save test, and a cheap LZ77
//! estimate of how far a file compresses.

use serde::Serialize;

use super::{office, ooxml};
use crate::rng::{hash_name, mix, Rng};

/// The default seed of the file set (same seed, same bytes).
pub const DEFAULT_SEED: u64 = 4;

/// What a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A Word 97-2003 document.
    Word,
    /// An Excel 97-2003 workbook.
    Excel,
    /// A PowerPoint 97-2003 presentation.
    PowerPoint,
    /// A zip archive of compressed data.
    Zip,
    /// A Word document, Office Open XML (`.docx`).
    Docx,
    /// An Excel workbook, Office Open XML (`.xlsx`).
    Xlsx,
    /// A PowerPoint presentation, Office Open XML (`.pptx`).
    Pptx,
}

impl Kind {
    /// How the reference names the kind in its tables.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Word => "Word",
            Kind::Excel => "Excel",
            Kind::PowerPoint => "PowerPoint",
            Kind::Zip => "Zip",
            Kind::Docx => "Word (OOXML)",
            Kind::Xlsx => "Excel (OOXML)",
            Kind::Pptx => "PowerPoint (OOXML)",
        }
    }

    /// Whether the file is an Office Open XML document ([`OOXML_SET`]).
    pub fn is_ooxml(self) -> bool {
        matches!(self, Kind::Docx | Kind::Xlsx | Kind::Pptx)
    }
}

/// One file of the set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FileSpec {
    /// Its name, as in the reference (`2M.xls`).
    pub name: &'static str,
    /// Its size in bytes, as in the reference.
    pub size: usize,
    /// What it is.
    pub kind: Kind,
}

const fn file(name: &'static str, size: usize, kind: Kind) -> FileSpec {
    FileSpec { name, size, kind }
}

/// The reference's Table 1 ("Test File Set"), smallest first per kind:
/// 18 Office files of 48 KB to 2.1 MB and a 5.6 MB zip, 17,579,447 bytes.
pub const FILE_SET: [FileSpec; 19] = [
    file("50K.doc", 57_344, Kind::Word),
    file("100K.doc", 108_032, Kind::Word),
    file("200K.doc", 219_136, Kind::Word),
    file("500K.doc", 513_024, Kind::Word),
    file("1M.doc", 1_006_592, Kind::Word),
    file("2M.doc", 2_055_168, Kind::Word),
    file("50K.xls", 53_248, Kind::Excel),
    file("100K.xls", 105_472, Kind::Excel),
    file("200K.xls", 222_208, Kind::Excel),
    file("500K.xls", 468_480, Kind::Excel),
    file("1M.xls", 1_054_720, Kind::Excel),
    file("2M.xls", 2_108_928, Kind::Excel),
    file("50K.ppt", 48_640, Kind::PowerPoint),
    file("100K.ppt", 112_640, Kind::PowerPoint),
    file("200K.ppt", 218_112, Kind::PowerPoint),
    file("500K.ppt", 524_800, Kind::PowerPoint),
    file("1M.ppt", 1_100_288, Kind::PowerPoint),
    file("2M.ppt", 1_960_448, Kind::PowerPoint),
    file("5M.zip", 5_642_167, Kind::Zip),
];

/// The second set: Office Open XML documents ([`super::ooxml`]), what
/// Office has saved since 2007, 1.3 MB in all.
pub const OOXML_SET: [FileSpec; 5] = [
    file("40K.docx", 40_000, Kind::Docx),
    file("300K.docx", 300_000, Kind::Docx),
    file("80K.xlsx", 80_000, Kind::Xlsx),
    file("400K.xlsx", 400_000, Kind::Xlsx),
    file("500K.pptx", 500_000, Kind::Pptx),
];

/// The name of the set `spec` belongs to: `office-set` ([`FILE_SET`]) or
/// `ooxml-set` ([`OOXML_SET`]); a copy test's row names its set so.
pub fn set_name(spec: &FileSpec) -> &'static str {
    if spec.kind.is_ooxml() {
        "ooxml-set"
    } else {
        "office-set"
    }
}

/// The file of either set called `name`.
pub fn find(name: &str) -> Option<&'static FileSpec> {
    FILE_SET
        .iter()
        .chain(OOXML_SET.iter())
        .find(|f| f.name == name)
}

/// The bytes of `spec` for `seed`: the same seed always gives the same
/// bytes, different files (and seeds) different bytes.
pub fn generate(spec: &FileSpec, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(mix(seed) ^ hash_name(spec.name.as_bytes()));
    match spec.kind {
        Kind::Word => office::word(&mut rng, spec.size),
        Kind::Excel => office::excel(&mut rng, spec.size),
        Kind::PowerPoint => office::powerpoint(&mut rng, spec.size),
        Kind::Zip => office::zip(&mut rng, spec.size),
        Kind::Docx | Kind::Xlsx | Kind::Pptx => ooxml_generation(spec, seed, 0),
    }
}

fn ooxml_generation(spec: &FileSpec, seed: u64, generation: u64) -> Vec<u8> {
    let kind = match spec.kind {
        Kind::Xlsx => ooxml::Document::Excel,
        Kind::Pptx => ooxml::Document::PowerPoint,
        _ => ooxml::Document::Word,
    };
    ooxml::generate(kind, spec.name, spec.size, seed, generation)
}

/// Bytes the edit of [`edit`] overwrites.
pub const EDIT_BYTES: usize = 16;

/// The file after the "edit" of open-edit-save number `generation`: the
/// 16 bytes in the middle overwritten with `rev NNNNNNNNNNNN` (size
/// unchanged, as Office rewrites the whole file). Generation 0 is the
/// original.
pub fn edit(content: &[u8], generation: u64) -> Vec<u8> {
    let mut out = content.to_vec();
    if generation == 0 {
        return out;
    }
    let label = format!("rev {:012}", generation % 1_000_000_000_000);
    let start = out.len().saturating_sub(EDIT_BYTES) / 2;
    for (dst, src) in out.iter_mut().skip(start).zip(label.bytes()) {
        *dst = src;
    }
    out
}

/// The bytes of `name` at edit `generation` (0: the original), or `None`
/// for a name outside the sets. An OOXML document's edit is a line
/// inserted in its text and the archive written again, as Office saves.
pub fn content(name: &str, seed: u64, generation: u64) -> Option<Vec<u8>> {
    find(name).map(|spec| {
        if spec.kind.is_ooxml() {
            ooxml_generation(spec, seed, generation)
        } else {
            edit(&generate(spec, seed), generation)
        }
    })
}

/// Estimated size of `data` after a greedy LZ77 compressor of the LZ4 kind
/// (4-byte hash, 64 KiB window, one candidate per hash, a token per
/// sequence): what a fast WAN-optimizer compressor can gain, as a sanity
/// check of the generated files (no compression library needed).
pub fn lz_estimate(data: &[u8]) -> usize {
    const HASH_BITS: u32 = 16;
    const WINDOW: usize = 65_535;
    fn length_bytes(n: usize) -> usize {
        if n < 15 {
            0
        } else {
            (n - 15) / 255 + 1
        }
    }
    let word = |i: usize| -> Option<u32> {
        data.get(i..i + 4)
            .and_then(|s| <[u8; 4]>::try_from(s).ok())
            .map(u32::from_le_bytes)
    };
    let mut table = vec![usize::MAX; 1 << HASH_BITS];
    let mut size = 0;
    let mut literals = 0;
    let mut i = 0;
    while let Some(v) = word(i) {
        let h = (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize;
        let candidate = table[h];
        table[h] = i;
        if candidate != usize::MAX && i - candidate <= WINDOW && word(candidate) == Some(v) {
            let mut len = 4;
            while data.get(i + len).is_some() && data.get(i + len) == data.get(candidate + len) {
                len += 1;
            }
            size += 1 + literals + length_bytes(literals) + 2 + length_bytes(len - 4);
            literals = 0;
            i += len;
        } else {
            literals += 1;
            i += 1;
        }
    }
    literals += data.len() - i.min(data.len());
    size + 1 + literals + length_bytes(literals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(data: &[u8]) -> f64 {
        data.len() as f64 / lz_estimate(data).max(1) as f64
    }

    #[test]
    fn sizes_and_names_are_the_references() {
        let total: usize = FILE_SET.iter().map(|f| f.size).sum();
        assert_eq!(total, 17_579_447);
        assert_eq!(find("2M.xls").map(|f| f.size), Some(2_108_928));
        assert!(find("3M.doc").is_none());
        for f in FILE_SET.iter().filter(|f| f.kind != Kind::Zip) {
            assert_eq!(f.size % 512, 0, "{}", f.name);
        }
    }

    #[test]
    fn same_seed_same_bytes_exact_sizes() {
        for name in ["50K.doc", "50K.xls", "50K.ppt", "100K.doc"] {
            let spec = find(name).copied().unwrap_or(FILE_SET[0]);
            let a = generate(&spec, 7);
            let b = generate(&spec, 7);
            let c = generate(&spec, 8);
            assert_eq!(a.len(), spec.size, "{name}");
            assert_eq!(a, b, "{name}");
            assert_ne!(a, c, "{name}");
            assert_eq!(&a[..8], &[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
        }
        // Different files are different, not copies of one another.
        let doc = generate(&FILE_SET[0], 1);
        let doc2 = generate(&FILE_SET[1], 1);
        assert_ne!(doc[4096..8192], doc2[4096..8192]);
    }

    #[test]
    fn office_documents_compress_and_the_zip_does_not() {
        // Sizes large enough for the real mix (pictures, tables, text).
        let seed = DEFAULT_SEED;
        let mut by_kind: Vec<(Kind, f64)> = Vec::new();
        for name in ["500K.doc", "500K.xls", "500K.ppt", "1M.doc", "1M.xls"] {
            let spec = find(name).copied().unwrap_or(FILE_SET[0]);
            let r = ratio(&generate(&spec, seed));
            by_kind.push((spec.kind, r));
        }
        for (kind, r) in &by_kind {
            match kind {
                // English text compresses about 2x with LZ4-class
                // compressors; pictures pull a document down.
                Kind::Word => assert!((1.4..8.0).contains(r), "doc ratio {r}"),
                // Spreadsheets compress best.
                Kind::Excel => assert!((1.8..12.0).contains(r), "xls ratio {r}"),
                // Presentations are mostly pictures.
                Kind::PowerPoint => assert!((1.02..1.6).contains(r), "ppt ratio {r}"),
                Kind::Zip | Kind::Docx | Kind::Xlsx | Kind::Pptx => {}
            }
        }
        let ppt_max = by_kind
            .iter()
            .filter(|(k, _)| *k == Kind::PowerPoint)
            .map(|(_, r)| *r)
            .fold(0.0, f64::max);
        assert!(by_kind
            .iter()
            .filter(|(k, _)| *k != Kind::PowerPoint)
            .all(|(_, r)| *r > ppt_max));
        let zip = find("5M.zip").copied().unwrap_or(FILE_SET[18]);
        let data = generate(&zip, seed);
        assert_eq!(data.len(), 5_642_167);
        assert_eq!(&data[..4], b"PK\x03\x04");
        assert_eq!(&data[data.len() - 22..data.len() - 18], b"PK\x05\x06");
        let r = ratio(&data);
        assert!(r < 1.005, "zip ratio {r}");
    }

    /// The OOXML set: exact sizes, zip archives, already compressed; an
    /// edit is a new archive of about the same size.
    #[test]
    fn ooxml_documents_are_compressed_archives_of_their_size() {
        for spec in OOXML_SET {
            let data = generate(&spec, DEFAULT_SEED);
            assert_eq!(data.len(), spec.size, "{}", spec.name);
            assert_eq!(&data[..4], b"PK\x03\x04");
            assert!(ratio(&data) < 1.1, "{} ratio {}", spec.name, ratio(&data));
            let edited = content(spec.name, DEFAULT_SEED, 3).unwrap_or_default();
            assert_ne!(edited, data);
            assert!(edited.len().abs_diff(data.len()) < 1_000, "{}", spec.name);
            assert_eq!(set_name(&spec), "ooxml-set");
        }
        assert_eq!(set_name(&FILE_SET[0]), "office-set");
    }

    #[test]
    fn edit_changes_a_few_bytes_in_the_middle() {
        let original = generate(&FILE_SET[6], 1);
        assert_eq!(edit(&original, 0), original);
        let edited = edit(&original, 3);
        assert_eq!(edited.len(), original.len());
        let changed: Vec<usize> = (0..original.len())
            .filter(|i| original[*i] != edited[*i])
            .collect();
        assert!(!changed.is_empty() && changed.len() <= EDIT_BYTES);
        let mid = original.len() / 2;
        assert!(changed.iter().all(|i| i.abs_diff(mid) <= EDIT_BYTES));
        assert_ne!(edit(&original, 4), edited);
        assert_eq!(edit(&original, 3), edited);
        // Tiny inputs do not panic.
        assert_eq!(edit(b"abc", 1).len(), 3);
        assert_eq!(content("50K.xls", 1, 3), Some(edited));
        assert_eq!(content("nope.doc", 1, 0), None);
    }

    #[test]
    fn lz_estimate_on_known_inputs() {
        assert!(lz_estimate(&[]) <= 1);
        let zeros = vec![0u8; 100_000];
        assert!(lz_estimate(&zeros) < 1_000);
        let mut random = vec![0u8; 100_000];
        Rng::new(5).fill(&mut random);
        let r = lz_estimate(&random);
        assert!((100_000..101_000).contains(&r), "{r}");
    }
}
