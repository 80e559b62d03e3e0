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
use warden_policy::{AskAnswer, AskPrompt, Asker};

type Reply<T> = oneshot::Sender<Result<T, ErrorData>>;

enum Forward {
    Elicit(ElicitRequestParams, Reply<ElicitResult>),
    Sample(CreateMessageRequestParams, Reply<CreateMessageResult>),
    Approve(AskPrompt, oneshot::Sender<AskAnswer>),
}

/// One gateway client, as the party of one tool call. What it forwards is
/// boxed: the channel holds its first block of 32 slots from the start,
/// for every call in flight, and 32 `Forward`s inline are 7.5 KB
/// (BENCHMARKS.md, "Eighteenth pass").
struct ClientDownstream {
    tx: mpsc::Sender<Box<Forward>>,
    can_elicit: bool,
    can_elicit_url: bool,
    can_sample: bool,
    /// It is a person's client that can be asked (`--ask-client`).
    can_approve: bool,
}

fn gone() -> ErrorData {
    ErrorData::internal_error("the gateway client's call has ended", None)
}

impl Downstream for ClientDownstream {
    fn can_elicit(&self) -> bool {
        self.can_elicit
    }

    fn can_elicit_url(&self) -> bool {
        self.can_elicit_url
    }

    fn can_sample(&self) -> bool {
        self.can_sample
    }

    fn approve<'a>(&'a self, prompt: &'a AskPrompt) -> Option<BoxFuture<'a, AskAnswer>> {
        if !self.can_approve {
            return None;
        }
        Some(Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let asked = Box::new(Forward::Approve(prompt.clone(), reply));
            if self.tx.send(asked).await.is_err() {
                return AskAnswer::Deny;
            }
            answer.await.unwrap_or(AskAnswer::Deny)
        }))
    }

    fn elicit(
        &self,
        params: ElicitRequestParams,
    ) -> BoxFuture<'_, Result<ElicitResult, ErrorData>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.tx
                .send(Box::new(Forward::Elicit(params, reply)))
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
                .send(Box::new(Forward::Sample(params, reply)))
                .await
                .map_err(|_| gone())?;
            answer.await.map_err(|_| gone())?
        })
    }
}

/// Runs `call` with a [`Downstream`] for the client of `context`,
/// serving what is passed to it on this task while the call runs; an
/// `ask` about a server's request goes to `asker` (the client, when it is
/// a person's), else it is a deny.
pub(super) async fn with_forwarding<F, Fut>(
    context: &RequestContext<RoleServer>,
    asker: Option<&dyn Asker>,
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
        can_elicit_url: session_protocol
            && peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Url),
        can_approve: asker.is_some(),
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
                // Boxed: a rare path whose future would otherwise add its
                // size to every call's.
                tokio::select! {
                    () = Box::pin(serve(peer, asker, *forward)) => {}
                    () = context.ct.cancelled() => {}
                }
            }
        }
    }
}

async fn serve(peer: &Peer<RoleServer>, asker: Option<&dyn Asker>, forward: Forward) {
    match forward {
        Forward::Elicit(params, reply) => {
            let answer = peer.create_elicitation(params).await.map_err(error_data);
            let _ = reply.send(answer);
        }
        Forward::Sample(params, reply) => {
            let answer = peer.create_message(params).await.map_err(error_data);
            let _ = reply.send(answer);
        }
        Forward::Approve(prompt, reply) => {
            let answer = match asker {
                Some(asker) => asker.ask(&prompt).await,
                None => AskAnswer::Deny,
            };
            let _ = reply.send(answer);
        }
    }
}
