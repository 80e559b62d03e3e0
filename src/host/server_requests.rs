//! A server's own requests (CONTRACT §8): `elicitation/create` and
//! `sampling/createMessage`, decided by the pipeline and recorded like
//! every request (`request` written ahead, `request_result` with the
//! answer's digest, never its content).
//!
//! An elicitation is the question to the person: the default stage's
//! `ask` means "put it to the person", so allow and ask both pass it to
//! the party that made the request the server is working on (a gateway
//! client that declared elicitation, unchanged), or, when the session
//! itself made it (`call`, `run`, the repl), to its [`Answerer`] (the
//! terminal, or an `--answers` file); a deny (also every `ask` with
//! `--ci`) declines it, and so does having no one to ask.
//!
//! Either is passed on only when it is tied to exactly one request of
//! warden's in flight ([`Attribution::Exact`]): a server asking on its own
//! or while several requests are in flight asks no one, not even the
//! session's model.
//!
//! Sampling: an `allow` (rule or policy) passes it on; an `ask` is put to
//! the person first (the terminal, the answers file, or the gateway client
//! marked as a person's), recorded as an `approval`. It goes to the
//! session's model (`run`, the repl) with `maxTokens` capped at the
//! server's `sampling.max_tokens` (the capping recorded in `capped`), or
//! to the gateway client unchanged (so a request over the cap is refused);
//! at most `sampling.max_requests` per server and session. The result
//! record says who answered (`answered_by`). At most
//! `elicitation.max_requests` elicitations per server and session are
//! passed on; later ones are declined unasked. Only a request passed on
//! to someone counts: one refused before anyone is asked (no one to ask,
//! whose it is cannot be told, a URL warden does not pass on) leaves the
//! quota to the legitimate ones.
//!
//! Every request is recorded, refused ones included (CONTRACT §6), however
//! many a server sends: a flood shows in the log as what it is.

// Sampling is deprecated for 2026-07-28 (SEP-2577) but is how the session
// protocol (2025-11-25) works.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::model::{
    ContextInclusion, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ElicitationAction, ListRootsResult,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_audit::{ApprovalAction, Caller, Event, Outcome};
use warden_core::RequestKind;
use warden_policy::{AskAnswer, AskPrompt, Decision, Effect};

use super::Host;
use super::answers::Answerer;
use super::call::{CallReport, ToolRef};
use super::mediated::{PendingCall, elapsed_ms, summary};
use crate::mcp::{Attribution, Downstream, ServerRequests};

/// The rule and Rego target of a server's elicitation.
pub fn elicitation_target(server: &str) -> String {
    format!("elicitation__{server}")
}

/// The rule and Rego target of a server's sampling.
pub fn sampling_target(server: &str) -> String {
    format!("sampling__{server}")
}

/// What a session's servers' own requests are decided with: who the
/// session works for, its model (answers allowed sampling: `run`, the
/// repl), and who answers for the person when the session is the client
/// (`call`, `run`, the repl: the terminal or an `--answers` file).
#[derive(Clone)]
pub struct ServerRequestsSetup {
    pub caller: Caller,
    pub model: Option<Arc<dyn crate::agent::Model>>,
    pub answerer: Option<Arc<dyn Answerer>>,
}

impl ServerRequestsSetup {
    pub fn new(caller: Caller) -> Self {
        ServerRequestsSetup {
            caller,
            model: None,
            answerer: None,
        }
    }
}

impl Host {
    /// Has this session decide its servers' elicitation and sampling
    /// requests, recorded with `caller` (who the session works for).
    pub fn install_server_requests(self: &Arc<Self>, caller: Caller) {
        self.install_server_requests_with(ServerRequestsSetup::new(caller));
    }

    /// [`Host::install_server_requests`], with the session's own model to
    /// answer allowed sampling and who answers an elicitation.
    pub fn install_server_requests_with(self: &Arc<Self>, setup: ServerRequestsSetup) {
        self.manager.set_server_requests(Arc::new(Decider {
            host: Arc::downgrade(self),
            caller: setup.caller,
            model: setup.model,
            answerer: setup.answerer,
            sampled: Mutex::new(HashMap::new()),
            elicited: Mutex::new(HashMap::new()),
        }));
    }
}

