//! The three datagrams of continuous FEC: parsing (never panics) and
//! building.

use std::fmt;

/// First byte of a source datagram.
pub const SOURCE: u8 = 0x22;
/// First byte of a repair datagram.
pub const REPAIR: u8 = 0x23;
/// First byte of a report datagram.
pub const REPORT: u8 = 0x24;
/// First bytes of the call strand's source, repair and report datagrams
/// (the same layouts; [`Strand::Calls`]).
pub const CALL_SOURCE: u8 = 0x26;
/// See [`CALL_SOURCE`].
pub const CALL_REPAIR: u8 = 0x27;
/// See [`CALL_SOURCE`].
pub const CALL_REPORT: u8 = 0x28;
/// Bytes a source datagram adds to the QUIC datagram it carries.
pub const SOURCE_HEADER: usize = 5;
/// Bytes of a repair datagram before its shard.
pub const REPAIR_HEADER: usize = 9;
/// How much longer a repair datagram is than the longest QUIC datagram of
/// its block (header, the symbol's length, rounding to even): the tunnel
/// leaves this much room under the path MTU.
pub const REPAIR_OVERHEAD: usize = REPAIR_HEADER + 3;
/// Length of a report datagram.
pub const REPORT_LEN: usize = 21;
/// Most sources in a block.
pub const MAX_K: u8 = 128;
/// Most repairs per block.
pub const MAX_M: u8 = 32;
/// Most blocks interleaved.
pub const MAX_DEPTH: u8 = 8;

/// Which of the datagrams of this layer a received datagram is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A QUIC datagram wrapped as a source.
    Source,
    /// A repair datagram.
    Repair,
    /// A receiver's report.
    Report,
}

/// Which of a peer's two codes a datagram belongs to: each has its own
/// sequence numbers, blocks, repairs and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Strand {
    /// Every QUIC datagram but those of the call strand.
    #[default]
    Bulk,
    /// The QUIC datagrams that carry real-time UDP flows: short blocks and
    /// a full code of their own, whatever the bulk beside them does.
    Calls,
}

impl Strand {
    /// The first byte of this strand's datagrams of `kind`.
    pub fn byte(self, kind: Kind) -> u8 {
        match (self, kind) {
            (Strand::Bulk, Kind::Source) => SOURCE,
            (Strand::Bulk, Kind::Repair) => REPAIR,
            (Strand::Bulk, Kind::Report) => REPORT,
            (Strand::Calls, Kind::Source) => CALL_SOURCE,
            (Strand::Calls, Kind::Repair) => CALL_REPAIR,
            (Strand::Calls, Kind::Report) => CALL_REPORT,
        }
    }
}

/// The kind and strand of `datagram` by its first byte, `None` for
/// anything else (a QUIC packet, tail parity, a path probe).
pub fn classify(datagram: &[u8]) -> Option<(Kind, Strand)> {
    match datagram.first() {
        Some(&SOURCE) => Some((Kind::Source, Strand::Bulk)),
        Some(&REPAIR) => Some((Kind::Repair, Strand::Bulk)),
        Some(&REPORT) => Some((Kind::Report, Strand::Bulk)),
        Some(&CALL_SOURCE) => Some((Kind::Source, Strand::Calls)),
        Some(&CALL_REPAIR) => Some((Kind::Repair, Strand::Calls)),
        Some(&CALL_REPORT) => Some((Kind::Report, Strand::Calls)),
        _ => None,
    }
}

/// The kind of `datagram` by its first byte (either strand), `None` for
/// anything else (a QUIC packet, tail parity, a path probe).
pub fn kind(datagram: &[u8]) -> Option<Kind> {
    classify(datagram).map(|(kind, _)| kind)
}

/// Why a datagram of this layer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamFecError {
    /// Shorter than its header says.
    #[error("FEC datagram truncated")]
    Truncated,
    /// Not the kind the parser expects.
    #[error("not an FEC {0} datagram")]
    WrongKind(&'static str),
    /// A count, size or index out of range.
    #[error("FEC datagram has an invalid {0}")]
    Invalid(&'static str),
}

/// A block code: `k` sources, `m` repairs, `depth` blocks interleaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Sources per block (1..=[`MAX_K`]).
    pub k: u8,
    /// Repairs per full block (1..=[`MAX_M`]).
    pub m: u8,
    /// Blocks interleaved (1..=[`MAX_DEPTH`]).
    pub depth: u8,
}

impl Params {
    /// Checked parameters.
    pub fn new(k: u8, m: u8, depth: u8) -> Result<Params, StreamFecError> {
        if !(1..=MAX_K).contains(&k) {
            return Err(StreamFecError::Invalid("k"));
        }
        if !(1..=MAX_M).contains(&m) {
            return Err(StreamFecError::Invalid("m"));
        }
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(StreamFecError::Invalid("depth"));
        }
        Ok(Params { k, m, depth })
    }

    /// Repairs over sources.
    pub fn ratio(&self) -> f64 {
        f64::from(self.m) / f64::from(self.k)
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.k, self.m)?;
        if self.depth > 1 {
            write!(f, "x{}", self.depth)?;
        }
        Ok(())
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A source datagram's sequence number and the QUIC datagram it carries.
pub fn parse_source(datagram: &[u8]) -> Result<(u32, &[u8]), StreamFecError> {
    if kind(datagram) != Some(Kind::Source) {
        return Err(StreamFecError::WrongKind("source"));
    }
    let header = datagram
        .get(..SOURCE_HEADER)
        .ok_or(StreamFecError::Truncated)?;
    let payload = &datagram[SOURCE_HEADER..];
    if payload.is_empty() {
        return Err(StreamFecError::Truncated);
    }
    Ok((be32(&header[1..5]), payload))
}

