//! The path tools' command line (`wanopt window`, `wanopt host-check`,
//! `wanopt probe` on loopback): what they print, their exit codes and
//! one-line errors. `wanopt probe` against the lab's emulator is
//! `tests/probe.rs`.

use std::process::Command;

use crate::common::*;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_one_line_error(stderr: &str, needle: &str) {
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("wanopt: "), "{stderr}");
    assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    assert!(!stderr.contains("panicked"));
    assert!(
        stderr.matches("(os error").count() <= 1,
        "a cause repeated: {stderr}"
    );
}

/// `wanopt window` does the reference's arithmetic for its 250 Mbit/s,
/// 150 ms experiment; bad paths are usage errors.
#[test]
fn window_computes_what_a_path_needs() {
    let (code, out, err) = run(&[
        "window", "--rate", "250mbit", "--rtt", "150ms", "--loss", "1%",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("bandwidth-delay product: 4687500 bytes"),
        "{out}"
    );
    assert!(out.contains("shift at least 7"), "{out}");
    assert!(out.contains("at least 9375000 bytes"), "{out}");
    assert!(out.contains("reaches about 945.83 kbit/s"), "{out}");
    for (args, needle) in [
        (
            &["window", "--rate", "10mbps", "--rtt", "1ms"][..],
            "--rate",
        ),
        (
            &["window", "--rate", "1mbit", "--rtt", "0ms"][..],
            "above zero",
        ),
        (
            &["window", "--rate", "1mbit", "--rtt", "1ms", "--mss", "9"][..],
            "minimum",
        ),
        (
            &[
                "host-check",
                "--rate",
                "1mbit",
                "--rtt",
                "1ms",
                "--loss",
                "2",
            ][..],
            "--loss",
        ),
        (
            &["host-check", "--rate", "1mbit", "--rtt", "soon"][..],
            "--rtt",
        ),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_one_line_error(&err, needle);
    }
    // --rtt without --rate is a usage error, also exit code 2.
    let (code, _, err) = run(&["host-check", "--rtt", "1ms"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "--rate and --rtt together");
    assert_eq!(run(&["window", "--rtt", "1ms"]).0, 2);
}

/// `wanopt probe --json` against a reflector on loopback, fed to `window`
/// and `host-check` with `--probe` (a file, and standard input): each
/// direction's window at the probes' RTT; bad files are one-line errors.
#[test]
fn window_and_host_check_read_what_probe_measured() {
    let reflector = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = reflector.local_addr().unwrap();
    drop(reflector);
    let mut listener = Command::new(BIN)
        .args(["probe", "--listen", &addr.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (code, json, err) = run(&[
        "probe",
        &addr.to_string(),
        "--count",
        "50",
        "--interval",
        "1ms",
        "--trains",
        "3",
        "--train-len",
        "8",
        "--json",
    ]);
    let _ = listener.kill();
    let _ = listener.wait();
    assert_eq!(code, 0, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("path.json");
    std::fs::write(&file, &json).unwrap();
    let file = file.to_str().unwrap();

    let (code, out, err) = run(&["window", "--probe", file]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("here -> {addr} (probed")), "{out}");
    assert!(out.contains(&format!("{addr} -> here (probed")), "{out}");
    assert_eq!(out.matches("bandwidth-delay product: ").count(), 2, "{out}");
    // Each product is the direction's measured rate times the probes'
    // smallest RTT, as the report has them.
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let min_rtt = report["rtt"]["min_ms"].as_f64().unwrap() / 1e3;
    let products: Vec<f64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("bandwidth-delay product: "))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    for (product, dir) in products.iter().zip(["forward", "reverse"]) {
        let rate = report["rate"][dir]["median_bps"].as_f64().unwrap().round();
        let expected = (rate * min_rtt / 8.0).ceil();
        assert!(
            (product - expected).abs() <= 1.0,
            "{dir}: {product} vs {expected}: {out}"
        );
    }
    // Overrides win: at 1 Mbit/s and 100 ms the product is 12500 bytes,
    // whatever loopback measured.
    let mut child = Command::new(BIN)
        .args([
            "window", "--probe", "-", "--rate", "1mbit", "--rtt", "100ms",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(json.as_bytes()).unwrap();
    }
    let piped = child.wait_with_output().unwrap();
    assert!(piped.status.success());
    let piped = String::from_utf8_lossy(&piped.stdout);
    assert_eq!(
        piped
            .matches("bandwidth-delay product: 12500 bytes")
            .count(),
        2,
        "{piped}"
    );

    // Loopback is far faster than the probes: nothing to warn about.
    assert_eq!(report["warnings"], serde_json::json!([]), "{json}");
    assert!(!out.contains("the probe warned"), "{out}");
    // A probe's warnings are repeated under the windows they concern.
    let mut warned = report.clone();
    warned["warnings"] = serde_json::json!(["the probes are 238% of the forward bottleneck"]);
    let warned_file = dir.path().join("warned.json");
    std::fs::write(&warned_file, warned.to_string()).unwrap();
    let (code, out, err) = run(&["window", "--probe", warned_file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with("\nthe probe warned: the probes are 238% of the forward bottleneck\n"),
        "{out}"
    );

    let (code, out, err) = run(&["host-check", "--probe", file]);
    assert!(code == 0 || code == 3, "{code}: {err}");
    assert!(
        out.contains("as probed (the direction that needs the larger window)"),
        "{out}"
    );

    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "rtt 150ms").unwrap();
    let missing = dir.path().join("missing.json");
    for args in [
        vec!["window", "--probe", garbage.to_str().unwrap()],
        vec!["window", "--probe", missing.to_str().unwrap()],
        vec!["host-check", "--probe", garbage.to_str().unwrap()],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_one_line_error(&err, "--probe");
    }
}

/// The value of a sysctl as `/proc/sys` holds it, whitespace collapsed.
fn sysctl(name: &str) -> String {
    let raw = std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/")))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    raw.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `host-check` reports this host's own settings (read here independently
/// from `/proc/sys`), judges the buffers against the path, and exits 3
/// exactly when a line says SHORT. In a network namespace with SACK
/// switched off it says so.
#[test]
fn host_check_reports_the_hosts_settings() {
    let (code, out, err) = run(&["host-check", "--rate", "250mbit", "--rtt", "150ms"]);
    assert!(code == 0 || code == 3, "{code}: {err}");
    assert_eq!(
        code == 3,
        out.lines().any(|l| l.starts_with("SHORT")),
        "{out}"
    );
    let line = |out: &str, name: &str| -> String {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("{name} missing: {out}"))
            .to_string()
    };
    for name in [
        "net.ipv4.tcp_window_scaling",
        "net.ipv4.tcp_sack",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.ipv4.tcp_congestion_control",
    ] {
        let l = line(&out, name);
        assert!(l.contains(&format!(" {} ", sysctl(name))), "{l}");
    }
    // The receive buffer's maximum against twice 4,687,500 bytes.
    let rmem_max: u64 = sysctl("net.ipv4.tcp_rmem")
        .split(' ')
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let rmem = line(&out, "net.ipv4.tcp_rmem");
    assert_eq!(rmem.starts_with("ok "), rmem_max >= 9_375_000, "{rmem}");
    assert_eq!(rmem.starts_with("SHORT "), rmem_max < 9_375_000, "{rmem}");

    // A namespace of our own with SACK off: found short, exit code 3.
    let ns = format!("wanopt-hc-{}", std::process::id());
    let ip = |args: &[&str]| {
        let status = Command::new("ip").args(args).status().unwrap();
        assert!(status.success(), "ip {args:?}");
    };
    ip(&["netns", "add", &ns]);
    let sack_off = Command::new("ip")
        .args(["netns", "exec", &ns, "sh", "-c"])
        .arg("echo 0 > /proc/sys/net/ipv4/tcp_sack")
        .status()
        .unwrap();
    let checked = Command::new("ip")
        .args(["netns", "exec", &ns, BIN, "host-check"])
        .output()
        .unwrap();
    ip(&["netns", "del", &ns]);
    assert!(sack_off.success());
    let out = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(3), "{out}");
    assert!(
        line(&out, "net.ipv4.tcp_sack").starts_with("SHORT "),
        "{out}"
    );
    assert!(
        line(&out, "net.ipv4.tcp_window_scaling").starts_with("ok "),
        "{out}"
    );
}
