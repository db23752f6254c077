//! One timed bulk download on a lab that is up, as the single-flow
//! experiments (`path-brokenness`, `fwsm`) measure it: one stream of the
//! `lossy` scenario's client against the lab's generator, its samples,
//! and what the link's counters and the server's kernel said around it.

use std::path::Path;
use std::thread;
use std::time::Duration;

use crate::clock::unix_ms;
use crate::link::{link_totals, LinkTotals};
use crate::lossy::client::ClientReport;
use crate::topology::{Lab, Node, SERVER_ADDR};
use crate::traffic::GENERATOR_PORT;

/// What one download measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Download {
    /// Its length, seconds.
    pub seconds: f64,
    /// Payload bytes received within it.
    pub bytes: u64,
    /// `(seconds since the connect, bytes so far)`.
    pub samples: Vec<(f64, u64)>,
    /// The link's counters over the download, both directions.
    pub link: LinkTotals,
    /// TCP segments the server's kernel retransmitted (`RetransSegs`), for
    /// a direct download (`None` through wanopt, whose server side
    /// crosses only a LAN, or when the kernel's table cannot be read).
    pub retrans_segs: Option<u64>,
    /// The share of the machine's CPU time that was busy during the
    /// download, percent (`/proc/stat`: everything but idle and I/O wait,
    /// over all cores): the emulator, the nodes and the hosts share them,
    /// so near 100 the machine, not the path, set the rate.
    pub cpu_busy_pct: Option<f64>,
}

impl Download {
    /// Goodput over the whole download, Mbit/s.
    pub fn mbit_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / self.seconds / 1e6
        } else {
            0.0
        }
    }
}

/// One download of `seconds` from the server to the client, with the
/// client's `congestion` control (`None`: the namespace's); `direct` says
/// whether the server's retransmissions count (no tunnel in between).
pub fn bulk(
    lab: &Lab,
    exe: &Path,
    seconds: u64,
    congestion: Option<&str>,
    direct: bool,
) -> Result<Download, String> {
    let before = link_totals(lab, unix_ms())?;
    let retrans_before = retrans_segs(lab);
    let cpu_before = cpu_times();
    let mut cmd = lab.command(Node::Client, &exe.to_string_lossy());
    cmd.args(["lab", "lossy-client", "--workload", "bulk", "--connect"])
        .arg(format!("{SERVER_ADDR}:{GENERATOR_PORT}"))
        .args(["--streams", "1", "--seconds", &seconds.to_string()]);
    if let Some(cc) = congestion {
        cmd.args(["--congestion", cc]);
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let cpu_busy_pct = cpu_before
        .zip(cpu_times())
        .and_then(|(a, b)| busy_pct(a, b));
    let report: ClientReport = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let link = link_totals(lab, unix_ms())?.since(&before);
    let retrans = match (direct, retrans_before, retrans_segs(lab)) {
        (true, Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    // Let the connection's last segments leave the path.
    thread::sleep(Duration::from_millis(100));
    let ClientReport::Bulk {
        seconds,
        bytes,
        samples,
        ..
    } = report
    else {
        return Err(format!("the client measured something else: {report:?}"));
    };
    Ok(Download {
        seconds,
        bytes,
        samples,
        link,
        retrans_segs: retrans,
        cpu_busy_pct,
    })
}

/// The machine's CPU time so far: `(busy, all)` in clock ticks, from the
/// first line of `/proc/stat`.
fn cpu_times() -> Option<(u64, u64)> {
    parse_cpu_times(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// `(busy, all)` from the text of `/proc/stat`: busy is everything but
/// idle (the 4th figure) and I/O wait (the 5th).
fn parse_cpu_times(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse().ok())
        .collect::<Option<_>>()?;
    // guest and guest_nice (9th, 10th) are already counted in user.
    let all: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
    Some((all.saturating_sub(idle), all))
}

/// Busy ticks over all ticks between two readings, percent.
fn busy_pct((busy0, all0): (u64, u64), (busy1, all1): (u64, u64)) -> Option<f64> {
    let all = all1.checked_sub(all0).filter(|t| *t > 0)?;
    Some((busy1.saturating_sub(busy0)) as f64 * 100.0 / all as f64)
}

/// `RetransSegs` of the server's namespace (`/proc/net/snmp`).
fn retrans_segs(lab: &Lab) -> Option<u64> {
    let out = lab
        .command(Node::Server, "cat")
        .arg("/proc/net/snmp")
        .output()
        .ok()?;
    parse_retrans_segs(&String::from_utf8_lossy(&out.stdout))
}

/// `RetransSegs` from the text of `/proc/net/snmp` (a `Tcp:` line of
/// names, then one of values).
fn parse_retrans_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let index = names.split_whitespace().position(|n| n == "RetransSegs")?;
    values.split_whitespace().nth(index)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmissions_are_read_from_the_snmp_table() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin RetransSegs InErrs\nTcp: 1 200 517 0\n";
        assert_eq!(parse_retrans_segs(snmp), Some(517));
        assert_eq!(parse_retrans_segs("Tcp: RtoMin\n"), None);
    }

    #[test]
    fn the_cpu_is_busy_but_for_idle_and_io_wait() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n";
        assert_eq!(parse_cpu_times(stat), Some((150, 1000)));
        assert_eq!(busy_pct((150, 1000), (1050, 2000)), Some(90.0));
        assert_eq!(busy_pct((150, 1000), (150, 1000)), None);
        assert_eq!(parse_cpu_times("intr 5\n"), None);
    }
}
