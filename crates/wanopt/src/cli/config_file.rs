//! The node's config file (`--config FILE`): the flags' options as
//! kebab-case TOML keys, read, and checked against the role.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

use wanopt_node::datagram::DuplicationMode;
use wanopt_node::edge::{FailMode, PathUse, TransportChoice};
use wanopt_node::reduce::CompressionMode;
use wanopt_node::tunnel::Congestion;

use super::size::FileSize;

/// The config file: the same options as the flags, kebab-case keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct FileConfig {
    pub(super) key: Option<PathBuf>,
    #[serde(default)]
    pub(super) peer_key: Vec<String>,
    pub(super) control: Option<SocketAddr>,
    pub(super) control_token: Option<PathBuf>,
    pub(super) connect_timeout: Option<String>,
    pub(super) drain: Option<String>,
    pub(super) max_flows: Option<usize>,
    pub(super) max_flows_per_source: Option<usize>,
    pub(super) flow_idle_timeout: Option<String>,
    pub(super) udp_idle_timeout: Option<String>,
    pub(super) congestion: Option<Congestion>,
    pub(super) duplication: Option<DuplicationMode>,
    pub(super) fec: Option<String>,
    pub(super) fec_budget: Option<f64>,
    pub(super) max_mtu: Option<u16>,
    pub(super) threads: Option<usize>,
    pub(super) tunnel_timeout: Option<String>,
    pub(super) stream_window: Option<FileSize>,
    pub(super) stream_window_initial: Option<FileSize>,
    pub(super) connection_window: Option<FileSize>,
    pub(super) window_budget: Option<FileSize>,
    pub(super) no_reduce: Option<bool>,
    pub(super) cache_dir: Option<PathBuf>,
    pub(super) cache_size: Option<String>,
    pub(super) cache_checkpoint: Option<String>,
    pub(super) compression: Option<CompressionMode>,
    pub(super) compressor_memory: Option<String>,
    // core
    pub(super) listen: Option<SocketAddr>,
    #[serde(default)]
    pub(super) allow: Vec<String>,
    #[serde(default)]
    pub(super) allow_udp: Vec<String>,
    pub(super) advertise: Option<SocketAddr>,
    pub(super) listen_tcp: Option<String>,
    // edge
    pub(super) core: Option<String>,
    #[serde(default)]
    pub(super) forward: Vec<String>,
    #[serde(default)]
    pub(super) forward_udp: Vec<String>,
    pub(super) transparent: Option<SocketAddr>,
    pub(super) transparent_udp: Option<SocketAddr>,
    #[serde(default)]
    pub(super) optimize: Vec<String>,
    pub(super) pass_unmatched: Option<bool>,
    pub(super) fail: Option<FailMode>,
    pub(super) tunnel_wait: Option<String>,
    pub(super) bind: Option<SocketAddr>,
    #[serde(default)]
    pub(super) path: Vec<String>,
    pub(super) path_mode: Option<PathUse>,
    #[serde(default)]
    pub(super) class: Vec<String>,
    #[serde(default)]
    pub(super) no_reduce_to: Vec<String>,
    pub(super) lan_if: Option<String>,
    pub(super) transport: Option<TransportChoice>,
    pub(super) tcp_port: Option<u16>,
    /// `[[peer]]` sections.
    #[serde(default)]
    pub(super) peer: Vec<PeerSection>,
}

/// A `[[peer]]` section: a peer, how it is reached and what goes to it,
/// and what it may reach through this node.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct PeerSection {
    /// Its public key (`wanopt pubkey`).
    pub(super) public_key: String,
    /// How `status`, `flows`, `/metrics` and logs name it (letters,
    /// digits, `.`, `_`, `-`); absent: its key.
    pub(super) name: Option<String>,
    /// Where to dial it, HOST:PORT (a node dials the peers that have one).
    pub(super) endpoint: Option<String>,
    /// Destinations sent to it, CIDR[:PORT[-PORT]]; none: what no other
    /// peer's routes hold.
    #[serde(default)]
    pub(super) routes: Vec<String>,
    /// What it may reach through this node; absent: the file's `allow`.
    pub(super) allow: Option<Vec<String>>,
    /// UDP destinations it may reach; absent: the file's `allow-udp`.
    pub(super) allow_udp: Option<Vec<String>>,
}

impl FileConfig {
    /// The keys set in the file that only `wanopt core` takes.
    pub(super) fn core_keys(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        if self.listen.is_some() {
            keys.push("listen");
        }
        if !self.allow.is_empty() {
            keys.push("allow");
        }
        if !self.allow_udp.is_empty() {
            keys.push("allow-udp");
        }
        if self.advertise.is_some() {
            keys.push("advertise");
        }
        if self.listen_tcp.is_some() {
            keys.push("listen-tcp");
        }
        keys
    }