struct Decider {
    host: Weak<Host>,
    caller: Caller,
    /// The session's own model, which answers allowed sampling.
    model: Option<Arc<dyn crate::agent::Model>>,
    /// Who answers for the person when no downstream client made the
    /// request (the session is the client).
    answerer: Option<Arc<dyn Answerer>>,
    /// Sampling requests granted per server this session.
    sampled: Mutex<HashMap<String, u32>>,
    /// Elicitations passed on (put to someone) per server this session.
    elicited: Mutex<HashMap<String, u32>>,
}

/// One server request on its way: what is recorded about it.
struct Pending {
    kind: RequestKind,
    method: &'static str,
    server: String,
    arguments: Value,
    call_id: String,
    started: Instant,
}

impl Pending {
    fn report(
        &self,
        outcome: Outcome,
        decision: Option<&Decision>,
        error: Option<String>,
    ) -> CallReport {
        let target = match self.kind {
            RequestKind::Sampling => sampling_target(&self.server),
            _ => elicitation_target(&self.server),
        };
        CallReport {
            server: Some(self.server.clone()),
            tool: Some(self.method.to_string()),
            decision: decision.map(summary),
            outcome,
            result: None,
            error,
            duration_ms: elapsed_ms(self.started),
            qualified: target,
            call_id: self.call_id.clone(),
            kind: self.kind,
            method: self.method,
        }
    }
}

impl Decider {
    /// Decides one server request; `Err` is a refusal already recorded
    /// (with the reason).
    async fn decide(
        &self,
        host: &Host,
        pending: &Pending,
        cancel: &CancellationToken,
    ) -> Result<Decision, String> {
        let target = match pending.kind {
            RequestKind::Sampling => sampling_target(&pending.server),
            _ => elicitation_target(&pending.server),
        };
        let facts = Arc::new(host.request_facts(
            pending.kind,
            &pending.server,
            pending.method,
            target,
            &pending.arguments,
        ));
        let pipeline = host.pipeline();
        let decided = tokio::select! {
            decision = pipeline.decide_within(facts) => Some(decision),
            () = cancel.cancelled() => None,
            () = host.exiting.cancelled() => None,
        };
        let Some(decision) = decided else {
            let report = pending.report(
                Outcome::Cancelled,
                None,
                Some("cancelled before warden decided".into()),
            );
            host.audit
                .record(host.request_record(self.caller, &pending.arguments, &report, None));
            return Err("cancelled before warden decided".into());
        };
        Ok(decision)
    }

    /// Counts one elicitation of `server` passed on; `false` (nothing
    /// counted) once it has had `max_requests`.
    fn take_elicitation(&self, server: &str, max_requests: u32) -> bool {
        let mut elicited = self.elicited.lock().unwrap_or_else(|p| p.into_inner());
        let count = elicited.entry(server.to_string()).or_default();
        if *count >= max_requests {
            return false;
        }
        *count += 1;
        true
    }

    /// Whether `server` has had `max_requests` sampling requests passed on.
    fn sampling_used_up(&self, server: &str, max_requests: u32) -> bool {
        let sampled = self.sampled.lock().unwrap_or_else(|p| p.into_inner());
        sampled
            .get(server)
            .is_some_and(|count| *count >= max_requests)
    }

    /// Records a refusal after the decision; `why`, for the server.
    fn refuse(&self, host: &Host, pending: &Pending, decision: &Decision, why: String) -> String {
        let report = pending.report(Outcome::Denied, Some(decision), Some(why.clone()));
        host.audit.record(host.request_record(
            self.caller,
            &pending.arguments,
            &report,
            Some(decision),
        ));
        why
    }

