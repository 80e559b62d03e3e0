//! Connections to MCP servers through rmcp: stdio (launched via
//! `warden_sandbox`), streamable HTTP and legacy SSE. Owns connecting,
//! listing, list-changed, timeouts, cancellation and reconnects. Sends a
//! call only with a [`warden_policy::Permit`].
//!
//! One [`Manager`] holds every configured server (and those added or
//! removed at run time: [`Manager::add`], [`Manager::remove`],
//! [`Manager::readmit`]). Each server has a slot
//! with its status and, while connected, one connection: an rmcp client
//! service plus two tasks, a monitor (notices the connection ending and
//! records why) and a re-lister (re-reads `tools/list` after
//! `notifications/tools/list_changed`). Nothing here holds a lock across an
//! `.await` except the per-server connect lock, which serialises connects.
//!
//! Invariants:
//! - every stdio server is created by [`warden_sandbox::prepare`] and its
//!   process group lives exactly as long as its connection;
//! - every request carries a timeout (the server's `timeout`): initialize,
//!   each `tools/list` page, each `tools/call`;
//! - a tool list is published whole or not at all.

mod connect;
pub mod probe;
pub mod sse;
mod stdio;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleClient, ServiceError};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use warden_core::TransportKind;
use warden_policy::Permit;
use warden_sandbox::{LaunchContext, SandboxSummary};

pub use connect::{LEGACY_PROTOCOL, PREFERRED_PROTOCOL};
pub use rmcp::model::{CallToolResult, Tool};
pub use stdio::ExitInfo;

/// At most this many `tools/list` pages are read from one server.
pub const MAX_TOOL_PAGES: usize = 100;
/// At most this many tools are accepted from one server.
pub const MAX_TOOLS: usize = 1000;
/// First reconnect delay after a failure; doubles per consecutive failure.
pub const BACKOFF_START: Duration = Duration::from_millis(500);
/// Longest reconnect delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A server's connection state as shown by `warden mcp status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Connecting,
    Connected,
    Error,
    Disabled,
    Blocked,
    PendingApproval,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    pub transport: TransportKind,
    /// Negotiated protocol version.
    pub protocol: Option<String>,
    pub error: Option<String>,
    pub sandbox: Option<SandboxSummary>,
    /// The server did not start because this kernel lacks a protection its
    /// sandbox requires (exit code 4 for `call`/`run`).
    #[serde(skip)]
    pub sandbox_unavailable: bool,
    /// The server process (the sandbox helper for sandboxed servers) while
    /// connected over stdio.
    #[serde(skip)]
    pub pid: Option<u32>,
    /// Tools as the server last listed them. Kept while the server is away
    /// (state `error` after a disconnect or a failed reconnect), so that a
    /// call can still reach it and reconnect; empty when the server never
    /// connected or its latest list was rejected (nothing half-registered).
    #[serde(skip)]
    pub tools: Vec<Tool>,
}

/// Why a call did not produce a `CallToolResult`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("server `{server}` is not connected: {reason}")]
    NotConnected { server: String, reason: String },
    #[error("JSON-RPC error {code}: {message}")]
    Rpc { code: i32, message: String },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cancelled")]
    Cancelled,
    #[error("server `{server}` went away during the call: {reason}")]
    Disconnected { server: String, reason: String },
    #[error("the permit was issued for another call")]
    PermitMismatch,
    #[error("server `{server}` broke the protocol: {message}")]
    Protocol { server: String, message: String },
}

/// Whether a configured server may be started (decided by the host from
/// trust, `disabled` and approvals). Servers that are not started still
/// appear in [`Manager::statuses`] with the matching state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Start,
    Disabled,
    Blocked,
    PendingApproval,
}

impl Admission {
    fn state(self) -> ServerState {
        match self {
            Admission::Start => ServerState::Connecting,
            Admission::Disabled => ServerState::Disabled,
            Admission::Blocked => ServerState::Blocked,
            Admission::PendingApproval => ServerState::PendingApproval,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Admission::Start => "it is admitted",
            Admission::Disabled => "it is disabled in the configuration",
            Admission::Blocked => "it is blocked (trust: blocked)",
            Admission::PendingApproval => {
                "it is a project server awaiting approval (`warden mcp approve NAME`)"
            }
        }
    }
}

