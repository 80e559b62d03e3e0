//! Serving an example server over streamable HTTP at `/mcp` on a loopback
//! address, in-process (for tests and demos). Host and Origin are checked:
//! only loopback names are accepted, so a DNS-rebinding page cannot reach it.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::fixture::{FixtureOptions, FixtureServer};
use super::notes::{NotesOptions, NotesServer};

/// A running in-process HTTP server; stopped by [`HttpHandle::shutdown`] or
/// when dropped.
pub struct HttpHandle {
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl HttpHandle {
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for HttpHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Serves example server `name` (default arguments) at `http://ADDR/mcp`.
pub async fn serve_http(name: &str, addr: SocketAddr) -> anyhow::Result<(SocketAddr, HttpHandle)> {
    serve_http_with_args(name, &[], addr).await
}

/// Like [`serve_http`], with the same arguments `warden example-server` takes.
pub async fn serve_http_with_args(
    name: &str,
    args: &[String],
    addr: SocketAddr,
) -> anyhow::Result<(SocketAddr, HttpHandle)> {
    serve_http_wrapped(name, args, addr, |router, _| router).await
}

/// Like [`serve_http_with_args`], with the router passed through `wrap`
/// (given the bound address) before it serves: tests put the server behind
/// their own layers and routes (an OAuth-protected resource, say).
pub async fn serve_http_wrapped(
    name: &str,
    args: &[String],
    addr: SocketAddr,
    wrap: impl FnOnce(axum::Router, SocketAddr) -> axum::Router,
) -> anyhow::Result<(SocketAddr, HttpHandle)> {
    anyhow::ensure!(
        addr.ip().is_loopback(),
        "example servers only listen on loopback addresses, not {addr}"
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let cancel = CancellationToken::new();
    let port = local.port();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(["localhost", "127.0.0.1", "::1", "[::1]"])
        .with_allowed_origins([
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ])
        .with_cancellation_token(cancel.child_token());
    let router = match name {
        "notes" => {
            // One server state shared by every session (HTTP may open a
            // session, or a stateless exchange, per request).
            let server = NotesServer::new(&NotesOptions::parse(args)?);
            let service: StreamableHttpService<NotesServer, LocalSessionManager> =
                StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
            axum::Router::new().nest_service("/mcp", service)
        }
        "fixture" => {
            let options = FixtureOptions::parse(args)?;
            anyhow::ensure!(!options.silent, "--silent is only for stdio");
            let server = FixtureServer::new(options);
            let service: StreamableHttpService<FixtureServer, LocalSessionManager> =
                StreamableHttpService::new(move || Ok(server.clone()), Arc::default(), config);
            axum::Router::new().nest_service("/mcp", service)
        }
        other => anyhow::bail!(
            "unknown example server `{other}` (known: {})",
            super::NAMES.join(", ")
        ),
    };
    let router = wrap(router, local);
    let shutdown = cancel.clone();
    let task = tokio::spawn(async move {
        let result = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
            .await;
        if let Err(error) = result {
            tracing::warn!(%error, "example HTTP server stopped");
        }
    });
    Ok((
        local,
        HttpHandle {
            cancel,
            task: Some(task),
        },
    ))
}
