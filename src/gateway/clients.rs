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
//!   `prompts/list_changed` to every client, but only from a server that
//!   offers resources (prompts) not all denied outright: a server the
//!   client can list nothing of has nothing to tell it.
// `logging/*` and `resources/(un)subscribe` are deprecated in rmcp
// (SEP-2577, protocol 2026-07-28) but are the session protocol's
// (2025-11-25) way, which the gateway speaks.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ResourceUpdatedNotificationParam, ServerNotification,
};
use rmcp::{Peer, RoleServer};
use tokio::sync::{broadcast, mpsc};

use crate::host::{Caller, Host, ResourceRequest, Share};
use crate::mcp::ProgressSink;
use warden_audit::Outcome;

/// One client's state: its log level and resource subscriptions.
#[derive(Debug, Default)]
pub(super) struct ClientState {
    level: Mutex<Option<LoggingLevel>>,
    /// By URI: where the client's share of the upstream subscription is
    /// held.
    subscriptions: Mutex<HashMap<String, Held>>,
}

/// One allowed subscription of a client.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub share: Share,
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

    /// Records an allowed subscription held as `share`; the one it
    /// replaces (a repeat), whose share is to be let go.
    pub(super) fn subscribe(&self, uri: &str, share: Share) -> Option<Held> {
        lock(&self.subscriptions).insert(uri.to_string(), Held { share })
    }

    /// Forgets a subscription; the one this client had.
    pub(super) fn unsubscribe(&self, uri: &str) -> Option<Held> {
        lock(&self.subscriptions).remove(uri)
    }

    /// Whether this client's subscription to `uri` was allowed on
    /// `server`: an update names only a URI, and another server's update
    /// for the same URI is not this subscription's.
    pub(super) fn subscribed_on(&self, uri: &str, server: &str) -> bool {
        lock(&self.subscriptions)
            .get(uri)
            .is_some_and(|held| held.share.server == server)
    }

    fn subscriptions(&self) -> Vec<(String, Held)> {
        lock(&self.subscriptions)
            .iter()
            .map(|(uri, held)| (uri.clone(), held.clone()))
            .collect()
    }

    /// Moves the subscription to `uri` from `old` to `new` (made again
    /// after a reconnect); false when the client let go of it meanwhile.
    fn renew(&self, uri: &str, old: &Share, new: Share) -> bool {
        match lock(&self.subscriptions).get_mut(uri) {
            Some(held) if held.share == *old => {
                *held = Held { share: new };
                true
            }
            _ => false,
        }
    }

    /// Ends the subscription to `uri` held as `share`; false when it was
    /// no longer that one.
    fn end(&self, uri: &str, share: &Share) -> bool {
        let mut subscriptions = lock(&self.subscriptions);
        if subscriptions.get(uri).is_some_and(|h| h.share == *share) {
            subscriptions.remove(uri);
            true
        } else {
            false
        }
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
        let held: Vec<(String, Held)> = lock(&client.subscriptions).drain().collect();
        for (uri, held) in held {
            if let Err(error) = release(host, &held.share, &uri).await {
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
    let mut changes = gateway.inner.host.manager().subscribe();
    let mut reloads = gateway.inner.host.policy_changes();
    let client = gateway.client.clone();
    let stop = gateway.inner.stop.clone();
    tokio::spawn(async move {
        let mut alive = tokio::time::interval(Duration::from_secs(5));
        loop {
            let next = tokio::select! {
                next = upstream.recv() => next,
                changed = changes.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    // A server connected or went away: the client's
                    // subscriptions on it end or are made again.
                    renew_subscriptions(&gateway, &peer, false).await;
                    continue;
                }
                changed = reloads.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    // New rules: each subscription is decided again.
                    renew_subscriptions(&gateway, &peer, true).await;
                    continue;
                }
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
                    if !client.subscribed_on(&u.params.uri, &note.server) {
                        continue;
                    }
                    peer.notify_resource_updated(u.params.clone()).await
                }
                // A list change is the server's signal to the client: passed
                // on only when the client's listing could change with it,
                // never from a server none of whose resources (prompts) it
                // can see (tools: the gateway compares its own listing).
                ServerNotification::ResourceListChangedNotification(_) => {
                    if !lists_any(&gateway.inner.host, &note.server, Listed::Resources) {
                        tracing::debug!(server = %note.server, "resources/list_changed dropped: nothing of this server's is listed");
                        continue;
                    }
                    peer.notify_resource_list_changed().await
                }
                ServerNotification::PromptListChangedNotification(_) => {
                    if !lists_any(&gateway.inner.host, &note.server, Listed::Prompts) {
                        tracing::debug!(server = %note.server, "prompts/list_changed dropped: nothing of this server's is listed");
                        continue;
                    }
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

/// What a list change is about.
#[derive(Clone, Copy)]
enum Listed {
    Resources,
    Prompts,
}

/// Whether a client's listing of `what` can hold anything of `server`'s:
/// it offers them (a server that does not is never listed) and a rule
/// does not deny them all outright.
fn lists_any(host: &Host, server: &str, what: Listed) -> bool {
    let offers = host
        .servers_with(|c| match what {
            Listed::Resources => c.resources.is_some(),
            Listed::Prompts => c.prompts.is_some(),
        })
        .iter()
        .any(|s| s == server);
    offers
        && match what {
            Listed::Resources => !host.resources_denied(server),
            Listed::Prompts => !host.prompts_denied(server),
        }
}

/// Lets go of a client's share of an upstream subscription (recorded),
/// unless it ended with its connection (nothing to let go of).
pub(super) async fn release(host: &Host, share: &Share, uri: &str) -> Result<(), String> {
    if host.subscription_generation(&share.server) != Some(share.generation) {
        return Ok(());
    }
    host.release_subscription(share, uri).await
}

/// A subscription lives on one upstream connection, and ends with it,
/// and was allowed by the policy of its time. A subscription whose
/// connection ended ends for the client too, which is told so (it may
/// subscribe again once the server is back: the manager connects it
/// again after a backoff). One whose connection was replaced while
/// no one looked (a reconnect), and every one after a policy reload
/// (`reloaded`), is decided again like a new `resources/subscribe`
/// (recorded; no one is asked: an `ask` is a deny): allowed, it is made
/// again upstream where its connection was replaced, and the client gets
/// `notifications/resources/updated` for the URI (what changed meanwhile
/// was not reported); refused, it ends, its share is let go, and the
/// client is told why. What the client is told comes as
/// `notifications/message` at level `warning` from the logger `warden`.
async fn renew_subscriptions(gateway: &super::Gateway, peer: &Peer<RoleServer>, reloaded: bool) {
    let host = &gateway.inner.host;
    let client = &gateway.client;
    for (uri, held) in client.subscriptions() {
        let old = held.share;
        let Some(now) = host.subscription_generation(&old.server) else {
            if client.end(&uri, &old) {
                tracing::warn!(server = %old.server, %uri, "the server's connection ended, and a client's subscription with it");
                tell(
                    peer,
                    &uri,
                    &old.server,
                    format!(
                        "warden: the subscription to `{uri}` ended: the connection to server \
                         `{}` ended, and the server's subscription with it; subscribe again \
                         once the server is back",
                        old.server
                    ),
                )
                .await;
            }
            continue;
        };
        let reconnected = now != old.generation;
        if !reconnected && !reloaded {
            continue;
        }
        let report = host
            .read_resource(
                ResourceRequest {
                    uri: uri.clone(),
                    server: None,
                    subscribe: true,
                    caller: Caller::Gateway,
                },
                None,
                gateway.inner.stop.child_token(),
                None,
            )
            .await;
        let made = (report.outcome == Outcome::Ok)
            .then(|| report.server.clone())
            .flatten()
            .and_then(|server| {
                Some(Share {
                    generation: host.subscription_generation(&server)?,
                    server,
                })
            });
        match made {
            Some(new) => {
                if !client.renew(&uri, &old, new.clone()) {
                    // The client let go of it meanwhile.
                    release_logged(host, &new, &uri).await;
                    continue;
                }
                // The share held before (on the same connection, after a
                // reload) is replaced by the new one.
                release_logged(host, &old, &uri).await;
                if reconnected {
                    tracing::info!(server = %new.server, %uri, "a client's subscription was made again after a reconnect");
                    let updated = ResourceUpdatedNotificationParam::new(uri.clone());
                    if let Err(error) = peer.notify_resource_updated(updated).await {
                        tracing::debug!(%error, "the client is gone");
                    }
                }
            }
            None => {
                if !client.end(&uri, &old) {
                    continue;
                }
                release_logged(host, &old, &uri).await;
                let why = match report.outcome {
                    Outcome::Denied => report.denial_text(),
                    _ => report
                        .error
                        .clone()
                        .unwrap_or_else(|| report.outcome.as_str().to_string()),
                };
                let when = if reconnected {
                    format!("server `{}` reconnected", old.server)
                } else {
                    "warden's policy was reloaded".to_string()
                };
                tracing::warn!(server = %old.server, %uri, %why, "a client's subscription ended: {when}");
                tell(
                    peer,
                    &uri,
                    &old.server,
                    crate::scrub::clean(&format!(
                        "warden: the subscription to `{uri}` ended: {when}, and the \
                         subscription, decided again, was not made: {why}"
                    ))
                    .into_owned(),
                )
                .await;
            }
        }
    }
}

async fn release_logged(host: &Host, share: &Share, uri: &str) {
    if let Err(error) = release(host, share, uri).await {
        tracing::debug!(%uri, %error, "letting go of a subscription failed upstream");
    }
}

/// Tells the client about one of its subscriptions, as a warning from
/// the logger `warden`.
async fn tell(peer: &Peer<RoleServer>, uri: &str, server: &str, message: String) {
    let mut note = LoggingMessageNotificationParam::new(
        LoggingLevel::Warning,
        serde_json::json!({ "message": message, "uri": uri, "server": server }),
    );
    note.logger = Some("warden".into());
    if let Err(error) = peer.notify_logging_message(note).await {
        tracing::debug!(%error, "the client is gone");
    }
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
        .map(|_| mpsc::unbounded_channel::<Box<ProgressNotificationParam>>())
        .unzip();
    let running = work(tx);
    tokio::pin!(running);
    let (Some(token), Some(rx)) = (token, rx.as_mut()) else {
        return running.await;
    };
    let relay = |p: Box<ProgressNotificationParam>| {
        let mut p = *p;
        p.progress_token = token.clone();
        p
    };
    // Each notification's send is boxed: it is 1 KB, and most calls
    // report no progress.
    loop {
        tokio::select! {
            biased;
            Some(p) = rx.recv() => {
                if let Err(error) = Box::pin(peer.notify_progress(relay(p))).await {
                    tracing::debug!(%error, "progress could not be passed on");
                }
            }
            out = &mut running => {
                while let Ok(p) = rx.try_recv() {
                    let _ = Box::pin(peer.notify_progress(relay(p))).await;
                }
                return out;
            }
        }
    }
}