/// Server process lifecycle, for the audit log (`server_start` / `server_exit`).
/// Remote servers have no pid.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LifecycleEvent {
    Started {
        server: String,
        pid: Option<u32>,
        transport: TransportKind,
        sandbox: Option<Box<SandboxSummary>>,
    },
    Exited {
        server: String,
        pid: Option<u32>,
        /// Exit code, when the process exited normally.
        code: Option<i32>,
        /// Signal number, when a signal ended it.
        signal: Option<i32>,
        reason: String,
    },
}

/// State shared with the per-connection tasks.
struct Shared {
    changed: watch::Sender<u64>,
    events: mpsc::UnboundedSender<LifecycleEvent>,
    shutting_down: AtomicBool,
    /// Cancelled by `shutdown`: abandons connects still in flight.
    shutdown: CancellationToken,
}

impl Shared {
    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }
}

struct Slot {
    config: ServerConfig,
    admission: Admission,
    inner: Mutex<SlotInner>,
    /// Held while connecting, so one server never has two connects at once.
    connecting: tokio::sync::Mutex<()>,
}

struct SlotInner {
    state: ServerState,
    protocol: Option<String>,
    error: Option<String>,
    sandbox: Option<SandboxSummary>,
    sandbox_unavailable: bool,
    tools: Vec<Tool>,
    conn: Option<Arc<Connection>>,
    generation: u64,
    /// Consecutive failures (failed connects, deaths); reset by a good call.
    failures: u32,
    retry_at: Option<Instant>,
}

