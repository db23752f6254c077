//! The control API's listener: a bounded number of connections, each with
//! a deadline for its request headers and for its whole life, so that
//! clients that never finish a request cannot take the file descriptors
//! the data plane needs; and the [`Guard`] in front of every route.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use super::guard::Guard;
use super::token::TokenFile;
use crate::error::NodeError;
use crate::state::NodeState;

/// Connections the control API serves at once; more are answered 503 and
/// closed. Far below any file descriptor limit a node runs with.
pub const MAX_CONNECTIONS: usize = 64;

/// Time a client has to send a request's headers (from the connection's
/// start, or from the previous answer on a kept-alive connection).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Time after which a connection is closed, whatever it is doing (a
/// request body or a reader that trickles).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);

/// How often at most the node warns that the connection cap was hit.
const BUSY_WARNING_INTERVAL: Duration = Duration::from_secs(60);

/// The answer to a connection over [`MAX_CONNECTIONS`].
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 61\r\nconnection: close\r\n\r\nthe control API is busy (too many connections): retry later\n";

/// A bound control API, with its token file (removed when this is dropped).
#[derive(Debug)]
pub struct ControlServer {
    listener: TcpListener,
    token: TokenFile,
}

impl ControlServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The token file.
    pub fn token_file(&self) -> &Path {
        self.token.path()
    }
}

/// Binds the control listener (so an occupied port is reported at start)
/// and writes a fresh token to `token_file` (default:
/// [`super::token::default_path`] of the port). A control address others
/// can reach gets a warning that says what it exposes.
pub async fn bind(addr: SocketAddr, token_file: Option<&Path>) -> Result<ControlServer, NodeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| NodeError::Bind {
            what: "control API",
            addr,
            source,
        })?;
    let port = listener.local_addr().map_or(addr.port(), |a| a.port());
    let token = TokenFile::create(token_file, port)?;
    info!(
        "control API on {addr}; changes need the token in {}",
        token.path().display()
    );
    if !addr.ip().is_loopback() {
        warn!(
            "control API on {addr} is not loopback-only: anyone who can reach it reads this node's status, metrics, byte cache statistics and flow table (the addresses and ports of every flow); changes still need the token; use --control 127.0.0.1:{} to keep it local",
            addr.port()
        );
    }
    Ok(ControlServer { listener, token })
}

/// Serves the control API until the task is dropped.
pub async fn serve(server: ControlServer, state: Arc<NodeState>) {
    let host_name = nix::unistd::gethostname()
        .ok()
        .and_then(|n| n.into_string().ok())
        .filter(|n| !n.is_empty());
    let guard = Arc::new(Guard::new(
        server.token.token().clone(),
        server.token.path().to_owned(),
        host_name,
    ));
    // The dashboard's charts: sampled while the control API serves them.
    let history = super::history::SharedHistory::default();
    let _sampler = super::history::Sampler::spawn(state.clone(), history.clone());
    let app = super::router(state)
        .layer(axum::Extension(history))
        .layer(axum::middleware::from_fn_with_state(guard, check));
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut last_busy_warning: Option<tokio::time::Instant> = None;
    loop {
        let (stream, peer) = match server.listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, most likely: the backlog waits.
                debug!("control API: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            let _ = stream.try_write(BUSY);
            if last_busy_warning.is_none_or(|at| at.elapsed() >= BUSY_WARNING_INTERVAL) {
                last_busy_warning = Some(tokio::time::Instant::now());
                warn!(
                    "control API: {MAX_CONNECTIONS} connections open, refusing more (latest from {peer}); clients that do not finish their requests are closed after {HEADER_READ_TIMEOUT:?}"
                );
            }
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(CONNECTION_LIFETIME, connection).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => debug!("control API: connection from {peer}: {e}"),
                Err(_) => debug!(
                    "control API: connection from {peer} closed after {CONNECTION_LIFETIME:?}"
                ),
            }
        });
    }
}

/// The [`Guard`] as a middleware: a refused request never reaches a route.
async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    match guard.check(request.method(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            let mut response = (refusal.status, format!("{}\n", refusal.message)).into_response();
            if refusal.status == axum::http::StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Bearer"),
                );
            }
            response
        }
    }
}
