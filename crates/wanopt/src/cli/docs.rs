//! `wanopt completions SHELL` and `wanopt man`: shell completion scripts
//! (clap_complete) and man pages (clap_mangen) generated from the command
//! line itself, so they cannot drift from the flags. The Debian package
//! installs both (`scripts/package-test` builds it).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use clap_complete::Shell;

use super::outcome::{print, Failure};

/// `wanopt completions` options.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

/// `wanopt man` options.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page (wanopt.1 and one per subcommand, e.g.
    /// wanopt-edge.1, wanopt-lab-run.1) into this existing directory
    /// instead of printing wanopt.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script of `shell` for `command`.
pub fn completions(args: &CompletionsArgs, mut command: clap::Command) -> Result<(), Failure> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "wanopt", &mut script);
    write_out(&script)
}

/// Prints the main man page of `command`, or writes all its pages to
/// `--dir` (a usage error when it is not a directory).
pub fn man(args: &ManArgs, command: clap::Command) -> Result<(), Failure> {
    let Some(dir) = &args.dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .render(&mut page)
            .map_err(Failure::runtime)?;
        return write_out(&page);
    };
    if !dir.is_dir() {
        return Err(Failure::usage(anyhow::anyhow!(
            "--dir {}: not a directory (create it first)",
            dir.display()
        )));
    }
    clap_mangen::generate_to(command, dir)
        .with_context(|| format!("cannot write man pages to {}", dir.display()))
        .map_err(Failure::runtime)
}

/// Writes `bytes` (UTF-8, as both generators write) to standard output.
fn write_out(bytes: &[u8]) -> Result<(), Failure> {
    print(&String::from_utf8_lossy(bytes))
}
