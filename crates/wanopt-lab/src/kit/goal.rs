//! A scenario's goal as its report states it: what it asks of one mode,
//! how many cells were checked, and the ones that missed, as a pass/fail
//! Markdown line.

/// One goal for one mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// What it asks.
    pub text: String,
    /// The mode checked.
    pub mode: String,
    /// Cells checked.
    pub checked: usize,
    /// The cells that missed, described.
    pub misses: Vec<String>,
}

impl Goal {
    /// `PASS`, `FAIL` or `n/a` (no cell to check).
    pub fn verdict(&self) -> &'static str {
        match (self.checked, self.misses.is_empty()) {
            (0, _) => "n/a",
            (_, true) => "PASS",
            (_, false) => "FAIL",
        }
    }

    /// The goal as a Markdown list item.
    pub fn line(&self) -> String {
        let mut line = format!(
            "- **{}** {}: {} ({} of {} cells met)",
            self.verdict(),
            self.mode,
            self.text,
            self.checked - self.misses.len(),
            self.checked
        );
        if !self.misses.is_empty() {
            let shown: Vec<&str> = self.misses.iter().take(4).map(String::as_str).collect();
            line.push_str(&format!("; missed: {}", shown.join("; ")));
            if self.misses.len() > 4 {
                line.push_str(&format!("; and {} more", self.misses.len() - 4));
            }
        }
        line
    }
}

/// Every goal's line, each ended by a newline.
pub fn lines(goals: &[Goal]) -> String {
    goals.iter().map(|g| g.line() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goal_says_its_verdict_and_its_first_misses() {
        let goal = |misses: usize, checked| Goal {
            text: "within 1.1 x the floor".into(),
            mode: "wanopt-warm".into(),
            checked,
            misses: (0..misses).map(|i| format!("cell {i}")).collect(),
        };
        assert_eq!(goal(0, 0).verdict(), "n/a");
        assert_eq!(
            goal(0, 3).line(),
            "- **PASS** wanopt-warm: within 1.1 x the floor (3 of 3 cells met)"
        );
        assert_eq!(
            goal(5, 6).line(),
            "- **FAIL** wanopt-warm: within 1.1 x the floor (1 of 6 cells met); missed: cell 0; cell 1; cell 2; cell 3; and 1 more"
        );
    }
}
