//! The real clients of `waas-3g`, run in the lab's client namespace:
//! curl for HTTP and FTP, smbclient for CIFS.
//!
//! curl reports its own times (`-w`): an HTTP download is timed from
//! before the connect to the last byte (a new connection per file, as a
//! browser following links); an FTP transfer from sending `RETR`/`STOR` to
//! the server's `226` (what an FTP client prints as the transfer's time;
//! read from curl's timestamped protocol trace, `-v --trace-time`), the
//! session's login and directory commands apart.
//!
//! smbclient runs as an interactive session ([`SmbSession`]): commands go
//! to its standard input one line at a time, each followed by `pwd`, whose
//! answer (printed locally, no network) marks the command's end. stdin is
//! unbuffered (`stdbuf -i0`): smbclient waits on its descriptor between
//! lines, so a line already in its stdio buffer would sit there until more
//! input arrived. The pauses of a person or an application between
//! commands are real pauses on the wire.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use super::servers::{program, Layout, ServerError, SHARE, SMB_PASSWORD, SMB_USER};
use crate::topology::{Lab, Node, SERVER_ADDR};

/// Errors of the clients.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A client program is missing.
    #[error(transparent)]
    Missing(#[from] ServerError),
    /// The client could not be started.
    #[error("cannot run {program}: {cause}")]
    Spawn {
        /// The program.
        program: &'static str,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The client failed (its message).
    #[error("{0}")]
    Failed(String),
    /// The client stopped answering.
    #[error("{what}: no answer for {seconds} s")]
    Stalled {
        /// What it was doing.
        what: String,
        /// How long it was silent.
        seconds: u64,
    },
}

/// curl's times of one transfer, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurlTimes {
    /// From the start to the end (HTTP: connect to the last byte; FTP: the
    /// whole session).
    pub total: f64,
    /// From the start until the transfer was about to begin (FTP: login,
    /// directory, passive mode, `RETR`/`STOR` answered).
    pub pretransfer: f64,
    /// FTP: from sending `RETR`/`STOR` to the `226`, from the trace.
    pub command: Option<f64>,
}

impl CurlTimes {
    /// The transfer alone: FTP from `RETR`/`STOR` to the `226`; otherwise
    /// from when the transfer was about to begin to its end.
    pub fn transfer(&self) -> f64 {
        self.command
            .unwrap_or((self.total - self.pretransfer).max(0.0))
    }
}

/// Seconds since midnight of a `--trace-time` stamp (`12:31:10.593946`).
fn time_of_day(stamp: &str) -> Option<f64> {
    let mut parts = stamp.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
}

