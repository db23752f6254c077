//! What can go wrong in `wanopt lab run`.

use std::path::PathBuf;

use crate::bringup::UpError;
use crate::grid::spec::SpecError;
use crate::kit::output::WriteError;
use crate::link::LinkOptionError;
use crate::profile::ProfileError;
use crate::traffic::TrafficError;

/// Errors of `lab run`: the first group is the user's (nothing ran, see
/// [`RunError::is_usage`]), the rest are the machine's.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `--runs` is out of range.
    #[error("--runs must be between 1 and 100")]
    Runs,
    /// An option of some scenarios given to one that does not take it
    /// (`registry::ScenarioOption::refusal` says which).
    #[error("{0}")]
    NotItsOption(String),
    /// The cellular scenario's traces cannot be had.
    #[error("{0}")]
    Traces(String),
    /// The scenario's name or file is bad.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The workload's size does not parse.
    #[error(transparent)]
    Size(#[from] TrafficError),
    /// A grid RTT does not parse.
    #[error("rtt `{text}`: {message}")]
    Rtt {
        /// The RTT as written.
        text: String,
        /// What is wrong with it.
        message: String,
    },
    /// Middlebox rules are given under both `[link]` and `[grid]`.
    #[error("give `middlebox` under [link] (every point) or under [grid] (a list), not both")]
    MiddleboxTwice,
    /// A point's link options are bad.
    #[error(transparent)]
    Link(#[from] LinkOptionError),
    /// A profile name is unknown.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The output directory could not be created.
    #[error("cannot create output directory {}", path.display())]
    OutputDir {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The lab's private copy of the executable could not be made.
    #[error(transparent)]
    Executable(UpError),
    /// An output file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl RunError {
    /// Whether the error is the user's (a bad option or scenario: exit
    /// code 2) rather than the machine's (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RunError::Runs
                | RunError::NotItsOption(_)
                | RunError::Traces(_)
                | RunError::Spec(_)
                | RunError::Size(_)
                | RunError::Rtt { .. }
                | RunError::MiddleboxTwice
                | RunError::Link(_)
                | RunError::Profile(_)
        )
    }
}
