//! Establishing one connection: transport, protocol negotiation, first
//! tool listing. Everything here is bounded by the server's `timeout`.

use std::collections::{HashMap, HashSet};
use std::sync::Once;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{
    PaginatedRequestParams, ProtocolVersion, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, RunningService, serve_client_with_lifecycle_and_ct,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use rmcp::{Peer, RoleClient};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::notify::{Router, Tap, Upstream};
use super::probe::{DiscoverBudget, probe_budget};
use super::sse::SseTransport;
use super::stdio::{self, ExitInfo, SharedStopNote, SpawnError};
use super::{LifecycleEvent, MAX_TOOL_PAGES, MAX_TOOLS, Tool};
use crate::config::{ProtocolChoice, RemoteConfig, ServerConfig, TransportConfig};
use warden_core::TransportKind;
use warden_sandbox::{LaunchContext, SandboxError, SandboxSummary};

pub(super) type Running = RunningService<RoleClient, WardenClient>;

/// The protocol revision warden prefers (stateless, `server/discover`).
pub const PREFERRED_PROTOCOL: ProtocolVersion = ProtocolVersion::V_2026_07_28;
/// The revision offered to servers without `server/discover`.
pub const LEGACY_PROTOCOL: ProtocolVersion = ProtocolVersion::V_2025_11_25;

pub(super) use super::client::WardenClient;

pub(super) struct Established {
    pub running: Running,
    pub ct: CancellationToken,
    pub protocol: String,
    pub tools: Vec<Tool>,
    pub sandbox: Option<SandboxSummary>,
    pub pid: Option<u32>,
    pub exit: Option<watch::Receiver<Option<ExitInfo>>>,
    pub stop_note: Option<SharedStopNote>,
    pub list_changed: mpsc::UnboundedReceiver<()>,
    pub transport: TransportKind,
    /// Cancelled when warden stops the connection.
    pub stop_requested: CancellationToken,
    /// The `subscriptions/listen` task (protocol 2026-07-28), if any.
    pub listener: Option<tokio::task::JoinHandle<()>>,
    pub router: std::sync::Arc<Router>,
    pub capabilities: rmcp::model::ServerCapabilities,
    /// The last 401/403 challenge of an http server.
    pub challenges: super::oauth::Challenges,
}

pub(super) struct Failure {
    pub message: String,
    pub sandbox_unavailable: bool,
    /// The server answered but its tool list was rejected: forget the
    /// tools it listed before. (Other failures keep the last good list,
    /// so that a later call can still try to reconnect.)
    pub tools_rejected: bool,
    /// A remote server answered with an OAuth challenge (401/403 with
    /// `WWW-Authenticate: Bearer`): it uses OAuth, whatever the config said.
    pub oauth_challenged: bool,
}

impl Failure {
    pub(super) fn new(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            sandbox_unavailable: false,
            tools_rejected: false,
            oauth_challenged: false,
        }
    }
}

/// rustls needs one process-wide crypto provider; warden uses ring.
pub fn ensure_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

pub(super) async fn establish(
    config: &ServerConfig,
    launch: &LaunchContext,
    events: &mpsc::UnboundedSender<LifecycleEvent>,
    notifications: &broadcast::Sender<std::sync::Arc<Upstream>>,
    handler: Option<std::sync::Arc<dyn super::ServerRequests>>,
    roots: super::client::Roots,
) -> Result<Established, Failure> {
    establish_inner(config, launch, events, notifications, handler, roots)
        .await
        .map_err(|failure| Failure {
            message: redact_url(&failure.message, config),
            ..failure
        })
}

/// Replaces the configured URL (which may carry an expanded secret, e.g. a
/// token in its query) in a message meant for status, logs or audit, and
/// masks credentials in any other URL the message holds (a redirect, an
/// endpoint the server named: [`warden_core::redact::urls_in`]).
pub(super) fn redact_url(text: &str, config: &ServerConfig) -> String {
    let (TransportConfig::Http(remote) | TransportConfig::Sse(remote)) = &config.transport else {
        return warden_core::redact::urls_in(text).into_owned();
    };
    let mut out = text.to_string();
    let mut forms = vec![remote.url.clone()];
    if let Ok(parsed) = reqwest::Url::parse(&remote.url) {
        forms.push(parsed.to_string());
    }
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    for form in forms.iter().filter(|f| !f.is_empty()) {
        out = out.replace(form.as_str(), "<configured URL>");
    }
    warden_core::redact::urls_in(&out).into_owned()
}