impl Slot {
    fn new(config: ServerConfig, admission: Admission) -> Arc<Slot> {
        Arc::new(Slot {
            config,
            admission,
            inner: Mutex::new(SlotInner {
                state: admission.state(),
                protocol: None,
                error: None,
                sandbox: None,
                sandbox_unavailable: false,
                tools: Vec::new(),
                conn: None,
                generation: 0,
                failures: 0,
                retry_at: None,
            }),
            connecting: tokio::sync::Mutex::new(()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, SlotInner> {
        // Every critical section leaves the slot consistent, so a poisoned
        // lock (a panic elsewhere) still holds usable state.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn name(&self) -> &str {
        &self.config.name
    }

    /// Records a failure and when the next attempt may happen.
    fn fail(inner: &mut SlotInner, error: String) {
        inner.state = ServerState::Error;
        inner.failures = inner.failures.saturating_add(1);
        let delay = backoff(inner.failures);
        inner.retry_at = Some(Instant::now() + delay);
        inner.error = Some(error);
    }

    /// The connection of `generation` ended on its own.
    fn connection_lost(&self, generation: u64, reason: &str) -> bool {
        let mut inner = self.lock();
        if inner
            .conn
            .as_ref()
            .is_none_or(|c| c.generation != generation)
        {
            return false;
        }
        inner.conn = None;
        Slot::fail(
            &mut inner,
            format!("disconnected: {reason}; reconnects on the next call"),
        );
        true
    }
}

/// The delay before reconnect attempt number `failures` (1-based).
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    BACKOFF_START.saturating_mul(1u32 << exp).min(BACKOFF_MAX)
}

/// One live client session with a server.
struct Connection {
    generation: u64,
    peer: Peer<RoleClient>,
    /// Cancels the rmcp service; its loop then closes the transport. rmcp
    /// also cancels it when the service ends on its own.
    ct: CancellationToken,
    /// Cancelled only when warden asks the connection to stop.
    stop_requested: CancellationToken,
    /// Set by the monitor once the connection has ended, with the reason.
    dead: watch::Receiver<Option<String>>,
    monitor: Mutex<Option<JoinHandle<()>>>,
    listener: Mutex<Option<JoinHandle<()>>>,
    pid: Option<u32>,
    exit: Option<watch::Receiver<Option<ExitInfo>>>,
    stop_note: Option<stdio::SharedStopNote>,
}

impl Connection {
    fn alive(&self) -> bool {
        self.dead.borrow().is_none() && !self.ct.is_cancelled()
    }

    /// Waits up to `wait` for the monitor to say why the connection ended.
    async fn death_reason(&self, wait: Duration) -> Option<String> {
        let mut dead = self.dead.clone();
        tokio::time::timeout(wait, dead.wait_for(Option::is_some))
            .await
            .ok()?
            .ok()?
            .clone()
    }

    /// Graceful stop: cancel the service (which closes stdin, waits,
    /// SIGTERMs and kills the group), then wait for the process to be reaped.
    async fn stop(&self, reason: &str) {
        if let Some(note) = &self.stop_note {
            stdio::note(note, |n| n.reason = Some(reason.to_string()));
        }
        self.stop_requested.cancel();
        let listener = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(listener) = listener {
            let _ = tokio::time::timeout(Duration::from_millis(500), listener).await;
        }
        self.ct.cancel();
        let monitor = self
            .monitor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(monitor) = monitor
            && tokio::time::timeout(Duration::from_secs(15), monitor)
                .await
                .is_err()
            && let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok())
        {
            tracing::warn!(
                pid,
                "server did not stop in time; killing its process group"
            );
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if let Some(exit) = &self.exit {
            let mut exit = exit.clone();
            let _ =
                tokio::time::timeout(Duration::from_secs(3), exit.wait_for(Option::is_some)).await;
        }
    }
}

/// All configured servers and their connections. `Send + Sync`; share it
/// behind the `Arc` that [`Manager::new`] returns.
pub struct Manager {
    launch: LaunchContext,
    /// Configured servers, plus those added at run time ([`Manager::add`]).
    /// Never locked across an `.await`: readers clone the `Arc`s out.
    slots: Mutex<Vec<Arc<Slot>>>,
    shared: Arc<Shared>,
    events_rx: Mutex<Option<mpsc::UnboundedReceiver<LifecycleEvent>>>,
}

impl Manager {
    pub fn new(servers: Vec<(ServerConfig, Admission)>, launch: LaunchContext) -> Arc<Manager> {
        let (changed, _) = watch::channel(0);
        let (events, events_rx) = mpsc::unbounded_channel();
        let slots = servers
            .into_iter()
            .map(|(config, admission)| Slot::new(config, admission))
            .collect();
        Arc::new(Manager {
            launch,
            slots: Mutex::new(slots),
            shared: Arc::new(Shared {
                changed,
                events,
                shutting_down: AtomicBool::new(false),
                shutdown: CancellationToken::new(),
            }),
            events_rx: Mutex::new(Some(events_rx)),
        })
    }

    fn slots(&self) -> Vec<Arc<Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn slot(&self, name: &str) -> Option<Arc<Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|s| s.name() == name)
            .cloned()
    }

    /// Adds a server at run time (the repl's `/mcp add`), with its
    /// admission; it is not connected yet (see [`Manager::reconnect`]).
    /// Fails when the name is taken or the manager is shutting down.
    pub fn add(&self, config: ServerConfig, admission: Admission) -> Result<(), String> {
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            return Err("warden is shutting down".into());
        }
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            if slots.iter().any(|s| s.name() == config.name) {
                return Err(format!("a server named `{}` already exists", config.name));
            }
            slots.push(Slot::new(config, admission));
        }
        self.shared.bump();
        Ok(())
    }

    /// Replaces a server that is not connected (e.g. pending approval) by
    /// the same configuration under another admission, keeping its place.
    pub fn readmit(&self, name: &str, admission: Admission) -> Result<(), String> {
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let Some(index) = slots.iter().position(|s| s.name() == name) else {
                return Err(format!("no server named `{name}`"));
            };
            if slots[index].lock().conn.is_some() {
                return Err(format!("server `{name}` is connected"));
            }
            slots[index] = Slot::new(slots[index].config.clone(), admission);
        }
        self.shared.bump();
        Ok(())
    }

    /// Stops a server (gracefully, as at shutdown) and forgets it for the
    /// rest of the session. Returns whether it existed.
    pub async fn remove(&self, name: &str) -> bool {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let Some(index) = slots.iter().position(|s| s.name() == name) else {
                return false;
            };
            slots.remove(index)
        };
        let conn = {
            let _connecting = slot.connecting.lock().await;
            slot.lock().conn.take()
        };
        if let Some(conn) = conn {
            conn.stop("removed by the user").await;
        }
        self.shared.bump();
        true
    }

    /// Connects every admitted server concurrently and returns once every
    /// attempt has settled. Each attempt is bounded by its server's timeout
    /// (per step); one that fails or hangs does not hold up the others.
    pub async fn connect_all(&self) {
        let slots = self.slots();
        let attempts = slots
            .iter()
            .filter(|slot| slot.admission == Admission::Start)
            .map(|slot| async move {
                let _connecting = slot.connecting.lock().await;
                let connected = slot.lock().conn.as_ref().is_some_and(|c| c.alive());
                if !connected {
                    let _ = self.connect_slot(slot).await;
                }
            });
        futures::future::join_all(attempts).await;
    }

    /// A snapshot of every configured server, in configuration order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.slots()
            .iter()
            .map(|slot| {
                let inner = slot.lock();
                ServerStatus {
                    name: slot.config.name.clone(),
                    state: inner.state,
                    transport: slot.config.transport.kind(),
                    protocol: inner.protocol.clone(),
                    error: inner.error.clone(),
                    sandbox: inner.sandbox.clone(),
                    sandbox_unavailable: inner.sandbox_unavailable,
                    pid: inner.conn.as_ref().and_then(|c| c.pid),
                    tools: inner.tools.clone(),
                }
            })
            .collect()
    }

    /// A counter bumped whenever any server's state or tools change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changed.subscribe()
    }

    /// The lifecycle events (server started / exited). The first call gets
    /// the stream; later calls get a receiver that yields nothing.
    pub fn take_lifecycle_events(&self) -> mpsc::UnboundedReceiver<LifecycleEvent> {
        self.events_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| mpsc::unbounded_channel().1)
    }

    /// Sends one `tools/call` that the pipeline allowed.
    ///
    /// The permit must match the call: its server and (remote) tool name are
    /// used as given, and its `args_sha256` must equal
    /// [`warden_core::digest::sha256_json`] of the arguments as sent, where
    /// `Some(map)` is hashed as the JSON object and `None` as JSON `null`.
    ///
    /// Outcomes: a result (also one with `isError: true`) is `Ok`; a JSON-RPC
    /// error is [`CallError::Rpc`]; no answer within the server's timeout is
    /// [`CallError::Timeout`] (rmcp sends `notifications/cancelled`);
    /// `cancel` firing is [`CallError::Cancelled`] (also notified); the
    /// server dying mid-call is [`CallError::Disconnected`]. The next call
    /// after a death reconnects, no sooner than the backoff allows
    /// ([`backoff`]); inside that window it fails fast with
    /// [`CallError::NotConnected`] saying when it retries.
    pub async fn call(
        &self,
        permit: Permit,
        arguments: Option<Map<String, Value>>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallError> {
        let sent = arguments.clone().map_or(Value::Null, Value::Object);
        if warden_core::digest::sha256_json(&sent) != permit.args_sha256() {
            return Err(CallError::PermitMismatch);
        }
        self.call_unchecked(permit.server(), permit.tool(), arguments, cancel)
            .await
    }

    /// The call path without the permit check; only [`Manager::call`] uses it.
    pub(crate) async fn call_unchecked(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallError> {
        let slot = self.slot(server).ok_or_else(|| CallError::NotConnected {
            server: server.to_string(),
            reason: "no server of that name is configured".into(),
        })?;
        let conn = tokio::select! {
            conn = self.ensure_connected(&slot) => conn?,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let timeout = slot.config.timeout;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match conn
            .peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(map_service_error(&self.shared, &slot, &conn, error).await),
        };
        let id = handle.id.clone();
        let peer = handle.peer.clone();
        let response = tokio::select! {
            response = handle.await_response() => response,
            () = cancel.cancelled() => {
                let note = CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by the warden user".to_string()),
                );
                if let Err(error) = peer.notify_cancelled(note).await {
                    tracing::debug!(server, %error, "could not send notifications/cancelled");
                }
                return Err(CallError::Cancelled);
            }
        };
        match response {
            Ok(ServerResult::CallToolResult(result)) => {
                slot.lock().failures = 0;
                Ok(result)
            }
            Ok(_) => Err(CallError::Protocol {
                server: server.to_string(),
                message: "the answer to tools/call is not a tool result".into(),
            }),
            Err(error) => Err(map_service_error(&self.shared, &slot, &conn, error).await),
        }
    }

    /// A live connection, reconnecting when allowed.
    async fn ensure_connected(&self, slot: &Arc<Slot>) -> Result<Arc<Connection>, CallError> {
        if let Some(conn) = self.usable(slot)? {
            return Ok(conn);
        }
        let _connecting = slot.connecting.lock().await;
        if let Some(conn) = self.usable(slot)? {
            return Ok(conn);
        }
        self.connect_slot(slot)
            .await
            .map_err(|reason| CallError::NotConnected {
                server: slot.name().to_string(),
                reason,
            })
    }

    /// `Ok(Some)`: connected; `Ok(None)`: a connect may be tried now;
    /// `Err`: not now (not admitted, shutting down, inside the backoff).
    fn usable(&self, slot: &Slot) -> Result<Option<Arc<Connection>>, CallError> {
        let not_connected = |reason: String| CallError::NotConnected {
            server: slot.name().to_string(),
            reason,
        };
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            return Err(not_connected("warden is shutting down".into()));
        }
        if slot.admission != Admission::Start {
            return Err(not_connected(slot.admission.describe().into()));
        }
        let inner = slot.lock();
        if let Some(conn) = &inner.conn
            && conn.alive()
        {
            return Ok(Some(conn.clone()));
        }
        if let Some(at) = inner.retry_at {
            let now = Instant::now();
            if now < at {
                let last = inner.error.as_deref().unwrap_or("not connected");
                return Err(not_connected(format!(
                    "{last} (next connection attempt in {:.1} s)",
                    (at - now).as_secs_f64()
                )));
            }
        }
        Ok(None)
    }

    /// Drops the current connection (gracefully) and connects again, ignoring
    /// the backoff. The caller gets the connect error, if any.
    pub async fn reconnect(&self, name: &str) -> Result<(), CallError> {
        let slot = self.slot(name).ok_or_else(|| CallError::NotConnected {
            server: name.to_string(),
            reason: "no server of that name is configured".into(),
        })?;
        if slot.admission != Admission::Start {
            return Err(CallError::NotConnected {
                server: name.to_string(),
                reason: slot.admission.describe().into(),
            });
        }
        let _connecting = slot.connecting.lock().await;
        let old = {
            let mut inner = slot.lock();
            inner.failures = 0;
            inner.retry_at = None;
            inner.conn.take()
        };
        if let Some(old) = old {
            old.stop("reconnect requested").await;
        }
        self.connect_slot(&slot)
            .await
            .map(|_| ())
            .map_err(|reason| CallError::NotConnected {
                server: name.to_string(),
                reason,
            })
    }

    /// Stops every server gracefully (close stdin, wait, SIGTERM, kill the
    /// group) and waits until their processes are gone. Later calls fail.
    pub async fn shutdown(&self) {
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        self.shared.shutdown.cancel();
        // Connects in flight give up (dropping a half-made connection kills
        // its process group); wait for them, so none survives the shutdown.
        let conns: Vec<Arc<Connection>> = {
            let mut conns = Vec::new();
            for slot in &self.slots() {
                let _connecting = slot.connecting.lock().await;
                let mut inner = slot.lock();
                if let Some(conn) = inner.conn.take() {
                    conns.push(conn);
                }
                if inner.state == ServerState::Connected {
                    inner.state = ServerState::Error;
                    inner.error = Some("stopped: warden shut down".into());
                }
            }
            conns
        };
        futures::future::join_all(conns.iter().map(|c| c.stop("warden shut down"))).await;
        self.shared.bump();
    }

    /// Connects one slot; the caller holds `slot.connecting`.
    async fn connect_slot(&self, slot: &Arc<Slot>) -> Result<Arc<Connection>, String> {
        {
            let mut inner = slot.lock();
            inner.state = ServerState::Connecting;
        }
        self.shared.bump();
        let result = tokio::select! {
            result = connect::establish(&slot.config, &self.launch, &self.shared.events) => result,
            () = self.shared.shutdown.cancelled() => {
                Err(connect::Failure::new("warden shut down while connecting"))
            }
        };
        let established = match result {
            Ok(established) => established,
            Err(failure) => {
                tracing::warn!(server = slot.name(), error = %failure.message, "connecting failed");
                {
                    let mut inner = slot.lock();
                    inner.sandbox_unavailable = failure.sandbox_unavailable;
                    if failure.tools_rejected {
                        inner.tools.clear();
                    }
                    Slot::fail(&mut inner, failure.message.clone());
                }
                self.shared.bump();
                return Err(failure.message);
            }
        };
        let connect::Established {
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
        } = established;
        let (dead_tx, dead_rx) = watch::channel(None);
        let peer = running.peer().clone();
        let conn = {
            let mut inner = slot.lock();
            inner.generation += 1;
            let conn = Arc::new(Connection {
                generation: inner.generation,
                peer: peer.clone(),
                ct: ct.clone(),
                stop_requested: stop_requested.clone(),
                dead: dead_rx,
                monitor: Mutex::new(None),
                listener: Mutex::new(listener),
                pid,
                exit: exit.clone(),
                stop_note: stop_note.clone(),
            });
            inner.conn = Some(conn.clone());
            inner.state = ServerState::Connected;
            inner.protocol = Some(protocol.clone());
            inner.error = None;
            inner.sandbox = sandbox;
            inner.sandbox_unavailable = false;
            inner.tools = tools;
            inner.retry_at = None;
            conn
        };
        tracing::info!(server = slot.name(), %protocol, "connected");
        let monitor = tokio::spawn(monitor(
            slot.clone(),
            self.shared.clone(),
            conn.generation,
            running,
            stop_requested,
            dead_tx,
            exit,
            pid,
            transport,
        ));
        *conn.monitor.lock().unwrap_or_else(|p| p.into_inner()) = Some(monitor);
        tokio::spawn(relist(
            slot.clone(),
            self.shared.clone(),
            conn.generation,
            peer,
            list_changed,
        ));
        self.shared.bump();
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            conn.stop("warden shut down").await;
            return Err("warden is shutting down".into());
        }
        Ok(conn)
    }
}

