//! What the gateway keeps per client, and the notifications it passes on
//! (CONTRACT §8): nothing crosses between two clients.
//!
//! - `notifications/progress`: only to the client whose request it is,
//!   with that client's own token ([`with_progress`]); upstream, warden's
//!   own token identifies the request.
//! - `notifications/message`: a message that belongs to no request goes
//!   to every client that set a level with `logging/setLevel`, filtered
//!   by that client's level, with its `logger` naming the server first;
//!   upstream servers are asked for the lowest level any client wants
//!   (each `logging/setLevel` sent is recorded). A message from a server
//!   whose every tool, resource and prompt the rules deny is dropped.
//!   With no client listening it is logged at debug.
//! - `notifications/resources/updated`: only to clients whose own
//!   subscription to that URI was allowed; `resources/list_changed` and
//!   `prompts/list_changed` to every client.
// `logging/*` and `resources/(un)subscribe` are deprecated in rmcp
// (SEP-2577, protocol 2026-07-28) but are the session protocol's
// (2025-11-25) way, which the gateway speaks.
#![allow(deprecated)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ServerNotification,
};
use rmcp::{Peer, RoleServer};
use tokio::sync::{broadcast, mpsc};

use crate::host::Host;
use crate::mcp::ProgressSink;

/// One client's state: its log level and resource subscriptions.
#[derive(Debug, Default)]
pub(super) struct ClientState {
    level: Mutex<Option<LoggingLevel>>,
    subscriptions: Mutex<HashSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Severity order of MCP log levels (RFC 5424: debug lowest).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl ClientState {
    /// Whether this client wants a message of `level`.
    fn wants(&self, level: LoggingLevel) -> bool {
        lock(&self.level).is_some_and(|min| rank(level) >= rank(min))
    }

    /// Records a subscription; true when it is new for this client.
    pub(super) fn subscribe(&self, uri: &str) -> bool {
        lock(&self.subscriptions).insert(uri.to_string())
    }

    /// Forgets a subscription; true when this client had it.
    pub(super) fn unsubscribe(&self, uri: &str) -> bool {
        lock(&self.subscriptions).remove(uri)
    }

    pub(super) fn subscribed(&self, uri: &str) -> bool {
        lock(&self.subscriptions).contains(uri)
    }
}

/// Every client of one gateway, for what concerns them all. (Upstream
/// subscriptions are shared by the connection manager: each client's
/// allowed subscription holds one share.)
#[derive(Debug, Default)]
pub(super) struct Clients {
    all: Mutex<Vec<Weak<ClientState>>>,
}

impl Clients {
    pub(super) fn add(&self) -> Arc<ClientState> {
        let state = Arc::new(ClientState::default());
        let mut all = lock(&self.all);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&state));
        state
    }

    /// The lowest level any client wants.
    fn lowest_level(&self) -> Option<LoggingLevel> {
        lock(&self.all)
            .iter()
            .filter_map(Weak::upgrade)
            .filter_map(|c| *lock(&c.level))
            .min_by_key(|l| rank(*l))
    }

    /// Sets `client`'s level and asks every upstream server that logs for
    /// the lowest level any client wants.
    pub(super) async fn set_level(&self, host: &Host, client: &ClientState, level: LoggingLevel) {
        *lock(&client.level) = Some(level);
        let Some(lowest) = self.lowest_level() else {
            return;
        };
        host.manager().set_log_level(Some(lowest));
        for server in host.servers_with(|c| c.logging.is_some()) {
            // Recorded (kind `logging`), written ahead like any request.
            if let Err(error) = host
                .set_log_level(&server, lowest, crate::host::Caller::Gateway)
                .await
            {
                tracing::debug!(%server, %error, "logging/setLevel failed upstream");
            }
        }
    }
}

impl Clients {
    /// A client went away: its subscriptions end (upstream too, after the
    /// last subscriber) and its level no longer counts.
    async fn forget(&self, host: &Host, client: &ClientState) {
        *lock(&client.level) = None;
        let uris: Vec<String> = lock(&client.subscriptions).drain().collect();
        for uri in uris {
            if let Err(error) = host.unsubscribe(&uri).await {
                tracing::debug!(%uri, %error, "unsubscribing for a client that left failed");
            }
        }
        host.manager().set_log_level(self.lowest_level());
    }
}

