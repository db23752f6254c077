//! The lab's worker processes as a scenario waits for them: each given
//! until a deadline, then killed, and its output an error unless it
//! succeeded.

use std::process::{Child, Output};
use std::thread;
use std::time::{Duration, Instant};

/// Waits for `child` until `deadline`, then kills it (it is the caller's);
/// `what` names it in the error.
pub fn finish(mut child: Child, deadline: Instant, what: &str) -> Result<Output, String> {
    while Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().map_err(|e| e.to_string()),
            Ok(None) => thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(format!("{what} did not end in time"))
}

/// `out` if its process succeeded, else its stderr as the error of `what`.
pub fn ok_output(out: Output, what: &str) -> Result<Output, String> {
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn a_process_is_waited_for_or_killed_at_its_deadline() {
        let spawn = |script: &str| {
            Command::new("sh")
                .args(["-c", script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let soon = || Instant::now() + Duration::from_secs(5);
        let out = finish(spawn("echo hi"), soon(), "echo").and_then(|o| ok_output(o, "echo"));
        assert_eq!(out.map(|o| o.stdout).ok(), Some(b"hi\n".to_vec()));
        let out =
            finish(spawn("echo no >&2; exit 3"), soon(), "sh").and_then(|o| ok_output(o, "sh"));
        assert_eq!(out.err().as_deref(), Some("sh failed: no"));
        let late = Instant::now() + Duration::from_millis(200);
        let out = finish(spawn("sleep 5"), late, "sleep");
        assert_eq!(out.err().as_deref(), Some("sleep did not end in time"));
    }
}
