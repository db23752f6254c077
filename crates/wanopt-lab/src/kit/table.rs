//! Markdown tables: a header, the rule under it (each column left or right
//! aligned) and a line per row, every line with as many cells.

use std::fmt;

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text (`---`).
    Left,
    /// Figures (`---:`).
    Right,
}

/// A Markdown table being built: columns first, then rows; [`Display`]
/// writes it, each line ending in a newline.
///
/// [`Display`]: fmt::Display
#[derive(Debug, Clone, Default)]
pub struct Table {
    headings: Vec<String>,
    aligns: Vec<Align>,
    spaced_rule: bool,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table of `columns`: each a heading and how its cells line up.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Table {
        let mut table = Table::default();
        for (heading, align) in columns {
            table = table.column(heading, align);
        }
        table
    }

    /// A table whose columns have `headings`, the first `left` of them
    /// text, the rest figures.
    pub fn text_then_figures(left: usize, headings: &[&str]) -> Table {
        Table::new(headings.iter().enumerate().map(|(i, heading)| {
            let align = if i < left { Align::Left } else { Align::Right };
            (*heading, align)
        }))
    }

    /// One more column.
    pub fn column(mut self, heading: impl Into<String>, align: Align) -> Table {
        self.headings.push(heading.into());
        self.aligns.push(align);
        self
    }

    /// The rule under the header with a space around each cell
    /// (`| --- | ---: |`) rather than none (`|---|---:|`).
    pub fn spaced_rule(mut self) -> Table {
        self.spaced_rule = true;
        self
    }

    /// One more row: a cell per column.
    pub fn row<S: ToString>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows
            .push(cells.into_iter().map(|c| c.to_string()).collect());
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// `| a | b |`.
fn line(f: &mut fmt::Formatter<'_>, cells: &[String]) -> fmt::Result {
    writeln!(f, "| {} |", cells.join(" | "))
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        line(f, &self.headings)?;
        let rule = |align: &Align| match align {
            Align::Left => "---",
            Align::Right => "---:",
        };
        let rules: Vec<&str> = self.aligns.iter().map(rule).collect();
        if self.spaced_rule {
            writeln!(f, "| {} |", rules.join(" | "))?;
        } else {
            writeln!(f, "|{}|", rules.join("|"))?;
        }
        for row in &self.rows {
            line(f, row)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_has_a_header_a_rule_and_a_line_per_row() {
        let mut table = Table::text_then_figures(1, &["name", "Mbit/s"]);
        table.row(["bbr", "5.00"]);
        table.row(["wanopt", ""]);
        assert_eq!(
            table.to_string(),
            "| name | Mbit/s |\n|---|---:|\n| bbr | 5.00 |\n| wanopt |  |\n"
        );
        let spaced = Table::new([("sites", Align::Right), ("mode", Align::Left)]).spaced_rule();
        assert_eq!(spaced.to_string(), "| sites | mode |\n| ---: | --- |\n");
        assert!(spaced.is_empty());
    }
}
