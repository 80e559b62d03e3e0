//! The call path: [`Manager::send`] (and [`Manager::call`] for tools)
//! checks the [`Permit`] against the request, connects (or reconnects,
//! within the backoff) and sends it with the server's timeout, the
//! caller's cancellation and its progress routed back
//! ([`super::notify`]). [`Manager::forward`] passes on the requests that
//! are not decided (listing, log level, ping, unsubscribe).
// `logging/setLevel` and `resources/(un)subscribe` are deprecated in rmcp
// (SEP-2577, protocol 2026-07-28) but are how the session protocol
// (2025-11-25) does them.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    CompleteRequest, CompleteRequestParams, EmptyResult, GetPromptRequest, GetPromptRequestParams,
    ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest, PaginatedRequestParams,
    PingRequest, ReadResourceRequest, ReadResourceRequestParams, Reference, RequestMetaObject,
    ServerResult, SetLevelRequest, SetLevelRequestParams, SubscribeRequest, SubscribeRequestParams,
    UnsubscribeRequest, UnsubscribeRequestParams,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use warden_policy::Permit;

use super::call_error::map_service_error;
use super::notify::ProgressSink;
use super::slot::{Connection, Slot};
use super::{Admission, CallError, CallToolResult, Manager};

/// A request the pipeline decides (CONTRACT §8), exactly as it is sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Mediated {
    CallTool {
        tool: String,
        arguments: Option<Map<String, Value>>,
    },
    ReadResource {
        uri: String,
    },
    Subscribe {
        uri: String,
    },
    /// A client's `resources/unsubscribe`, decided and recorded like its
    /// subscribe (CONTRACT §8). `share`: the generation of the connection
    /// on which the caller holds a share of the upstream subscription
    /// ([`Manager::subscription_generation`]); `None`, or a connection
    /// that has since ended, sends nothing upstream.
    Unsubscribe {
        uri: String,
        share: Option<u64>,
    },
    GetPrompt {
        name: String,
        arguments: Option<Map<String, Value>>,
    },
    /// `completion/complete` for a prompt (its remote name in `params`)
    /// or a resource template: decided like the `prompts/get` or the
    /// resource read it prepares ([`completion_arguments`]).
    Complete(Box<CompleteRequestParams>),
}

/// What a `completion/complete` is decided on (CONTRACT §8, extended): for
/// a prompt, the prompt's arguments as far as known (the context's
/// resolved values, and the one being completed with its partial value),
/// as a `prompts/get` with them would be; for a resource template,
/// `{"uri": URI}` with the URI the completion prepares (the template
/// filled with the context's values and the partial value:
/// [`super::template_fill`]), as a read of that URI would be, so a
/// denied resource cannot be probed by completing towards it.
pub fn completion_arguments(params: &CompleteRequestParams) -> Value {
    match &params.r#ref {
        Reference::Resource(template) => {
            let known = params.context.as_ref().and_then(|c| c.arguments.as_ref());
            let uri = super::template_fill::fill_template(&template.uri, |name| {
                if name == params.argument.name {
                    return Some(params.argument.value.as_str());
                }
                known.and_then(|k| k.get(name)).map(String::as_str)
            });
            serde_json::json!({ "uri": uri })
        }
        Reference::Prompt(_) => {
            let mut arguments: Map<String, Value> = params
                .context
                .as_ref()
                .and_then(|c| c.arguments.as_ref())
                .map(|known| {
                    known
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect()
                })
                .unwrap_or_default();
            arguments.insert(
                params.argument.name.clone(),
                Value::String(params.argument.value.clone()),
            );
            Value::Object(arguments)
        }
        // A reference of a later revision: nothing warden decides on, so
        // nothing a permit can cover (the host refuses it first).
        _ => Value::Null,
    }
}

