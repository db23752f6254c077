//! The middlebox rules in a real lab, as tcpdump at each end and the
//! kernel's own `ss` see them: what the endpoints negotiate (SACK, window
//! scaling, MSS), sequence numbers, and the ECN policies.

use std::time::Duration;

use super::{counters, iperf_json, iperf_server, run_in, stdout_of, up, Guard, TestResult};
use wanopt_lab::link::LinkOptions;
use wanopt_lab::topology::{Lab, Node, SERVER_ADDR};

/// The SYN that arrived at the server and the SYN-ACK that arrived at the
/// client, as tcpdump at each end printed them (with their TCP options),
/// and what `ss -tin` in the client says of the connections (the options
/// the kernel negotiated), while a 2-second iperf3 upload runs.
struct Handshake {
    syn: String,
    syn_ack: String,
    ss: String,
}

fn handshake(lab: &Lab) -> Result<Handshake, String> {
    iperf_server(lab)?;
    let syn = capture(
        lab,
        Node::Server,
        "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn and dst port 5201",
    )?;
    let syn_ack = capture(
        lab,
        Node::Client,
        "tcp[tcpflags] & (tcp-syn|tcp-ack) = (tcp-syn|tcp-ack) and src port 5201",
    )?;
    std::thread::sleep(Duration::from_millis(800));
    let client = lab
        .command(Node::Client, "iperf3")
        .args(["-c", SERVER_ADDR, "-p", "5201", "-t", "2", "-b", "5M"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3: {e}"))?;
    std::thread::sleep(Duration::from_millis(1000));
    let dst = format!("dst {SERVER_ADDR}:5201");
    let ss = run_in(lab, Node::Client, "ss", &["-tin", &dst]);
    let _ = client.wait_with_output();
    let ss = stdout_of(&ss?);
    if !ss.contains("ESTAB") {
        return Err(format!("no connection to the iperf3 server in `ss`: {ss}"));
    }
    Ok(Handshake {
        syn: first_line(syn)?,
        syn_ack: first_line(syn_ack)?,
        ss,
    })
}

/// The largest `mss:N` in `ss -i` output.
fn ss_mss(text: &str) -> u64 {
    text.split_whitespace()
        .filter_map(|w| w.strip_prefix("mss:")?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// tcpdump in `node` until the first segment `filter` matches.
fn capture(lab: &Lab, node: Node, filter: &str) -> Result<std::process::Child, String> {
    lab.command(node, "tcpdump")
        .args(["-i", "eth0", "-n", "-l", "-S", "-c", "1", filter])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("tcpdump: {e}"))
}

/// The line a [`capture`] printed (stopped after 5 s if it saw nothing).
fn first_line(child: std::process::Child) -> Result<String, String> {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(5));
        // Harmless if it already exited on its first match.
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
    });
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = stdout_of(&out);
    match text.lines().next() {
        Some(line) if !line.is_empty() => Ok(line.to_string()),
        _ => Err("tcpdump saw no handshake segment".into()),
    }
}

/// The `seq N` of a tcpdump line.
fn seq_of(line: &str) -> Result<u64, String> {
    line.split(", ")
        .find_map(|part| part.strip_prefix("seq ")?.parse().ok())
        .ok_or_else(|| format!("no sequence number in {line:?}"))
}

