//! The two tasks every connection runs: the [`Monitor`] (notices the
//! connection ending and records why) and the re-lister (re-reads
//! `tools/list` after `notifications/tools/list_changed`).

use std::sync::Arc;
use std::time::Duration;

use rmcp::{Peer, RoleClient};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use warden_core::TransportKind;

use super::slot::{Shared, Slot};
use super::stdio::ExitInfo;
use super::{LifecycleEvent, connect};

/// Watches one connection: waits for it to end, records why on the slot,
/// tells waiting calls, and reports a remote server's exit (a stdio
/// server's exit is reported by its process reaper, with the status).
pub(super) struct Monitor {
    pub slot: Arc<Slot>,
    pub shared: Arc<Shared>,
    /// The connection's generation: a newer connection is left alone.
    pub generation: u64,
    pub running: connect::Running,
    /// Cancelled when warden itself stops the connection.
    pub stop_requested: CancellationToken,
    /// Where the reason goes once the connection has ended.
    pub dead: watch::Sender<Option<String>>,
    /// The stdio server's exit status, published by its reaper.
    pub exit: Option<watch::Receiver<Option<ExitInfo>>>,
    pub pid: Option<u32>,
    pub transport: TransportKind,
}

impl Monitor {
    pub(super) async fn run(self) {
        let Monitor {
            slot,
            shared,
            generation,
            running,
            stop_requested,
            dead,
            exit,
            pid,
            transport,
        } = self;
        let quit = running.waiting().await;
        let stopped = stop_requested.is_cancelled();
        let reason = if stopped {
            "stopped by warden".to_string()
        } else if let Some(mut exit) = exit {
            let info = tokio::time::timeout(Duration::from_secs(2), exit.wait_for(Option::is_some))
                .await
                .ok()
                .and_then(|r| r.ok().and_then(|info| *info));
            match info {
                Some(info) => format!("the server process exited ({info})"),
                None => "the server closed its output".to_string(),
            }
        } else {
            match quit {
                Ok(_) => "the server closed the connection".to_string(),
                Err(error) => format!("the connection task failed: {error}"),
            }
        };
        // The slot first, so whoever learns of the death sees the slot updated.
        if !stopped && slot.connection_lost(generation, &reason) {
            tracing::warn!(server = slot.name(), %reason, "server disconnected");
            shared.bump();
            let _ = shared.revive.send(slot.clone());
        }
        let _ = dead.send(Some(reason.clone()));
        if transport != TransportKind::Stdio {
            // stdio exits are reported by the process reaper, with the status.
            let _ = shared.events.send(LifecycleEvent::Exited {
                server: slot.name().to_string(),
                pid,
                code: None,
                signal: None,
                reason,
            });
        }
    }
}

/// Re-reads `tools/list` whenever the server says its tools changed.
pub(super) async fn relist(
    slot: Arc<Slot>,
    shared: Arc<Shared>,
    generation: u64,
    peer: Peer<RoleClient>,
    mut changes: mpsc::UnboundedReceiver<()>,
) {
    while changes.recv().await.is_some() {
        while changes.try_recv().is_ok() {}
        let result = connect::list_tools(&peer, slot.config.timeout).await;
        let stale = {
            let mut inner = slot.lock();
            if inner
                .conn
                .as_ref()
                .is_none_or(|c| c.generation != generation)
            {
                return;
            }
            match result {
                Ok(tools) => {
                    tracing::info!(
                        server = slot.name(),
                        tools = tools.len(),
                        "tool list changed"
                    );
                    inner.tools = tools;
                    None
                }
                Err(connect::ListError::Rejected(error)) => {
                    tracing::warn!(server = slot.name(), %error, "tool list rejected");
                    inner.tools.clear();
                    let stale = inner.conn.take();
                    Slot::fail(&mut inner, format!("re-listing tools failed: {error}"));
                    stale
                }
                Err(connect::ListError::Failed(error)) => {
                    // Keep the last good list. If the server is gone, the
                    // monitor records why; stopping here would hide that.
                    tracing::warn!(server = slot.name(), %error, "re-listing tools failed");
                    continue;
                }
            }
        };
        shared.bump();
        if let Some(conn) = stale {
            conn.stop("its tool list was rejected").await;
            return;
        }
    }
}