/// Takes out of a completion's `context.arguments` what its decision
/// does not cover ([`completion_arguments`]): the argument being
/// completed (its value is `argument.value`; the context is for the
/// *other*, already resolved arguments, and a server reading the same
/// name there would complete a value no rule saw) and, for a template,
/// a name that is not one of its variables (it is in no URI decided on).
/// Returns whether anything was taken out.
pub fn keep_decided_context(params: &mut CompleteRequestParams) -> bool {
    let decided = decided_context(&params.r#ref, &params.argument.name);
    let Some(known) = params.context.as_mut().and_then(|c| c.arguments.as_mut()) else {
        return false;
    };
    let before = known.len();
    known.retain(|name, _| decided(name));
    known.len() != before
}

/// Whether a context entry named so is covered by the decision of a
/// completion of `completed` for `reference` ([`keep_decided_context`]).
fn decided_context<'a>(reference: &'a Reference, completed: &'a str) -> impl Fn(&str) -> bool + 'a {
    let variables = match reference {
        Reference::Resource(template) => Some(super::template_fill::variables(&template.uri)),
        _ => None,
    };
    move |name| name != completed && variables.as_ref().is_none_or(|v| v.contains(&name))
}

/// Whether `params` carries context its decision does not cover (see
/// [`keep_decided_context`]).
fn undecided_context(params: &CompleteRequestParams) -> bool {
    let decided = decided_context(&params.r#ref, &params.argument.name);
    params
        .context
        .as_ref()
        .and_then(|c| c.arguments.as_ref())
        .is_some_and(|known| known.keys().any(|name| !decided(name)))
}

/// The subject a completion's permit names: the prompt's (remote) name,
/// or the template.
fn completion_subject(params: &CompleteRequestParams) -> &str {
    match &params.r#ref {
        Reference::Resource(template) => &template.uri,
        Reference::Prompt(prompt) => &prompt.name,
        _ => "",
    }
}

impl Mediated {
    /// What the permit names: the tool's remote name, the resource's URI,
    /// the prompt's name.
    pub fn subject(&self) -> &str {
        match self {
            Mediated::CallTool { tool, .. } => tool,
            Mediated::ReadResource { uri }
            | Mediated::Subscribe { uri }
            | Mediated::Unsubscribe { uri, .. } => uri,
            Mediated::GetPrompt { name, .. } => name,
            Mediated::Complete(params) => completion_subject(params),
        }
    }

    /// The arguments the permit's digest covers: a tool's or prompt's
    /// arguments (`null` when absent), a resource's `{"uri": …}`.
    pub fn arguments(&self) -> Value {
        match self {
            Mediated::CallTool { arguments, .. } | Mediated::GetPrompt { arguments, .. } => {
                arguments.clone().map_or(Value::Null, Value::Object)
            }
            Mediated::ReadResource { uri }
            | Mediated::Subscribe { uri }
            | Mediated::Unsubscribe { uri, .. } => serde_json::json!({ "uri": uri }),
            Mediated::Complete(params) => completion_arguments(params),
        }
    }

    /// Whether [`Mediated::arguments`] equals `decided`, without building
    /// it.
    pub fn arguments_are(&self, decided: &Value) -> bool {
        match self {
            Mediated::CallTool { arguments, .. } | Mediated::GetPrompt { arguments, .. } => {
                match (arguments, decided) {
                    (Some(sent), Value::Object(decided)) => sent == decided,
                    (None, Value::Null) => true,
                    _ => false,
                }
            }
            Mediated::ReadResource { uri }
            | Mediated::Subscribe { uri }
            | Mediated::Unsubscribe { uri, .. } => decided
                .as_object()
                .is_some_and(|o| o.len() == 1 && o.get("uri").and_then(Value::as_str) == Some(uri)),
            // Context the decision did not cover is never sent.
            Mediated::Complete(params) => {
                !undecided_context(params) && completion_arguments(params) == *decided
            }
        }
    }

    /// The MCP method this request is sent as.
    pub fn method(&self) -> &'static str {
        match self {
            Mediated::CallTool { .. } => "tools/call",
            Mediated::ReadResource { .. } => "resources/read",
            Mediated::Subscribe { .. } => "resources/subscribe",
            Mediated::Unsubscribe { .. } => "resources/unsubscribe",
            Mediated::GetPrompt { .. } => "prompts/get",
            Mediated::Complete(_) => "completion/complete",
        }
    }

    fn into_request(self) -> ClientRequest {
        match self {
            Mediated::CallTool { tool, arguments } => {
                let mut params = CallToolRequestParams::new(tool);
                params.arguments = arguments;
                ClientRequest::CallToolRequest(CallToolRequest::new(params))
            }
            Mediated::ReadResource { uri } => ClientRequest::ReadResourceRequest(
                ReadResourceRequest::new(ReadResourceRequestParams::new(uri)),
            ),
            Mediated::Subscribe { uri } => ClientRequest::SubscribeRequest(SubscribeRequest::new(
                SubscribeRequestParams::new(uri),
            )),
            Mediated::Unsubscribe { uri, .. } => ClientRequest::UnsubscribeRequest(
                UnsubscribeRequest::new(UnsubscribeRequestParams::new(uri)),
            ),
            Mediated::GetPrompt { name, arguments } => {
                let mut params = GetPromptRequestParams::new(name);
                params.arguments = arguments;
                ClientRequest::GetPromptRequest(GetPromptRequest::new(params))
            }
            Mediated::Complete(mut params) => {
                // warden's own request: the client's `_meta` (its progress
                // token…) is not the server's to see.
                params.meta = None;
                ClientRequest::CompleteRequest(CompleteRequest::new(*params))
            }
        }
    }

    /// Whether `result` is the kind of answer a request of `method`
    /// ([`Mediated::method`]) expects. By method, so that the request
    /// (a tool call's whole arguments) need not be kept to check it.
    fn expects(method: &str, result: &ServerResult) -> bool {
        matches!(
            (method, result),
            ("tools/call", ServerResult::CallToolResult(_))
                | ("resources/read", ServerResult::ReadResourceResult(_))
                // `{}`: rmcp's untagged union may read it as any result
                // whose fields all have defaults.
                | ("resources/subscribe" | "resources/unsubscribe", _)
                | ("prompts/get", ServerResult::GetPromptResult(_))
                | ("completion/complete", ServerResult::CompleteResult(_))
        )
    }
}