/// Writes the source header of `strand` for `seq` and `datagram` into
/// `out`.
pub fn write_source(strand: Strand, seq: u32, datagram: &[u8], out: &mut Vec<u8>) {
    out.push(strand.byte(Kind::Source));
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(datagram);
}

/// A repair datagram, parsed (borrowing it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repair<'a> {
    /// The block's first source.
    pub first: u32,
    /// Sources in the block.
    pub k: u8,
    /// Distance between the block's sources.
    pub stride: u8,
    /// Repairs of the block.
    pub m: u8,
    /// This repair's index (0..m).
    pub index: u8,
    /// The repair symbol.
    pub shard: &'a [u8],
}

impl Repair<'_> {
    /// The sequence number of the block's `i`-th source.
    pub fn source_seq(&self, i: u8) -> u32 {
        self.first
            .wrapping_add(u32::from(i) * u32::from(self.stride))
    }
}

/// Parses a repair datagram.
pub fn parse_repair(datagram: &[u8]) -> Result<Repair<'_>, StreamFecError> {
    if kind(datagram) != Some(Kind::Repair) {
        return Err(StreamFecError::WrongKind("repair"));
    }
    let header = datagram
        .get(..REPAIR_HEADER)
        .ok_or(StreamFecError::Truncated)?;
    let (k, stride, m, index) = (header[5], header[6], header[7], header[8]);
    if !(1..=MAX_K).contains(&k) {
        return Err(StreamFecError::Invalid("k"));
    }
    if !(1..=MAX_DEPTH).contains(&stride) {
        return Err(StreamFecError::Invalid("stride"));
    }
    if !(1..=MAX_M).contains(&m) {
        return Err(StreamFecError::Invalid("m"));
    }
    if index >= m {
        return Err(StreamFecError::Invalid("index"));
    }
    let shard = &datagram[REPAIR_HEADER..];
    if shard.len() < 4 || !shard.len().is_multiple_of(2) {
        return Err(StreamFecError::Invalid("shard length"));
    }
    Ok(Repair {
        first: be32(&header[1..5]),
        k,
        stride,
        m,
        index,
        shard,
    })
}

/// Writes a repair datagram's header of `strand` into `out`.
pub fn write_repair_header(
    strand: Strand,
    first: u32,
    k: u8,
    stride: u8,
    m: u8,
    index: u8,
    out: &mut Vec<u8>,
) {
    out.push(strand.byte(Kind::Repair));
    out.extend_from_slice(&first.to_be_bytes());
    out.extend_from_slice(&[k, stride, m, index]);
}

/// A receiver's counts, totals since it began (they wrap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// Sources that arrived.
    pub received: u32,
    /// Sources lost on the way (before repair).
    pub lost: u32,
    /// Lost sources that repair rebuilt.
    pub recovered: u32,
    /// Runs of consecutive lost sources.
    pub runs: u32,
    /// Repair datagrams that arrived.
    pub repairs: u32,
}

impl Report {
    /// The report as a datagram of the bulk strand.
    pub fn to_bytes(&self) -> [u8; REPORT_LEN] {
        self.to_bytes_of(Strand::Bulk)
    }

    /// The report as a datagram of `strand`.
    pub fn to_bytes_of(&self, strand: Strand) -> [u8; REPORT_LEN] {
        let mut out = [0u8; REPORT_LEN];
        out[0] = strand.byte(Kind::Report);
        for (i, v) in [
            self.received,
            self.lost,
            self.recovered,
            self.runs,
            self.repairs,
        ]
        .into_iter()
        .enumerate()
        {
            out[1 + 4 * i..5 + 4 * i].copy_from_slice(&v.to_be_bytes());
        }
        out
    }

    /// What happened between `earlier` and this report (counts wrap).
    pub fn since(&self, earlier: &Report) -> Report {
        Report {
            received: self.received.wrapping_sub(earlier.received),
            lost: self.lost.wrapping_sub(earlier.lost),
            recovered: self.recovered.wrapping_sub(earlier.recovered),
            runs: self.runs.wrapping_sub(earlier.runs),
            repairs: self.repairs.wrapping_sub(earlier.repairs),
        }
    }
}

/// Parses a report datagram.
pub fn parse_report(datagram: &[u8]) -> Result<Report, StreamFecError> {
    if kind(datagram) != Some(Kind::Report) {
        return Err(StreamFecError::WrongKind("report"));
    }
    if datagram.len() != REPORT_LEN {
        return Err(if datagram.len() < REPORT_LEN {
            StreamFecError::Truncated
        } else {
            StreamFecError::Invalid("length")
        });
    }
    let v = |i: usize| be32(&datagram[1 + 4 * i..5 + 4 * i]);
    Ok(Report {
        received: v(0),
        lost: v(1),
        recovered: v(2),
        runs: v(3),
        repairs: v(4),
    })
}

/// The symbol of a source: its length and bytes, zero-padded to `shard`.
pub(super) fn symbol(datagram: &[u8], shard: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&(datagram.len() as u16).to_be_bytes());
    out.extend_from_slice(datagram);
    out.resize(shard, 0);
}

/// The shard length for sources of at most `max_len` bytes.
pub(super) fn shard_len(max_len: usize) -> usize {
    (max_len + 2).next_multiple_of(2).max(4)
}
