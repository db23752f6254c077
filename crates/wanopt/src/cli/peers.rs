//! A node's peers: the `--peer-key`s of the one-peer case and the config
//! file's `[[peer]]` sections, checked, as the peers it accepts (each with
//! its allowlists) and the peers it dials (each with its routes).

use anyhow::{bail, Context};

use wanopt_node::core::AcceptedPeer;
use wanopt_node::edge::UpstreamConfig;
use wanopt_node::identity::{PrivateKey, PublicKey};
use wanopt_node::policy::{AddrRule, RuleSet};

use super::config_file::PeerSection;

/// Which command reads the peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// `wanopt core`: accepts every peer, dials none.
    Core,
    /// `wanopt edge`: dials every peer, accepts none.
    Edge,
    /// `wanopt run`: dials the peers with an endpoint, accepts them all.
    Run,
}

/// A `[[peer]]` section, parsed.
#[derive(Debug, Clone)]
pub(super) struct Section {
    key: PublicKey,
    name: Option<String>,
    endpoint: Option<String>,
    routes: RuleSet,
    allow: Option<RuleSet>,
    allow_udp: Option<RuleSet>,
}

/// The node's peers.
#[derive(Debug, Clone)]
pub(super) struct Peers {
    /// `--peer-key` / `peer-key`: the one peer's keys.
    pub(super) flag_keys: Vec<PublicKey>,
    sections: Vec<Section>,
}

impl Peers {
    /// Reads and checks the peers: keys that parse, none twice, none this
    /// node's own (`key`, read from `key_path`), and what `mode` takes.
    pub(super) fn read(
        flag_keys: &[String],
        sections: &[PeerSection],
        key: &PrivateKey,
        key_path: &std::path::Path,
        mode: Mode,
    ) -> anyhow::Result<Peers> {
        let flag_keys = flag_keys
            .iter()
            .map(|k| PublicKey::from_base64(k))
            .collect::<Result<Vec<_>, _>>()?;
        let sections = sections
            .iter()
            .enumerate()
            .map(|(i, s)| section(i + 1, s, mode))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if flag_keys.is_empty() && sections.is_empty() {
            bail!("no peer key: give --peer-key PUB (the peer's `wanopt pubkey` output), or [[peer]] sections in the config file");
        }
        let mut seen: Vec<PublicKey> = Vec::new();
        let own = key.public_key();
        for k in flag_keys.iter().chain(sections.iter().map(|s| &s.key)) {
            if *k == own {
                bail!("peer {k} is this node's own key ({}): a node is never its own peer; give the other node's public key", key_path.display());
            }
            if key.is_bytes_of(k) {
                bail!(
                    "key file {} holds the public key {k}, which this node lists as a peer's: give --key this node's private key file (from `wanopt keygen --out`)",
                    key_path.display()
                );
            }
            if seen.contains(k) {
                bail!("peer {k} is listed twice: give each peer once");
            }
            seen.push(*k);
        }
        let mut names: Vec<&str> = sections.iter().filter_map(|s| s.name.as_deref()).collect();
        names.sort_unstable();
        if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
            bail!(
                "peer name {:?} is given twice: give each peer its own name",
                twice[0]
            );
        }
        Ok(Peers {
            flag_keys,
            sections,
        })
    }

    /// The peers accepted, each with its allowlists: the flags' keys and
    /// sections without lists of their own take `allow` and `allow_udp`.
    pub(super) fn accepted(&self, allow: &RuleSet, allow_udp: &RuleSet) -> Vec<AcceptedPeer> {
        let flags = self.flag_keys.iter().map(|&key| AcceptedPeer {
            key,
            name: None,
            allow: allow.clone(),
            allow_udp: allow_udp.clone(),
        });
        let sections = self.sections.iter().map(|s| AcceptedPeer {
            key: s.key,
            name: s.name.clone(),
            allow: s.allow.clone().unwrap_or_else(|| allow.clone()),
            allow_udp: s.allow_udp.clone().unwrap_or_else(|| allow_udp.clone()),
        });
        flags.chain(sections).collect()
    }

    /// The peers dialed: `core` with the flags' keys (routes: the rest),
    /// then every section with an endpoint.
    pub(super) fn dialed(&self, core: Option<String>) -> anyhow::Result<Vec<UpstreamConfig>> {
        let mut upstreams = Vec::new();
        match (core, self.flag_keys.is_empty()) {
            (Some(endpoint), false) => upstreams.push(UpstreamConfig {
                endpoint: {
                    check_endpoint(&endpoint).context("--core")?;
                    endpoint
                },
                keys: self.flag_keys.clone(),
                routes: RuleSet::default(),
                name: None,
            }),
            (Some(endpoint), true) => bail!(
                "--core {endpoint} has no key: give --peer-key PUB (the core's `wanopt pubkey` output), or a [[peer]] with endpoint = \"{endpoint}\""
            ),
            (None, false) => bail!(
                "--peer-key pins the core's key, and no core is given: give --core HOST:PORT"
            ),
            (None, true) => {}
        }
        for s in &self.sections {
            if let Some(endpoint) = &s.endpoint {
                upstreams.push(UpstreamConfig {
                    endpoint: endpoint.clone(),
                    keys: vec![s.key],
                    routes: s.routes.clone(),
                    name: s.name.clone(),
                });
            }
        }
        let routeless: Vec<&str> = upstreams
            .iter()
            .filter(|u| u.routes.is_empty())
            .map(|u| u.endpoint.as_str())
            .collect();
        if let [first, rest @ ..] = routeless.as_slice() {
            if !rest.is_empty() {
                tracing::warn!(
                    "dialed peers {} have no routes: only the first, {first}, takes the flows no route holds; give the others routes",
                    routeless.join(", ")
                );
            }
        }
        Ok(upstreams)
    }

    /// Whether any section names an endpoint (the node dials it).
    pub(super) fn any_endpoint(sections: &[PeerSection]) -> bool {
        sections.iter().any(|s| s.endpoint.is_some())
    }
}

