//! How a command ends: its exit code, a failure as one line on stderr,
//! and standard output, whose reader going away (`wanopt flows | head -1`)
//! is a normal end, not an error (as ripgrep's `crates/core/main.rs`
//! treats it: the Rust runtime ignores SIGPIPE, so a write to a closed
//! pipe comes back as an error instead of ending the process).

use std::io::{ErrorKind, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Exit code of a usage or configuration error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code of a runtime failure.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code of `host-check` when a setting falls short.
pub const EXIT_SHORT: u8 = 3;

/// A command that failed: the exit code and what went wrong.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What went wrong.
    pub error: anyhow::Error,
}

impl Failure {
    /// A usage or configuration error (exit code 2).
    pub fn usage(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code: EXIT_USAGE,
            error: error.into(),
        }
    }

    /// A runtime failure (exit code 1).
    pub fn runtime(error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code: EXIT_FAILURE,
            error: error.into(),
        }
    }

    /// The exit code, after the error's one line on stderr; none when
    /// standard output's reader went away, which ends the command
    /// normally.
    pub fn exit(self) -> ExitCode {
        if stdout_closed() {
            return ExitCode::SUCCESS;
        }
        eprintln!("wanopt: {}", one_line(&self.error));
        ExitCode::from(self.code)
    }
}

/// Whether a write to standard output found its reader gone.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether a write to standard output found its reader gone.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Standard output, locked; a write that finds the reader gone is an
/// error the command passes up like any other, and remembered, so that
/// the command ends with exit code 0 and nothing on stderr.
pub struct Stdout(std::io::StdoutLock<'static>);

/// Standard output for a command's results.
pub fn stdout() -> Stdout {
    Stdout(std::io::stdout().lock())
}

/// Notes a broken pipe in `result`.
fn noted<T>(result: std::io::Result<T>) -> std::io::Result<T> {
    if let Err(e) = &result {
        if e.kind() == ErrorKind::BrokenPipe {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
        }
    }
    result
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        noted(self.0.write(buf))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        noted(self.0.flush())
    }
}

/// Writes `text` to standard output (a runtime failure when it cannot).
pub fn print(text: &str) -> Result<(), Failure> {
    let mut out = stdout();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure::runtime(anyhow::Error::new(e).context("writing to standard output")))
}

/// The chain of causes joined on one line, never a backtrace; a cause that
/// an error's own message already quotes is not repeated.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if line.contains(&cause) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&cause);
    }
    line.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::one_line;

    /// An error whose message quotes its source, as `thiserror`'s
    /// `#[error("...: {source}")]` does.
    #[derive(Debug)]
    struct Quoting(std::io::Error);

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read key file k: {}", self.0)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_are_joined_once_on_one_line() {
        let io = || std::io::Error::other("disk\non fire");
        let quoted = anyhow::Error::new(Quoting(io()));
        assert_eq!(one_line(&quoted), "cannot read key file k: disk on fire");
        let context = anyhow::Error::new(io()).context("starting the core");
        assert_eq!(one_line(&context), "starting the core: disk on fire");
    }
}
