//! Requests a server makes of warden (CONTRACT §8): `elicitation/create`,
//! `sampling/createMessage`, `roots/list`.
//!
//! warden answers `roots/list` itself (the workspace, nothing else), and
//! the host records each answer ([`ServerRequests::roots_answered`]). The
//! other two are decided by the host ([`ServerRequests`], installed with
//! [`super::Manager::set_server_requests`]), which needs to know on whose
//! behalf the server asks: the party that made the request the server is
//! working on ([`Downstream`], e.g. the gateway client whose `tools/call`
//! is in flight). On stdio nothing on the wire says which request a server
//! request belongs to, so attribution is exact only while exactly one
//! warden request is in flight on that connection ([`InFlight`]);
//! otherwise it is [`Attribution::Ambiguous`] and refused, never guessed.

// Sampling and roots are deprecated for 2026-07-28 (SEP-2577) but are how
// the session protocol (2025-11-25) works.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ListRootsResult,
};
use tokio_util::sync::CancellationToken;
use warden_policy::{AskAnswer, AskPrompt};

/// Who a server's request can be passed to: the party that made the
/// request the server is serving (a gateway client).
pub trait Downstream: Send + Sync {
    /// It declared the elicitation capability (form mode).
    fn can_elicit(&self) -> bool;
    /// It declared URL-mode elicitation.
    fn can_elicit_url(&self) -> bool {
        false
    }
    /// It declared the sampling capability.
    fn can_sample(&self) -> bool;
    /// Puts an `ask` about a server's own request (sampling) to the person
    /// behind this party; `None` when it is not a person's client or
    /// cannot be asked (CONTRACT §5: the program that made the call never
    /// approves by default).
    fn approve<'a>(&'a self, _prompt: &'a AskPrompt) -> Option<BoxFuture<'a, AskAnswer>> {
        None
    }
    /// Passes the elicitation on unchanged; its answer comes back unchanged.
    fn elicit(&self, params: ElicitRequestParams)
    -> BoxFuture<'_, Result<ElicitResult, ErrorData>>;
    /// Passes the sampling request on unchanged.
    fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, ErrorData>>;
}

/// The warden request a server's request is attributed to.
#[derive(Clone)]
pub enum Attribution {
    /// Exactly one warden request is in flight: this one, with the party
    /// that made it when there is one to pass server requests to.
    Exact(Option<Arc<dyn Downstream>>),
    /// No warden request is in flight (the server asks on its own).
    Idle,
    /// More than one is in flight: which one is unknowable.
    Ambiguous(usize),
}

/// Decides the server requests that need a decision (installed by the host).
pub trait ServerRequests: Send + Sync {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        params: ElicitRequestParams,
        from: Attribution,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ElicitResult, ErrorData>>;

    fn sample<'a>(
        &'a self,
        server: &'a str,
        params: CreateMessageRequestParams,
        from: Attribution,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<CreateMessageResult, ErrorData>>;

    /// Records warden's own answer to a server's `roots/list` before it
    /// is given (the workspace's path leaves warden): `Err` when it could
    /// not be recorded and the session fails closed, so no answer is
    /// given. Not decided: the answer is warden's, the workspace only.
    fn roots_answered(&self, _server: &str, _answer: &ListRootsResult) -> Result<(), String> {
        Ok(())
    }
}

/// The warden requests in flight on one connection.
#[derive(Default)]
pub(crate) struct InFlight {
    next: AtomicU64,
    requests: Mutex<BTreeMap<u64, Option<Arc<dyn Downstream>>>>,
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Option<Arc<dyn Downstream>>>> {
        self.requests.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one request in flight until the guard is dropped.
    pub(crate) fn begin(
        self: &Arc<Self>,
        downstream: Option<Arc<dyn Downstream>>,
    ) -> InFlightGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, downstream);
        InFlightGuard {
            in_flight: Arc::clone(self),
            id,
        }
    }

    pub(crate) fn attribute(&self) -> Attribution {
        let requests = self.lock();
        match requests.len() {
            0 => Attribution::Idle,
            1 => Attribution::Exact(requests.values().next().cloned().flatten()),
            n => Attribution::Ambiguous(n),
        }
    }
}

/// Ends one request's time in flight when dropped.
pub(crate) struct InFlightGuard {
    in_flight: Arc<InFlight>,
    id: u64,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.in_flight.lock().remove(&self.id);
    }
}

/// A JSON-RPC error from a failed request to a downstream party: its own
/// error unchanged, anything else as an internal error.
pub fn error_data(error: rmcp::ServiceError) -> ErrorData {
    match error {
        rmcp::ServiceError::McpError(data) => data,
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribution_is_exact_only_with_one_request_in_flight() {
        let in_flight = Arc::new(InFlight::default());
        assert!(matches!(in_flight.attribute(), Attribution::Idle));
        let one = in_flight.begin(None);
        assert!(matches!(in_flight.attribute(), Attribution::Exact(None)));
        let two = in_flight.begin(None);
        assert!(matches!(in_flight.attribute(), Attribution::Ambiguous(2)));
        drop(one);
        assert!(matches!(in_flight.attribute(), Attribution::Exact(None)));
        drop(two);
        assert!(matches!(in_flight.attribute(), Attribution::Idle));
    }
}
