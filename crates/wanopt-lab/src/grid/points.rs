//! The points of a grid: every RTT, middlebox rules, endpoint profile and
//! path of a scenario, in its order, each with its emulator specs.

use super::results::Skipped;
use super::spec::{Mode, ScenarioSpec};
use crate::link::{LinkOptions, LinkSpecs};
use crate::profile::Profile;
use crate::scenario::RunError;

/// One grid point.
#[derive(Debug, Clone)]
pub(super) struct Point {
    pub(super) rtt_ms: u64,
    pub(super) specs: LinkSpecs,
    pub(super) profile: &'static Profile,
    pub(super) mode: Mode,
}

impl Point {
    /// The point in a progress line.
    pub(super) fn label(&self) -> String {
        let (rtt_ms, name, mode) = (self.rtt_ms, self.profile.name, self.mode.name());
        if self.specs.middlebox.is_empty() {
            format!("rtt {rtt_ms}ms {name} {mode}")
        } else {
            format!(
                "rtt {rtt_ms}ms middlebox [{}] {name} {mode}",
                self.specs.middlebox
            )
        }
    }

    pub(super) fn skipped(&self, reason: String) -> Skipped {
        Skipped {
            rtt_ms: self.rtt_ms,
            profile: self.profile.name.into(),
            mode: self.mode.name().into(),
            middlebox: self.specs.middlebox.clone(),
            reason,
        }
    }
}

fn parse_rtt_ms(text: &str) -> Result<u64, RunError> {
    wanopt_netem::units::parse_duration(text)
        .map(|d| d.as_millis() as u64)
        .map_err(|e| RunError::Rtt {
            text: text.to_string(),
            message: e.to_string(),
        })
}

/// The middlebox rules of each point: the grid's list, or the `[link]`
/// table's rules (if any) at every point.
fn middleboxes(spec: &ScenarioSpec) -> Result<Vec<Option<String>>, RunError> {
    match (spec.grid.middlebox.is_empty(), &spec.link.middlebox) {
        (true, rules) => Ok(vec![rules.clone()]),
        (false, None) => Ok(spec.grid.middlebox.iter().cloned().map(Some).collect()),
        (false, Some(_)) => Err(RunError::MiddleboxTwice),
    }
}

/// Every point of the grid, in its order: RTT, middlebox, profile, mode.
pub(super) fn points(spec: &ScenarioSpec) -> Result<Vec<Point>, RunError> {
    let middleboxes = middleboxes(spec)?;
    let mut points = Vec::new();
    for rtt in &spec.grid.rtt {
        let rtt_ms = parse_rtt_ms(rtt)?;
        for middlebox in &middleboxes {
            let link = LinkOptions {
                rtt: Some(rtt.clone()),
                middlebox: middlebox.clone(),
                ..spec.link.clone()
            };
            let specs = link.specs()?;
            for profile in &spec.grid.profile {
                let profile = Profile::named(profile)?;
                for mode in &spec.grid.mode {
                    points.push(Point {
                        rtt_ms,
                        specs: specs.clone(),
                        profile,
                        mode: *mode,
                    });
                }
            }
        }
    }
    Ok(points)
}

/// Middlebox rules as the start of a file name (`strip-wscale-`; empty
/// for none): [`crate::optimize::file_safe`], at most 40 characters.
pub(super) fn slug(rules: &str) -> String {
    if rules.is_empty() {
        return String::new();
    }
    let safe = crate::optimize::file_safe(rules);
    let mut out: String = safe.trim_matches('-').chars().take(40).collect();
    out.push('-');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::spec;
    use crate::traffic;

    #[test]
    fn a_grid_of_middleboxes_has_a_point_per_rules() {
        let spec: ScenarioSpec = toml::from_str(
            r#"
            name = "brokenness"
            [grid]
            rtt = ["100ms"]
            middlebox = ["", "strip-wscale"]
            "#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            middleboxes(&spec).ok(),
            Some(vec![Some(String::new()), Some("strip-wscale".into())])
        );
        let mut both = spec.clone();
        both.link.middlebox = Some("mss 1200".into());
        assert!(middleboxes(&both).is_err_and(|e| e.to_string().contains("not both")));
        let mut link_only = both.clone();
        link_only.grid.middlebox.clear();
        assert_eq!(
            middleboxes(&link_only).ok(),
            Some(vec![Some("mss 1200".into())])
        );
    }

    /// The scenario files shipped in `scenarios/` parse, and every point's
    /// link and middlebox rules are valid.
    #[test]
    fn shipped_scenarios_are_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            let name = path.to_string_lossy().into_owned();
            let spec = spec::load(&name, false).unwrap_or_else(|e| panic!("{e}"));
            let boxes = middleboxes(&spec).unwrap_or_else(|e| panic!("{name}: {e}"));
            for rtt in &spec.grid.rtt {
                for middlebox in &boxes {
                    let link = LinkOptions {
                        rtt: Some(rtt.clone()),
                        middlebox: middlebox.clone(),
                        ..spec.link.clone()
                    };
                    assert!(link.specs().is_ok(), "{name}: {link:?}");
                }
            }
            assert!(traffic::parse_size(&spec.workload.bytes).is_ok(), "{name}");
            for profile in &spec.grid.profile {
                assert!(Profile::named(profile).is_ok(), "{name}: {profile}");
            }
            seen += 1;
        }
        assert!(seen >= 1, "no scenario in {}", dir.display());
    }

    /// A bad option or scenario is the user's error (exit code 2), with
    /// the one line `lab run` always printed; nothing runs.

    #[test]
    fn middlebox_rules_name_files() {
        assert_eq!(slug(""), "");
        assert_eq!(slug("strip-wscale"), "strip-wscale-");
        assert_eq!(slug("port 80 mss 1200; drop"), "port-80-mss-1200-drop-");
        assert_eq!(slug(&"x".repeat(100)).len(), 41);
    }
}
