//! Resource subscriptions on protocol 2026-07-28, where
//! `resources/subscribe` is gone: a `subscriptions/listen` stream per
//! subscribed URI, held open until `resources/unsubscribe` or the end of
//! the connection. Its `notifications/resources/updated` arrive on the
//! transport like any notification, so [`super::notify::Tap`] routes them;
//! the stream here is only drained and closed.

use rmcp::model::{EmptyResult, ProtocolVersion, ServerResult, SubscriptionFilter};
use tokio_util::sync::CancellationToken;

use super::call_error::map_service_error;
use super::slot::Connection;
use super::{CallError, Manager};

/// Whether `conn` speaks 2026-07-28 or later.
pub(super) fn modern(conn: &Connection) -> bool {
    conn.peer
        .peer_info()
        .is_some_and(|i| i.protocol_version >= ProtocolVersion::V_2026_07_28)
}

impl Manager {
    /// `resources/subscribe` on a 2026-07-28 server: `Ok(None)` when the
    /// server is older (the caller sends `resources/subscribe`).
    pub(super) async fn listen_resource(
        &self,
        server: &str,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<ServerResult>, CallError> {
        let Some(slot) = self.slot(server) else {
            return Ok(None);
        };
        let conn = tokio::select! {
            conn = self.ensure_connected(&slot) => conn?,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        if !modern(&conn) {
            return Ok(None);
        }
        let filter = SubscriptionFilter::builder()
            .resource_subscription(uri)
            .build();
        let listened = tokio::select! {
            listened = tokio::time::timeout(slot.config.timeout, conn.peer.listen(filter)) => listened,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let mut subscription = match listened {
            Err(_) => return Err(CallError::Timeout(slot.config.timeout)),
            Ok(Err(error)) => {
                return Err(map_service_error(&self.shared, &slot, &conn, error).await);
            }
            Ok(Ok(subscription)) => subscription,
        };
        let stop = conn.stop_requested.child_token();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stopped.cancelled() => {
                        let _ = subscription.cancel().await;
                        return;
                    }
                    next = subscription.next() => match next {
                        Ok(Some(_)) => {}
                        Ok(None) | Err(_) => return,
                    },
                }
            }
        });
        let old = conn
            .resource_listens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uri.to_string(), (stop, task));
        if let Some((old, _)) = old {
            old.cancel();
        }
        Ok(Some(ServerResult::EmptyResult(EmptyResult {})))
    }

    /// `resources/unsubscribe` on a 2026-07-28 server: closes the stream
    /// (`Ok(None)` when the server is older).
    pub(super) fn unlisten_resource(&self, server: &str, uri: &str) -> Option<ServerResult> {
        let slot = self.slot(server)?;
        let conn = slot.lock().conn.clone()?;
        if !modern(&conn) {
            return None;
        }
        let listen = conn
            .resource_listens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(uri);
        if let Some((stop, _)) = listen {
            stop.cancel();
        }
        Some(ServerResult::EmptyResult(EmptyResult {}))
    }
}
