//! Connections to MCP servers through rmcp: stdio (launched via
//! [`crate::sandbox`]), streamable HTTP and legacy SSE. Owns connecting,
//! listing, list-changed, timeouts, cancellation and reconnects. Sends a
//! call only with a [`crate::policy::Permit`].

use std::time::Duration;

use serde::Serialize;

use crate::sandbox::SandboxSummary;

pub use rmcp::model::{CallToolResult, Tool};

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
    pub transport: String,
    /// Negotiated protocol version.
    pub protocol: Option<String>,
    pub error: Option<String>,
    pub sandbox: Option<SandboxSummary>,
    /// Tools as the server listed them (empty unless connected).
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
}
