//! Every peer of a node's configuration is listed, up or down: `status`,
//! `/metrics` and `flows` name it by its `name` (or key), say its state
//! (up, connecting, down, refused) and why, and count its flows and bytes;
//! a peer that goes down stays listed; the configuration's hash and its
//! reloads are shown.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// The configured peer labelled `label` in a node's status.
fn configured(node: &Node, label: &str) -> serde_json::Value {
    let status = node.status().expect("status");
    status["configured_peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"] == label)
        .cloned()
        .unwrap_or_else(|| panic!("no configured peer {label} in {status}"))
}

/// Whether `line` (a sample's name and labels' start) is in the node's
/// exposition with `value`.
fn has_sample(node: &Node, name_and_labels: &str, value: &str) -> bool {
    let metrics = http_get(node.control, "/metrics").unwrap_or_default();
    metrics.lines().any(|l| {
        l.starts_with(name_and_labels.split('{').next().unwrap())
            && name_and_labels
                .split(['{', ',', '}'])
                .skip(1)
                .filter(|p| !p.is_empty())
                .all(|p| l.contains(p))
            && l.ends_with(&format!(" {value}"))
    })
}

/// A core that pins the edge as `branch-a` and a second edge, `branch-z`,
/// that never connects.
fn core_file(keys: &Keys, listen: SocketAddr) -> String {
    let (key, _) = keys.key("core");
    let (_, edge) = keys.key("edge");
    let (_, never) = keys.key("never");
    format!(
        "listen = \"{listen}\"\nkey = \"{}\"\nallow = [\"127.0.0.1\"]\nno-reduce = true\nlisten-tcp = \"off\"\n\
         [[peer]]\npublic-key = \"{edge}\"\nname = \"branch-a\"\n\
         [[peer]]\npublic-key = \"{never}\"\nname = \"branch-z\"\n",
        key.display()
    )
}

/// An edge with three peers: `hq`, the core; `dc2`, where nothing
/// listens; and `stranger`, a core pinned with a key it does not have.
fn edge_file(keys: &Keys, (core, other_core): (SocketAddr, SocketAddr), forward: &str) -> String {
    let (key, _) = keys.key("edge");
    let (_, core_pub) = keys.key("core");
    let (_, other) = keys.key("other");
    let nowhere = free_udp();
    format!(
        "key = \"{}\"\nno-reduce = true\ntransport = \"quic\"\nforward = [\"{forward}\"]\n\
         [[peer]]\npublic-key = \"{core_pub}\"\nname = \"hq\"\nendpoint = \"{core}\"\n\
         [[peer]]\npublic-key = \"{other}\"\nname = \"dc2\"\nendpoint = \"{nowhere}\"\nroutes = [\"10.99.0.0/16\"]\n\
         [[peer]]\npublic-key = \"{}\"\nname = \"stranger\"\nendpoint = \"{other_core}\"\nroutes = [\"10.98.0.0/16\"]\n",
        key.display(),
        keys.key("stranger").1,
    )
}