/// From the last `RETR` or `STOR` curl sent to the last `226` it
/// received, in a `-v --trace-time` trace.
pub fn ftp_command_seconds(trace: &str) -> Option<f64> {
    let mut sent = None;
    let mut done = None;
    for line in trace.lines() {
        let mut words = line.split_whitespace();
        let (Some(stamp), Some(arrow), Some(word)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        match (arrow, word) {
            (">", "RETR" | "STOR") => sent = time_of_day(stamp),
            ("<", "226") => done = time_of_day(stamp),
            _ => {}
        }
    }
    let (sent, done) = (sent?, done?);
    // Past midnight.
    let took = if done < sent { done + 86_400.0 } else { done } - sent;
    Some(took)
}

/// Runs curl in the client namespace: downloads `url` to `local`, or with
/// `upload` sends `local` to `url`. Gives up after `stall` without
/// progress.
pub fn curl(
    lab: &Lab,
    url: &str,
    local: &Path,
    upload: bool,
    stall: Duration,
) -> Result<CurlTimes, ClientError> {
    let curl = program("curl")?;
    let mut cmd = lab.command(Node::Client, &curl.to_string_lossy());
    cmd.args(["--disable", "-sS", "--fail", "--connect-timeout", "30"])
        .args(["--speed-limit", "1", "--speed-time"])
        .arg(stall.as_secs().max(1).to_string())
        .args([
            "-w",
            "%{time_total} %{time_pretransfer}",
            "-v",
            "--trace-time",
        ]);
    if upload {
        cmd.arg("-T").arg(local);
    } else {
        cmd.arg("-o").arg(local);
    }
    cmd.arg(url);
    let out = cmd.output().map_err(|cause| ClientError::Spawn {
        program: "curl",
        cause,
    })?;
    if !out.status.success() {
        // The error is the trace's last line.
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(ClientError::Failed(format!(
            "curl {url}: {}",
            stderr.trim().lines().last().unwrap_or("failed")
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let times: Vec<f64> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let ftp = url.starts_with("ftp:");
    let command = ftp
        .then(|| ftp_command_seconds(&String::from_utf8_lossy(&out.stderr)))
        .flatten();
    match times.as_slice() {
        [total, pretransfer] if command.is_some() || !ftp => Ok(CurlTimes {
            total: *total,
            pretransfer: *pretransfer,
            command,
        }),
        _ => Err(ClientError::Failed(format!(
            "curl {url}: unexpected times `{text}`"
        ))),
    }
}

/// The URL of `path` (under the share) on the server, `http` or `ftp`.
pub fn url(scheme: &str, path: &str) -> String {
    format!("{scheme}://{SERVER_ADDR}/{path}")
}

/// How long smbclient waits for an answer to one request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(180);

/// The line smbclient's `pwd` answers with: the end of a command.
const MARK: &str = "Current directory is ";

/// A live smbclient session in the client namespace.
pub struct SmbSession {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Everything smbclient printed but the end marks, for errors.
    transcript: Vec<String>,
    stall: Duration,
}

impl SmbSession {
    /// Logs in to the share and changes to `directory` (smbclient's local
    /// directory is `local`); gives up on a command silent for `stall`.
    pub fn open(
        lab: &Lab,
        layout: &Layout,
        directory: &str,
        local: &Path,
        stall: Duration,
    ) -> Result<SmbSession, ClientError> {
        let smbclient = program("smbclient")?;
        let stdbuf = program("stdbuf")?;
        let (reader, writer) = std::io::pipe().map_err(|cause| ClientError::Spawn {
            program: "smbclient",
            cause,
        })?;
        let writer2 = writer.try_clone().map_err(|cause| ClientError::Spawn {
            program: "smbclient",
            cause,
        })?;
        let mut cmd = lab.command(Node::Client, &stdbuf.to_string_lossy());
        cmd.args(["-i0", "-oL"])
            .arg(smbclient)
            .arg("--configfile")
            .arg(layout.client_conf())
            .arg(format!("//{SERVER_ADDR}/{SHARE}"))
            .arg("--user")
            .arg(format!("{SMB_USER}%{SMB_PASSWORD}"))
            // smbclient writes up to 1 MB per request, several at once:
            // over the 384 kbit/s uplink one takes over its default 20 s.
            .arg("--timeout")
            .arg(REQUEST_TIMEOUT.as_secs().to_string())
            .current_dir(local)
            .stdin(Stdio::piped())
            .stdout(writer)
            .stderr(writer2);
        let mut child = cmd.spawn().map_err(|cause| ClientError::Spawn {
            program: "smbclient",
            cause,
        })?;
        // The command keeps the pipe's write ends; ours are gone with it.
        drop(cmd);
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(reader).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut session = SmbSession {
            child,
            stdin,
            lines,
            transcript: Vec::new(),
            stall,
        };
        session.run(&format!("cd {directory}"))?;
        Ok(session)
    }

    /// Runs one command; returns how long it took (from sending it to its
    /// end mark). An `NT_STATUS_` error in its output fails it.
    pub fn run(&mut self, command: &str) -> Result<Duration, ClientError> {
        let start = Instant::now();
        let from = self.transcript.len();
        let sent = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(format!("{command}\npwd\n").as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if sent.is_err() {
            return Err(self.failure(command, from));
        }
        loop {
            match self.lines.recv_timeout(self.stall) {
                Ok(line) if line.starts_with(MARK) => break,
                Ok(line) => self.transcript.push(line),
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ClientError::Stalled {
                        what: format!("smbclient `{command}`"),
                        seconds: self.stall.as_secs(),
                    })
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.failure(command, from)),
            }
        }
        let took = start.elapsed();
        if let Some(error) = self.transcript[from..]
            .iter()
            .find(|l| l.contains("NT_STATUS_"))
        {
            return Err(ClientError::Failed(format!(
                "smbclient `{command}`: {error}"
            )));
        }
        Ok(took)
    }

    /// What went wrong when smbclient ended or stopped reading.
    fn failure(&mut self, command: &str, from: usize) -> ClientError {
        // Whatever it printed on its way out.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(500)) {
            self.transcript.push(line);
        }
        let said: Vec<&str> = self.transcript[from.min(self.transcript.len())..]
            .iter()
            .map(String::as_str)
            .filter(|l| !l.trim().is_empty())
            .collect();
        ClientError::Failed(format!(
            "smbclient ended during `{command}`: {}",
            if said.is_empty() {
                "no output".to_string()
            } else {
                said.join(" | ")
            }
        ))
    }

    /// Logs off and waits for smbclient to end.
    pub fn close(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"exit\n");
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SmbSession {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FTP command's time runs from the `RETR` (or `STOR`) sent to the
    /// `226` received, across midnight too.
    #[test]
    fn ftp_times_come_from_the_trace() {
        let trace = "12:31:10.593852 > SIZE a.doc\n12:31:10.593904 < 213 100000\n\
                     12:31:10.593946 > RETR a.doc\n\
                     12:31:10.746296 < 150 Opening BINARY mode data connection\n\
                     12:31:11.096885 < 226 Transfer complete.\n";
        let took = ftp_command_seconds(trace).unwrap_or(0.0);
        assert!((took - 0.502939).abs() < 1e-6, "{took}");
        let late = "23:59:59.900000 > STOR z.doc\n00:00:00.300000 < 226 Transfer complete.\n";
        let took = ftp_command_seconds(late).unwrap_or(0.0);
        assert!((took - 0.4).abs() < 1e-6, "{took}");
        assert_eq!(ftp_command_seconds("12:00:00.0 > RETR a\n"), None);
    }
}