    /// Writes the request ahead (with what was `capped`), runs `send`,
    /// records its result's digest and who answered.
    async fn forward<T, F>(
        &self,
        host: &Host,
        pending: &Pending,
        decision: &Decision,
        capped: Option<Value>,
        send: F,
    ) -> Result<T, ErrorData>
    where
        T: serde::Serialize,
        F: Future<Output = Answered<T>>,
    {
        let mut report = pending.report(Outcome::Pending, Some(decision), None);
        let mut record =
            host.request_record(self.caller, &pending.arguments, &report, Some(decision));
        if let Event::Request(request) = &mut record {
            request.capped = capped;
        }
        if let Err(refusal) = host.audit.write_ahead(record) {
            return Err(ErrorData::internal_error(
                format!("warden could not record the request: {refusal}"),
                None,
            ));
        }
        let written = PendingCall::new(host, pending.kind, &pending.call_id, pending.started);
        let Answered {
            answer,
            by,
            unanswered,
        } = send.await;
        let by = match (&answer, unanswered) {
            (_, Some(why)) => {
                // No one answered: the server is told no (a decline).
                report.outcome = Outcome::Cancelled;
                report.error = Some(why);
                None
            }
            (Ok(result), None) => {
                report.outcome = Outcome::Ok;
                report.result = serde_json::to_value(result).ok();
                by
            }
            (Err(error), None) => {
                report.outcome = Outcome::RpcError;
                report.error = Some(format!("{}: {}", error.code.0, error.message));
                None
            }
        };
        report.duration_ms = elapsed_ms(pending.started);
        // Fail-closed: an answer the log could not record is not passed on.
        if let Err(refusal) = written.finish_answered(&report, by) {
            return Err(ErrorData::internal_error(
                format!("warden could not record the answer: {refusal}"),
                None,
            ));
        }
        answer
    }