/// Parses the `n`th section and checks it fits `mode`.
fn section(n: usize, s: &PeerSection, mode: Mode) -> anyhow::Result<Section> {
    let key = PublicKey::from_base64(&s.public_key)
        .with_context(|| format!("[[peer]] #{n}: public-key"))?;
    let parsed = |texts: &[String], what: &str| {
        rules(texts).with_context(|| format!("[[peer]] #{n} ({key}): {what}"))
    };
    if let Some(endpoint) = &s.endpoint {
        check_endpoint(endpoint).with_context(|| format!("[[peer]] #{n} ({key})"))?;
    }
    let section = Section {
        key,
        name: s
            .name
            .as_deref()
            .map(check_name)
            .transpose()
            .with_context(|| format!("[[peer]] #{n} ({key})"))?,
        endpoint: s.endpoint.clone(),
        routes: parsed(&s.routes, "routes")?,
        allow: s.allow.as_deref().map(|a| parsed(a, "allow")).transpose()?,
        allow_udp: s
            .allow_udp
            .as_deref()
            .map(|a| parsed(a, "allow-udp"))
            .transpose()?,
    };
    match mode {
        Mode::Core if section.endpoint.is_some() || !section.routes.is_empty() => bail!(
            "[[peer]] #{n} ({key}) has an endpoint or routes: wanopt core dials no peer; run the node with `wanopt run --config FILE` to dial it"
        ),
        Mode::Edge if section.endpoint.is_none() => bail!(
            "[[peer]] #{n} ({key}) has no endpoint: wanopt edge dials its peers and accepts none; give its endpoint, or run the node with `wanopt run --config FILE` to accept it"
        ),
        Mode::Edge if section.allow.is_some() || section.allow_udp.is_some() => bail!(
            "[[peer]] #{n} ({key}) has allow rules: wanopt edge accepts no tunnels; run the node with `wanopt run --config FILE` and `listen` to accept it"
        ),
        Mode::Run if section.endpoint.is_none() && !section.routes.is_empty() => bail!(
            "[[peer]] #{n} ({key}) has routes but no endpoint: a node sends flows only to peers it dials; give its endpoint"
        ),
        _ => Ok(section),
    }
}

/// The longest peer name.
const MAX_NAME: usize = 64;

/// Checks a peer's `name`: 1 to 64 letters, digits, `.`, `_` or `-` (it
/// is a label in `/metrics` and a word in log lines).
fn check_name(name: &str) -> anyhow::Result<String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(fits) {
        bail!(
            "name {:?}: give 1 to {MAX_NAME} letters, digits, '.', '_' or '-' (e.g. branch-paris)",
            name.chars().take(80).collect::<String>()
        );
    }
    Ok(name.to_owned())
}

/// Address rules, `CIDR[:PORT[-PORT]]` each.
pub(super) fn rules(texts: &[String]) -> anyhow::Result<RuleSet> {
    Ok(RuleSet(
        texts
            .iter()
            .map(|t| t.parse::<AddrRule>())
            .collect::<Result<_, _>>()?,
    ))
}

/// Checks that `endpoint` reads `HOST:PORT` (a name or an address, IPv6
/// in brackets, and a port from 1): a typo is a usage error, while a name
/// that does not resolve yet is retried by the node.
fn check_endpoint(endpoint: &str) -> anyhow::Result<()> {
    let bad = |why: &str| {
        anyhow::anyhow!(
            "endpoint {endpoint:?}: {why} (expected HOST:PORT, e.g. core.example.net:4433 or [2001:db8::1]:4433)"
        )
    };
    let (host, port) = endpoint.rsplit_once(':').ok_or_else(|| bad("no port"))?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err(bad("bad port")),
    }
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    match bare {
        Some(v6) if v6.parse::<std::net::Ipv6Addr>().is_err() => Err(bad("bad IPv6 address")),
        Some(_) => Ok(()),
        None if host.is_empty() || host.contains(':') || host.contains(char::is_whitespace) => {
            Err(bad("bad host"))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::check_endpoint;

    #[test]
    fn endpoints_read_host_and_port() {
        for good in [
            "core.example.net:4433",
            "127.0.0.1:4433",
            "[2001:db8::1]:4433",
            "localhost:1",
        ] {
            assert!(check_endpoint(good).is_ok(), "{good}");
        }
        for bad in [
            "127.0.0.1",
            "",
            "127.0.0.1:0",
            ":4433",
            "host:port",
            "2001:db8::1:4433",
            "[nope]:4433",
            "a b:1",
        ] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }
}
