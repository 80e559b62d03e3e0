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
//! Map: `manager` (the [`Manager`]: admission, connecting, stopping),
//! `call` (the call path, which needs a `Permit`), `slot` (one
//! server's state and its live connection), `tasks` (the monitor and the
//! re-lister of a connection), `connect` (establishing a session, listing
//! tools), `stdio`/`sse` (transports; `wire`: the line transport under
//! every stdio connection and the stdio gateway), `call_error` (rmcp errors →
//! [`CallError`]), `probe` (protocol checks).
//!
//! Invariants:
//! - every stdio server is created by [`warden_sandbox::prepare`] and its
//!   process group lives exactly as long as its connection;
//! - every request carries a timeout (the server's `timeout`): initialize,
//!   each `tools/list` page, each `tools/call`;
//! - a tool list is published whole or not at all.

mod call;
mod call_error;
mod client;
mod connect;
mod listen;
mod manager;
mod notify;
pub mod oauth;
mod probe;
mod server_requests;
mod slot;
mod sse;
mod stdio;
mod tasks;
mod template_fill;
pub(crate) mod wire;

use std::time::Duration;

use serde::Serialize;
use warden_core::TransportKind;
use warden_sandbox::SandboxSummary;

pub use call::{Forwarded, Mediated, SendOptions, completion_arguments, keep_decided_context};
pub use call_error::CallError;
pub use connect::ensure_crypto_provider;
pub use manager::Manager;
pub use notify::{ProgressSink, Upstream};
pub use rmcp::model::{CallToolResult, Tool};
pub use server_requests::{Attribution, Downstream, ServerRequests, error_data};
pub use stdio::{ExitInfo, MAX_LINE};

/// At most this many `tools/list` pages are read from one server.
pub const MAX_TOOL_PAGES: usize = 100;
/// At most this many tools are accepted from one server.
pub const MAX_TOOLS: usize = 1000;
/// First reconnect delay after a failure; doubles per consecutive failure.
pub const BACKOFF_START: Duration = Duration::from_millis(500);
/// Longest reconnect delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A connection that lived this long before dying starts its server's
/// backoff afresh: a server that dies once a day is back in 0.5 s, one
/// that dies as it starts is tried every 30 s.
pub const LONG_LIVED: Duration = Duration::from_secs(60);

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

impl ServerState {
    /// The state as `mcp status` names it (`pending_approval`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::Error => "error",
            ServerState::Disabled => "disabled",
            ServerState::Blocked => "blocked",
            ServerState::PendingApproval => "pending_approval",
        }
    }
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
    /// The server's last connection attempt was refused with an OAuth
    /// challenge (so it uses OAuth even when no login is stored yet).
    #[serde(skip)]
    pub oauth_challenged: bool,
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
    /// What the server declared at the handshake (`None` before the first
    /// connection).
    #[serde(skip)]
    pub capabilities: Option<rmcp::model::ServerCapabilities>,
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
