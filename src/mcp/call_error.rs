//! Why a call did not produce a `CallToolResult`, and how rmcp's errors
//! map onto that.

use std::time::Duration;

use rmcp::ServiceError;

use super::connect;
use super::slot::{Connection, Shared, Slot};

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

/// Turns an rmcp error for a call into a [`CallError`].
pub(super) async fn map_service_error(
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
                    // A 401/403 from a server behind OAuth: say what to do.
                    let reason = match connect::auth_note(&slot.config, &conn.challenges) {
                        Some(note) => note,
                        None => connect::redact_url(
                            &format!("sending the request failed: {detail}"),
                            &slot.config,
                        ),
                    };
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
