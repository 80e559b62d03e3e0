//! Passing a server's own requests (elicitation, sampling) made during a
//! gateway client's tool call on to that client, once the host allowed
//! them (`host::server_requests`). They are sent from the client's own
//! `tools/call` handler task: rmcp then ties them to that request (on
//! streamable HTTP, its response stream), which it does not across tasks.

// Sampling is deprecated for 2026-07-28 (SEP-2577) but is how the session
// protocol (2025-11-25) works.
#![allow(deprecated)]

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer};
use tokio::sync::{mpsc, oneshot};

use crate::mcp::{Downstream, error_data};

type Reply<T> = oneshot::Sender<Result<T, ErrorData>>;

enum Forward {
    Elicit(ElicitRequestParams, Reply<ElicitResult>),
    Sample(CreateMessageRequestParams, Reply<CreateMessageResult>),
}

/// One gateway client, as the party of one tool call.
struct ClientDownstream {
    tx: mpsc::Sender<Forward>,
    can_elicit: bool,
    can_sample: bool,
}

fn gone() -> ErrorData {
    ErrorData::internal_error("the gateway client's call has ended", None)
}

impl Downstream for ClientDownstream {
    fn can_elicit(&self) -> bool {
        self.can_elicit
    }

    fn can_sample(&self) -> bool {
        self.can_sample
    }

    fn elicit(
        &self,
        params: ElicitRequestParams,
    ) -> BoxFuture<'_, Result<ElicitResult, ErrorData>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.tx
                .send(Forward::Elicit(params, reply))
                .await
                .map_err(|_| gone())?;
            answer.await.map_err(|_| gone())?
        })
    }

    fn sample(
        &self,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, ErrorData>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.tx
                .send(Forward::Sample(params, reply))
                .await
                .map_err(|_| gone())?;
            answer.await.map_err(|_| gone())?
        })
    }
}

/// Runs `call` with a [`Downstream`] for the client of `context`,
/// serving what is passed to it on this task while the call runs.
pub(super) async fn with_forwarding<F, Fut>(
    context: &RequestContext<RoleServer>,
    call: F,
) -> Fut::Output
where
    F: FnOnce(Arc<dyn Downstream>) -> Fut,
    Fut: Future,
{
    let session_protocol = context
        .protocol_version()
        .is_none_or(|version| version.has_initialize());
    let peer = &context.peer;
    let (tx, mut rx) = mpsc::channel(4);
    let downstream = ClientDownstream {
        tx,
        can_elicit: session_protocol
            && peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form),
        can_sample: session_protocol
            && peer
                .peer_info()
                .is_some_and(|info| info.capabilities.sampling.is_some()),
    };
    let call = call(Arc::new(downstream));
    tokio::pin!(call);
    loop {
        tokio::select! {
            output = &mut call => return output,
            Some(forward) = rx.recv() => {
                // The client cancelling its call ends what it is asked too.
                tokio::select! {
                    () = serve(peer, forward) => {}
                    () = context.ct.cancelled() => {}
                }
            }
        }
    }
}

async fn serve(peer: &Peer<RoleServer>, forward: Forward) {
    match forward {
        Forward::Elicit(params, reply) => {
            let answer = peer.create_elicitation(params).await.map_err(error_data);
            let _ = reply.send(answer);
        }
        Forward::Sample(params, reply) => {
            let answer = peer.create_message(params).await.map_err(error_data);
            let _ = reply.send(answer);
        }
    }
}
