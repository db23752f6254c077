//! The references' experiments that are scenarios of their own, in their
//! quick forms on a real lab: `lab run initcwnd --quick` (the
//! initial-window post), `lab run path-brokenness --quick` (the
//! path-brokenness paper), `lab run fwsm --quick` (the firewall
//! single-flow guide), `lab run cluster --quick` (a core cluster) and `lab
//! run reach --quick` (paths that block or police UDP) write their rows
//! with the interface contract's keys, and their figures obey the physics
//! they measure. Needs root (network namespaces); each test has its lab
//! prefix (`wie-`, `wpb-`, `wfw-`, `wcs-`, `wre-`).
//!
//! The scenario tier: about 12 minutes of lab runs, one test at a time
//! (their rates must not share the CPU), kept out of `scripts/test` (which
//! must stay under 8 minutes from a clean clone) and run by
//! `scripts/test-scenarios`, which CI runs after it.

/// `lab run SCENARIO --quick`: its results, once `report.md` and the
/// `plots` (SVG) are checked to be there.
fn run_quick(prefix: &str, scenario: &str, plots: &[&str]) -> serde_json::Value {
    let wanopt = |args: &[&str]| crate::common::lab_wanopt(prefix, args);
    let dir = std::env::temp_dir().join(format!("lab-{scenario}-{}", std::process::id()));
    let out = wanopt(&[
        "lab",
        "run",
        scenario,
        "--quick",
        "--out",
        &dir.to_string_lossy(),
    ]);
    let _ = wanopt(&["lab", "down"]);
    assert!(out.status.success(), "{out:?}");
    for file in
        std::iter::once("report.md".to_string()).chain(plots.iter().map(|p| format!("{p}.svg")))
    {
        assert!(dir.join(&file).exists(), "{file} missing");
    }
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::from_str(&text).unwrap()
}

