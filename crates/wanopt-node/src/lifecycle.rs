//! A node's life around its data plane: the shutdown flag and signals,
//! the housekeeping every node runs (samplers, control API, cache
//! checkpoints), and the drain at the end.

use std::sync::Arc;
use std::time::Duration;

use crate::control;
use crate::state::NodeState;
use crate::transport::datagram::SAMPLE_INTERVAL;

/// A one-shot, cloneable shutdown flag.
#[derive(Debug, Clone)]
pub struct Shutdown(Arc<tokio::sync::watch::Sender<bool>>);

impl Shutdown {
    /// A flag not yet triggered.
    pub fn new() -> Shutdown {
        Shutdown(Arc::new(tokio::sync::watch::channel(false).0))
    }

    /// Triggers it.
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// Whether it was triggered.
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once it is triggered.
    pub async fn triggered(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|t| *t).await;
    }
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

/// Resolves on the first SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the node runs until killed.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Makes SIGHUP harmless from now on: each one is logged and ignored (a
/// node does not reload its configuration yet; SIGTERM stops it). Its
/// default action would kill the node at once, without draining. Call
/// it inside the runtime, before the node starts.
pub fn ignore_hangups() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(mut hangup) => {
            tokio::spawn(async move {
                while hangup.recv().await.is_some() {
                    tracing::info!(
                        "SIGHUP received and ignored: this node has no configuration to re-read (restart it, or SIGTERM to stop it)"
                    );
                }
            });
        }
        Err(e) => tracing::warn!("cannot catch SIGHUP ({e}): one would stop this node"),
    }
}

/// Starts what every node runs beside its data plane: the flow-rate and
/// tunnel-rate samplers (once a second) and, if bound, the control API.
pub(crate) fn spawn_housekeeping(
    tasks: &mut tokio::task::JoinSet<()>,
    state: &Arc<NodeState>,
    control: Option<control::ControlServer>,
) {
    tasks.spawn(state.flows.clone().run_sampler());
    let sampled = state.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            sampled.sample_peers();
        }
    });
    let sampled = state.clone();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(SAMPLE_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            sampled.sample_duplication();
        }
    });
    if let Some(listener) = control {
        tasks.spawn(control::serve(listener, state.clone()));
    }
    if let Some(caches) = state.caches.clone() {
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(caches.config().cache_checkpoint);
            tick.tick().await;
            loop {
                tick.tick().await;
                let caches = caches.clone();
                let _ = tokio::task::spawn_blocking(move || caches.checkpoint()).await;
            }
        });
    }
}

/// Saves the byte caches (at shutdown).
pub(crate) async fn checkpoint_caches(state: &NodeState) {
    if let Some(caches) = state.caches.clone() {
        let _ = tokio::task::spawn_blocking(move || caches.checkpoint()).await;
    }
}

/// Waits until no flow is live or `limit` passes.
pub(crate) async fn drain(state: &NodeState, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while state.flows.active() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
