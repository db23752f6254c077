//! A node: the roles its configuration asks for (accepting tunnels,
//! dialing peers, or both: `wanopt run`) on one state, one tunnel
//! endpoint and one control API; its shutdown; and its reloads (SIGHUP
//! and `POST /reload`), which change peers, routes and allowlists
//! without dropping the flows the new configuration still permits.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tracing::{info, warn};

use crate::control;
use crate::core::{self, AcceptedPeer, Core, CoreConfig};
use crate::edge::{self, Edge, EdgeConfig};
use crate::error::{NodeError, UsageError};
use crate::lifecycle;
use crate::peer_book::ConfiguredPeer;
use crate::reduce::Caches;
use crate::state::{NodeState, Role};
use crate::transport::identity::PublicKey;
use crate::transport::tunnel;

/// What a node runs: a core part when it accepts tunnels, an edge part
/// when it dials peers. Both parts, when present, were read from one file
/// and share their common settings; the core part's are used.
#[derive(Debug)]
pub struct NodeConfig {
    /// Accepting tunnels (`listen`).
    pub core: Option<CoreConfig>,
    /// Dialing peers and intercepting flows.
    pub edge: Option<EdgeConfig>,
    /// The configuration's hash (of what it was read from), shown in
    /// `/status` and `/metrics`.
    pub hash: String,
}

impl NodeConfig {
    fn role(&self) -> Option<Role> {
        match (&self.core, &self.edge) {
            (Some(_), Some(_)) => Some(Role::EdgeCore),
            (Some(_), None) => Some(Role::Core),
            (None, Some(_)) => Some(Role::Edge),
            (None, None) => None,
        }
    }

    /// The keys of the peers the edge part dials.
    fn dialed(&self) -> Vec<PublicKey> {
        self.edge
            .iter()
            .flat_map(|e| e.upstreams.iter().flat_map(|u| u.keys.iter().copied()))
            .collect()
    }

    /// The peers of the configuration: those the edge part dials (each
    /// also accepted when the core part pins its key), then those only
    /// accepted.
    fn configured_peers(&self) -> Vec<ConfiguredPeer> {
        let accepted: &[AcceptedPeer] = self.core.as_ref().map_or(&[], |c| &c.peers);
        let upstreams = self.edge.as_ref().map_or(&[][..], |e| &e.upstreams);
        let dialed = upstreams.iter().map(|u| ConfiguredPeer {
            keys: u.keys.clone(),
            endpoint: Some(u.endpoint.clone()),
            accepted: accepted.iter().any(|a| u.keys.contains(&a.key)),
            name: u.name.clone(),
        });
        let only_accepted = accepted
            .iter()
            .filter(|a| !upstreams.iter().any(|u| u.keys.contains(&a.key)))
            .map(|a| ConfiguredPeer {
                keys: vec![a.key],
                endpoint: None,
                accepted: true,
                name: a.name.clone(),
            });
        dialed.chain(only_accepted).collect()
    }

    fn public_key(&self) -> Option<PublicKey> {
        match (&self.core, &self.edge) {
            (Some(c), _) => Some(c.key.public_key()),
            (None, Some(e)) => Some(e.key.public_key()),
            (None, None) => None,
        }
    }
}

/// Reads the node's configuration again, for a reload: the new
/// configuration, or why it cannot be used (one line).
pub type Reload = Arc<dyn Fn() -> Result<NodeConfig, String> + Send + Sync>;

use crate::state::ReloadRequest;