#[test]
#[ignore = "the scenario tier: scripts/test-scenarios runs it, and CI"]
fn initcwnd_quick_times_a_short_file_per_initial_window_and_tunnel() {
    // `--runs` is its option; the waas-3g's are not.
    let out = crate::common::lab_wanopt(
        "wie-",
        &[
            "lab",
            "run",
            "initcwnd",
            "--tests",
            "download",
            "--out",
            "/nonexistent",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    crate::common::require_root();
    let results = run_quick("wie-", "initcwnd", &["initcwnd"]);
    assert_eq!(results["scenario"], "initcwnd");
    assert!(
        results["skipped"].as_array().is_some_and(Vec::is_empty),
        "{results}"
    );
    let rows = results["rows"].as_array().unwrap();
    let seconds = |path: &str, mode: &str| {
        let row = rows
            .iter()
            .find(|r| r["path"] == path && r["mode"] == mode)
            .unwrap_or_else(|| panic!("no {path} {mode} row: {results}"));
        for key in [
            "rate_mbps",
            "rtt_ms",
            "loss_pct",
            "bytes",
            "size",
            "initcwnd",
            "seconds",
            "runs_seconds",
            "floor_s",
            "x_floor",
            "reference_s",
        ] {
            assert!(row.get(key).is_some(), "{key} missing: {row}");
        }
        assert_eq!(row["size"], "180KB");
        let s = row["seconds"]
            .as_f64()
            .unwrap_or_else(|| panic!("not done: {row}"));
        // Nothing beats one round trip plus the file at the link's rate.
        assert!(s >= row["floor_s"].as_f64().unwrap() * 0.98, "{row}");
        s
    };
    for path in ["rtt200", "rtt200-loss1"] {
        for mode in ["icw2", "icw4", "icw10", "wanopt-fresh", "wanopt-warm"] {
            seconds(path, mode);
        }
    }
    // Slow start from 2 segments takes more round trips than from 10 (the
    // post's shape); a fresh connection needs a round trip the edge
    // answers locally through the tunnel.
    assert!(seconds("rtt200", "icw2") > seconds("rtt200", "icw10") + 0.15);
    assert!(seconds("rtt200", "wanopt-warm") < seconds("rtt200", "icw10"));
}

#[test]
#[ignore = "the scenario tier: scripts/test-scenarios runs it, and CI"]
fn path_brokenness_quick_runs_each_experiment_direct_and_through_wanopt() {
    let out = crate::common::lab_wanopt(
        "wpb-",
        &[
            "lab",
            "run",
            "path-brokenness",
            "--runs",
            "2",
            "--out",
            "/nonexistent",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    crate::common::require_root();
    let results = run_quick(
        "wpb-",
        "path-brokenness",
        &["brokenness-sack", "brokenness-wscale"],
    );
    assert_eq!(results["scenario"], "path-brokenness");
    let rows = results["rows"].as_array().unwrap();
    let row = |experiment: &str, policy: &str, mode: &str| {
        rows.iter()
            .find(|r| r["experiment"] == experiment && r["policy"] == policy && r["mode"] == mode)
            .unwrap_or_else(|| panic!("no {experiment} {policy} {mode} row: {results}"))
    };
    for r in rows {
        for key in [
            "paper_policy",
            "middlebox",
            "rate_mbps",
            "rtt_ms",
            "loss_pct",
            "red_ecn",
            "wscale",
            "seconds",
            "mbit_s",
            "second_half_mbit_s",
            "of_rate",
            "first_byte_s",
            "longest_stall_s",
            "retrans_segs",
            "ce_marked",
            "queue_drops",
            "lost_frames",
        ] {
            assert!(r.get(key).is_some(), "{key} missing: {r}");
        }
    }
    let mbit = |r: &serde_json::Value| r["mbit_s"].as_f64().unwrap();
    for policy in ["sack", "no-sack", "broken-sack"] {
        for mode in ["cubic", "wanopt"] {
            row("sack", policy, mode);
        }
        // The tunnel crosses the policy as if it were not there.
        assert!(
            mbit(row("sack", policy, "wanopt")) > 0.8 * mbit(row("sack", "sack", "wanopt")),
            "{results}"
        );
    }
    // The emulator's loss and the server's retransmissions are counted.
    let direct = row("sack", "sack", "cubic");
    assert!(direct["lost_frames"].as_u64().unwrap() > 0, "{direct}");
    assert!(direct["retrans_segs"].as_u64().unwrap() > 0, "{direct}");
    // A blocked ECN setup costs the client's SYN timeout; CE on every
    // ECN-capable packet keeps CUBIC far below the rate.
    let first = |r: &serde_json::Value| r["first_byte_s"].as_f64().unwrap();
    assert!(
        first(row("ecn", "ecn-blocked", "cubic")) > first(row("ecn", "ecn", "cubic")) + 0.9,
        "{results}"
    );
    assert!(
        mbit(row("ecn", "ce-on-ect", "cubic")) < 0.5 * mbit(row("ecn", "ecn", "cubic")),
        "{results}"
    );
    assert!(
        row("ecn", "ecn", "cubic")["ce_marked"].as_u64().unwrap() > 0,
        "{results}"
    );
    // The window-scale sweep found a shift that fills 100 Mbit/s at
    // 100 ms, no smaller than window arithmetic allows; through wanopt
    // `wscale 0` on the WAN does not matter.
    let minimum = &results["wscale_minimums"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == "bbr")
        .unwrap_or_else(|| panic!("no measured minimum: {results}"))
        .clone();
    let measured = minimum["measured"]
        .as_u64()
        .unwrap_or_else(|| panic!("{minimum}"));
    assert!(
        measured >= minimum["computed"].as_u64().unwrap(),
        "{minimum}"
    );
    let tunnel = row("wscale", "wscale", "wanopt");
    assert!(tunnel["of_rate"].as_f64().unwrap() >= 0.9, "{tunnel}");
}

#[test]
#[ignore = "the scenario tier: scripts/test-scenarios runs it, and CI"]
fn fwsm_quick_measures_the_guides_table_direct_and_through_wanopt() {
    let out = crate::common::lab_wanopt(
        "wfw-",
        &[
            "lab",
            "run",
            "fwsm",
            "--traces",
            "/tmp",
            "--out",
            "/nonexistent",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    crate::common::require_root();
    let results = run_quick("wfw-", "fwsm", &["fwsm"]);
    assert_eq!(results["scenario"], "fwsm");
    assert!(
        results["skipped"].as_array().is_some_and(Vec::is_empty),
        "{results}"
    );
    let rows = results["rows"].as_array().unwrap();
    let row = |config: &str, mode: &str| {
        rows.iter()
            .find(|r| r["config"] == config && r["mode"] == mode)
            .unwrap_or_else(|| panic!("no {config} {mode} row: {results}"))
    };
    for config in [
        "no-firewall",
        "default",
        "tuned",
        "jumbo",
        "default-loss",
        "tuned-loss",
        "default-20ms",
    ] {
        for mode in ["cubic", "bbr", "wanopt"] {
            let r = row(config, mode);
            for key in [
                "guide",
                "guide_mbit_s",
                "firewall",
                "middlebox",
                "reorder",
                "mtu",
                "rtt_ms",
                "loss_pct",
                "idle_rtt_ms",
                "payload_bytes",
                "ceiling_mbit_s",
                "window_ceiling_mbit_s",
                "bdp_bytes",
                "mbit_s",
                "runs_mbit_s",
                "of_guide",
                "retrans_segs",
                "reordered",
                "queue_drops",
                "cpu_busy_pct",
            ] {
                assert!(r.get(key).is_some(), "{key} missing: {r}");
            }
            // Nothing crosses faster than the firewall (or the ports) lets
            // one flow of full segments through.
            assert!(
                r["mbit_s"].as_f64().unwrap() <= 1.02 * r["ceiling_mbit_s"].as_f64().unwrap(),
                "{r}"
            );
        }
    }
    let mbit = |config: &str, mode: &str| row(config, mode)["mbit_s"].as_f64().unwrap();
    // Through a packet-rate cap, jumbo frames carry more than 1500-byte ones.
    assert!(
        mbit("jumbo", "cubic") > 1.05 * mbit("tuned", "cubic"),
        "{results}"
    );
    // The completion unit off reorders, and the path's loss is counted.
    assert!(row("default", "cubic")["reordered"].as_u64().unwrap() > 0);
    assert!(row("tuned", "cubic")["reordered"].as_u64().unwrap() == 0);
    // 20 ms away, the hosts' 256 KB window binds the direct flow (window /
    // RTT), and the tunnel, whose own windows are the path's, does not.
    let far = row("default-20ms", "cubic");
    assert!(
        far["mbit_s"].as_f64().unwrap() <= 1.05 * far["window_ceiling_mbit_s"].as_f64().unwrap(),
        "{far}"
    );
    assert!(
        mbit("default-20ms", "wanopt") > 2.0 * mbit("default-20ms", "bbr"),
        "{results}"
    );
}

#[test]
#[ignore = "the scenario tier: scripts/test-scenarios runs it, and CI"]
fn cluster_quick_scales_fails_over_adds_and_keeps_an_edge_on_its_replica() {
    crate::common::require_root();
    let results = run_quick("wcs-", "cluster", &[]);
    assert_eq!(results["scenario"], "cluster");
    let rows = results["rows"].as_array().cloned().unwrap_or_default();
    let of = |phase: &str| -> Vec<serde_json::Value> {
        rows.iter()
            .filter(|r| r["phase"] == phase)
            .cloned()
            .collect()
    };
    for row in &rows {
        for key in [
            "replicas",
            "sites",
            "phase",
            "site",
            "mbit_s",
            "first_flow_ms",
            "resets",
            "wrong_bytes",
        ] {
            assert!(row.get(key).is_some(), "{key} missing: {row}");
        }
        assert_eq!(row["wrong_bytes"], 0, "{row}");
    }
    // Every phase ran, with six sites each.
    let steady = of("steady");
    assert_eq!(steady.len(), 12, "{results}");
    assert_eq!(of("failover").len(), 6, "{results}");
    assert_eq!(of("added").len(), 6, "{results}");
    assert!(steady.iter().all(|r| r["resets"] == 0), "{results}");
    // Three capped replicas carry clearly more than one (the goal, 2.7x,
    // is the report's; a loaded machine must not turn this floor red).
    let total = |n: u64| {
        results["steady"]
            .as_array()
            .and_then(|cells| cells.iter().find(|c| c["replicas"] == n))
            .and_then(|c| c["mbit_s"].as_f64())
            .unwrap_or(0.0)
    };
    assert!(total(3) > 2.0 * total(1), "{}", results["steady"]);
    // The killed replica's sites had a new flow within 3 s; the others
    // were not reset.
    let killed = results["killed"].clone();
    for row in of("failover") {
        if row["replica"] == killed {
            let ms = row["first_flow_ms"].as_f64().unwrap_or(f64::INFINITY);
            assert!(ms < 3000.0, "{row}");
        } else {
            assert_eq!(row["resets"], 0, "{row}");
        }
    }
    for row in of("added") {
        assert_eq!(row["resets"], 0, "{row}");
        assert!(row["first_flow_ms"].is_number(), "{row}");
    }
    // Ten redials while its replica lives: back on it every time.
    let redials = &results["redials"];
    assert_eq!(redials["redials"], 10, "{redials}");
    assert_eq!(redials["returned"], 10, "{redials}");
}

#[test]
#[ignore = "the scenario tier: scripts/test-scenarios runs it, and CI"]
fn reach_quick_carries_flows_where_udp_is_blocked_policed_and_returns() {
    crate::common::require_root();
    let results = run_quick("wre-", "reach", &[]);
    assert_eq!(results["scenario"], "reach");
    assert!(
        results["skipped"].as_array().is_some_and(Vec::is_empty),
        "{results}"
    );
    let rows = results["rows"].as_array().cloned().unwrap_or_default();
    for row in &rows {
        for key in [
            "case",
            "mode",
            "transport",
            "mbit_s",
            "first_byte_ms",
            "resets",
            "wrong_bytes",
            "fetch_ms",
            "floor_ms",
            "moved_after_ms",
        ] {
            assert!(row.get(key).is_some(), "{key} missing: {row}");
        }
        assert_eq!(row["wrong_bytes"], 0, "{row}");
    }
    let row = |case: &str, mode: &str| {
        rows.iter()
            .find(|r| r["case"] == case && r["mode"] == mode)
            .cloned()
            .unwrap_or_else(|| panic!("no {case} {mode} row: {results}"))
    };
    let figure = |case: &str, mode: &str, key: &str| {
        row(case, mode)[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{case} {mode}: no {key}: {results}"))
    };
    // Every case ran once in each mode.
    assert_eq!(rows.len(), 10, "{results}");
    // Direct, the rules on UDP leave kernel TCP alone: the link's rate.
    for case in ["open", "blocked", "policed"] {
        let direct = figure(case, "direct", "mbit_s");
        assert!(direct > 40.0 && direct < 50.5, "{case}: {direct}");
    }
    // Through wanopt: QUIC where UDP is open, TCP where it is blocked or
    // policed, QUIC again once it returns; the bounds are the goals' with
    // room for a loaded machine (the report judges the goals themselves).
    assert_eq!(row("open", "wanopt")["transport"], "quic", "{results}");
    assert_eq!(row("blocked", "wanopt")["transport"], "tcp", "{results}");
    assert_eq!(row("policed", "wanopt")["transport"], "tcp", "{results}");
    assert_eq!(row("returns", "wanopt")["transport"], "quic", "{results}");
    assert!(figure("blocked", "wanopt", "first_byte_ms") < 5000.0);
    assert!(figure("blocked-mid", "wanopt", "first_byte_ms") < 5000.0);
    assert!(figure("policed", "wanopt", "moved_after_ms") < 10_000.0);
    assert!(figure("returns", "wanopt", "moved_after_ms") < 60_000.0);
    for case in ["blocked", "policed"] {
        let ratio = figure(case, "wanopt", "mbit_s") / figure(case, "direct", "mbit_s");
        assert!(ratio > 0.8, "{case}: wanopt over direct {ratio}");
    }
    let fetch = figure("blocked", "wanopt", "fetch_ms") / figure("blocked", "wanopt", "floor_ms");
    assert!(fetch < 1.3, "the warm fetch at {fetch} x its floor");
    // The download open when UDP was blocked was reset, and the edge
    // counted why, or it continued.
    let mid = row("blocked-mid", "wanopt");
    let counted = mid["reset_reasons"]
        .as_object()
        .is_some_and(|reasons| !reasons.is_empty());
    assert!(
        mid["open_flow"] == "continued" || (mid["open_flow"] == "reset" && counted),
        "{mid}"
    );
}
