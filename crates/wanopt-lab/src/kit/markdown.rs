//! Pieces of every `report.md`: the `(quick)` mark and the lists under a
//! heading (cells not measured, flow resets, notes).

use std::fmt::{Display, Write as _};

/// ` (quick)` after a title for a `--quick` run, nothing otherwise.
pub fn quick(quick: bool) -> &'static str {
    if quick {
        " (quick)"
    } else {
        ""
    }
}

/// `## HEADING`, a blank line, and a `- ITEM` line per item.
pub fn list<T: Display>(out: &mut String, heading: &str, items: impl IntoIterator<Item = T>) {
    let _ = writeln!(out, "## {heading}\n");
    for item in items {
        let _ = writeln!(out, "- {item}");
    }
}

/// The flow resets the nodes logged as a list under `heading`, each
/// line in backticks.
pub fn flow_resets(out: &mut String, heading: &str, lines: &[String]) {
    list(out, heading, lines.iter().map(|line| format!("`{line}`")));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_a_heading_and_a_line_per_item() {
        let mut out = String::new();
        list(&mut out, "Not measured", ["a: why", "b: why"]);
        flow_resets(&mut out, "Flow resets", &["edge: reset".to_string()]);
        assert_eq!(
            out,
            "## Not measured\n\n- a: why\n- b: why\n## Flow resets\n\n- `edge: reset`\n"
        );
        assert_eq!(quick(true), " (quick)");
        assert_eq!(quick(false), "");
    }
}