/// Middlebox rules rewrite what the endpoints negotiate, as tcpdump at each
/// end sees the handshake and the kernel's own `ss` reports the connection
/// (SACK, window scaling, MSS), and randomize sequence numbers, as tcpdump
/// at each end sees them; without rules the same connection negotiates
/// everything and keeps its numbers.
pub(super) fn rewrites_what_endpoints_negotiate() -> TestResult {
    {
        let guard = up(LinkOptions {
            rtt: Some("10ms".into()),
            ..LinkOptions::default()
        })?;
        let h = handshake(&guard.0)?;
        println!("  no middlebox: SYN at the server {}", h.syn);
        for line in [&h.syn, &h.syn_ack] {
            if !line.contains("sackOK") || !line.contains("wscale") || !line.contains("mss 1460") {
                return Err(format!("a plain link changed the handshake: {line}"));
            }
        }
        if !h.ss.contains("wscale:") || ss_mss(&h.ss) < 1400 {
            return Err(format!(
                "a plain link lost window scaling or the MSS: {}",
                h.ss
            ));
        }
    }
    {
        let guard = up(LinkOptions {
            rtt: Some("10ms".into()),
            middlebox: Some("strip-sack-permitted strip-wscale mss 1000".into()),
            ..LinkOptions::default()
        })?;
        let h = handshake(&guard.0)?;
        let c = counters(&guard.0);
        let rewritten = |dir: &str| {
            c[dir]["link"]["middlebox"]["rewritten"]
                .as_u64()
                .unwrap_or(0)
        };
        println!(
            "  strip-sack-permitted strip-wscale mss 1000: SYN at the server {}; ss mss {}; rewritten up {} down {}",
            h.syn,
            ss_mss(&h.ss),
            rewritten("up"),
            rewritten("down")
        );
        for line in [&h.syn, &h.syn_ack] {
            if line.contains("sackOK") || line.contains("wscale") {
                return Err(format!(
                    "SACK-permitted or window scale crossed the middlebox: {line}"
                ));
            }
        }
        if !h.syn.contains("mss 1000") {
            return Err(format!("the SYN's MSS was not clamped to 1000: {}", h.syn));
        }
        // The kernel negotiated no scaling and segments of at most 1000
        // bytes (less the timestamps every segment carries).
        if h.ss.contains("wscale:") || !(900..=1000).contains(&ss_mss(&h.ss)) {
            return Err(format!(
                "the connection still scales or has a larger MSS: {}",
                h.ss
            ));
        }
        // Both connections' SYNs up, their SYN-ACKs down.
        if rewritten("up") < 2 || rewritten("down") < 2 {
            return Err(format!("middlebox counters: {c}"));
        }
    }
    for (rules, changed) in [("", false), ("randomize-seq", true)] {
        let guard = up(LinkOptions {
            rtt: Some("10ms".into()),
            middlebox: Some(rules.into()),
            ..LinkOptions::default()
        })?;
        let lab = &guard.0;
        iperf_server(lab)?;
        let filter = "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn and dst port 5201";
        let sent = capture(lab, Node::Client, filter)?;
        let arrived = capture(lab, Node::Server, filter)?;
        std::thread::sleep(Duration::from_millis(800));
        let doc = iperf_json(lab, &["-t", "1", "-b", "5M"])?;
        let (sent, arrived) = (seq_of(&first_line(sent)?)?, seq_of(&first_line(arrived)?)?);
        let bytes = doc["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        println!(
            "  middlebox `{rules}`: SYN seq {sent} sent, {arrived} arrived; {bytes} bytes carried"
        );
        if (sent != arrived) != changed {
            return Err(format!("`{rules}`: SYN seq {sent} sent, {arrived} arrived"));
        }
        // The endpoints never see each other's real numbers, and the
        // connection works.
        if bytes < 500_000 {
            return Err(format!("`{rules}`: only {bytes} bytes in 1 s at 5 Mbit/s"));
        }
    }
    Ok(())
}

/// The packets `filter` matched on `node`'s eth0 while `during` ran (as
/// tcpdump printed them), and what `during` returned.
fn captured<T>(
    lab: &Lab,
    node: Node,
    filter: &str,
    during: impl FnOnce() -> Result<T, String>,
) -> Result<(Vec<String>, T), String> {
    let dump = lab
        .command(node, "tcpdump")
        .args(["-i", "eth0", "-n", "-l", "-c", "1000000", filter])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("tcpdump: {e}"))?;
    std::thread::sleep(Duration::from_millis(800));
    let result = during();
    std::thread::sleep(Duration::from_millis(300));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(dump.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    );
    let out = dump.wait_with_output().map_err(|e| e.to_string())?;
    // tcpdump may end its output with an empty line when interrupted.
    let lines = stdout_of(&out)
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(str::to_string)
        .collect();
    Ok((lines, result?))
}

/// How many packets [`captured`] saw.
fn count_captured<T>(
    lab: &Lab,
    node: Node,
    filter: &str,
    during: impl FnOnce() -> Result<T, String>,
) -> Result<(usize, T), String> {
    captured(lab, node, filter, during).map(|(lines, result)| (lines.len(), result))
}

/// A lab with ECN requested by both endpoints' kernels.
fn up_with_ecn(options: LinkOptions) -> Result<Guard, String> {
    let guard = up(options)?;
    for node in [Node::Client, Node::Server] {
        guard
            .0
            .sysctl(node, "net.ipv4.tcp_ecn", "1")
            .map_err(|e| e.to_string())?;
    }
    Ok(guard)
}