    async fn elicit_inner(
        &self,
        server: &str,
        params: ElicitRequestParams,
        from: Attribution,
        cancel: CancellationToken,
    ) -> Result<ElicitResult, ErrorData> {
        let Some(host) = self.host.upgrade() else {
            return decline();
        };
        let url_mode = matches!(params, ElicitRequestParams::UrlElicitationParams { .. });
        let arguments = match &params {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                json!({"mode": "form", "message": message, "schema": requested_schema})
            }
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                json!({"mode": "url", "message": message, "url": url})
            }
            _ => json!({"mode": "unknown"}),
        };
        let pending = Pending {
            kind: RequestKind::Elicitation,
            method: "elicitation/create",
            server: server.to_string(),
            arguments,
            call_id: uuid::Uuid::new_v4().to_string(),
            started: Instant::now(),
        };
        let Ok(decision) = self.decide(&host, &pending, &cancel).await else {
            return Ok(ElicitResult::new(ElicitationAction::Cancel));
        };
        if decision.effect == Effect::Deny {
            let why = format!(
                "declined: denied by the {} stage: {}",
                decision.stage,
                decision.reasons.join("; ")
            );
            let why = self.refuse(&host, &pending, &decision, why);
            tracing::info!(server, "{why}");
            return decline();
        }
        if !url_mode && !matches!(params, ElicitRequestParams::FormElicitationParams { .. }) {
            self.refuse(
                &host,
                &pending,
                &decision,
                "declined: an elicitation mode warden does not know".into(),
            );
            return decline();
        }
        // A URL whose text hides where it leads (a user name before `@`,
        // `javascript:`, `file:`) goes to no one: not the person at the
        // terminal, not an answers file, not a gateway client's person.
        if let ElicitRequestParams::UrlElicitationParams { url, .. } = &params
            && let Err(why) = super::url_site::url_site(url)
        {
            let why = format!(
                "declined: warden does not pass on the URL `{}`: {why}",
                warden_core::display::line(url)
            );
            let why = self.refuse(&host, &pending, &decision, why);
            tracing::warn!(server, "elicitation {why}");
            return decline();
        }
        // Allow, or ask: the elicitation is itself the question to the
        // person. Who would be asked is found before the quota is taken:
        // a request no one could be asked does not use up the quota of the
        // legitimate ones after it.
        let (able, what): (fn(&dyn Downstream) -> bool, _) = if url_mode {
            (|d| d.can_elicit_url(), "URL-mode elicitation")
        } else {
            (|d| d.can_elicit(), "elicitation")
        };
        let to = match from {
            Attribution::Exact(None) => self.local_answerer().map(Asked::Local),
            from => self.downstream(from, able, what).map(Asked::Client),
        };
        let to = match to {
            Ok(to) => to,
            Err(why) => {
                let why = self.refuse(&host, &pending, &decision, format!("declined: {why}"));
                tracing::info!(server, "elicitation {why}");
                return decline();
            }
        };
        // A bound on questions: without it a server could ask again after
        // every decline, as long as its call runs, until someone accepts.
        let max = host
            .with_server_config(server, |c| c.elicitation.max_requests)
            .unwrap_or_else(|| crate::config::ElicitationLimits::default().max_requests);
        if !self.take_elicitation(server, max) {
            let why = format!(
                "declined: this server's elicitation.max_requests ({max}) are used up for this \
                 session"
            );
            let why = self.refuse(&host, &pending, &decision, why);
            tracing::warn!(server, "elicitation {why}");
            return decline();
        }
        let downstream = match to {
            Asked::Local(answerer) => {
                return self
                    .elicit_locally(&host, &pending, &decision, server, params, cancel, answerer)
                    .await;
            }
            Asked::Client(downstream) => downstream,
        };
        let send = async {
            let answer = tokio::select! {
                answer = downstream.elicit(params) => answer,
                () = cancel.cancelled() => Err(ErrorData::internal_error("the server cancelled its elicitation", None)),
            };
            Answered::by("client", answer)
        };
        self.forward(&host, &pending, &decision, None, send).await
    }

    /// Who answers an elicitation during a request the session itself
    /// made (`call`, `run`, the repl): the person at the terminal, or the
    /// `--answers` file; with neither, why no one can.
    fn local_answerer(&self) -> Result<Arc<dyn Answerer>, String> {
        match &self.answerer {
            None if self.caller == Caller::Gateway => Err(GATEWAY_CANNOT_ASK.to_string()),
            None => Err(NO_ONE_TO_ASK.to_string()),
            Some(answerer) => answerer.ready().map(|()| Arc::clone(answerer)),
        }
    }

    /// An elicitation during a request the session itself made, put to
    /// its `answerer` ([`Decider::local_answerer`]).
    #[allow(clippy::too_many_arguments)]
    async fn elicit_locally(
        &self,
        host: &Host,
        pending: &Pending,
        decision: &Decision,
        server: &str,
        params: ElicitRequestParams,
        cancel: CancellationToken,
        answerer: Arc<dyn Answerer>,
    ) -> Result<ElicitResult, ErrorData> {
        let send = async {
            let asked = tokio::select! {
                asked = answerer.elicit(server, &params) => Some(asked),
                () = cancel.cancelled() => None,
            };
            match asked {
                Some(Ok(result)) => Answered::by(&answerer.who(), Ok(result)),
                Some(Err(why)) => {
                    tracing::warn!(server, "elicitation declined: {why}");
                    Answered {
                        answer: Ok(ElicitResult::new(ElicitationAction::Decline)),
                        by: None,
                        unanswered: Some(why),
                    }
                }
                None => Answered {
                    answer: Err(ErrorData::internal_error(
                        "the server cancelled its elicitation",
                        None,
                    )),
                    by: None,
                    unanswered: None,
                },
            }
        };
        self.forward(host, pending, decision, None, send).await
    }

    /// The party a server request may be passed to, or why there is none.
    fn downstream(
        &self,
        from: Attribution,
        able: fn(&dyn Downstream) -> bool,
        what: &str,
    ) -> Result<Arc<dyn Downstream>, String> {
        match from {
            Attribution::Exact(Some(downstream)) if able(downstream.as_ref()) => Ok(downstream),
            Attribution::Exact(Some(_)) => Err(format!(
                "not passed on: the client that made the call did not declare {what}"
            )),
            Attribution::Exact(None) => Err(format!(
                "not passed on: this session has no client to pass {what} to"
            )),
            Attribution::Idle => Err(format!(
                "not passed on: {what} outside any request of warden's has no one to go to"
            )),
            Attribution::Ambiguous(0) => Err(format!(
                "not passed on: when this {what} arrived is unknown, so whose it is cannot be told"
            )),
            Attribution::Ambiguous(n) => Err(format!(
                "not passed on: {n} requests are in flight on this connection, so whose {what} this is cannot be told"
            )),
        }
    }

    /// Puts an `ask` about a sampling request to the person: at the
    /// terminal (or from the answers file) when the session is the client,
    /// else to the gateway client marked as a person's. Records the answer
    /// as an `approval` linked to the request. `Err`: no one could be asked.
    async fn approve_sampling(
        &self,
        host: &Host,
        pending: &Pending,
        decision: &Decision,
        params: &CreateMessageRequestParams,
        from: &Attribution,
    ) -> Result<bool, String> {
        let server = pending.server.as_str();
        let approved = match from {
            Attribution::Exact(None) => match &self.answerer {
                Some(answerer) => {
                    answerer.ready()?;
                    answerer.approve_sampling(server, params).await?
                }
                None if self.caller == Caller::Gateway => {
                    return Err(GATEWAY_CANNOT_ASK.to_string());
                }
                None => return Err(NO_ONE_TO_ASK.to_string()),
            },
            Attribution::Exact(Some(downstream)) => {
                let prompt = AskPrompt {
                    server: server.to_string(),
                    tool: pending.method.to_string(),
                    qualified: sampling_target(server),
                    argument_lines: warden_policy::argument_lines(&pending.arguments)?,
                    arguments: pending.arguments.clone(),
                    stage: decision.stage,
                    reasons: decision.reasons.clone(),
                };
                match downstream.approve(&prompt) {
                    // Only an explicit allow approves.
                    Some(asked) => {
                        matches!(asked.await, AskAnswer::AllowOnce | AskAnswer::AllowSession)
                    }
                    None => {
                        return Err("the client that made the call cannot be asked (only a \
                                    person's client is: `warden gateway --ask-client`, with \
                                    form elicitation)"
                            .into());
                    }
                }
            }
            _ => return Err("no one could be asked: whose request this is cannot be told".into()),
        };
        host.audit_event(Event::Approval {
            server: server.to_string(),
            config_sha256: host
                .server_config(server)
                .map(|c| c.digest)
                .unwrap_or_default(),
            action: if approved {
                ApprovalAction::AllowOnce
            } else {
                ApprovalAction::Deny
            },
            subject: sampling_target(server),
            call_id: Some(pending.call_id.clone()),
        });
        Ok(approved)
    }

    async fn sample_inner(
        &self,
        server: &str,
        params: CreateMessageRequestParams,
        from: Attribution,
        cancel: CancellationToken,
    ) -> Result<CreateMessageResult, ErrorData> {
        let Some(host) = self.host.upgrade() else {
            return Err(ErrorData::invalid_request("warden is exiting", None));
        };
        // `include_context`: what the server asked to have added from
        // other servers' context (`input.sampling.include_context`);
        // never passed on (below).
        let arguments = sampling_arguments(&params);
        let pending = Pending {
            kind: RequestKind::Sampling,
            method: "sampling/createMessage",
            server: server.to_string(),
            arguments,
            call_id: uuid::Uuid::new_v4().to_string(),
            started: Instant::now(),
        };
        let refused = |why: String| Err(ErrorData::invalid_request(why, None));
        let decision = match self.decide(&host, &pending, &cancel).await {
            Ok(decision) => decision,
            Err(why) => return refused(why),
        };
        if decision.effect == Effect::Deny {
            let why = format!(
                "sampling refused by warden: denied by the {} stage: {}",
                decision.stage,
                decision.reasons.join("; ")
            );
            return refused(self.refuse(&host, &pending, &decision, why));
        }
        if self.caller == Caller::Cli {
            return refused(self.refuse(
                &host,
                &pending,
                &decision,
                "sampling refused by warden: this command (`call`, `mcp status`, `doctor`) has no model to sample".into(),
            ));
        }
        let limits = host
            .server_config(server)
            .map(|c| c.sampling)
            .unwrap_or_default();
        // Who answers: the session's model, else the client that made the
        // call. The session's model too only for a request tied to exactly
        // one request of the session's in flight: a server asking on its
        // own (between turns, after its call returned) or while several
        // are in flight does not spend the session's model.
        let downstream = match (&self.model, &from) {
            (Some(_), Attribution::Exact(_)) => None,
            _ => match self.downstream(from.clone(), |d| d.can_sample(), "sampling") {
                Ok(downstream) => Some(downstream),
                Err(why) => {
                    return refused(self.refuse(
                        &host,
                        &pending,
                        &decision,
                        format!("sampling {why}"),
                    ));
                }
            },
        };
        // The session's model is asked for at most the cap; a client is
        // sent the request unchanged, so one over the cap is refused.
        let mut params = params;
        let mut capped = serde_json::Map::new();
        // A server's `includeContext` ("thisServer", "allServers") asks
        // whoever samples to add context from the session, other servers'
        // included: what one server must never read through another. It
        // is set to "none" before anyone is asked, and recorded as capped.
        if let Some(asked) = params
            .include_context
            .take_if(|c| *c != ContextInclusion::None)
        {
            capped.insert(
                "include_context".into(),
                json!({"asked": asked, "sent": "none"}),
            );
            params.include_context = Some(ContextInclusion::None);
        }
        if params.max_tokens > limits.max_tokens {
            if downstream.is_some() {
                return refused(self.refuse(
                    &host,
                    &pending,
                    &decision,
                    format!(
                        "sampling refused by warden: maxTokens {} is above this server's sampling.max_tokens {}",
                        params.max_tokens, limits.max_tokens
                    ),
                ));
            }
            capped.insert(
                "max_tokens".into(),
                json!({"asked": params.max_tokens, "sent": limits.max_tokens}),
            );
            tracing::info!(
                server,
                asked = params.max_tokens,
                sent = limits.max_tokens,
                "sampling maxTokens capped to sampling.max_tokens"
            );
            params.max_tokens = limits.max_tokens;
        }
        // Checked before the person is asked too: a server past its limit
        // would otherwise put question after question to them, each
        // approved answer then refused below.
        if self.sampling_used_up(server, limits.max_requests) {
            return refused(self.refuse(&host, &pending, &decision, used_up(limits.max_requests)));
        }
        if decision.effect == Effect::Ask {
            let asked = tokio::select! {
                asked = self.approve_sampling(&host, &pending, &decision, &params, &from) => asked,
                () = cancel.cancelled() => Err("the server cancelled its sampling request".into()),
            };
            let why = match asked {
                Ok(true) => None,
                Ok(false) => Some("sampling refused by warden: the person denied it".to_string()),
                Err(why) => Some(format!(
                    "sampling refused by warden: the decision is ask ({}), and {why}",
                    decision.reasons.join("; ")
                )),
            };
            if let Some(why) = why {
                return refused(self.refuse(&host, &pending, &decision, why));
            }
        }
        {
            let mut sampled = self.sampled.lock().unwrap_or_else(|p| p.into_inner());
            let count = sampled.entry(server.to_string()).or_default();
            // Again: requests asked about at the same time all passed the
            // check above.
            if *count >= limits.max_requests {
                drop(sampled);
                return refused(self.refuse(
                    &host,
                    &pending,
                    &decision,
                    used_up(limits.max_requests),
                ));
            }
            *count += 1;
        }
        let model = self.model.clone();
        let by = if model.is_some() { "model" } else { "client" };
        let sampled = async {
            match (model, downstream) {
                (Some(model), _) => {
                    let (result, calls) =
                        super::sampling_model::sample(model.as_ref(), server, &params).await?;
                    if !calls.is_empty() {
                        let reason = format!(
                            "the model asked for this tool call in its answer to server \
                             `{server}`'s sampling request, which offers no tools: not run"
                        );
                        crate::agent::record_calls_not_run(
                            &calls,
                            "skipped",
                            &reason,
                            &mut |call, why| {
                                host.record_skipped(
                                    &ToolRef::Qualified(call.name.clone()),
                                    &call.arguments,
                                    Caller::Model,
                                    why,
                                );
                            },
                        );
                    }
                    Ok(result)
                }
                (None, Some(downstream)) => downstream.sample(params).await,
                (None, None) => Err(ErrorData::internal_error("no one to sample", None)),
            }
        };
        let send = async {
            let answer = tokio::select! {
                answer = sampled => answer,
                () = cancel.cancelled() => Err(ErrorData::internal_error("the server cancelled its sampling request", None)),
            };
            Answered::by(by, answer)
        };
        let capped = (!capped.is_empty()).then_some(Value::Object(capped));
        self.forward(&host, &pending, &decision, capped, send).await
    }
}

