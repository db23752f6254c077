//! `wanopt cache stats` and `wanopt cache clear`: the byte cache of a running
//! node, through its control API.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};

use wanopt_node::reduce::CacheReport;

use super::outcome::stdout;
use super::status::{counted, fetch, human_bytes, post, QueryArgs, DEFAULT_CONTROL};
use super::token;

/// `wanopt cache ...`.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Show the node's byte caches (one per peer): size, chunks, hits.
    Stats(QueryArgs),
    /// Empty the node's byte caches; the peers are told, so the next
    /// transfers are cold on both ends.
    Clear(ClearArgs),
}

/// Options of `wanopt cache clear`.
#[derive(Debug, Args)]
pub struct ClearArgs {
    /// The node's control address (its --control).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_CONTROL)]
    pub control: SocketAddr,
    /// The node's control token file (its --control-token) [default: where
    /// a node of this user writes it for the port of --control].
    #[arg(long, value_name = "FILE")]
    pub control_token: Option<PathBuf>,
}

/// Runs a `wanopt cache` command.
pub fn run(command: &CacheCommand) -> anyhow::Result<()> {
    match command {
        CacheCommand::Stats(args) => stats(args),
        CacheCommand::Clear(args) => {
            let credential = token::find(args.control, args.control_token.as_deref())?;
            let answer = post(args.control, "/cache/clear", credential.token())
                .map_err(|e| credential.explain(e))?;
            writeln!(stdout(), "{}", answer.trim())?;
            Ok(())
        }
    }
}

fn stats(args: &QueryArgs) -> anyhow::Result<()> {
    let body = fetch(args.control, "/cache")?;
    let mut out = stdout();
    if args.json {
        writeln!(out, "{body}")?;
        return Ok(());
    }
    let report: CacheReport =
        serde_json::from_str(&body).context("the control API sent malformed cache stats")?;
    if !report.enabled {
        bail!("data reduction is off on this node (--no-reduce): it has no byte cache");
    }
    writeln!(out, "cache dir   {}", report.dir.as_deref().unwrap_or("?"))?;
    writeln!(
        out,
        "cleared     {} since start",
        counted(report.clears, "time", "times")
    )?;
    if report.peers.is_empty() {
        writeln!(out, "(no peer has connected yet)")?;
    }
    for p in &report.peers {
        writeln!(out, "peer        {}", p.peer)?;
        writeln!(out, "  dir       {}", p.dir)?;
        writeln!(
            out,
            "  store     {} chunks, {} of {} in {} segment(s), {} evicted",
            p.chunks,
            human_bytes(p.store_bytes),
            human_bytes(p.capacity_bytes),
            p.segments,
            p.evicted_segments
        )?;
        writeln!(
            out,
            "  lookups   {} hits, {} misses, {} damaged (repaired from the peer)",
            p.hits, p.misses, p.corrupt
        )?;
        if p.write_errors > 0 {
            writeln!(
                out,
                "  writes    {} failed (last: {}): new data is not cached",
                p.write_errors,
                p.last_write_error.as_deref().unwrap_or("?")
            )?;
        }
        writeln!(
            out,
            "  peer      holds {} of our chunks ({})",
            p.peer_chunks,
            if p.peer_confirmed {
                "confirmed on the live tunnel"
            } else {
                "not confirmed: tunnel down"
            }
        )?;
    }
    Ok(())
}