    /// The keys set in the file that only `wanopt edge` takes.
    pub(super) fn edge_keys(&self) -> Vec<&'static str> {
        let set = [
            ("core", self.core.is_some()),
            ("forward", !self.forward.is_empty()),
            ("forward-udp", !self.forward_udp.is_empty()),
            ("transparent", self.transparent.is_some()),
            ("transparent-udp", self.transparent_udp.is_some()),
            ("optimize", !self.optimize.is_empty()),
            ("pass-unmatched", self.pass_unmatched.is_some()),
            ("fail", self.fail.is_some()),
            ("tunnel-wait", self.tunnel_wait.is_some()),
            ("bind", self.bind.is_some()),
            ("path", !self.path.is_empty()),
            ("path-mode", self.path_mode.is_some()),
            ("class", !self.class.is_empty()),
            ("no-reduce-to", !self.no_reduce_to.is_empty()),
            ("lan-if", self.lan_if.is_some()),
            ("transport", self.transport.is_some()),
            ("tcp-port", self.tcp_port.is_some()),
        ];
        set.into_iter()
            .filter_map(|(key, given)| given.then_some(key))
            .collect()
    }
}

/// An error when the file sets keys of the other role: `keys` are `other`
/// options, and this is `wanopt role`.
pub(super) fn other_role(
    path: Option<&Path>,
    keys: &[&str],
    other: &str,
    role: &str,
) -> anyhow::Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let path = path.map(|p| p.display().to_string()).unwrap_or_default();
    bail!(
        "config file {path}: {} {} only for wanopt {other}, and this is wanopt {role}",
        keys.join(", "),
        if keys.len() == 1 { "is" } else { "are" }
    )
}

pub(super) fn read_file(path: Option<&Path>) -> anyhow::Result<FileConfig> {
    let Some(path) = path else {
        return Ok(FileConfig::default());
    };
    let text = read_regular(path, MAX_CONFIG_BYTES)?;
    let mut file: FileConfig = toml::from_str(&text).map_err(|e| {
        anyhow::anyhow!("config file {}: {}", path.display(), quoted(&e.to_string()))
    })?;
    file.relative_to(path.parent().unwrap_or(Path::new("")));
    Ok(file)
}

/// The longest piece of a line an error about the file quotes.
const QUOTE_CHARS: usize = 200;

/// A parser's message on one line, each of its lines (which quote the
/// file) cut to [`QUOTE_CHARS`] characters.
fn quoted(message: &str) -> String {
    message
        .lines()
        .map(|line| match line.char_indices().nth(QUOTE_CHARS) {
            Some((cut, _)) => format!("{}...", &line[..cut]),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The largest configuration file a node reads: far more than any
/// configuration needs, far less than a mistake (`/dev/zero`, a log) could
/// make a node hold.
pub(super) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The text of `path`, which must be a regular file of at most `max`
/// bytes: a FIFO, a device or a socket is refused without waiting for it
/// (it is opened non-blocking), and so is a larger file.
pub(super) fn read_regular(path: &Path, max: u64) -> anyhow::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot read config file {shown}"))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read config file {shown}"))?;
    if !meta.is_file() {
        bail!("config file {shown} is not a regular file (a FIFO, a device or a directory is refused)");
    }
    if meta.len() > max {
        bail!(
            "config file {shown} is {} bytes; a config file has at most {max}",
            meta.len()
        );
    }
    let mut text = String::new();
    file.take(max + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read config file {shown}"))?;
    if text.len() as u64 > max {
        bail!("config file {shown} grew past {max} bytes while it was read");
    }
    Ok(text)
}

impl FileConfig {
    /// Resolves the file's relative paths against `dir`, the file's own
    /// folder (a node under systemd runs in `/`).
    fn relative_to(&mut self, dir: &Path) {
        for path in [&mut self.key, &mut self.control_token, &mut self.cache_dir]
            .into_iter()
            .flatten()
        {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every TOML block of the README and the docs parses as a config
    /// file, and its `[[peer]]` keys are keys.
    #[test]
    fn the_documented_config_examples_parse() {
        let pages = [
            include_str!("../../../../README.md"),
            include_str!("../../../../docs/deploy.md"),
            include_str!("../../../../docs/sites.md"),
            include_str!("../../../../docs/configuration.md"),
            include_str!("../../../../docs/install.md"),
        ];
        let blocks: Vec<&str> = pages
            .iter()
            .flat_map(|page| page.split("```toml\n").skip(1))
            .filter_map(|rest| rest.split("```").next())
            .collect();
        assert!(
            blocks.len() >= 2,
            "the docs have {} TOML blocks",
            blocks.len()
        );
        let mut peers = 0;
        for block in blocks {
            let file: FileConfig = toml::from_str(block)
                .unwrap_or_else(|e| panic!("documented block does not parse: {e}\n{block}"));
            for peer in &file.peer {
                wanopt_node::identity::PublicKey::from_base64(&peer.public_key)
                    .unwrap_or_else(|e| panic!("{}: {e}", peer.public_key));
                peers += 1;
            }
        }
        assert!(peers >= 4, "{peers} [[peer]] sections in the docs");
    }
}
