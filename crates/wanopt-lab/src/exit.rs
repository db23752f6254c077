//! Exit codes of the `wanopt lab` commands: 0 success, 1 a runtime
//! failure, 2 a usage error (one line on stderr), and a child's own code
//! where a command runs one (`lab exec`).

/// A usage error: one line on stderr, exit code 2.
pub(crate) fn usage(message: impl std::fmt::Display) -> anyhow::Result<i32> {
    eprintln!("wanopt lab: {message}");
    Ok(2)
}

/// A child's exit status as a shell would report it.
pub(crate) fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        _ => 1,
    }
}