/// What a sampling request is decided on (`input.sampling`) and recorded
/// with: every field whoever samples receives (the spec's names in
/// snake_case), so that a policy can refuse, and the log show, a request
/// offering tools, steering the model's choice or carrying metadata. The
/// first four keys are always there (null when not given, as before);
/// the others only when the server gave them, so that a policy's
/// `count(input.sampling.tools)` is undefined, not an error on null, for
/// a request without tools.
#[allow(deprecated)]
fn sampling_arguments(params: &CreateMessageRequestParams) -> Value {
    let mut arguments = json!({
        "max_tokens": params.max_tokens,
        "messages": params.messages,
        "system_prompt": params.system_prompt,
        "include_context": params.include_context,
    });
    let given = [
        ("model_preferences", json!(params.model_preferences)),
        ("temperature", json!(params.temperature)),
        ("stop_sequences", json!(params.stop_sequences)),
        ("metadata", json!(params.metadata)),
        ("tools", json!(params.tools)),
        ("tool_choice", json!(params.tool_choice)),
    ];
    if let Some(map) = arguments.as_object_mut() {
        map.extend(
            given
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.to_string(), v)),
        );
    }
    arguments
}

/// Why a server's sampling request is refused once it has had its share.
fn used_up(max_requests: u32) -> String {
    format!(
        "sampling refused by warden: this server's sampling.max_requests ({max_requests}) are \
         used up for this session"
    )
}

