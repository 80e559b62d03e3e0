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
//! request belongs to, so attribution is exact only when the server
//! request is read while exactly one warden request is in flight on that
//! connection ([`InFlight`], kept in wire order); otherwise it is
//! [`Attribution::Idle`] or [`Attribution::Ambiguous`] and refused, never
//! guessed.

// Sampling and roots are deprecated for 2026-07-28 (SEP-2577) but are how
// the session protocol (2025-11-25) works.
#![allow(deprecated)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ListRootsResult, RequestId,
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
    /// More than one is in flight: which one is unknowable (0: the request
    /// was not seen as it was read, so when it came is unknown).
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

/// The warden requests in flight on one connection, as the server's
/// messages are read in wire order ([`super::notify::Tap`]): a request
/// stops being in flight when its answer is read, not when the task that
/// sent it next runs, and a server request is attributed as it is read,
/// not when its handler runs. Otherwise a server that writes its answer and
/// then a request of its own in one go would have that request attributed
/// to a call that has already ended.
#[derive(Default)]
pub(crate) struct InFlight {
    next: AtomicU64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    requests: BTreeMap<u64, Entry>,
    /// Answers read before the id of their request was known here (the
    /// request went out on rmcp's task before the sender noted its id).
    answered_early: VecDeque<RequestId>,
    /// Each server request's attribution as of the moment it was read,
    /// until its handler takes it.
    attributed: HashMap<RequestId, Attribution>,
    /// Ids in `attributed`, oldest first (it is bounded).
    attributed_order: VecDeque<RequestId>,
}

struct Entry {
    downstream: Option<Arc<dyn Downstream>>,
    /// The JSON-RPC id it was sent with, once known.
    id: Option<RequestId>,
}

/// How many early answers and unclaimed attributions are kept. A handful
/// is ever needed; the bound keeps a server that floods either from
/// growing them.
const KEPT: usize = 256;

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one request in flight until its answer is read or the guard
    /// is dropped.
    pub(crate) fn begin(
        self: &Arc<Self>,
        downstream: Option<Arc<dyn Downstream>>,
    ) -> InFlightGuard {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().requests.insert(
            key,
            Entry {
                downstream,
                id: None,
            },
        );
        InFlightGuard {
            in_flight: Arc::clone(self),
            key,
        }
    }

    /// The attribution of a server request read now.
    fn current(state: &State) -> Attribution {
        match state.requests.len() {
            0 => Attribution::Idle,
            1 => Attribution::Exact(
                state
                    .requests
                    .values()
                    .next()
                    .and_then(|e| e.downstream.clone()),
            ),
            n => Attribution::Ambiguous(n),
        }
    }

    /// The server's answer to request `id` was read: it is no longer in
    /// flight.
    pub(crate) fn answered(&self, id: &RequestId) {
        let mut state = self.lock();
        let found = state
            .requests
            .iter()
            .find(|(_, e)| e.id.as_ref() == Some(id))
            .map(|(key, _)| *key);
        match found {
            Some(key) => {
                state.requests.remove(&key);
            }
            None => {
                if state.answered_early.len() == KEPT {
                    state.answered_early.pop_front();
                }
                state.answered_early.push_back(id.clone());
            }
        }
    }

    /// A server request with JSON-RPC `id` was read: it is attributed now.
    pub(crate) fn server_request(&self, id: RequestId) {
        let mut state = self.lock();
        let attribution = Self::current(&state);
        if state.attributed.insert(id.clone(), attribution).is_none() {
            state.attributed_order.push_back(id);
        }
        while state.attributed_order.len() > KEPT {
            if let Some(old) = state.attributed_order.pop_front() {
                state.attributed.remove(&old);
            }
        }
    }

    /// The attribution of server request `id`, taken when it was read. A
    /// request never seen being read (or read twice under one id and
    /// already taken) is refused as [`Attribution::Ambiguous`], never
    /// attributed now, after the fact.
    pub(crate) fn attribute(&self, id: &RequestId) -> Attribution {
        let mut state = self.lock();
        match state.attributed.remove(id) {
            Some(attribution) => {
                state.attributed_order.retain(|old| old != id);
                attribution
            }
            None => Attribution::Ambiguous(0),
        }
    }
}

