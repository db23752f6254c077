//! The files every scenario leaves in its output folder: `results.json`
//! (its typed results as pretty JSON), `report.md`, and plots. A plot that
//! cannot be drawn is said on stderr: it never fails a run.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The results' file name.
pub const RESULTS_JSON: &str = "results.json";

/// The report's file name.
pub const REPORT_MD: &str = "report.md";

/// An output file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// The underlying error.
    pub source: std::io::Error,
}

/// Errors reading a `results.json` back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not the results of this scenario.
    #[error("{} is not the results of this scenario: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where and why it does not parse.
        source: serde_json::Error,
    },
}

/// Writes `text` to `path`.
pub fn write_file(path: &Path, text: impl AsRef<[u8]>) -> Result<(), WriteError> {
    std::fs::write(path, text).map_err(|source| WriteError {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `results.json` (`results` as pretty JSON) and `report.md` into
/// `out`.
pub fn write_results(
    out: &Path,
    results: &impl Serialize,
    report: impl AsRef<[u8]>,
) -> Result<(), WriteError> {
    let json = serde_json::to_string_pretty(results).unwrap_or_default();
    write_file(&out.join(RESULTS_JSON), json)?;
    write_file(&out.join(REPORT_MD), report)
}

/// Reads the `results.json` in `out` back.
pub fn read_results<R: DeserializeOwned>(out: &Path) -> Result<R, ReadError> {
    let path = out.join(RESULTS_JSON);
    let text = std::fs::read_to_string(&path).map_err(|source| ReadError::Io {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| ReadError::Json { path, source })
}

/// What drawing the plots gave, or `None` once the reason they were not
/// drawn is said on stderr.
pub fn plotted<T>(drawn: Result<T, impl Display>) -> Option<T> {
    drawn
        .map_err(|e| eprintln!("wanopt lab: plot not written: {e}"))
        .ok()
}

/// `, logs/ (WHAT)` when `out` has the nodes' logs, for the line that says
/// what a run wrote.
pub fn logs_note(out: &Path, what: &str) -> String {
    if out.join("logs").exists() {
        format!(", logs/ ({what})")
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_read_back_as_written() {
        let out = std::env::temp_dir().join(format!("kit-output-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&out);
        let results = serde_json::json!({"scenario": "x", "rows": [1.5, 2.0]});
        assert!(write_results(&out, &results, "# x\n").is_ok());
        let back: Result<serde_json::Value, _> = read_results(&out);
        assert_eq!(back.ok(), Some(results));
        assert_eq!(logs_note(&out, "node logs"), "");
        let wrong: Result<Vec<u8>, _> = read_results(&out);
        assert!(wrong.is_err_and(|e| e.to_string().contains("not the results")));
        let _ = std::fs::remove_dir_all(&out);
        let gone = write_file(&out.join("a/b"), "x").map_err(|e| e.to_string());
        assert!(gone.is_err_and(|e| e.starts_with("cannot write ")));
    }
}
