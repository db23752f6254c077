//! The emulator's side of `lab middlebox` (changing a link's middlebox
//! rules while the lab runs).
//!
//! The command writes a [`RulesRequest`] next to the emulator's counters
//! ([`request_path`]) and sends SIGHUP; the emulator's signal thread
//! ([`super::cut::take_signals`]) reads it into the [`RulesSwitch`], which
//! both directions' link models follow: each checks the switch's
//! generation (one atomic load) whenever it is pumped, at least every
//! 50 ms, and publishes the request it applied with its counters
//! (`middlebox_rules.request`), which is how the command knows.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use wanopt_netem::middlebox::{parse_rules, Rule};

/// What `lab middlebox` asks of a running emulator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesRequest {
    /// Tells this request from any other (the command's clock, ns).
    pub request: u64,
    /// The new rules as text (empty: none).
    pub rules: String,
}

/// Rules the switch holds, and the request that brought them.
#[derive(Debug, Clone, PartialEq)]
pub struct RulesChange {
    /// The request.
    pub request: u64,
    /// The rules as text.
    pub text: String,
    /// The rules, parsed.
    pub rules: Arc<[Rule]>,
}

/// Errors of reading a request into the switch.
#[derive(Debug, thiserror::Error)]
pub enum RulesReloadError {
    /// The request file does not read.
    #[error("cannot read the middlebox request {path}: {cause}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: std::io::Error,
    },
    /// The request file is not a request.
    #[error("bad middlebox request {path}: {cause}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        cause: serde_json::Error,
    },
    /// The rules do not parse (the command checks them first).
    #[error("bad middlebox rules in {path}: {message}")]
    Rules {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        message: String,
    },
}

/// The file a link's middlebox requests go to, beside its counters file
/// (`counters.json` -> `counters.middlebox.json`).
pub fn request_path(counters: &Path) -> PathBuf {
    counters.with_extension("middlebox.json")
}

/// The rules a running emulator was last asked for; shared by its signal
/// thread and its two pumps.
#[derive(Debug)]
pub struct RulesSwitch {
    request_file: PathBuf,
    /// Bumped on every change (0: the rules the emulator started with).
    generation: AtomicU64,
    current: Mutex<Option<RulesChange>>,
}

impl RulesSwitch {
    /// The switch of the emulator that publishes its counters to
    /// `counters`.
    pub fn new(counters: &Path) -> RulesSwitch {
        RulesSwitch {
            request_file: request_path(counters),
            generation: AtomicU64::new(0),
            current: Mutex::new(None),
        }
    }

    /// How many times the rules changed.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The latest change, if any.
    pub fn current(&self) -> Option<RulesChange> {
        self.current.lock().ok().and_then(|current| current.clone())
    }

    /// Reads the request file and takes its rules; a request already
    /// taken changes nothing (a stray SIGHUP).
    pub fn reload(&self) -> Result<(), RulesReloadError> {
        let path = &self.request_file;
        let text = std::fs::read_to_string(path).map_err(|cause| RulesReloadError::Read {
            path: path.clone(),
            cause,
        })?;
        let request: RulesRequest =
            serde_json::from_str(&text).map_err(|cause| RulesReloadError::Parse {
                path: path.clone(),
                cause,
            })?;
        self.take(request)
    }

    /// Takes the rules of `request`.
    pub fn take(&self, request: RulesRequest) -> Result<(), RulesReloadError> {
        let rules = parse_rules(&request.rules).map_err(|e| RulesReloadError::Rules {
            path: self.request_file.clone(),
            message: e.to_string(),
        })?;
        let Ok(mut current) = self.current.lock() else {
            return Ok(());
        };
        if current
            .as_ref()
            .is_some_and(|c| c.request == request.request)
        {
            return Ok(());
        }
        *current = Some(RulesChange {
            request: request.request,
            text: request.rules,
            rules: rules.into(),
        });
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

/// What a link model that follows a [`RulesSwitch`] keeps: the generation
/// it last saw and the change it applied.
#[derive(Debug)]
pub struct RulesFollower {
    switch: Arc<RulesSwitch>,
    seen: u64,
    applied: Option<(u64, String)>,
}

impl RulesFollower {
    /// A follower of `switch` that has seen nothing yet.
    pub fn new(switch: Arc<RulesSwitch>) -> RulesFollower {
        RulesFollower {
            switch,
            seen: 0,
            applied: None,
        }
    }

    /// The rules to apply now, if they changed since the last call.
    pub fn poll_change(&mut self) -> Option<Arc<[Rule]>> {
        let generation = self.switch.generation();
        if generation == self.seen {
            return None;
        }
        self.seen = generation;
        let change = self.switch.current()?;
        self.applied = Some((change.request, change.text));
        Some(change.rules)
    }

    /// The change applied, as published with the counters
    /// (`{"request": N, "rules": "..."}`), or none.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        self.applied
            .as_ref()
            .map(|(request, text)| serde_json::json!({"request": request, "rules": text}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_see_each_change_once_and_stray_reloads_change_nothing() {
        let dir = std::env::temp_dir().join(format!("wanopt-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let counters = dir.join("counters2.json");
        assert_eq!(
            request_path(&counters),
            dir.join("counters2.middlebox.json")
        );
        let switch = Arc::new(RulesSwitch::new(&counters));
        let mut up = RulesFollower::new(switch.clone());
        assert!(up.poll_change().is_none());
        assert!(up.to_json().is_none());
        assert!(matches!(
            switch.reload(),
            Err(RulesReloadError::Read { .. })
        ));

        let request = RulesRequest {
            request: 7,
            rules: "port 443 block-udp".into(),
        };
        let json = serde_json::to_string(&request).unwrap_or_default();
        std::fs::write(request_path(&counters), json).unwrap_or_else(|e| panic!("{e}"));
        switch.reload().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(up.poll_change().map(|rules| rules.len()), Some(1));
        assert!(up.poll_change().is_none());
        assert_eq!(
            up.to_json(),
            Some(serde_json::json!({"request": 7, "rules": "port 443 block-udp"}))
        );
        // The same request again (a stray SIGHUP) is no change.
        switch.reload().unwrap_or_else(|e| panic!("{e}"));
        assert!(up.poll_change().is_none());
        // Bad rules are refused and the old ones stay.
        let bad = RulesRequest {
            request: 8,
            rules: "police-udp fast".into(),
        };
        assert!(matches!(
            switch.take(bad),
            Err(RulesReloadError::Rules { .. })
        ));
        assert_eq!(switch.generation(), 1);
        switch
            .take(RulesRequest {
                request: 9,
                rules: String::new(),
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(up.poll_change().map(|rules| rules.len()), Some(0));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