/// Ends one request's time in flight when dropped.
pub(crate) struct InFlightGuard {
    in_flight: Arc<InFlight>,
    key: u64,
}

impl InFlightGuard {
    /// Notes the JSON-RPC id the request went out with, so that reading
    /// its answer ends its time in flight.
    pub(crate) fn sent(&self, id: &RequestId) {
        let mut state = self.in_flight.lock();
        if let Some(at) = state.answered_early.iter().position(|early| early == id) {
            state.answered_early.remove(at);
            state.requests.remove(&self.key);
        } else if let Some(entry) = state.requests.get_mut(&self.key) {
            entry.id = Some(id.clone());
        }
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.in_flight.lock().requests.remove(&self.key);
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

    /// Reads server request `id` now and takes its attribution.
    fn read_request(in_flight: &InFlight, id: i64) -> Attribution {
        in_flight.server_request(RequestId::Number(id));
        in_flight.attribute(&RequestId::Number(id))
    }

    #[test]
    fn attribution_is_exact_only_with_one_request_in_flight() {
        let in_flight = Arc::new(InFlight::default());
        assert!(matches!(read_request(&in_flight, 1), Attribution::Idle));
        let one = in_flight.begin(None);
        assert!(matches!(
            read_request(&in_flight, 2),
            Attribution::Exact(None)
        ));
        let two = in_flight.begin(None);
        assert!(matches!(
            read_request(&in_flight, 3),
            Attribution::Ambiguous(2)
        ));
        drop(one);
        assert!(matches!(
            read_request(&in_flight, 4),
            Attribution::Exact(None)
        ));
        drop(two);
        assert!(matches!(read_request(&in_flight, 5), Attribution::Idle));
    }

    /// A server that writes its answer and then a request of its own: the
    /// request is read after the answer, so the call is over (even though
    /// the task that sent it has not run since), and the request is
    /// attributed as of when it was read, not when its handler runs.
    #[test]
    fn a_request_read_after_the_answer_is_not_the_calls() {
        let in_flight = Arc::new(InFlight::default());
        let call = in_flight.begin(None);
        call.sent(&RequestId::Number(7));
        in_flight.answered(&RequestId::Number(7));
        in_flight.server_request(RequestId::Number(100));
        assert!(matches!(
            in_flight.attribute(&RequestId::Number(100)),
            Attribution::Idle
        ));
        drop(call);

        // Read while a call was alone in flight, handled after a second
        // began: still the first call's.
        let first = in_flight.begin(None);
        in_flight.server_request(RequestId::Number(101));
        let second = in_flight.begin(None);
        assert!(matches!(
            in_flight.attribute(&RequestId::Number(101)),
            Attribution::Exact(None)
        ));
        // Never seen being read: not attributed after the fact.
        assert!(matches!(
            in_flight.attribute(&RequestId::Number(102)),
            Attribution::Ambiguous(0)
        ));
        drop((first, second));
    }

    /// An answer read before the sender noted its request's id still ends
    /// the request's time in flight.
    #[test]
    fn an_answer_read_before_the_id_was_noted_ends_the_request() {
        let in_flight = Arc::new(InFlight::default());
        let call = in_flight.begin(None);
        in_flight.answered(&RequestId::Number(9));
        call.sent(&RequestId::Number(9));
        assert!(matches!(read_request(&in_flight, 1), Attribution::Idle));
    }

    /// A flood of server requests never handled, or of answers to nothing,
    /// keeps at most `KEPT` of each.
    #[test]
    fn what_is_kept_for_later_is_bounded() {
        let in_flight = InFlight::default();
        for id in 0..(KEPT as i64 * 4) {
            in_flight.server_request(RequestId::Number(id));
            in_flight.answered(&RequestId::Number(id));
        }
        let state = in_flight.lock();
        assert_eq!(state.attributed.len(), KEPT);
        assert_eq!(state.attributed_order.len(), KEPT);
        assert_eq!(state.answered_early.len(), KEPT);
    }
}