#[test]
fn every_configured_peer_is_listed_with_its_state_flows_and_bytes() {
    let keys = Keys::new();
    let (core_addr, listen, echo) = (free_udp(), free_tcp(), echo_server());
    let core_path = keys.dir.path().join("core.toml");
    std::fs::write(&core_path, core_file(&keys, core_addr)).unwrap();
    let core = spawn(
        &keys,
        "core",
        &["core", "--config", core_path.to_str().unwrap()].map(String::from),
    );
    // A second core, which the edge pins with a key it does not have.
    let other_core = free_udp();
    let (other_key, _) = keys.key("core2");
    let _core2 = spawn(
        &keys,
        "core2",
        &[
            "core",
            "--listen",
            &other_core.to_string(),
            "--key",
            other_key.to_str().unwrap(),
            "--peer-key",
            &keys.key("edge").1,
            "--listen-tcp",
            "off",
            "--no-reduce",
        ]
        .map(String::from),
    );
    let edge_path = keys.dir.path().join("edge.toml");
    let forward = format!("{listen}={echo}");
    std::fs::write(
        &edge_path,
        edge_file(&keys, (core_addr, other_core), &forward),
    )
    .unwrap();
    let edge = spawn(
        &keys,
        "edge",
        &["edge", "--config", edge_path.to_str().unwrap()].map(String::from),
    );
    edge.wait_tunnel_up(Duration::from_secs(10));

    // A flow through hq, open while its peer is read.
    let mut client = TcpStream::connect(listen).unwrap();
    client.write_all(&[7u8; 100_000]).unwrap();
    let mut back = vec![0u8; 100_000];
    client.read_exact(&mut back).unwrap();
    let flows: serde_json::Value =
        serde_json::from_str(&http_get(edge.control, "/flows").unwrap()).unwrap();
    assert_eq!(flows["flows"][0]["peer_name"], "hq", "{flows}");
    let out = Command::new(BIN)
        .args(["flows", "--control", &edge.control.to_string()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.lines().next().unwrap().contains("PEER") && table.contains(" hq "),
        "{table}"
    );
    drop(client);

    assert!(
        eventually(Duration::from_secs(10), || {
            configured(&edge, "stranger")["state"] == "refused"
                && configured(&edge, "hq")["flows_active"] == 0
        }),
        "{}",
        edge.status().unwrap()
    );
    let hq = configured(&edge, "hq");
    assert_eq!(hq["state"], "up", "{hq}");
    assert_eq!(hq["flows_total"], 1, "{hq}");
    assert_eq!(hq["bytes_to_server"], 100_000, "{hq}");
    assert_eq!(hq["bytes_to_client"], 100_000, "{hq}");
    assert_eq!(hq["tunnels"].as_array().unwrap().len(), 1, "{hq}");
    let dc2 = configured(&edge, "dc2");
    assert_eq!(dc2["state"], "connecting", "{dc2}");
    assert_eq!(dc2["flows_total"], 0, "{dc2}");
    let stranger = configured(&edge, "stranger");
    assert!(
        stranger["why"].as_str().unwrap().contains("not among"),
        "{stranger}"
    );
    assert!(has_sample(&edge, "wanopt_peer_up{name=\"hq\"}", "1"));
    assert!(has_sample(&edge, "wanopt_peer_up{name=\"dc2\"}", "0"));
    assert!(has_sample(
        &edge,
        "wanopt_peer_state{name=\"stranger\",state=\"refused\"}",
        "1"
    ));
    assert!(has_sample(
        &edge,
        "wanopt_peer_lan_bytes_total{name=\"hq\",direction=\"to_server\"}",
        "100000"
    ));
    let text = Command::new(BIN)
        .args(["status", "--control", &edge.control.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("peers       3 configured, 1 up"), "{text}");
    assert!(text.contains("  dc2 dialed at"), "{text}");

    // The core: branch-a up with the flow's bytes, branch-z down since
    // the start; its log names the edge.
    let a = configured(&core, "branch-a");
    assert_eq!(a["state"], "up", "{a}");
    assert_eq!(a["bytes_to_client"], 100_000, "{a}");
    let z = configured(&core, "branch-z");
    assert_eq!(z["state"], "down", "{z}");
    assert!(z["why"].as_str().unwrap().contains("not connected"), "{z}");
    assert!(
        core.log_text().contains("tunnel up from edge branch-a at"),
        "{}",
        core.log_text()
    );

    // The edge stops: branch-a stays listed, down, and alertable.
    drop(edge);
    assert!(
        eventually(Duration::from_secs(40), || configured(&core, "branch-a")
            ["state"]
            == "down"),
        "{}",
        core.status().unwrap()
    );
    assert!(has_sample(&core, "wanopt_peer_up{name=\"branch-a\"}", "0"));
    assert_eq!(configured(&core, "branch-a")["flows_total"], 1);
}

#[test]
fn the_configuration_hash_and_reloads_are_shown() {
    let keys = Keys::new();
    let path = keys.dir.path().join("core.toml");
    let text = core_file(&keys, free_udp());
    std::fs::write(&path, &text).unwrap();
    let core = spawn(
        &keys,
        "core",
        &["core", "--config", path.to_str().unwrap()].map(String::from),
    );
    assert!(eventually(Duration::from_secs(10), || core
        .status()
        .is_some()));
    let before = core.status().unwrap()["config_hash"].clone();
    assert_eq!(before.as_str().map(str::len), Some(16), "{before}");
    let reload = || {
        Command::new(BIN)
            .args(["reload", "--control", &core.control.to_string()])
            .output()
            .unwrap()
    };
    // A renamed peer: applied, the hash changes, the name with it.
    std::fs::write(&path, text.replace("branch-z", "branch-y")).unwrap();
    assert!(reload().status.success());
    let status = core.status().unwrap();
    assert_ne!(status["config_hash"], before, "{status}");
    assert_eq!(status["reloads"], 1, "{status}");
    configured(&core, "branch-y");
    // A broken file: refused, counted, the hash kept.
    std::fs::write(&path, "listen = [").unwrap();
    assert!(!reload().status.success());
    let after = core.status().unwrap();
    assert_eq!(after["config_hash"], status["config_hash"], "{after}");
    assert_eq!(after["reload_failures"], 1, "{after}");
    assert!(has_sample(
        &core,
        "wanopt_config_reloads_total{result=\"refused\"}",
        "1"
    ));
    assert!(has_sample(
        &core,
        "wanopt_config_reloads_total{result=\"applied\"}",
        "1"
    ));
}

#[test]
fn a_bad_or_doubled_peer_name_is_a_usage_error() {
    let keys = Keys::new();
    let path = keys.dir.path().join("core.toml");
    let text = core_file(&keys, free_udp());
    for (bad, needle) in [
        (text.replace("branch-z", "has space"), "letters, digits"),
        (text.replace("branch-z", "branch-a"), "given twice"),
    ] {
        std::fs::write(&path, bad).unwrap();
        let args = ["core", "--config", path.to_str().unwrap()].map(String::from);
        let (code, err) = run_refused(&args).expect("the core ran");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(needle), "{err}");
    }
}
