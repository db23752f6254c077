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

/// A report's tail: the cells not measured (with why) and the flow resets
/// the nodes logged, each a list under its heading after a blank line,
/// and nothing for an empty one.
pub fn not_measured_and_resets(
    out: &mut String,
    not_measured: impl IntoIterator<Item = String>,
    resets: &[String],
) {
    let not_measured: Vec<String> = not_measured.into_iter().collect();
    if !not_measured.is_empty() {
        out.push('\n');
        list(out, "Not measured", not_measured);
    }
    if !resets.is_empty() {
        out.push('\n');
        flow_resets(out, "Flow resets (the run fails)", resets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_lists_only_what_there_is() {
        let mut out = String::new();
        not_measured_and_resets(&mut out, Vec::new(), &[]);
        assert_eq!(out, "");
        not_measured_and_resets(&mut out, ["a: why".to_string()], &["reset".to_string()]);
        assert_eq!(
            out,
            "\n## Not measured\n\n- a: why\n\n## Flow resets (the run fails)\n\n- `reset`\n"
        );
    }

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
