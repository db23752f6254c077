//! `wanopt run --config FILE` (a node as its file describes it: it
//! accepts tunnels when the file has `listen`, dials every peer that has
//! an endpoint), the reloads of every node command, and `wanopt reload`.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;
use clap::Args;

use wanopt_node::node::{NodeConfig, Reload};

use super::config_file::read_file;
use super::node::{core_config_in, edge_config_in, CommonArgs, CoreArgs, EdgeArgs};
use super::outcome::stdout;
use super::peers::{Mode, Peers};
use super::status::{post, DEFAULT_CONTROL};
use super::token;

/// `wanopt run` options.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The node's TOML file: its key, `listen` to accept tunnels,
    /// `[[peer]]` sections (an `endpoint` to dial a peer, `routes` sent to
    /// it, what it may `allow`), forwards, and any option of `wanopt
    /// edge` and `wanopt core`. Relative paths in it are relative to it.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
}

/// `wanopt reload` options.
#[derive(Debug, Args)]
pub struct ReloadArgs {
    /// The node's control address (its --control).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_CONTROL)]
    pub control: SocketAddr,
    /// The node's control token file (its --control-token) [default: where
    /// a node of this user writes it for the port of --control].
    #[arg(long, value_name = "FILE")]
    pub control_token: Option<PathBuf>,
}

/// The node `wanopt run --config FILE` runs.
/// The worker threads of the node `wanopt run` starts (its file's
/// `threads`, else the CPUs).
pub fn run_threads(args: &RunArgs) -> anyhow::Result<usize> {
    super::node::threads_setting(
        read_file(Some(&args.config))?.threads,
        "config file: threads =",
    )
}

pub fn run_config(args: &RunArgs) -> anyhow::Result<NodeConfig> {
    let file = read_file(Some(&args.config))?;
    let accepts = file.listen.is_some();
    let dials = file.core.is_some() || Peers::any_endpoint(&file.peer);
    let intercepts = !file.forward.is_empty()
        || !file.forward_udp.is_empty()
        || file.transparent.is_some()
        || file.transparent_udp.is_some();
    if !accepts && !dials {
        bail!(
            "config file {}: nothing to run: give `listen` to accept tunnels, or a [[peer]] with an endpoint to dial",
            args.config.display()
        );
    }
    let common = || CommonArgs {
        config: Some(args.config.clone()),
        ..CommonArgs::default()
    };
    let core = match accepts {
        true => Some(core_config_in(
            &CoreArgs {
                common: common(),
                ..CoreArgs::default()
            },
            Mode::Run,
        )?),
        false => None,
    };
    // An edge part when the node dials or intercepts (at start it must
    // dial a peer; a reload may leave it none for a while).
    let mut edge = match dials || intercepts {
        true => Some(edge_config_in(
            &EdgeArgs {
                common: common(),
                ..EdgeArgs::default()
            },
            Mode::Run,
        )?),
        false => None,
    };
    if let (Some(core), Some(edge)) = (&core, &mut edge) {
        // One node, one budget of receive windows over all its tunnels.
        edge.tuning.window_budget = core.tuning.window_budget.clone();
    }
    Ok(NodeConfig {
        core,
        edge,
        hash: config_hash(args, Some(&args.config)),
    })
}

/// The hash of a node's configuration: blake3 over its command line's
/// options and its config file's bytes, 16 hex digits. `/status` and
/// `/metrics` show it, so an operator can tell which configuration each
/// node runs.
pub fn config_hash(args: &impl std::fmt::Debug, file: Option<&std::path::Path>) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(format!("{args:?}").as_bytes());
    if let Some(text) = file.and_then(|f| {
        super::config_file::read_regular(f, super::config_file::MAX_CONFIG_BYTES).ok()
    }) {
        hasher.update(text.as_bytes());
    }
    hasher.finalize().to_hex()[..16].to_owned()
}

/// How a node command reads its configuration again on reload: the same
/// flags over the file as it is now.
pub fn reloader(read: impl Fn() -> anyhow::Result<NodeConfig> + Send + Sync + 'static) -> Reload {
    Arc::new(move || read().map_err(|e| super::outcome::one_line(&e)))
}

/// `wanopt reload`: asks a running node to re-read its configuration.
pub fn reload(args: &ReloadArgs) -> anyhow::Result<()> {
    let credential = token::find(args.control, args.control_token.as_deref())?;
    let answer =
        post(args.control, "/reload", credential.token()).map_err(|e| credential.explain(e))?;
    writeln!(stdout(), "{}", answer.trim())?;
    Ok(())
}
