//! `wanopt lab status`: link settings and emulator counters per direction.

use crate::bringup::{counters_path, settings_path, Settings};
use crate::topology::{Lab, TopologyError};

/// Prints the running lab's settings and counters; returns the exit code.
pub fn print(lab: &Lab) -> anyhow::Result<i32> {
    if !lab.is_up() {
        eprintln!(
            "wanopt lab: {}",
            TopologyError::NotUp(lab.prefix().to_string())
        );
        return Ok(1);
    }
    let settings: Option<Settings> = std::fs::read_to_string(settings_path(lab))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    match &settings {
        Some(s) => {
            println!("profile   {}", s.profile);
            println!("optimize  {}", s.optimize);
            println!("seed      {}", s.link.seed);
            println!(
                "up        {}",
                if s.link.up.is_empty() {
                    "(perfect link)"
                } else {
                    &s.link.up
                }
            );
            println!(
                "down      {}",
                if s.link.down.is_empty() {
                    "(perfect link)"
                } else {
                    &s.link.down
                }
            );
        }
        None => println!(
            "settings  (unknown: the lab is still starting or was built by another version)"
        ),
    }
    let counters: serde_json::Value = std::fs::read_to_string(counters_path(lab))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    for direction in ["up", "down"] {
        println!("\n[{direction}]");
        let d = &counters[direction];
        if d.is_null() {
            println!("  (no counters: is the emulator running?)");
            continue;
        }
        print_flat("  io", &d["io"]);
        print_flat("  link", &d["link"]);
    }
    Ok(0)
}

fn print_flat(prefix: &str, value: &serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                print_flat(&format!("{prefix}.{k}"), v);
            }
        }
        other => println!("{prefix:<32} {other}"),
    }
}
