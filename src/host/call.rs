//! The path of one tool call, top to bottom: registry lookup →
//! `Pipeline::decide` → `authorize` (the only source of a `Permit`) →
//! connection → result → audit. Every caller goes through [`Host::call`].

use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::mcp::CallError;
use futures::future::BoxFuture;
pub use warden_audit::Caller;
use warden_audit::{ApprovalAction, DecisionRecord, Event, Outcome, ToolCallRecord};
use warden_core::TransportKind;
use warden_core::digest::sha256_json;
use warden_policy::{
    AskAnswer, AskPrompt, Asker, CallContext, CallFacts, Decision, Effect, ServerFacts, Stage,
    ToolFacts,
};

use super::Host;

/// A proposed call, by qualified name (`mcp__S__T`).
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub qualified: String,
    pub arguments: Value,
    pub caller: Caller,
}

#[derive(Debug, Clone, Serialize)]
pub struct DecisionSummary {
    pub effect: Effect,
    pub stage: Stage,
    pub reasons: Vec<String>,
}

/// What a call came to: `warden call --json` prints exactly this.
#[derive(Debug, Clone, Serialize)]
pub struct CallReport {
    pub server: String,
    pub tool: String,
    pub decision: DecisionSummary,
    pub outcome: Outcome,
    /// The `CallToolResult` as the server sent it (every content block).
    pub result: Option<Value>,
    pub error: Option<String>,
    pub duration_ms: u64,
    #[serde(skip)]
    pub qualified: String,
}

impl CallReport {
    /// What a model or an MCP client is told about a denial: the deciding
    /// stage and the reasons, so it can adapt.
    pub fn denial_text(&self) -> String {
        format!(
            "Denied by warden's {} stage: {}",
            self.decision.stage,
            self.decision.reasons.join("; ")
        )
    }

    /// This report with warden's own texts (reasons, error) cleaned of
    /// secrets and credentials in URLs ([`crate::scrub`]); the server's
    /// result is left as it sent it.
    pub fn scrubbed(&self) -> CallReport {
        let mut out = self.clone();
        for r in &mut out.decision.reasons {
            *r = crate::scrub::clean(r).into_owned();
        }
        if let Some(e) = &mut out.error {
            *e = crate::scrub::clean(e).into_owned();
        }
        out
    }

    /// The text a model sees for this call: warden's texts cleaned, the
    /// server's without configured secrets.
    pub fn text_for_model(&self) -> String {
        let text = self.text_for_model_raw();
        match self.outcome {
            Outcome::Ok | Outcome::ToolError => crate::scrub::secrets_only(&text).into_owned(),
            _ => crate::scrub::clean(&text).into_owned(),
        }
    }

    fn text_for_model_raw(&self) -> String {
        match self.outcome {
            Outcome::Denied => self.denial_text(),
            Outcome::Ok | Outcome::ToolError => {
                let mut out = Vec::new();
                if let Some(result) = &self.result {
                    if let Some(blocks) = result.get("content").and_then(Value::as_array) {
                        for block in blocks {
                            match block.get("type").and_then(Value::as_str) {
                                Some("text") => out.push(
                                    block
                                        .get("text")
                                        .and_then(Value::as_str)
                                        .unwrap_or_default()
                                        .to_string(),
                                ),
                                Some(other) => out.push(format!("[{other} content]")),
                                None => {}
                            }
                        }
                    }
                    if out.is_empty()
                        && let Some(structured) = result.get("structuredContent")
                    {
                        out.push(structured.to_string());
                    }
                }
                out.join("\n")
            }
            _ => self.error.clone().unwrap_or_default(),
        }
    }
}

/// A call the host refused before the pipeline could decide (unknown tool).
#[derive(Debug, thiserror::Error)]
pub enum CallRefusal {
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
}