/// A request passed on without a decision (CONTRACT §8: listing, which
/// warden filters afterwards, log level (recorded by the host), ping, and
/// warden's own release of a subscription whose client went away or
/// replaced it (recorded by the host)).
#[derive(Debug, Clone)]
pub enum Forwarded {
    ListResources(Option<String>),
    ListResourceTemplates(Option<String>),
    ListPrompts(Option<String>),
    SetLevel(SetLevelRequestParams),
    Ping,
    /// Lets go of one share of the upstream subscription to `uri` held on
    /// the connection of `generation` (nothing is sent when that
    /// connection has ended, or other shares remain).
    Unsubscribe {
        uri: String,
        generation: u64,
    },
}

impl Forwarded {
    fn into_request(self) -> ClientRequest {
        let page =
            |cursor: Option<String>| Some(PaginatedRequestParams::default().with_cursor(cursor));
        match self {
            Forwarded::ListResources(cursor) => {
                ClientRequest::ListResourcesRequest(ListResourcesRequest {
                    method: Default::default(),
                    params: page(cursor),
                    extensions: Default::default(),
                })
            }
            Forwarded::ListResourceTemplates(cursor) => {
                ClientRequest::ListResourceTemplatesRequest(ListResourceTemplatesRequest {
                    method: Default::default(),
                    params: page(cursor),
                    extensions: Default::default(),
                })
            }
            Forwarded::ListPrompts(cursor) => {
                ClientRequest::ListPromptsRequest(ListPromptsRequest {
                    method: Default::default(),
                    params: page(cursor),
                    extensions: Default::default(),
                })
            }
            Forwarded::SetLevel(params) => {
                ClientRequest::SetLevelRequest(SetLevelRequest::new(params))
            }
            Forwarded::Ping => ClientRequest::PingRequest(PingRequest {
                method: Default::default(),
                extensions: Default::default(),
            }),
            Forwarded::Unsubscribe { uri, .. } => ClientRequest::UnsubscribeRequest(
                UnsubscribeRequest::new(UnsubscribeRequestParams::new(uri)),
            ),
        }
    }
}

