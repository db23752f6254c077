//! The lab's second WAN link and `lab link N down|up`, with ping as the
//! independent witness: link 2 answers at its own emulated round trip, a
//! cut link answers nothing (and its emulator counts the frames it
//! dropped), a restored one answers again, cutting link 1 leaves link 2
//! alone, and `lab down` removes link 2's emulator with the rest. Needs
//! root (network namespaces); the lab's prefix is `wl2-`.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

const PREFIX: &str = "wl2-";

fn wanopt(args: &[&str]) -> Output {
    crate::common::lab_wanopt(PREFIX, args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Takes the lab down when dropped, even on failure.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = wanopt(&["lab", "down"]);
    }
}

/// Pings `addr` from the edge `count` times; the average round trip in
/// ms, or `None` if nothing answered.
fn ping(addr: &str, count: u32) -> Option<f64> {
    let out = wanopt(&[
        "lab",
        "exec",
        "edge",
        "--",
        "ping",
        "-n",
        "-q",
        "-c",
        &count.to_string(),
        "-i",
        "0.2",
        "-W",
        "1",
        addr,
    ]);
    let stdout = text(&out.stdout);
    if !out.status.success() {
        assert!(stdout.contains("100% packet loss"), "{stdout}");
        return None;
    }
    // rtt min/avg/max/mdev = 20.1/20.3/20.6/0.1 ms
    let stats = stdout
        .lines()
        .find_map(|l| l.split_once(" = ").filter(|(k, _)| k.contains("min/avg")))
        .map(|(_, v)| v.to_string())
        .unwrap_or_else(|| panic!("no rtt line: {stdout}"));
    stats.split('/').nth(1).and_then(|avg| avg.parse().ok())
}

/// The emulators' counters as `lab status` shows them: (section, name)
/// to value.
fn counters() -> BTreeMap<(String, String), u64> {
    // The emulator publishes every 200 ms.
    std::thread::sleep(Duration::from_millis(450));
    let out = wanopt(&["lab", "status"]);
    assert!(out.status.success(), "{out:?}");
    let mut section = String::new();
    let mut map = BTreeMap::new();
    for line in text(&out.stdout).lines() {
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

fn dropped_down(section: &str) -> u64 {
    counters()
        .get(&(section.to_string(), "link.dropped_down".to_string()))
        .copied()
        .unwrap_or_else(|| panic!("no link.dropped_down in [{section}]"))
}

/// `lab link N STATE`: its one line.
fn switch(number: &str, state: &str) -> String {
    let out = wanopt(&["lab", "link", number, state]);
    assert!(out.status.success(), "lab link {number} {state}: {out:?}");
    let line = text(&out.stdout);
    assert!(
        line.starts_with(&format!("link {number} {state}")) && line.lines().count() == 1,
        "{line}"
    );
    line
}

/// A usage error: exit code 2 and one line on stderr.
fn refused(args: &[&str], needle: &str) {
    let out = wanopt(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    assert!(
        stderr.contains(needle) && stderr.trim_end().lines().count() == 1,
        "{args:?}: {stderr}"
    );
}

fn recorded_pid(name: &str) -> u32 {
    let path = format!("/run/wanopt-lab/wl2/pids/{name}.pid");
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {path}"))
}

#[test]
fn link2_answers_at_its_rtt_and_each_link_can_be_cut_and_restored() {
    // A bad spec is the user's mistake, before anything is built.
    refused(
        &["lab", "up", "--link2", "warp 9"],
        "bad --link2 up spec `warp 9`",
    );
    crate::common::require_root();
    let _ = wanopt(&["lab", "down"]);
    let _guard = Guard;
    let out = wanopt(&["lab", "up", "--rtt", "6ms", "--link2", "rtt 20ms"]);
    assert!(out.status.success(), "{out:?}");

    // Each link at its own round trip; direct traffic stays on link 1.
    let rtt2 = ping("198.18.4.2", 5).unwrap_or_else(|| panic!("link 2 does not answer"));
    assert!((19.5..23.0).contains(&rtt2), "link 2 rtt {rtt2} ms");
    let rtt1 = ping("198.18.2.2", 5).unwrap_or_else(|| panic!("link 1 does not answer"));
    assert!((5.5..9.0).contains(&rtt1), "link 1 rtt {rtt1} ms");
    let status = text(&wanopt(&["lab", "status"]).stdout);
    assert!(status.contains("link2 up   rtt 20ms"), "{status}");
    assert!(status.contains("link 2    up"), "{status}");

    // Link 2 cut: nothing answers, and its emulator says why.
    assert_eq!(dropped_down("link2 up"), 0);
    switch("2", "down");
    assert_eq!(ping("198.18.4.2", 3), None, "link 2 answered while down");
    assert!(dropped_down("link2 up") > 0);
    let status = text(&wanopt(&["lab", "status"]).stdout);
    assert!(status.contains("link 2    down (cut at "), "{status}");
    // Link 1 is not touched by it.
    assert!(ping("198.18.2.2", 2).is_some(), "link 1 lost with link 2");

    // Restored: answers again, at the same round trip.
    switch("2", "up");
    let rtt2 = ping("198.18.4.2", 3).unwrap_or_else(|| panic!("link 2 did not come back"));
    assert!((19.5..23.0).contains(&rtt2), "link 2 rtt {rtt2} ms");

    // Link 1 cut leaves link 2 working.
    switch("1", "down");
    assert_eq!(ping("198.18.2.2", 3), None, "link 1 answered while down");
    assert!(dropped_down("up") > 0);
    assert!(ping("198.18.4.2", 3).is_some(), "link 2 lost with link 1");
    switch("1", "up");
    assert!(ping("198.18.2.2", 2).is_some(), "link 1 did not come back");

    // Only links the lab has.
    refused(&["lab", "link", "3", "down"], "the lab has no link 3");

    // `lab down` ends both emulators and removes every namespace.
    let emulators = [recorded_pid("emulator"), recorded_pid("emulator2")];
    let out = wanopt(&["lab", "down"]);
    assert!(out.status.success(), "{out:?}");
    for pid in emulators {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "emulator {pid} still runs"
        );
    }
    let netns = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_default();
    assert!(!netns.contains(PREFIX), "{netns}");
    assert!(!std::path::Path::new("/run/wanopt-lab/wl2").exists());

    // A lab without --link2 has no link 2.
    let out = wanopt(&["lab", "up"]);
    assert!(out.status.success(), "{out:?}");
    refused(
        &["lab", "link", "2", "down"],
        "the lab has no link 2: it was brought up without --link2",
    );
    let status = text(&wanopt(&["lab", "status"]).stdout);
    assert!(!status.contains("link 2"), "{status}");
}
