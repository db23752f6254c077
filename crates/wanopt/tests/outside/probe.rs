//! `wanopt probe` against the lab's emulator: the round-trip time and the
//! bottleneck rates it measures are the emulated ones, and what it counts
//! per direction (loss, duplication, reordering) is what the emulator's
//! own counters say it did; `wanopt window --probe` sizes the emulated link
//! from its report. Needs root (network namespaces); the lab's prefix is `wpt-`.

use std::collections::BTreeMap;
use std::process::{Child, Command, Output};
use std::time::Duration;

use crate::common::BIN;

const PREFIX: &str = "wpt-";

fn wanopt(args: &[&str]) -> Output {
    crate::common::lab_wanopt(PREFIX, args)
}

/// A lab with a reflector in `server`; both gone when dropped.
struct Lab {
    reflector: Child,
    server: String,
}

impl Lab {
    fn up(link: &[&str]) -> Lab {
        let _ = wanopt(&["lab", "down"]);
        let mut args = vec!["lab", "up"];
        args.extend_from_slice(link);
        let out = wanopt(&args);
        assert!(out.status.success(), "{out:?}");
        let addr = wanopt(&["lab", "addr", "server"]);
        let server = String::from_utf8_lossy(&addr.stdout).trim().to_string();
        let reflector = Command::new("ip")
            .args(["netns", "exec", &format!("{PREFIX}server"), BIN])
            .args(["probe", "--listen", "0.0.0.0:7009"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        Lab { reflector, server }
    }

    /// Probes the server from the client, with `extra` flags; the JSON
    /// report.
    fn probe(&self, extra: &[&str]) -> serde_json::Value {
        let out = Command::new("ip")
            .args(["netns", "exec", &format!("{PREFIX}client"), BIN, "probe"])
            .arg(format!("{}:7009", self.server))
            .args(["--count", "1000", "--interval", "2ms", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The emulator's counters: (direction, name) to value.
    fn counters(&self) -> BTreeMap<(String, String), u64> {
        let out = wanopt(&["lab", "status"]);
        let text = String::from_utf8_lossy(&out.stdout);
        let mut section = String::new();
        let mut map = BTreeMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = s.to_string();
            } else if let [name, value] = line.split_whitespace().collect::<Vec<_>>()[..] {
                if let Ok(v) = value.parse() {
                    map.insert((section.clone(), name.to_string()), v);
                }
            }
        }
        map
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.reflector.kill();
        let _ = self.reflector.wait();
        let _ = wanopt(&["lab", "down"]);
    }
}

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Probe datagrams lost, duplicated or reordered per direction within the
/// emulator's counts of the same; the report exchange at the end (up to
/// five requests and answers) may add to the emulator's.
fn within(probe: u64, emulator: u64, what: &str) {
    assert!(
        probe <= emulator && emulator <= probe + 5,
        "{what}: probe {probe}, emulator {emulator}"
    );
}

#[test]
fn probe_measures_what_the_emulator_does() {
    crate::common::require_root();
    // Loss: 3% each way on a 60 ms round trip.
    // No trains here: their datagrams would be in the emulator's counters.
    let lab = Lab::up(&["--rtt", "60ms", "--loss", "3%", "--seed", "7"]);
    let r = lab.probe(&["--trains", "0"]);
    assert!(r["rate"].is_null(), "{r}");
    // Without trains there is no bottleneck rate to hold the probes to.
    assert_eq!(r["warnings"], serde_json::json!([]), "{r}");
    let c = lab.counters();
    let rtt = &r["rtt"];
    let min = rtt["min_ms"].as_f64().unwrap_or(0.0);
    assert!((60.0..61.5).contains(&min), "{rtt}");
    assert!(rtt["median_ms"].as_f64().unwrap_or(0.0) < 62.0, "{rtt}");
    for (dir, way) in [("forward", "up"), ("reverse", "down")] {
        let d = &r[dir];
        let lost = u(&d["lost"]);
        assert!(lost > 0, "{dir}: {d}");
        within(lost, c[&(way.into(), "link.dropped_loss".into())], dir);
        assert_eq!((u(&d["reordered"]), u(&d["duplicated"])), (0, 0), "{d}");
    }
    assert_eq!(u(&r["forward"]["sent"]), 1000);
    drop(lab);

    // Reordering and duplication, no loss.
    let lab = Lab::up(&[
        "--rtt",
        "60ms",
        "--reorder",
        "5%",
        "--duplicate",
        "2%",
        "--seed",
        "7",
    ]);
    let r = lab.probe(&["--trains", "0"]);
    let c = lab.counters();
    for (dir, way) in [("forward", "up"), ("reverse", "down")] {
        let d = &r[dir];
        assert_eq!(u(&d["lost"]), 0, "{d}");
        let dups = u(&d["duplicated"]);
        assert!(dups > 0, "{d}");
        within(dups, c[&(way.into(), "link.duplicated".into())], dir);
        // A held-back datagram is seen late only when the next one passed
        // it: at most as many as the emulator held back.
        let late = u(&d["reordered"]);
        assert!(
            late > 0 && late <= c[&(way.into(), "link.reordered".into())],
            "{dir}: {d}"
        );
    }
    // Each duplicated probe was echoed once more.
    assert_eq!(
        u(&r["reverse"]["sent"]),
        1000 + u(&r["forward"]["duplicated"])
    );
    drop(lab);

    // Bottleneck rates: the waas-3g link's, asymmetric (the emulator
    // shapes IP bytes, which is what the trains count).
    let lab = Lab::up(&[
        "--rtt",
        "60ms",
        "--up",
        "rate 384kbit queue 32kb",
        "--down",
        "rate 2mbit queue 64kb",
    ]);
    let r = lab.probe(&[]);
    for (dir, rate) in [("forward", 384e3), ("reverse", 2e6)] {
        let e = &r["rate"][dir];
        let median = e["median_bps"].as_f64().unwrap_or(0.0);
        assert!(
            (median / rate - 1.0).abs() < 0.03,
            "{dir}: {median} vs {rate}: {e}"
        );
        assert_eq!(u(&e["trains"]), 10, "{e}");
        assert_eq!(e["sender_limited"], false, "{e}");
    }
    // The probes (200 bytes every 2 ms: 912 kbit/s of IP) exceed the
    // uplink, and the probe says so; they are under half the downlink.
    let warnings = r["warnings"].as_array().cloned().unwrap_or_default();
    assert_eq!(warnings.len(), 1, "{r}");
    let w = warnings[0].as_str().unwrap_or("");
    assert!(
        w.contains("of the forward bottleneck") && w.contains("exceed it"),
        "{w}"
    );
    // The suggested interval loads the uplink to about a quarter.
    assert!(
        w.contains("--interval 19ms") || w.contains("--interval 20ms"),
        "{w}"
    );
    // `window --probe` sizes each direction from this report: its rate x
    // the probes' smallest RTT (60 ms plus a probe's transmission on the
    // two links; the median holds the queue the probes, 800 kbit/s of
    // them, build on the 384 kbit/s uplink).
    let mut window = Command::new(BIN)
        .args(["window", "--probe", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = window.stdin.take().unwrap();
        stdin.write_all(r.to_string().as_bytes()).unwrap();
    }
    let out = window.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let products: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("bandwidth-delay product: "))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(products.len(), 2, "{text}");
    assert!(
        text.contains("the probe warned: the probes (912 kbit/s"),
        "{text}"
    );
    let min_rtt = r["rtt"]["min_ms"].as_f64().unwrap_or(0.0);
    assert!((60.0..70.0).contains(&min_rtt), "{r}");
    for (product, rate) in products.iter().zip([384e3, 2e6]) {
        let emulated = rate * min_rtt / 1e3 / 8.0;
        assert!(
            (product / emulated - 1.0).abs() < 0.03,
            "{product} vs {emulated}: {text}"
        );
    }
}
