//! The call path: [`Manager::call`] checks the [`Permit`] against the call,
//! connects (or reconnects, within the backoff) and sends `tools/call`
//! with the server's timeout and the caller's cancellation.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use warden_policy::Permit;

use super::call_error::map_service_error;
use super::slot::{Connection, Slot};
use super::{Admission, CallError, CallToolResult, Manager};

impl Manager {
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
    /// (`slot::backoff`); inside that window it fails fast with
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
    async fn call_unchecked(
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
}
