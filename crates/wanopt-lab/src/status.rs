//! `wanopt lab status`: link settings and emulator counters per direction,
//! for link 1, (with `lab up --link2`) link 2 and (with `lab up --sites`)
//! each extra site's link; with `lab up --cores` the replicas, their
//! health and tunnels, and the director's bucket map; with `lab up
//! --edges 2` each edge's VRRP state, who holds the address, and edge B's
//! link.

use crate::bringup::{link_counters_path, settings_path, Settings};
use crate::link::WanLink;
use crate::sites::Sites;
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
            if let Some(link2) = &s.link2 {
                outln!(out, "link2 seed {}", link2.seed);
                outln!(out, "link2 up   {}", or_perfect(&link2.up));
                outln!(out, "link2 down {}", or_perfect(&link2.down));
            }
            if s.sites > Sites::ONE {
                outln!(
                    out,
                    "sites     {} (sites 2-{}: the same link, seeds {}-{})",
                    s.sites,
                    s.sites,
                    s.sites.extra().next().map_or(0, |x| x.specs(&s.link).seed),
                    s.sites.extra().last().map_or(0, |x| x.specs(&s.link).seed)
                );
            }
        }
        None => outln!(
            out,
            "settings  (unknown: the lab is still starting or was built by another version)"
        ),
    }
    if let Some(cluster) = settings.as_ref().and_then(|s| s.cluster) {
        out.push_str(&crate::cluster::status::lines(lab, cluster));
    }
    let pair = settings.as_ref().is_some_and(|s| s.edges.is_pair());
    if pair {
        let optimize = settings.as_ref().is_some_and(|s| s.optimize);
        out.push_str(&crate::edge_pair::vrrp::status_lines(lab, optimize));
    }
    // (state line's label, section prefix, counters file).
    let mut links = vec![(
        "link 1".to_string(),
        String::new(),
        link_counters_path(lab, WanLink::One),
    )];
    if settings.as_ref().is_some_and(|s| s.link2.is_some()) {
        links.push((
            "link 2".into(),
            "link2 ".into(),
            link_counters_path(lab, WanLink::Two),
        ));
    }
    let sites = settings.as_ref().map_or(Sites::ONE, |s| s.sites);
    for site in sites.extra() {
        links.push((
            format!("site {}", site.number()),
            format!("site{} ", site.number()),
            lab.state_dir().join(site.counters_file()),
        ));
    }
    if pair {
        links.push((
            "link edgeb".into(),
            "edgeb ".into(),
            lab.state_dir().join(crate::edge_pair::EDGE_B_COUNTERS),
        ));
    }
    let counters: Vec<(String, String, serde_json::Value)> = links
        .into_iter()
        .map(|(label, section, path)| {
            let doc = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(serde_json::Value::Null);
            (label, section, doc)
        })
        .collect();
    for (label, _, doc) in &counters {
        outln!(out, "{label}    {}", cut_state(&doc["cut"]));
    }
    for (_, section, doc) in &counters {
        for direction in ["up", "down"] {
            // Link 1's sections keep their names (`[up]`, `[down]`).
            outln!(out, "\n[{section}{direction}]");
            let d = &doc[direction];
            if d.is_null() {
                outln!(out, "  (no counters: is the emulator running?)");
                continue;
            }
            print_flat(&mut out, "  io", &d["io"]);
            print_flat(&mut out, "  link", &d["link"]);
        }
    }
    // A closed pipe (`| head`) is not an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    Ok(())
}

/// A spec as shown: an empty one is a perfect link.
fn or_perfect(spec: &str) -> &str {
    if spec.is_empty() {
        "(perfect link)"
    } else {
        spec
    }
}

/// A link's state from its emulator's `cut` counters.
fn cut_state(cut: &serde_json::Value) -> String {
    match (cut["down"].as_bool(), cut["down_since_unix_ms"].as_u64()) {
        (Some(true), Some(since)) => format!("down (cut at {since} unix ms)"),
        (Some(true), None) => "down".to_string(),
        (Some(false), _) => "up".to_string(),
        (None, _) => "(unknown: no counters)".to_string(),
    }
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
