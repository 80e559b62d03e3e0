//! A server's own requests (CONTRACT §8): `elicitation/create` and
//! `sampling/createMessage`, decided by the pipeline and recorded like
//! every request (`request` written ahead, `request_result` with the
//! answer's digest, never its content).
//!
//! An elicitation is the question to the person: the default stage's
//! `ask` means "put it to the person", so allow and ask both pass it to
//! the party that made the request the server is working on (a gateway
//! client that declared elicitation), unchanged; a deny (also every
//! `ask` with `--ci`) declines it. Sampling needs an allow (rule or
//! policy): an `ask` cannot be put to anyone here and is a deny; allowed
//! sampling goes to the gateway client, within the server's
//! `sampling.max_tokens` and `sampling.max_requests`.

// Sampling is deprecated for 2026-07-28 (SEP-2577) but is how the session
// protocol (2025-11-25) works.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use futures::future::BoxFuture;
use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_audit::{Caller, Outcome};
use warden_core::RequestKind;
use warden_policy::{Decision, Effect};

use super::Host;
use super::call::CallReport;
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

impl Host {
    /// Has this session decide its servers' elicitation and sampling
    /// requests, recorded with `caller` (who the session works for).
    pub fn install_server_requests(self: &Arc<Self>, caller: Caller) {
        self.install_server_requests_with(caller, None);
    }

    /// [`Host::install_server_requests`], with the session's own model to
    /// answer allowed sampling (`warden run`).
    pub fn install_server_requests_with(
        self: &Arc<Self>,
        caller: Caller,
        model: Option<Arc<dyn crate::agent::Model>>,
    ) {
        self.manager.set_server_requests(Arc::new(Decider {
            host: Arc::downgrade(self),
            caller,
            model,
            sampled: Mutex::new(HashMap::new()),
        }));
    }
}

struct Decider {
    host: Weak<Host>,
    caller: Caller,
    /// The session's own model, which answers allowed sampling.
    model: Option<Arc<dyn crate::agent::Model>>,
    /// Sampling requests granted per server this session.
    sampled: Mutex<HashMap<String, u32>>,
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

    /// Records a refusal after the decision.
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

    /// Writes the request ahead, runs `send`, records its result's digest.
    async fn forward<T, F>(
        &self,
        host: &Host,
        pending: &Pending,
        decision: &Decision,
        send: F,
    ) -> Result<T, ErrorData>
    where
        T: serde::Serialize,
        F: Future<Output = Result<T, ErrorData>>,
    {
        let mut report = pending.report(Outcome::Pending, Some(decision), None);
        if let Err(refusal) = host.audit.write_ahead(host.request_record(
            self.caller,
            &pending.arguments,
            &report,
            Some(decision),
        )) {
            return Err(ErrorData::internal_error(
                format!("warden could not record the request: {refusal}"),
                None,
            ));
        }
        let written = PendingCall::new(host, pending.kind, &pending.call_id, pending.started);
        let answer = send.await;
        match &answer {
            Ok(result) => {
                report.outcome = Outcome::Ok;
                report.result = serde_json::to_value(result).ok();
            }
            Err(error) => {
                report.outcome = Outcome::RpcError;
                report.error = Some(format!("{}: {}", error.code.0, error.message));
            }
        }
        report.duration_ms = elapsed_ms(pending.started);
        written.finish(&report);
        answer
    }

    async fn elicit_inner(
        &self,
        server: &str,
        params: ElicitRequestParams,
        from: Attribution,
        cancel: CancellationToken,
    ) -> Result<ElicitResult, ErrorData> {
        let decline = || Ok(ElicitResult::new(ElicitationAction::Decline));
        let Some(host) = self.host.upgrade() else {
            return decline();
        };
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
        if !matches!(params, ElicitRequestParams::FormElicitationParams { .. }) {
            self.refuse(
                &host,
                &pending,
                &decision,
                "declined: warden passes on form-mode elicitation only".into(),
            );
            return decline();
        }
        // Allow, or ask: the elicitation is itself the question to the person.
        let downstream = match self.downstream(from, |d| d.can_elicit(), "elicitation") {
            Ok(downstream) => downstream,
            Err(why) => {
                let why = self.refuse(&host, &pending, &decision, why);
                tracing::info!(server, "{why}");
                return decline();
            }
        };
        let send = async {
            tokio::select! {
                answer = downstream.elicit(params) => answer,
                () = cancel.cancelled() => Err(ErrorData::internal_error("the server cancelled its elicitation", None)),
            }
        };
        self.forward(&host, &pending, &decision, send).await
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
                "not passed on: this session (warden call, run or the repl) does not put a server's {what} to anyone yet"
            )),
            Attribution::Idle => Err(format!(
                "not passed on: {what} outside any request of warden's has no one to go to"
            )),
            Attribution::Ambiguous(n) => Err(format!(
                "not passed on: {n} requests are in flight on this connection, so whose {what} this is cannot be told"
            )),
        }
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
        let arguments = json!({
            "max_tokens": params.max_tokens,
            "messages": params.messages,
            "system_prompt": params.system_prompt,
        });
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
        if decision.effect != Effect::Allow {
            let why = match decision.effect {
                Effect::Deny => format!(
                    "sampling refused by warden: denied by the {} stage: {}",
                    decision.stage,
                    decision.reasons.join("; ")
                ),
                _ => format!(
                    "sampling refused by warden: the decision is ask ({}), and sampling is allowed only by a rule or policy (`sampling__{server}`)",
                    decision.reasons.join("; ")
                ),
            };
            return refused(self.refuse(&host, &pending, &decision, why));
        }
        if self.caller == Caller::Cli {
            return refused(self.refuse(
                &host,
                &pending,
                &decision,
                "sampling refused by warden: `warden call` has no model to sample".into(),
            ));
        }
        let limits = host
            .server_config(server)
            .map(|c| c.sampling)
            .unwrap_or_default();
        if params.max_tokens > limits.max_tokens {
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
        let downstream = match (
            &self.model,
            self.downstream(from, |d| d.can_sample(), "sampling"),
        ) {
            (Some(_), _) => None,
            (None, Ok(downstream)) => Some(downstream),
            (None, Err(why)) => {
                return refused(self.refuse(&host, &pending, &decision, format!("sampling {why}")));
            }
        };
        {
            let mut sampled = self.sampled.lock().unwrap_or_else(|p| p.into_inner());
            let count = sampled.entry(server.to_string()).or_default();
            if *count >= limits.max_requests {
                drop(sampled);
                return refused(self.refuse(
                    &host,
                    &pending,
                    &decision,
                    format!(
                        "sampling refused by warden: this server's sampling.max_requests ({}) are used up for this session",
                        limits.max_requests
                    ),
                ));
            }
            *count += 1;
        }
        let model = self.model.clone();
        let sampled = async {
            match (model, downstream) {
                (Some(model), _) => {
                    super::sampling_model::sample(model.as_ref(), server, &params).await
                }
                (None, Some(downstream)) => downstream.sample(params).await,
                (None, None) => Err(ErrorData::internal_error("no one to sample", None)),
            }
        };
        let send = async {
            tokio::select! {
                answer = sampled => answer,
                () = cancel.cancelled() => Err(ErrorData::internal_error("the server cancelled its sampling request", None)),
            }
        };
        self.forward(&host, &pending, &decision, send).await
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
}