/// Turns an rmcp error for a call into a [`CallError`].
async fn map_service_error(
    shared: &Shared,
    slot: &Slot,
    conn: &Connection,
    error: ServiceError,
) -> CallError {
    let server = slot.name().to_string();
    match error {
        ServiceError::McpError(data) => CallError::Rpc {
            code: data.code.0,
            message: data.message.into_owned(),
        },
        ServiceError::Timeout { timeout } => CallError::Timeout(timeout),
        ServiceError::Cancelled { .. } => CallError::Cancelled,
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            let reason = match conn.death_reason(Duration::from_secs(2)).await {
                Some(reason) => reason,
                None => {
                    // The session is still up but cannot carry requests
                    // (e.g. an HTTP server that went away): drop it, so
                    // the next call reconnects.
                    let detail = match &error {
                        ServiceError::TransportSend(e) => connect::error_chain(e.error.as_ref()),
                        other => other.to_string(),
                    };
                    let reason = connect::redact_url(
                        &format!("sending the request failed: {detail}"),
                        &slot.config,
                    );
                    if slot.connection_lost(conn.generation, &reason) {
                        shared.bump();
                    }
                    conn.stop_requested.cancel();
                    conn.ct.cancel();
                    reason
                }
            };
            CallError::Disconnected { server, reason }
        }
        other => CallError::Protocol {
            server,
            message: connect::redact_url(&other.to_string(), &slot.config),
        },
    }
}

/// Waits for a connection to end and records why.
#[allow(clippy::too_many_arguments)]
async fn monitor(
    slot: Arc<Slot>,
    shared: Arc<Shared>,
    generation: u64,
    running: connect::Running,
    stop_requested: CancellationToken,
    dead: watch::Sender<Option<String>>,
    exit: Option<watch::Receiver<Option<ExitInfo>>>,
    pid: Option<u32>,
    transport: TransportKind,
) {
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

/// Re-reads `tools/list` whenever the server says its tools changed.
async fn relist(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(2));
        assert_eq!(backoff(7), Duration::from_secs(30));
        assert_eq!(backoff(1000), Duration::from_secs(30));
    }
}