impl Host {
    /// Decides, performs and audits one tool call.
    pub async fn call(
        &self,
        request: CallRequest,
        asker: Option<&dyn Asker>,
        cancel: CancellationToken,
    ) -> Result<CallReport, CallRefusal> {
        let started = Instant::now();
        let view = self.tools();
        let Some(entry) = view.get(&request.qualified).cloned() else {
            return Err(CallRefusal::UnknownTool(request.qualified));
        };
        let server = self.server_config(&entry.server);
        let server = server.as_ref();
        let call_index = self.call_index.fetch_add(1, Ordering::Relaxed) + 1;
        let facts = CallFacts {
            server: ServerFacts {
                name: entry.server.clone(),
                trust: server.map(|s| s.trust).unwrap_or_default(),
                transport: server.map_or(TransportKind::Stdio, |s| s.transport.kind()),
                scope: server.map_or(crate::config::Scope::Project, |s| s.scope),
            },
            tool: ToolFacts {
                name: entry.remote.clone(),
                qualified: entry.qualified.clone(),
                annotations: entry
                    .definition
                    .annotations
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok())
                    .unwrap_or(Value::Null),
                input_schema: Value::Object((*entry.definition.input_schema).clone()),
                pin: view.pin(&entry.qualified),
            },
            arguments: request.arguments.clone(),
            context: CallContext {
                mode: self.mode,
                session: self.session.clone(),
                call_index,
            },
        };
        // Decided off this task, with a deadline: a runaway schema or
        // policy is a deny at the deadline, never a wedged caller; the
        // caller's cancellation (SIGTERM, --timeout, a client going away)
        // ends the wait at once.
        let facts = std::sync::Arc::new(facts);
        let decision = tokio::select! {
            decision = self.pipeline.decide_within(facts.clone()) => decision,
            () = cancel.cancelled() => {
                self.stats.calls.fetch_add(1, Ordering::Relaxed);
                let decision = cancelled_before_decision(self.pipeline.policy_sha256());
                let report = CallReport {
                    outcome: Outcome::Cancelled,
                    error: Some("cancelled before warden decided".into()),
                    ..report(&entry.server, &entry.remote, &entry.qualified, &decision, started)
                };
                self.audit_call(&request, &facts, &decision, &report);
                return Ok(report);
            }
        };
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let recording = asker.map(|inner| RecordingAsker { inner, host: self });
        let asker = recording.as_ref().map(|a| a as &dyn Asker);
        let permit = match self.pipeline.authorize(&facts, decision, asker).await {
            Ok(permit) => permit,
            Err(decision) => {
                self.stats.denied.fetch_add(1, Ordering::Relaxed);
                let report = report(
                    &entry.server,
                    &entry.remote,
                    &entry.qualified,
                    &decision,
                    started,
                );
                let report = CallReport {
                    outcome: Outcome::Denied,
                    error: Some(format!(
                        "denied by the {} stage: {}",
                        decision.stage,
                        decision.reasons.join("; ")
                    )),
                    ..report
                };
                self.audit_call(&request, &facts, &decision, &report);
                return Ok(report);
            }
        };
        let decision = permit.decision().clone();
        let arguments = match &request.arguments {
            Value::Object(map) => Some(map.clone()),
            _ => None,
        };
        let result = self.manager.call(permit, arguments, cancel).await;
        let base = report(
            &entry.server,
            &entry.remote,
            &entry.qualified,
            &decision,
            started,
        );
        let report = match result {
            Ok(result) => {
                let is_error = result.is_error.unwrap_or(false);
                CallReport {
                    outcome: if is_error {
                        Outcome::ToolError
                    } else {
                        Outcome::Ok
                    },
                    result: serde_json::to_value(&result).ok(),
                    ..base
                }
            }
            Err(error) => CallReport {
                outcome: match error {
                    CallError::Timeout(_) => Outcome::Timeout,
                    CallError::Cancelled => Outcome::Cancelled,
                    _ => Outcome::RpcError,
                },
                error: Some(error.to_string()),
                ..base
            },
        };
        self.audit_call(&request, &facts, &decision, &report);
        Ok(report)
    }

    fn audit_call(
        &self,
        request: &CallRequest,
        facts: &CallFacts,
        decision: &Decision,
        report: &CallReport,
    ) {
        let Some(audit) = &self.audit else {
            return;
        };
        let record = ToolCallRecord {
            server: report.server.clone(),
            tool: report.tool.clone(),
            qualified: report.qualified.clone(),
            caller: request.caller,
            arguments: audit.redact_arguments(&facts.arguments),
            args_sha256: sha256_json(&facts.arguments),
            decision: DecisionRecord {
                effect: decision.effect,
                stage: decision.stage,
                reasons: decision.reasons.clone(),
                policy_sha256: decision.policy_sha256.clone(),
            },
            outcome: report.outcome,
            duration_ms: report.duration_ms,
            result_sha256: report.result.as_ref().map(sha256_json),
            error: report.error.clone(),
        };
        self.audit_event(Event::ToolCall(record));
    }
}

/// Passes an `ask` to the person (or client) and records the answer in the
/// audit log as an `approval` event.
struct RecordingAsker<'a> {
    inner: &'a dyn Asker,
    host: &'a Host,
}

impl Asker for RecordingAsker<'_> {
    fn ask<'a>(&'a self, prompt: &'a AskPrompt) -> BoxFuture<'a, AskAnswer> {
        Box::pin(async move {
            let answer = self.inner.ask(prompt).await;
            let action = match answer {
                AskAnswer::AllowOnce => ApprovalAction::AllowOnce,
                AskAnswer::AllowSession => ApprovalAction::AllowSession,
                AskAnswer::Deny => ApprovalAction::Deny,
            };
            let config_sha256 = self
                .host
                .config
                .servers
                .get(&prompt.server)
                .map(|s| s.digest.clone())
                .unwrap_or_default();
            self.host.audit_event(Event::Approval {
                server: prompt.server.clone(),
                config_sha256,
                action,
                subject: prompt.qualified.clone(),
            });
            answer
        })
    }
}

fn report(
    server: &str,
    tool: &str,
    qualified: &str,
    decision: &Decision,
    started: Instant,
) -> CallReport {
    CallReport {
        server: server.to_string(),
        tool: tool.to_string(),
        qualified: qualified.to_string(),
        decision: DecisionSummary {
            effect: decision.effect,
            stage: decision.stage,
            reasons: decision.reasons.clone(),
        },
        outcome: Outcome::Ok,
        result: None,
        error: None,
        duration_ms: elapsed_ms(started),
    }
}

/// The decision recorded for a call cancelled while it was being decided.
fn cancelled_before_decision(policy_sha256: Option<&str>) -> Decision {
    Decision {
        effect: Effect::Deny,
        stage: Stage::Default,
        reasons: vec!["the call was cancelled before warden decided".into()],
        stages: Vec::new(),
        policy_sha256: policy_sha256.map(str::to_string),
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