async fn establish_inner(
    config: &ServerConfig,
    launch: &LaunchContext,
    events: &mpsc::UnboundedSender<LifecycleEvent>,
    notifications: &broadcast::Sender<std::sync::Arc<Upstream>>,
    handler: Option<std::sync::Arc<dyn super::ServerRequests>>,
    roots: super::client::Roots,
) -> Result<Established, Failure> {
    let router = Router::new(&config.name, notifications.clone());
    let (list_changed_tx, list_changed) = mpsc::unbounded_channel();
    let client = WardenClient {
        server: config.name.clone(),
        list_changed: list_changed_tx.clone(),
        router: router.clone(),
        handler,
        roots,
    };
    let protocol = config.protocol;
    let ct = CancellationToken::new();
    // What an http server's 401/403 said (OAuth), for the messages of
    // this connection and its later requests.
    let challenges = super::oauth::Challenges::default();
    let timeout = config.timeout;
    let transport = config.transport.kind();
    let (running, sandbox, pid, exit, stop_note) = match &config.transport {
        TransportConfig::Stdio(stdio_config) => {
            let spawned =
                stdio::spawn(config, stdio_config, launch, events).map_err(|e| Failure {
                    sandbox_unavailable: matches!(
                        e,
                        SpawnError::Sandbox(SandboxError::Unsupported { .. })
                    ),
                    ..Failure::new(e.to_string())
                })?;
            stdio::note(&spawned.stop, |n| {
                n.reason = Some("the connection could not be set up".into());
            });
            let mut exit = spawned.exit.clone();
            let running = match handshake(
                client,
                Tap::new(spawned.transport, router.clone()),
                timeout,
                protocol,
                ct.clone(),
            )
            .await
            {
                Ok(running) => running,
                Err(message) => {
                    // A server that died during the handshake: say how.
                    let info = tokio::time::timeout(
                        Duration::from_millis(500),
                        exit.wait_for(Option::is_some),
                    )
                    .await
                    .ok()
                    .and_then(|r| r.ok().and_then(|info| *info));
                    let message = match info {
                        Some(info) => {
                            // Its last words on stderr (the sandbox helper's
                            // reason, an interpreter's traceback line), once
                            // stderr is closed or briefly waited for.
                            let mut tail = spawned.stderr_tail.clone();
                            let _ = tokio::time::timeout(
                                Duration::from_millis(200),
                                tail.wait_for(|t| t.1),
                            )
                            .await;
                            let said = tail.borrow().0.clone();
                            match said {
                                Some(line) => format!(
                                    "{message} (the server process ended: {info}; its last \
                                     line on stderr: {line})"
                                ),
                                None => format!("{message} (the server process ended: {info})"),
                            }
                        }
                        None => message,
                    };
                    stdio::note(&spawned.stop, |n| n.reason = Some(message.clone()));
                    return Err(Failure::new(message));
                }
            };
            stdio::note(&spawned.stop, |n| {
                n.reason = None;
                n.connected = true;
            });
            (
                running,
                Some(spawned.summary),
                Some(spawned.pid),
                Some(spawned.exit),
                Some(spawned.stop),
            )
        }
        TransportConfig::Http(remote) => {
            ensure_crypto_provider();
            let headers = header_map(remote)?;
            let http_config = StreamableHttpClientTransportConfig::with_uri(remote.url.clone())
                .custom_headers(
                    headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect::<HashMap<_, _>>(),
                );
            // A server behind OAuth: the stored login (refreshed as it
            // expires); without one, a 401 says to log in.
            let plan = super::oauth::plan(&config.name, remote)
                .await
                .map_err(Failure::new)?;
            let running = match plan {
                super::oauth::Plan::Plain => {
                    let http = StreamableHttpClientTransport::with_client(
                        super::oauth::Recording {
                            inner: super::oauth::http_client(),
                            seen: challenges.clone(),
                        },
                        http_config,
                    );
                    handshake(
                        client,
                        Tap::new(http, router.clone()),
                        timeout,
                        protocol,
                        ct.clone(),
                    )
                    .await
                }
                super::oauth::Plan::Authorized(auth) => {
                    let http = StreamableHttpClientTransport::with_client(
                        super::oauth::Recording {
                            inner: *auth,
                            seen: challenges.clone(),
                        },
                        http_config,
                    );
                    handshake(
                        client,
                        Tap::new(http, router.clone()),
                        timeout,
                        protocol,
                        ct.clone(),
                    )
                    .await
                }
            };
            let running = running.map_err(|message| {
                match super::oauth::explain(&config.name, remote, &challenges) {
                    Some(advice) => Failure {
                        oauth_challenged: true,
                        ..Failure::new(advice)
                    },
                    None => Failure::new(message),
                }
            })?;
            (running, None, None, None, None)
        }
        TransportConfig::Sse(remote) => {
            ensure_crypto_provider();
            let headers = header_map(remote)?;
            let sse = SseTransport::connect(&remote.url, headers, timeout)
                .await
                .map_err(|e| Failure::new(e.to_string()))?;
            let running = handshake(
                client,
                Tap::new(sse, router.clone()),
                timeout,
                protocol,
                ct.clone(),
            )
            .await
            .map_err(Failure::new)?;
            (running, None, None, None, None)
        }
    };
    if pid.is_none() {
        let _ = events.send(LifecycleEvent::Started {
            server: config.name.clone(),
            pid: None,
            transport,
            sandbox: None,
        });
    }

    let Some(info) = running.peer().peer_info() else {
        return Err(stop_with(
            &stop_note,
            "the server sent no handshake information",
        ));
    };
    let protocol = info.protocol_version.to_string();
    let stop_requested = CancellationToken::new();
    let caps = &info.capabilities;
    let tools = if caps.tools.is_some() {
        list_tools(running.peer(), timeout)
            .await
            .map_err(|e| Failure {
                tools_rejected: true,
                ..stop_with(
                    &stop_note,
                    auth_note(config, &challenges)
                        .unwrap_or_else(|| format!("listing tools failed: {e}")),
                )
            })?
    } else {
        Vec::new()
    };
    // 2026-07-28 delivers list_changed only on a subscription (resource
    // and prompt changes reach the notification broadcast through the
    // transport's tap, like every notification).
    let mut filter = SubscriptionFilter::builder();
    let mut wanted = false;
    if caps.tools.as_ref().and_then(|t| t.list_changed) == Some(true) {
        filter = filter.tools_list_changed();
        wanted = true;
    }
    if caps.resources.as_ref().and_then(|r| r.list_changed) == Some(true) {
        filter = filter.resources_list_changed();
        wanted = true;
    }
    if caps.prompts.as_ref().and_then(|p| p.list_changed) == Some(true) {
        filter = filter.prompts_list_changed();
        wanted = true;
    }
    let listener = (wanted && info.protocol_version >= PREFERRED_PROTOCOL).then(|| {
        tokio::spawn(listen_for_changes(
            running.peer().clone(),
            filter.build(),
            list_changed_tx,
            config.name.clone(),
            stop_requested.clone(),
        ))
    });
    Ok(Established {
        running,
        ct,
        protocol,
        tools,
        sandbox,
        pid,
        exit,
        stop_note,
        list_changed,
        transport,
        stop_requested,
        listener,
        router,
        capabilities: info.capabilities.clone(),
        challenges,
    })
}