/// The path-brokenness paper's ECN policies, as tcpdump sees them with ECN
/// on at both ends: `block-ecn-setup` drops the ECN-setup SYN (it leaves
/// the client `[SEW]`, the server only sees the retry, `[S]`, and no
/// ECN-capable packet follows); `rewrite-ecn ce` marks every packet CE,
/// SYNs included, so the server answers without ECE (`[S.]`); `set-ce`
/// marks every ECN-capable data packet CE, which the server sees and the
/// client never sent; `after-queue clear-ce` erases the CE marks a RED
/// queue made, so the server sees none while the queue counts them.
/// Without rules the same lab negotiates ECN (`[S.E]`).
pub(super) fn ecn_policies() -> TestResult {
    let rtt = || LinkOptions {
        rtt: Some("10ms".into()),
        ..LinkOptions::default()
    };
    {
        let guard = up_with_ecn(rtt())?;
        let h = handshake(&guard.0)?;
        println!("  no middlebox, ECN on: SYN at the server {}", h.syn);
        if !h.syn.contains("[SEW]") || !h.syn_ack.contains("[S.E]") {
            return Err(format!(
                "a plain link did not negotiate ECN: {} / {}",
                h.syn, h.syn_ack
            ));
        }
    }
    {
        let guard = up_with_ecn(LinkOptions {
            middlebox: Some("block-ecn-setup".into()),
            ..rtt()
        })?;
        let lab = &guard.0;
        iperf_server(lab)?;
        let filter = "tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn and dst port 5201";
        let sent = capture(lab, Node::Client, filter)?;
        let arrived = capture(lab, Node::Server, filter)?;
        // The client's data packets would be ECT(0) had ECN been negotiated.
        let ect = "ip[1] & 3 = 2 and dst port 5201";
        let (ect_lines, doc) = captured(lab, Node::Server, ect, || {
            iperf_json(lab, &["-t", "1", "-b", "5M"])
        })?;
        let ect_arrived = ect_lines.len();
        let (sent, arrived) = (first_line(sent)?, first_line(arrived)?);
        let dropped = counters(lab)["up"]["link"]["middlebox"]["dropped"]
            .as_u64()
            .unwrap_or(0);
        let bytes = doc["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
        println!(
            "  block-ecn-setup: SYN sent {sent}; first at the server {arrived}; {dropped} dropped; {ect_arrived} ECT packets, {bytes} bytes"
        );
        if !sent.contains("[SEW]")
            || !arrived.contains("[S]")
            || dropped == 0
            || ect_arrived != 0
            || bytes < 300_000
        {
            return Err(format!(
                "block-ecn-setup: sent {sent}, arrived {arrived}, dropped {dropped}, {ect_arrived} ECT ({ect_lines:?}), {bytes} bytes"
            ));
        }
    }
    {
        let guard = up_with_ecn(LinkOptions {
            middlebox: Some("rewrite-ecn ce".into()),
            ..rtt()
        })?;
        let lab = &guard.0;
        let syn = capture(
            lab,
            Node::Server,
            "ip[1] & 3 = 3 and tcp[tcpflags] & (tcp-syn|tcp-ack) = tcp-syn",
        )?;
        let h = handshake(lab)?;
        let syn = first_line(syn)?;
        println!(
            "  rewrite-ecn ce: CE SYN at the server {syn}; SYN-ACK at the client {}",
            h.syn_ack
        );
        if !h.syn_ack.contains("[S.]") {
            return Err(format!(
                "ECN accepted although the SYN arrived CE: {}",
                h.syn_ack
            ));
        }
    }
    {
        let guard = up_with_ecn(LinkOptions {
            rate: Some("20mbit".into()),
            middlebox: Some("set-ce".into()),
            ..rtt()
        })?;
        let lab = &guard.0;
        iperf_server(lab)?;
        let ce = "ip[1] & 3 = 3 and tcp dst port 5201";
        let (sent_ce, arrived_ce) = count_captured(lab, Node::Client, ce, || {
            count_captured(lab, Node::Server, ce, || {
                iperf_json(lab, &["-t", "2", "-C", "cubic"])
            })
            .map(|(arrived, _)| arrived)
        })?;
        println!("  set-ce: {sent_ce} CE packets sent, {arrived_ce} arrived");
        if sent_ce != 0 || arrived_ce < 100 {
            return Err(format!("set-ce: {sent_ce} CE sent, {arrived_ce} arrived"));
        }
    }
    let guard = up_with_ecn(LinkOptions {
        rate: Some("20mbit".into()),
        queue: Some("200p".into()),
        ecn: Some("red".into()),
        middlebox: Some("after-queue clear-ce".into()),
        ..rtt()
    })?;
    let lab = &guard.0;
    iperf_server(lab)?;
    let (arrived_ce, doc) = count_captured(lab, Node::Server, "ip[1] & 3 = 3", || {
        iperf_json(lab, &["-t", "3", "-C", "cubic"])
    })?;
    let c = counters(lab);
    let marked = c["up"]["link"]["ce_marked"].as_u64().unwrap_or(0);
    let cleared = c["up"]["link"]["middlebox_after_queue"]["rewritten"]
        .as_u64()
        .unwrap_or(0);
    let bytes = doc["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    println!("  after-queue clear-ce: RED marked {marked}, cleared {cleared}, server saw {arrived_ce} CE; {bytes} bytes");
    if marked == 0 || cleared == 0 || arrived_ce != 0 {
        return Err(format!(
            "after-queue clear-ce: marked {marked}, cleared {cleared}, {arrived_ce} CE arrived"
        ));
    }
    Ok(())
}

/// What arrives of an iperf3 UDP run at `offered` (e.g. `5M`) for
/// `seconds`, Mbit/s of IP packets. A fresh one-off server.
fn udp_run(lab: &Lab, offered: &str, seconds: u32) -> Result<f64, String> {
    const PAYLOAD: u64 = 1200;
    iperf_server(lab)?;
    let t = seconds.to_string();
    let length = PAYLOAD.to_string();
    let doc = iperf_json(lab, &["-u", "-l", &length, "-b", offered, "-t", &t])?;
    let sum = &doc["end"]["sum"];
    let packets = sum["packets"].as_u64().unwrap_or(0);
    let lost = sum["lost_packets"].as_u64().unwrap_or(packets);
    let ip_bits = packets.saturating_sub(lost) * (PAYLOAD + 28) * 8;
    Ok(ip_bits as f64 / f64::from(seconds) / 1e6)
}

/// `wanopt_lab::link::set_middlebox` changes the rules of a running lab
/// and returns once they apply: UDP is blocked from the next datagram on
/// (every one the middlebox saw) while TCP still flows, then policed to 1 Mbit/s as iperf3's receiver
/// counts it, then let through again; the counters and the lab's settings
/// follow, and bad rules change nothing.
pub(super) fn udp_rules_change_while_running() -> TestResult {
    use wanopt_lab::link::set_middlebox;
    let guard = up(LinkOptions {
        rtt: Some("10ms".into()),
        ..LinkOptions::default()
    })?;
    let lab = &guard.0;
    let show = |e: wanopt_lab::link::MiddleboxControlError| e.to_string();
    set_middlebox(lab, 1, "block-udp").map_err(show)?;
    // 200 datagrams from the client (this binary's probe-send), then TCP.
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let addr = format!("{SERVER_ADDR}:6000");
    let exe = exe.to_string_lossy();
    let sent = run_in(
        lab,
        Node::Client,
        &exe,
        &["probe-send", &addr, "200", "500"],
    )?;
    if !sent.status.success() {
        return Err("probe-send failed".into());
    }
    iperf_server(lab)?;
    let tcp = iperf_json(lab, &["-t", "1", "-b", "5M"])?;
    let tcp_bytes = tcp["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    let c = counters(lab);
    let udp = &c["up"]["link"]["middlebox"];
    let (inspected, blocked) = (udp["udp_inspected"].as_u64(), udp["udp_blocked"].as_u64());
    println!("  block-udp: {blocked:?} of {inspected:?} datagrams blocked; tcp {tcp_bytes} bytes");
    if blocked < Some(200) || blocked != inspected || tcp_bytes < 500_000 {
        return Err(format!(
            "block-udp: {blocked:?} of {inspected:?} blocked, {tcp_bytes} TCP bytes"
        ));
    }

    let bad = set_middlebox(lab, 1, "police-udp 1mbps").err().map(show);
    if !bad
        .as_deref()
        .is_some_and(|e| e.contains("nothing changed"))
    {
        return Err(format!("bad rules were not refused: {bad:?}"));
    }
    set_middlebox(lab, 1, "police-udp 1mbit").map_err(show)?;
    let policed = udp_run(lab, "5M", 2)?;
    println!("  police-udp 1mbit: {policed:.3} Mbit/s of 5 Mbit/s arrived");
    // The rate, plus a 6250-byte bucket over 2 s (2.5%).
    if !(0.9..=1.1).contains(&policed) {
        return Err(format!("police-udp 1mbit passed {policed:.3} Mbit/s"));
    }

    set_middlebox(lab, 1, "none").map_err(show)?;
    let free = udp_run(lab, "3M", 1)?;
    let c = counters(lab);
    let settings =
        std::fs::read_to_string(wanopt_lab::bringup::settings_path(lab)).unwrap_or_default();
    println!("  none: {free:.3} Mbit/s of 3 Mbit/s arrived");
    if free < 2.8 || c["down"]["link"]["middlebox_rules"]["rules"] != "" {
        return Err(format!("after clearing: {free} Mbit/s, counters {c}"));
    }
    if !settings.contains("\"middlebox\": \"\"") {
        return Err(format!("the settings kept old rules: {settings}"));
    }
    Ok(())
}