/// How one request is sent: the caller's cancellation, and where its
/// progress goes (none: progress is dropped).
#[derive(Clone, Default)]
pub struct SendOptions {
    pub cancel: CancellationToken,
    pub progress: Option<ProgressSink>,
    /// Who the server's own requests made while this one is in flight
    /// (elicitation, sampling) may be passed to.
    pub downstream: Option<Arc<dyn super::Downstream>>,
}

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
        let tool = permit.tool().to_string();
        let options = SendOptions {
            cancel,
            ..SendOptions::default()
        };
        match self
            .send(permit, Mediated::CallTool { tool, arguments }, options)
            .await?
        {
            ServerResult::CallToolResult(result) => Ok(result),
            _ => Err(CallError::Protocol {
                server: String::new(),
                message: "the answer to tools/call is not a tool result".into(),
            }),
        }
    }

    /// Sends one request of any kind of CONTRACT §8 that the pipeline
    /// allowed: the permit must name its server, subject
    /// ([`Mediated::subject`]) and the digest of [`Mediated::arguments`].
    /// Outcomes as for [`Manager::call`]; an answer of the wrong type is
    /// [`CallError::Protocol`].
    pub async fn send(
        &self,
        permit: Permit,
        request: Mediated,
        options: SendOptions,
    ) -> Result<ServerResult, CallError> {
        // The arguments sent must be the ones decided: compared with the
        // permit's own copy (a large request is not hashed again), or, for
        // a permit that names only a digest, by that digest.
        let covered = permit.tool() == request.subject()
            && match permit.arguments() {
                Some(decided) => request.arguments_are(decided),
                None => {
                    warden_core::digest::sha256_json(&request.arguments()) == permit.args_sha256()
                }
            };
        if !covered {
            return Err(CallError::PermitMismatch);
        }
        let method = request.method();
        // Subscriptions are boxed: a rare path whose futures (4.5–5 KB)
        // would otherwise set the size of every call's future.
        match &request {
            Mediated::Subscribe { uri } => {
                return Box::pin(self.subscribe_shared(permit.server(), uri, options)).await;
            }
            Mediated::Unsubscribe { uri, share } => {
                return match share {
                    Some(generation) => {
                        Box::pin(self.unsubscribe_shared(
                            permit.server(),
                            uri,
                            *generation,
                            options,
                        ))
                        .await
                    }
                    // Allowed and recorded; the caller holds no share, so
                    // there is nothing to let go of upstream.
                    None => Ok(ServerResult::EmptyResult(EmptyResult {})),
                };
            }
            _ => {}
        }
        let result = self
            .send_unchecked(permit.server(), request.into_request(), options)
            .await?;
        if Mediated::expects(method, &result) {
            Ok(result)
        } else {
            Err(CallError::Protocol {
                server: permit.server().to_string(),
                message: format!("the answer to {method} is not of its type"),
            })
        }
    }

    /// Passes on a request that is not decided ([`Forwarded`]).
    pub async fn forward(
        &self,
        server: &str,
        request: Forwarded,
        options: SendOptions,
    ) -> Result<ServerResult, CallError> {
        if let Forwarded::Unsubscribe { uri, generation } = &request {
            return self
                .unsubscribe_shared(server, uri, *generation, options)
                .await;
        }
        self.send_unchecked(server, request.into_request(), options)
            .await
    }

    /// One caller's `resources/subscribe` (already allowed): the server is
    /// subscribed on the first caller's only; a later caller joins that
    /// subscription (each caller's own request is decided and recorded
    /// all the same, by the host). Counted only once the server accepted,
    /// under the connection's lock, so no caller joins a subscription that
    /// is still being made or failed.
    async fn subscribe_shared(
        &self,
        server: &str,
        uri: &str,
        options: SendOptions,
    ) -> Result<ServerResult, CallError> {
        let slot = self.slot(server).ok_or_else(|| CallError::NotConnected {
            server: server.to_string(),
            reason: "no server of that name is configured".into(),
        })?;
        let cancel = options.cancel.clone();
        let conn = tokio::select! {
            conn = self.ensure_connected(&slot) => conn?,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let mut held = tokio::select! {
            held = conn.subscribers.lock() => held,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        if let Some(n) = held.get_mut(uri) {
            *n += 1;
            return Ok(ServerResult::EmptyResult(EmptyResult {}));
        }
        // A 2026-07-28 server without `subscriptions/listen` may still
        // answer `resources/subscribe`.
        let result = match self.listen_resource(server, uri, &cancel).await {
            Ok(Some(done)) => done,
            Ok(None) | Err(CallError::Rpc { code: -32601, .. }) => {
                let request = Mediated::Subscribe {
                    uri: uri.to_string(),
                };
                self.send_unchecked(server, request.into_request(), options)
                    .await?
            }
            Err(error) => return Err(error),
        };
        held.insert(uri.to_string(), 1);
        Ok(result)
    }

    /// One caller's `resources/unsubscribe` of the share it holds on the
    /// connection of `generation`: the server is unsubscribed after the
    /// last caller that holds the subscription on this connection lets
    /// go. A share on a connection that has ended (a reconnect since)
    /// ended with it: it never takes another caller's share on the new
    /// connection.
    async fn unsubscribe_shared(
        &self,
        server: &str,
        uri: &str,
        generation: u64,
        options: SendOptions,
    ) -> Result<ServerResult, CallError> {
        let done = || ServerResult::EmptyResult(EmptyResult {});
        let Some(conn) = self.slot(server).and_then(|slot| slot.lock().conn.clone()) else {
            return Ok(done());
        };
        if conn.generation != generation {
            return Ok(done());
        }
        let mut held = conn.subscribers.lock().await;
        match held.get_mut(uri) {
            Some(n) if *n > 1 => {
                *n -= 1;
                return Ok(done());
            }
            Some(_) => {
                held.remove(uri);
            }
            None => return Ok(done()),
        }
        if !conn.alive() {
            // Its subscriptions ended with it.
            return Ok(done());
        }
        if let Some(done) = self.unlisten_resource(server, uri) {
            return Ok(done);
        }
        let request = Forwarded::Unsubscribe {
            uri: uri.to_string(),
            generation,
        };
        self.send_unchecked(server, request.into_request(), options)
            .await
    }

    /// The send path without the permit check; only [`Manager::send`] and
    /// [`Manager::forward`] use it.
    async fn send_unchecked(
        &self,
        server: &str,
        request: ClientRequest,
        options: SendOptions,
    ) -> Result<ServerResult, CallError> {
        let SendOptions {
            cancel,
            progress,
            downstream,
        } = options;
        let slot = self.slot(server).ok_or_else(|| CallError::NotConnected {
            server: server.to_string(),
            reason: "no server of that name is configured".into(),
        })?;
        let conn = tokio::select! {
            conn = self.ensure_connected(&slot) => conn?,
            () = cancel.cancelled() => return Err(CallError::Cancelled),
        };
        let timeout = slot.config.timeout;
        let mut request_options = PeerRequestOptions::with_timeout(timeout);
        if progress.is_some() {
            // A request that reports progress is alive: its idle timeout
            // restarts with each report, up to six times the timeout.
            request_options = request_options
                .reset_timeout_on_progress()
                .with_max_total_timeout(timeout.saturating_mul(6));
        }
        let level = *self
            .shared
            .log_level
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(level) = level
            && super::listen::modern(&conn)
        {
            let mut meta = RequestMetaObject::default();
            meta.set_log_level(level);
            request_options = request_options.with_meta(meta);
        }
        // Counted in flight before it is sent: a server request made while
        // it runs is attributed to it only if it is the only one.
        let in_flight = conn.router.in_flight.begin(downstream);
        let handle = match conn
            .peer
            .send_request_with_option(request, request_options)
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(map_service_error(&self.shared, &slot, &conn, error).await),
        };
        // Reading its answer (in wire order) ends its time in flight.
        in_flight.sent(&handle.id);
        let _progress =
            progress.map(|sink| conn.router.register(handle.progress_token.clone(), sink));
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
            Ok(result) => {
                slot.lock().failures = 0;
                Ok(result)
            }
            Err(error) => Err(map_service_error(&self.shared, &slot, &conn, error).await),
        }
    }

    /// A live connection, reconnecting when allowed.
    pub(super) async fn ensure_connected(
        &self,
        slot: &Arc<Slot>,
    ) -> Result<Arc<Connection>, CallError> {
        if let Some(conn) = self.usable(slot)? {
            return Ok(conn);
        }
        let _connecting = slot.connecting.lock().await;
        if let Some(conn) = self.usable(slot)? {
            return Ok(conn);
        }
        // Boxed: connecting is rare, and its future (~8 KB) would
        // otherwise sit inside every call's future, copied whole each time
        // the call is moved or spawned.
        Box::pin(self.connect_slot(slot))
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