/// For an http server whose last 401/403 explains a failure: what to do
/// about it (log in, or log in again for more scope).
pub(super) fn auth_note(
    config: &ServerConfig,
    challenges: &super::oauth::Challenges,
) -> Option<String> {
    match &config.transport {
        TransportConfig::Http(remote) => super::oauth::explain(&config.name, remote, challenges),
        _ => None,
    }
}

fn stop_with(stop_note: &Option<SharedStopNote>, message: impl Into<String>) -> Failure {
    let message = message.into();
    if let Some(note) = stop_note {
        stdio::note(note, |n| n.reason = Some(message.clone()));
    }
    Failure::new(message)
}

/// The configured headers, marked sensitive; a bad name or value is an
/// error that names the header but never shows the value.
fn header_map(remote: &RemoteConfig) -> Result<HeaderMap, Failure> {
    let mut headers = HeaderMap::new();
    for (name, value) in &remote.headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| Failure::new(format!("`{name}` is not a valid HTTP header name")))?;
        let mut value = HeaderValue::from_str(value.expose())
            .map_err(|_| Failure::new(format!("the value of header `{name}` is not valid")))?;
        value.set_sensitive(true);
        headers.insert(header, value);
    }
    Ok(headers)
}

/// Negotiates the protocol. By default `initialize` with 2025-11-25, the
/// revision on which servers may send their own requests (elicitation,
/// sampling, roots: rmcp refuses them on 2026-07-28) and answer
/// `resources/subscribe`. A server configured with `protocol =
/// "2026-07-28"` is asked `server/discover` first, falling back to
/// `initialize` with 2025-11-25; rmcp's Auto mode would wait 10 s for a
/// server that ignores `server/discover`; [`DiscoverBudget`] cuts that to
/// half the server's `timeout`. The whole handshake is bounded by the
/// `timeout`.
async fn handshake<T>(
    client: WardenClient,
    transport: T,
    timeout: Duration,
    protocol: ProtocolChoice,
    ct: CancellationToken,
) -> Result<Running, String>
where
    T: Transport<RoleClient> + 'static,
{
    let lifecycle = match protocol {
        ProtocolChoice::Session => ClientLifecycleMode::Initialize,
        ProtocolChoice::Stateless => ClientLifecycleMode::Auto {
            preferred_versions: vec![PREFERRED_PROTOCOL],
            legacy_version: Some(LEGACY_PROTOCOL),
        },
    };
    let transport = DiscoverBudget::new(transport, probe_budget(timeout));
    match tokio::time::timeout(
        timeout,
        serve_client_with_lifecycle_and_ct(client, transport, lifecycle, ct),
    )
    .await
    {
        Err(_) => Err(format!(
            "no answer to the protocol handshake within {}",
            human(timeout)
        )),
        Ok(Err(error)) => Err(describe_init_error(&error)),
        Ok(Ok(running)) => Ok(running),
    }
}