/// Runs a node until `shutdown` resolves, then drains flows for a bounded
/// time. Every listener is bound before this returns an error-free start.
/// With `reload`, SIGHUP and `POST /reload` re-read the configuration;
/// without, SIGHUP is logged and ignored.
pub async fn run(
    config: NodeConfig,
    reload: Option<Reload>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), NodeError> {
    let role = config.role().ok_or(UsageError::NothingToRun)?;
    let dialed = config.dialed();
    let running_key = config.public_key();
    let configured = config.configured_peers();
    let NodeConfig { core, edge, hash } = config;
    let listeners = match &edge {
        Some(edge) => Some(edge::bind(edge).await?),
        None => None,
    };
    let (reduce, tuning, control, token, idle, drain) = match (&core, &edge) {
        (Some(c), _) => (
            c.reduce.clone(),
            &c.tuning,
            c.control,
            c.control_token.clone(),
            c.flow_idle_timeout,
            c.drain,
        ),
        (None, Some(e)) => (
            e.reduce.clone(),
            &e.tuning,
            e.control,
            e.control_token.clone(),
            e.flow_idle_timeout,
            e.drain,
        ),
        (None, None) => return Err(UsageError::NothingToRun.into()),
    };
    let caches = match reduce {
        Some(reduce) => Some(Arc::new(Caches::new(reduce)?)),
        None => None,
    };
    let state = NodeState::new(role, tuning.congestion, tuning.duplication, caches);
    state.flows.set_idle_timeout(idle);
    state.set_window_budget(tuning.window_budget.clone());
    state.book.configure(configured);
    state.config_applied(&hash, false);
    let control = match control {
        Some(addr) => Some(control::bind(addr, token.as_deref()).await?),
        None => None,
    };
    let mut tasks = tokio::task::JoinSet::new();
    let (core, endpoint) = match core {
        Some(config) => {
            let (core, endpoint) = core::start(config, &dialed, &state, &mut tasks)?;
            (Some(core), Some(endpoint))
        }
        None => (None, None),
    };
    let edge = match (edge, listeners) {
        (Some(config), Some(listeners)) => {
            let endpoint = match &endpoint {
                // One port for both: the dialed tunnels leave from the
                // listening endpoint.
                Some(endpoint) if config.paths.is_empty() => (endpoint.clone(), None),
                Some(_) => return Err(UsageError::PathsNeedOnePeer(0).into()),
                None => {
                    let (bind, paths_core) = edge::tunnel_bind(&config, &state).await?;
                    let endpoint = tunnel::endpoint(
                        bind,
                        None,
                        &config.key,
                        &config.tuning,
                        &state.datagrams,
                    )?;
                    (endpoint, paths_core)
                }
            };
            Some(edge::start(
                config, listeners, &state, endpoint, &mut tasks,
            )?)
        }
        _ => None,
    };
    let endpoint = match (&endpoint, &edge) {
        (Some(endpoint), _) => endpoint.clone(),
        (None, Some(edge)) => edge.endpoint(),
        (None, None) => return Err(UsageError::NothingToRun.into()),
    };
    lifecycle::spawn_housekeeping(&mut tasks, &state, control);
    let parts = Arc::new(Parts {
        core,
        edge,
        key: running_key,
        state: state.clone(),
    });
    match reload {
        Some(reload) => {
            let (tx, rx) = mpsc::channel(4);
            state.set_reloads(tx);
            tasks.spawn(serve_reloads(reload, parts.clone(), rx));
        }
        None => lifecycle::ignore_hangups(),
    }

    shutdown.await;
    state.set_closing();
    info!(
        "shutting down: no new flows or tunnels; draining {} flow(s) for up to {drain:?}",
        state.flows.active()
    );
    tasks.abort_all();
    if let Some(edge) = &parts.edge {
        // No reconnection from here; the tunnels stay while flows drain.
        edge.stop_dialing();
    }
    endpoint.set_server_config(None);
    lifecycle::drain(&state, drain).await;
    lifecycle::checkpoint_caches(&state).await;
    endpoint.close(
        quinn::VarInt::from_u32(wanopt_proto::codes::SHUTDOWN),
        b"node shutting down",
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    Ok(())
}

/// The running parts a reload changes.
struct Parts {
    core: Option<Arc<Core>>,
    edge: Option<Arc<Edge>>,
    /// The node's public key, which a reload cannot change.
    key: Option<PublicKey>,
    state: Arc<NodeState>,
}

/// How long a reload may take to read its configuration.
const RELOAD_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves reloads, from SIGHUP and from the control API, one at a time.
async fn serve_reloads(
    reload: Reload,
    parts: Arc<Parts>,
    mut requests: mpsc::Receiver<ReloadRequest>,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(e) => {
            warn!("cannot catch SIGHUP ({e}): reload with `wanopt reload` instead");
            None
        }
    };
    loop {
        let reply = tokio::select! {
            Some(()) = async { hangup.as_mut()?.recv().await } => None,
            request = requests.recv() => match request {
                Some(reply) => Some(reply),
                None => return,
            },
        };
        let read = reload.clone();
        let reading = tokio::task::spawn_blocking(move || read());
        let outcome = match tokio::time::timeout(RELOAD_READ_TIMEOUT, reading).await {
            Ok(Ok(Ok(config))) => parts.apply(config),
            Ok(Ok(Err(why))) => Err(why),
            Ok(Err(e)) => Err(format!("the reload failed: {e}")),
            // A read that hangs (a file system that does not answer) is
            // left behind; the next reload is served.
            Err(_) => Err(format!(
                "reading the configuration took more than {RELOAD_READ_TIMEOUT:?}"
            )),
        };
        match &outcome {
            Ok(changes) => info!("configuration reloaded: {changes}"),
            Err(why) => {
                parts.state.reload_refused();
                warn!("configuration not reloaded, the running one is kept: {why}");
            }
        }
        if let Some(reply) = reply {
            let _ = reply.send(outcome);
        }
    }
}

impl Parts {
    /// Applies a reloaded configuration to the running parts; what
    /// changed, or why nothing did (the running configuration is kept
    /// whole: every check is made before anything changes).
    fn apply(&self, new: NodeConfig) -> Result<String, String> {
        let fail = |e: NodeError| e.to_string();
        if new.public_key() != self.key {
            return Err(fail(UsageError::NeedsRestart("the node's key").into()));
        }
        match (&self.core, &new.core) {
            (Some(_), None) | (None, Some(_)) => {
                return Err(fail(UsageError::NeedsRestart("listen").into()))
            }
            _ => {}
        }
        match (&self.edge, &new.edge) {
            (Some(_), None) | (None, Some(_)) => {
                return Err(fail(
                    UsageError::NeedsRestart("whether the node intercepts flows and dials peers")
                        .into(),
                ))
            }
            _ => {}
        }
        let dialed = new.dialed();
        if let (Some(edge), Some(config)) = (&self.edge, &new.edge) {
            edge.check_reload(config).map_err(fail)?;
        }
        if let (Some(core), Some(config)) = (&self.core, &new.core) {
            core.check_reload(config).map_err(fail)?;
        }
        self.state.book.configure(new.configured_peers());
        let hash = new.hash.clone();
        // The dialed peers first: a removed one stops redialing before the
        // core part closes its tunnel.
        let mut changes = Vec::new();
        if let (Some(edge), Some(config)) = (&self.edge, new.edge) {
            changes.push(edge.reload(config).map_err(fail)?);
        }
        if let (Some(core), Some(config)) = (&self.core, new.core) {
            changes.push(core.reload(&config, &dialed).map_err(fail)?);
        }
        self.state.config_applied(&hash, true);
        Ok(changes.join("; "))
    }
}
