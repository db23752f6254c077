//! Byte sizes on the command line and in the config file: `512MiB`,
//! `20GB`, `65536`, and the tunnel window settings built from them.

use anyhow::bail;
use serde::Deserialize;

/// A byte-size setting: the flag's value, else the config file's `key`,
/// else `default`.
pub(super) fn size_setting(
    flag: Option<u64>,
    file: Option<&str>,
    key: &str,
    default: u64,
) -> anyhow::Result<u64> {
    match (flag, file) {
        (Some(size), _) => Ok(size),
        (None, Some(text)) => {
            parse_size(text).map_err(|e| anyhow::anyhow!("config file: {key}: {e}"))
        }
        (None, None) => Ok(default),
    }
}

/// A byte size in the config file: an integer (bytes) or a string with a
/// unit, as on the command line (`stream-window = "16MiB"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum FileSize {
    Bytes(u64),
    Text(String),
}

/// The smallest tunnel window accepted: a window of 0 stalls every flow,
/// and one of a few bytes makes a request take a round trip per datagram.
pub const MIN_WINDOW: u64 = 64 << 10;

/// A tunnel window setting (flag, else config file, else `default`),
/// at least [`MIN_WINDOW`].
pub(super) fn window_setting(
    flag: Option<u64>,
    file: Option<FileSize>,
    key: &str,
    default: u64,
) -> anyhow::Result<u64> {
    let (bytes, given) = match (flag, file) {
        (Some(bytes), _) => (bytes, format!("--{key} {bytes}")),
        (None, Some(FileSize::Bytes(bytes))) => (bytes, format!("config file: {key} = {bytes}")),
        (None, Some(FileSize::Text(text))) => (
            parse_size(&text).map_err(|e| anyhow::anyhow!("config file: {key}: {e}"))?,
            format!("config file: {key} = {text:?}"),
        ),
        (None, None) => return Ok(default),
    };
    if bytes < MIN_WINDOW {
        bail!("{given} is too small: give at least 64KiB (0 would stall every flow)");
    }
    Ok(bytes)
}

/// Parses a byte size: a number with an optional unit (B, KB/MB/GB/TB in
/// powers of 1000, KiB/MiB/GiB/TiB in powers of 1024; K/M/G/T alone are
/// binary too).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("bad size {text:?} (expected e.g. 512MiB, 4GiB, 20GB)"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "bad size unit in {text:?} (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    let bytes = number * scale as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("size {text:?} out of range"));
    }
    Ok(bytes as u64)
}