fn describe_init_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => format!(
            "server/discover failed ({}) and initialize failed: {}",
            describe_init_error(discover),
            describe_init_error(fallback)
        ),
        ClientInitializeError::ConnectionClosed(waiting_for) => {
            format!("the server closed the connection while warden waited for the {waiting_for}")
        }
        ClientInitializeError::JsonRpcError(data) => {
            format!(
                "the server refused the handshake: JSON-RPC error {}: {}",
                data.code.0, data.message
            )
        }
        ClientInitializeError::TransportError { error, context } => {
            format!("{context} failed: {}", error_chain(error.error.as_ref()))
        }
        other => format!("the handshake failed: {other}"),
    }
}

/// An error and its sources, `a: b: c`, without repeating a source that a
/// message already quotes.
pub(super) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

pub(super) fn human(duration: Duration) -> String {
    format!("{:.2} s", duration.as_secs_f64())
}

/// Reads every `tools/list` page, each within `timeout`. A repeated cursor,
/// more than [`MAX_TOOL_PAGES`] pages or more than [`MAX_TOOLS`] tools is an
/// error and nothing is returned.
/// Why a listing produced no tools.
#[derive(Debug)]
pub(super) enum ListError {
    /// The server answered, but the listing breaks warden's caps (pages,
    /// tools, a repeated cursor): nothing of it may be registered.
    Rejected(String),
    /// No usable answer (timeout, transport closed, JSON-RPC error): the
    /// last good listing stays; a dead connection is the monitor's business.
    Failed(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Rejected(m) | ListError::Failed(m) => f.write_str(m),
        }
    }
}

pub(super) async fn list_tools(
    peer: &Peer<RoleClient>,
    timeout: Duration,
) -> Result<Vec<Tool>, ListError> {
    let mut tools: Vec<Tool> = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor: Option<String> = None;
    for page in 1..=MAX_TOOL_PAGES {
        let params = cursor
            .clone()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let result = tokio::time::timeout(timeout, peer.list_tools(params))
            .await
            .map_err(|_| {
                ListError::Failed(format!(
                    "tools/list page {page} got no answer within {}",
                    human(timeout)
                ))
            })?
            .map_err(|e| ListError::Failed(format!("tools/list page {page} failed: {e}")))?;
        tools.extend(result.tools);
        if tools.len() > MAX_TOOLS {
            return Err(ListError::Rejected(format!(
                "the server lists more than {MAX_TOOLS} tools; none were registered"
            )));
        }
        match result.next_cursor {
            None => return Ok(tools),
            Some(next) => {
                if !seen.insert(next.clone()) {
                    return Err(ListError::Rejected(format!(
                        "tools/list page {page} repeated an earlier cursor; none were registered"
                    )));
                }
                cursor = Some(next);
            }
        }
    }
    Err(ListError::Rejected(format!(
        "tools/list has more than {MAX_TOOL_PAGES} pages; none were registered"
    )))
}

/// Protocol 2026-07-28: subscribe to list_changed with `subscriptions/listen`.
async fn listen_for_changes(
    peer: Peer<RoleClient>,
    filter: SubscriptionFilter,
    changes: mpsc::UnboundedSender<()>,
    server: String,
    stop: CancellationToken,
) {
    let mut subscription = tokio::select! {
        () = stop.cancelled() => return,
        result = peer.listen(filter) => match result {
            Ok(subscription) => subscription,
            Err(error) => {
                tracing::debug!(%server, %error, "subscriptions/listen unavailable");
                return;
            }
        },
    };
    // Changes made between the first listing and the acknowledgement
    // would otherwise be missed: list once more.
    if changes.send(()).is_err() {
        return;
    }
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => {
                // Ends the server's listen handler, so it can exit promptly
                // once its stdin closes.
                let _ = subscription.cancel().await;
                return;
            }
            next = subscription.next() => next,
        };
        match next {
            Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                if changes.send(()).is_err() {
                    return;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
}
