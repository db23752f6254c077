//! `wanopt lab status`: link settings and emulator counters per direction.

use crate::bringup::{counters_path, settings_path, Settings};
use crate::topology::{Lab, Node, TopologyError};

/// Appends one formatted line to a `String`.
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        use std::fmt::Write as _;
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Errors of `lab status`.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// No lab is up.
    #[error(transparent)]
    NotUp(TopologyError),
}

/// Prints the running lab's settings and counters.
pub fn print(lab: &Lab) -> Result<(), StatusError> {
    let mut out = String::new();
    if !lab.is_up() {
        return Err(StatusError::NotUp(TopologyError::NotUp(
            lab.netns(Node::Client),
        )));
    }
    let settings: Option<Settings> = std::fs::read_to_string(settings_path(lab))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    match &settings {
        Some(s) => {
            outln!(out, "profile   {}", s.profile);
            outln!(out, "optimize  {}", s.optimize);
            if s.optimize {
                outln!(out, "reduce    {}", s.reduce);
            }
            outln!(out, "seed      {}", s.link.seed);
            outln!(
                out,
                "up        {}",
                if s.link.up.is_empty() {
                    "(perfect link)"
                } else {
                    &s.link.up
                }
            );
            outln!(
                out,
                "down      {}",
                if s.link.down.is_empty() {
                    "(perfect link)"
                } else {
                    &s.link.down
                }
            );
            if !s.link.middlebox.is_empty() {
                outln!(out, "middlebox {}", s.link.middlebox);
            }
        }
        None => outln!(
            out,
            "settings  (unknown: the lab is still starting or was built by another version)"
        ),
    }
    let counters: serde_json::Value = std::fs::read_to_string(counters_path(lab))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    for direction in ["up", "down"] {
        outln!(out, "\n[{direction}]");
        let d = &counters[direction];
        if d.is_null() {
            outln!(out, "  (no counters: is the emulator running?)");
            continue;
        }
        print_flat(&mut out, "  io", &d["io"]);
        print_flat(&mut out, "  link", &d["link"]);
    }
    // A closed pipe (`| head`) is not an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    Ok(())
}

fn print_flat(out: &mut String, prefix: &str, value: &serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                print_flat(out, &format!("{prefix}.{k}"), v);
            }
        }
        other => outln!(out, "{prefix:<32} {other}"),
    }
}
