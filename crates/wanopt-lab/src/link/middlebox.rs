//! `lab middlebox [--link N] RULES`: changes a link's middlebox rules while
//! the lab runs. The rules are checked here, written to the emulator's
//! request file, and the emulator is sent SIGHUP (its side is
//! [`super::rules`]); the change is confirmed once both directions
//! publish the request as applied, as `lab link` confirms a cut. The lab's
//! settings then show the new rules (`lab status`).

use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::control::{running_emulator, signal_emulator, LinkControlError, CONFIRM_WITHIN};
use super::rules::{request_path, RulesRequest};
use super::wan::WanLink;
use crate::bringup::settings_path;
use crate::topology::Lab;

/// Errors of `lab middlebox`.
#[derive(Debug, thiserror::Error)]
pub enum MiddleboxControlError {
    /// The rules do not parse; nothing was changed.
    #[error("bad middlebox rules `{rules}`: {message} (nothing changed)")]
    Rules {
        /// The rules as given.
        rules: String,
        /// What is wrong with them.
        message: String,
    },
    /// No lab, no such link, or its emulator is not running or cannot be
    /// signalled.
    #[error(transparent)]
    Link(#[from] LinkControlError),
    /// The request file could not be written.
    #[error("cannot write the middlebox request {path}: {cause}")]
    Request {
        /// The file.
        path: std::path::PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The emulator did not publish the new rules in time.
    #[error("link {link}'s emulator did not apply the new middlebox rules within 2 s (see `wanopt lab status`)")]
    Unapplied {
        /// The link.
        link: u8,
    },
}

impl MiddleboxControlError {
    /// Whether this is the user's mistake (exit code 2).
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Rules { .. } => true,
            Self::Link(e) => e.is_usage(),
            Self::Request { .. } | Self::Unapplied { .. } => false,
        }
    }
}

/// What the emulator applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MiddleboxApplied {
    /// The link.
    pub link: WanLink,
    /// The rules now in force, as text (empty: none).
    pub rules: String,
}

impl std::fmt::Display for MiddleboxApplied {
    /// `link 1 middlebox port 443 block-udp` (`none` for no rules).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rules = if self.rules.is_empty() {
            "none"
        } else {
            &self.rules
        };
        write!(f, "link {} middlebox {rules}", self.link.number())
    }
}

/// `rules` as the lab keeps them: trimmed, and `none` for no rules.
pub fn normalize(rules: &str) -> &str {
    let rules = rules.trim();
    if rules.eq_ignore_ascii_case("none") {
        ""
    } else {
        rules
    }
}

/// Replaces the middlebox rules of link `number` of the running `lab` with
/// `rules` (the grammar of `lab up --middlebox`; empty or `none` clears
/// them) and returns once both directions of its emulator apply them.
/// Rules that do not parse change nothing. Every `police-udp` bucket
/// starts full; the middlebox counters go on.
pub fn set_middlebox(
    lab: &Lab,
    number: u32,
    rules: &str,
) -> Result<MiddleboxApplied, MiddleboxControlError> {
    let rules = normalize(rules);
    wanopt_netem::middlebox::parse_rules(rules).map_err(|e| MiddleboxControlError::Rules {
        rules: rules.to_string(),
        message: e.to_string(),
    })?;
    let (link, pid) = running_emulator(lab, number)?;
    let request = RulesRequest {
        request: request_id(),
        rules: rules.to_string(),
    };
    let counters = lab.state_dir().join(link.counters_file());
    let path = request_path(&counters);
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string(&request).unwrap_or_default())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|cause| MiddleboxControlError::Request {
            path: path.clone(),
            cause,
        })?;
    signal_emulator(link, pid, Signal::SIGHUP)?;
    let deadline = Instant::now() + CONFIRM_WITHIN;
    loop {
        let doc: serde_json::Value = std::fs::read_to_string(&counters)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        if applied(&doc, request.request) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(MiddleboxControlError::Unapplied {
                link: link.number(),
            });
        }
        thread::sleep(Duration::from_millis(20));
    }
    record_in_settings(lab, link, rules);
    Ok(MiddleboxApplied {
        link,
        rules: rules.to_string(),
    })
}

/// A request id no other request has: the wall clock in nanoseconds.
fn request_id() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// Whether both directions of an emulator's counters show `request` as
/// the middlebox change they applied.
fn applied(doc: &serde_json::Value, request: u64) -> bool {
    ["up", "down"].iter().all(|direction| {
        doc[direction]["link"]["middlebox_rules"]["request"].as_u64() == Some(request)
    })
}

/// Writes `rules` into the lab's settings as `link`'s rules, so that `lab
/// status` shows them; the settings are edited as JSON, every other field
/// kept. A lab without settings keeps none.
fn record_in_settings(lab: &Lab, link: WanLink, rules: &str) {
    let path = settings_path(lab);
    let Some(mut doc) = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    else {
        return;
    };
    let key = match link {
        WanLink::One => "link",
        WanLink::Two => "link2",
    };
    let Some(specs) = doc.get_mut(key).and_then(|v| v.as_object_mut()) else {
        return;
    };
    specs.insert("middlebox".into(), rules.into());
    let tmp = path.with_extension("json.tmp");
    let written = std::fs::write(&tmp, serde_json::to_string_pretty(&doc).unwrap_or_default())
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        tracing::warn!("the lab's settings still show the old middlebox rules: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_and_blank_clear_the_rules() {
        assert_eq!(normalize(" none "), "");
        assert_eq!(normalize("NONE"), "");
        assert_eq!(normalize("  "), "");
        assert_eq!(normalize(" block-udp "), "block-udp");
    }

    /// Bad rules are refused before anything is looked at: no lab is
    /// needed to be told, in one line, and it is the user's mistake.
    #[test]
    fn bad_rules_change_nothing_and_say_why() {
        let lab = Lab::new("wmbx-none-");
        for (rules, needle) in [
            ("police-udp 2mbps", "`2mbps` is ambiguous"),
            ("block-udp drop", "mixes actions"),
            ("warp 9", "unknown middlebox action `warp`"),
        ] {
            let e = set_middlebox(&lab, 1, rules)
                .err()
                .unwrap_or_else(|| panic!("{rules} accepted"));
            let text = e.to_string();
            assert!(e.is_usage(), "{text}");
            assert!(
                text.starts_with(&format!("bad middlebox rules `{rules}`: ")),
                "{text}"
            );
            assert!(
                text.contains(needle) && text.ends_with("(nothing changed)"),
                "{text}"
            );
            assert!(!text.contains('\n'), "{text}");
        }
        // Good rules on a lab that is not up: that lab's error.
        let e = set_middlebox(&lab, 1, "block-udp").err();
        assert!(matches!(
            e,
            Some(MiddleboxControlError::Link(LinkControlError::NotUp(_)))
        ));
    }

    #[test]
    fn both_directions_must_show_the_request() {
        let doc = |up: u64, down: u64| {
            serde_json::json!({
                "up": {"link": {"middlebox_rules": {"request": up}}},
                "down": {"link": {"middlebox_rules": {"request": down}}},
            })
        };
        assert!(applied(&doc(5, 5), 5));
        assert!(!applied(&doc(5, 4), 5));
        assert!(!applied(&serde_json::Value::Null, 5));
    }
}