/// Why a request the session made has no one to answer its server's
/// elicitation.
const NO_ONE_TO_ASK: &str = "no one to ask: there is no terminal to put it to \
    (warden reads /dev/tty) and no --answers file was given";

/// Why a gateway request other than a tool call (a resource read, a
/// prompt) has no one to put its server's question to.
const GATEWAY_CANNOT_ASK: &str = "no one to ask: only the client of a tool call is \
    passed its server's requests";

/// Who an elicitation goes to.
enum Asked {
    /// The session is the client: the terminal or the answers file.
    Local(Arc<dyn Answerer>),
    /// The client that made the request the server is working on.
    Client(Arc<dyn Downstream>),
}

fn decline() -> Result<ElicitResult, ErrorData> {
    Ok(ElicitResult::new(ElicitationAction::Decline))
}

/// How a server request passed on ended.
struct Answered<T> {
    answer: Result<T, ErrorData>,
    /// Who answered (`request_result.answered_by`).
    by: Option<String>,
    /// Why no one answered (the server is sent `answer`, a decline).
    unanswered: Option<String>,
}

impl<T> Answered<T> {
    fn by(who: &str, answer: Result<T, ErrorData>) -> Self {
        Answered {
            answer,
            by: Some(who.to_string()),
            unanswered: None,
        }
    }
}

impl ServerRequests for Decider {
    fn elicit<'a>(
        &'a self,
        server: &'a str,
        params: ElicitRequestParams,
        from: Attribution,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ElicitResult, ErrorData>> {
        Box::pin(self.elicit_inner(server, params, from, cancel))
    }

    fn sample<'a>(
        &'a self,
        server: &'a str,
        params: CreateMessageRequestParams,
        from: Attribution,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<CreateMessageResult, ErrorData>> {
        Box::pin(self.sample_inner(server, params, from, cancel))
    }

    fn roots_answered(&self, server: &str, answer: &ListRootsResult) -> Result<(), String> {
        // A session already gone records nothing, and answers nothing.
        let host = self
            .host
            .upgrade()
            .ok_or_else(|| "the session has ended".to_string())?;
        host.record_roots(server, answer, self.caller)
    }
}
