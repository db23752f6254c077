//! The control plane: `/health`, `/status`, `/flows`, `/flows/ID` (one
//! flow, and why it runs at its rate), `/metrics` (Prometheus text),
//! `/cache`, the dashboard `/ui` and its `/history`, `POST /cache/clear` and
//! `POST /reload` over HTTP on a local address. Reading
//! is open to whoever reaches the address; changing anything needs the
//! node's token ([`token`]); the listener bounds its connections and their
//! time ([`mod@serve`]), and every request passes the [`guard`].

pub mod guard;
mod history;
pub mod metrics;
pub mod serve;
pub mod token;
mod ui;

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::flow::FlowInfo;
use crate::reduce::CacheReport;
use crate::state::NodeState;

pub use metrics::render_metrics;
pub use serve::{bind, serve, ControlServer};

/// What `/flows` returns.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Flows {
    /// The node's role.
    pub role: crate::state::Role,
    /// Live flows, oldest first.
    pub flows: Vec<FlowInfo>,
    /// The tunnel paths the flows share, with what continuous FEC does on
    /// each, both directions.
    #[serde(default)]
    pub paths: Vec<FlowPath>,
}

/// A tunnel path in `/flows`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct FlowPath {
    /// The peer's address.
    pub peer: String,
    /// Continuous FEC on the path.
    pub fec: Option<crate::transport::datagram::FecStatus>,
}

/// The control API's routes over `state`.
pub fn router(state: Arc<NodeState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/status", get(status))
        .route("/flows", get(flows))
        .route("/flows/{id}", get(flow))
        .route("/metrics", get(metrics::metrics))
        .route("/cache", get(cache))
        .route("/cache/clear", post(cache_clear))
        .route("/reload", post(reload))
        .route("/ui", get(ui::page))
        .route("/history", get(history::history))
        .with_state(state)
}

/// 200 while the node does its job (a core accepts tunnels, an edge has
/// one up), 503 otherwise, with the reason in one line: what a balancer's
/// or keepalived's health check asks.
async fn health(State(state): State<Arc<NodeState>>) -> impl IntoResponse {
    match state.health() {
        Ok(what) => (StatusCode::OK, format!("ok: {what}\n")),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("unavailable: {why}\n"),
        ),
    }
}

async fn status(State(state): State<Arc<NodeState>>) -> Json<crate::state::Status> {
    Json(state.status())
}

async fn flows(State(state): State<Arc<NodeState>>) -> Json<Flows> {
    Json(Flows {
        role: state.role,
        flows: state.flows_explained(),
        paths: state
            .status()
            .peers
            .into_iter()
            .filter(|p| p.state == "up")
            .map(|p| FlowPath {
                peer: p.address,
                fec: p.fec,
            })
            .collect(),
    })
}

/// Everything about one live flow: both directions' limits and waits,
/// its LAN socket's counts, its tunnel.
async fn flow(
    State(state): State<Arc<NodeState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> axum::response::Response {
    let Ok(id) = id.parse::<u64>() else {
        return (
            StatusCode::BAD_REQUEST,
            format!("flow {id:?}: not a flow ID (a number from wanopt flows)\n"),
        )
            .into_response();
    };
    match state.flow_detail(id) {
        Some(detail) => Json(detail).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("no live flow {id} (it ended, or never was: see wanopt flows)\n"),
        )
            .into_response(),
    }
}

async fn cache(State(state): State<Arc<NodeState>>) -> Json<CacheReport> {
    Json(state.cache_report())
}

async fn cache_clear(State(state): State<Arc<NodeState>>) -> impl IntoResponse {
    let Some(caches) = state.caches.clone() else {
        return (
            StatusCode::CONFLICT,
            "data reduction is off on this node (--no-reduce): no cache to clear".to_owned(),
        );
    };
    match tokio::task::spawn_blocking(move || caches.clear()).await {
        Ok(Ok(())) => (StatusCode::OK, "cleared".to_owned()),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Re-reads the node's configuration: 200 with what changed, 422 with
/// why the new configuration was refused (the running one is kept).
async fn reload(State(state): State<Arc<NodeState>>) -> impl IntoResponse {
    let Some(requests) = state.reloads() else {
        return (
            StatusCode::CONFLICT,
            "this node cannot reload: it was started without a config file".to_owned(),
        );
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    if requests.send(reply).await.is_err() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the node is shutting down".to_owned(),
        );
    }
    match answer.await {
        Ok(Ok(changes)) => (StatusCode::OK, changes),
        Ok(Err(why)) => (StatusCode::UNPROCESSABLE_ENTITY, why),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the node is shutting down".to_owned(),
        ),
    }
}
