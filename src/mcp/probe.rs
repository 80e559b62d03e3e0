//! Bounds rmcp's Auto negotiation for servers that ignore `server/discover`.
//!
//! rmcp's `ClientLifecycleMode::Auto` sends `server/discover` first and
//! falls back to `initialize` when the server answers with an error, or
//! after a fixed 10 s when it does not answer at all. A server that silently
//! drops unknown methods would therefore need a timeout over 10 s. This
//! wrapper gives the probe a budget (half the server's timeout, at most
//! 10 s): when it runs out, the transport hands rmcp a correlated
//! "method not found" error for the probe, which rmcp treats as a legacy
//! server and follows with `initialize` on the same connection. A late
//! answer to the abandoned probe is dropped, so it cannot be mistaken for
//! the `initialize` response.

use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::time::Instant;

/// Longest probe budget, matching rmcp's own Auto wait.
pub const MAX_PROBE: Duration = Duration::from_secs(10);

/// The probe budget for a server with request timeout `timeout`.
pub fn probe_budget(timeout: Duration) -> Duration {
    (timeout / 2).min(MAX_PROBE)
}

pub(crate) struct DiscoverBudget<T> {
    inner: T,
    budget: Duration,
    pending: Option<(RequestId, Instant)>,
    abandoned: Vec<RequestId>,
}

impl<T> DiscoverBudget<T> {
    pub(crate) fn new(inner: T, budget: Duration) -> Self {
        DiscoverBudget {
            inner,
            budget,
            pending: None,
            abandoned: Vec::new(),
        }
    }
}

fn response_id(message: &ServerJsonRpcMessage) -> Option<&RequestId> {
    match message {
        ServerJsonRpcMessage::Response(response) => Some(&response.id),
        ServerJsonRpcMessage::Error(error) => error.id.as_ref(),
        _ => None,
    }
}

impl<T> Transport<RoleClient> for DiscoverBudget<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
        {
            self.pending = Some((request.id.clone(), Instant::now() + self.budget));
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let message = match self.pending.clone() {
                Some((id, deadline)) => tokio::select! {
                    message = self.inner.receive() => message,
                    () = tokio::time::sleep_until(deadline) => {
                        self.pending = None;
                        self.abandoned.push(id.clone());
                        tracing::debug!("server/discover unanswered; falling back to initialize");
                        return Some(ServerJsonRpcMessage::error(
                            ErrorData::new(
                                ErrorCode::METHOD_NOT_FOUND,
                                "server/discover was not answered in time",
                                None,
                            ),
                            Some(id),
                        ));
                    }
                },
                None => self.inner.receive().await,
            };
            let message = message?;
            if let Some(id) = response_id(&message) {
                if self.pending.as_ref().is_some_and(|(p, _)| p == id) {
                    self.pending = None;
                } else if let Some(i) = self.abandoned.iter().position(|a| a == id) {
                    self.abandoned.swap_remove(i);
                    continue;
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