/// Passes upstream notifications that concern the gateway's client on to
/// it, in the order each server sent them, until the client goes away or
/// the gateway stops; then forgets the client's subscriptions and level.
pub(super) fn forward_notifications(gateway: super::Gateway, peer: Peer<RoleServer>) {
    let mut upstream = gateway.inner.host.manager().notifications();
    let client = gateway.client.clone();
    let stop = gateway.inner.stop.clone();
    tokio::spawn(async move {
        let mut alive = tokio::time::interval(Duration::from_secs(5));
        loop {
            let next = tokio::select! {
                next = upstream.recv() => next,
                _ = alive.tick() => {
                    if peer.is_transport_closed() {
                        break;
                    }
                    continue;
                }
                () = stop.cancelled() => break,
            };
            let note = match next {
                Ok(note) => note,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "a gateway client fell behind; notifications dropped"
                    );
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => break,
            };
            let sent = match &note.notification {
                ServerNotification::LoggingMessageNotification(m) => {
                    if !client.wants(m.params.level) {
                        tracing::debug!(server = %note.server, level = ?m.params.level, data = %m.params.data, "upstream log message (no client wants it)");
                        continue;
                    }
                    // A log message is the server's data on its way to the
                    // model: from a server whose every tool, resource and
                    // prompt the rules deny, nothing of it may pass.
                    if gateway.inner.host.denies_everything_of(&note.server) {
                        tracing::debug!(server = %note.server, level = ?m.params.level, "upstream log message dropped: the rules deny everything this server offers");
                        continue;
                    }
                    peer.notify_logging_message(named(&note.server, &m.params))
                        .await
                }
                ServerNotification::ResourceUpdatedNotification(u) => {
                    if !client.subscribed(&u.params.uri) {
                        continue;
                    }
                    peer.notify_resource_updated(u.params.clone()).await
                }
                ServerNotification::ResourceListChangedNotification(_) => {
                    peer.notify_resource_list_changed().await
                }
                ServerNotification::PromptListChangedNotification(_) => {
                    peer.notify_prompt_list_changed().await
                }
                _ => continue,
            };
            if let Err(error) = sent {
                tracing::debug!(%error, "the client is gone; no more notifications");
                break;
            }
        }
        if !stop.is_cancelled() {
            gateway
                .inner
                .clients
                .forget(&gateway.inner.host, &client)
                .await;
        }
    });
}

/// A server's log message as a client gets it: `logger` names the
/// server first (`S`, or `S/LOGGER` with the server's own logger name),
/// so a client can tell which upstream wrote it and a server cannot pass
/// for another or for warden.
fn named(
    server: &str,
    params: &LoggingMessageNotificationParam,
) -> LoggingMessageNotificationParam {
    let mut named = params.clone();
    named.logger = Some(match &params.logger {
        Some(logger) => format!("{server}/{logger}"),
        None => server.to_string(),
    });
    named
}

/// Runs `work` with a progress sink when the client asked for progress
/// (`token`), passing each report on to `peer` under the client's own
/// token, in order and before the answer.
pub(super) async fn with_progress<F, Fut, T>(
    peer: &Peer<RoleServer>,
    token: Option<ProgressToken>,
    work: F,
) -> T
where
    F: FnOnce(Option<ProgressSink>) -> Fut,
    Fut: Future<Output = T>,
{
    // One `work` future for both cases: two (one per branch) would each
    // take their own room in this future, doubling the size of every
    // request's future.
    let (tx, mut rx) = token
        .as_ref()
        .map(|_| mpsc::unbounded_channel::<ProgressNotificationParam>())
        .unzip();
    let running = work(tx);
    tokio::pin!(running);
    let (Some(token), Some(rx)) = (token, rx.as_mut()) else {
        return running.await;
    };
    let relay = |mut p: ProgressNotificationParam| {
        p.progress_token = token.clone();
        p
    };
    loop {
        tokio::select! {
            biased;
            Some(p) = rx.recv() => {
                if let Err(error) = peer.notify_progress(relay(p)).await {
                    tracing::debug!(%error, "progress could not be passed on");
                }
            }
            out = &mut running => {
                while let Ok(p) = rx.try_recv() {
                    let _ = peer.notify_progress(relay(p)).await;
                }
                return out;
            }
        }
    }
}
