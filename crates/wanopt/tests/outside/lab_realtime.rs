//! The `realtime` scenario end to end on a real lab: `lab run realtime
//! --smoke` runs one 5 s direct cell (voice both ways, video down and a
//! bulk download at once across link 1 at 5% loss) and writes its four
//! rows with the interface contract's keys and figures that make sense.
//! Needs root (network namespaces); the lab's prefix is `wrt-`.

const PREFIX: &str = "wrt-";

fn wanopt(args: &[&str]) -> std::process::Output {
    crate::common::lab_wanopt(PREFIX, args)
}

#[test]
fn a_direct_cell_writes_a_row_per_stream() {
    // Options of other scenarios are the user's mistake, before any lab.
    let out = wanopt(&[
        "lab",
        "run",
        "realtime",
        "--runs",
        "2",
        "--out",
        "/nonexistent",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = wanopt(&["lab", "run", "lossy", "--smoke", "--out", "/nonexistent"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    crate::common::require_root();
    let dir = std::env::temp_dir().join(format!("lab-realtime-{}", std::process::id()));
    let out = wanopt(&[
        "lab",
        "run",
        "realtime",
        "--smoke",
        "--out",
        &dir.to_string_lossy(),
    ]);
    let _ = wanopt(&["lab", "down"]);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    let results: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(results["scenario"], "realtime");
    let rows = results["rows"].as_array().unwrap();
    let keys: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["stream"].as_str().unwrap_or_default().to_string(),
                r["direction"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            ("voice".to_string(), "up".to_string()),
            ("voice".into(), "down".into()),
            ("video".into(), "down".into()),
            ("bulk".into(), "down".into())
        ],
        "{text}"
    );
    for r in rows {
        for key in [
            "stream",
            "loss_pct",
            "paths",
            "mode",
            "event",
            "delivered_loss_pct",
            "delay_p50_ms",
            "delay_p99_ms",
            "jitter_ms",
            "max_gap_ms",
            "throughput_mbps",
        ] {
            assert!(r.get(key).is_some(), "{key} missing: {r}");
        }
        assert_eq!(
            (r["mode"].as_str(), r["paths"].as_u64()),
            (Some("direct"), Some(1))
        );
        assert_eq!(r["event"], "none");
        assert_eq!(r["loss_pct"], 5.0);
    }
    for r in &rows[..3] {
        // 5% loss each way on the link, 5 s of packets: some lost, most
        // not; a one-way delay of at least the link's 20 ms, well under
        // a second; no copy delivered twice.
        let loss = r["delivered_loss_pct"].as_f64().unwrap();
        assert!((0.0..20.0).contains(&loss), "{r}");
        let p50 = r["delay_p50_ms"].as_f64().unwrap();
        let p99 = r["delay_p99_ms"].as_f64().unwrap();
        assert!(
            (19.0..200.0).contains(&p50) && p50 <= p99 && p99 < 1_000.0,
            "{r}"
        );
        assert!(r["jitter_ms"].as_f64().is_some() && r["max_gap_ms"].as_f64().is_some());
        assert_eq!(r["duplicates_delivered"], 0);
        assert!(r["throughput_mbps"].is_null());
    }
    // Voice is 50 packets/s: about 250 in 5 s.
    let sent = rows[0]["sent"].as_u64().unwrap();
    assert!((240..=260).contains(&sent), "{sent}");
    // Video is 30 frames of 7 packets a second.
    let video = rows[2]["sent"].as_u64().unwrap();
    assert!(
        (1_000..=1_100).contains(&video) && video.is_multiple_of(7),
        "{video}"
    );
    assert!(rows[3]["throughput_mbps"].as_f64().unwrap() > 0.5);
    assert!(rows[3]["delivered_loss_pct"].is_null());
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Goals"), "{report}");
    assert!(dir.join("realtime-delay.svg").exists() && dir.join("realtime-loss.png").exists());
    assert!(dir.join("series/loss5-direct-none.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
