//! The path of one tool call, top to bottom: resolve the name →
//! `Pipeline::decide` → `authorize` (the only source of a `Permit`) →
//! write-ahead `tool_call` record (fail closed) → connection → `tool_result`
//! record. Every caller goes through [`Host::call`], and every call it is
//! asked to make is recorded: refused before the pipeline (unknown tool or
//! server, server unavailable), denied, not sent because the log failed, or
//! sent and ended (ok, errors, timeout, cancelled, abandoned).

use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::mcp::{CallError, ServerState};
use crate::registry::{ToolEntry, qualified_name};
use futures::future::BoxFuture;
pub use warden_audit::Caller;
use warden_audit::{
    ApprovalAction, DecisionRecord, Event, Outcome, RequestKind, RequestResultRecord, ResultRecord,
    ToolCallRecord,
};
use warden_core::TransportKind;
use warden_core::digest::sha256_json;
use warden_policy::{
    AskAnswer, AskPrompt, Asker, CallContext, CallFacts, Decision, Effect, PinState, ServerFacts,
    Stage, ToolFacts,
};

use super::{Host, ToolView};

/// A proposed call.
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub target: ToolRef,
    pub arguments: Value,
    pub caller: Caller,
}

/// How a caller names the tool it wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRef {
    /// `mcp__S__T`, as models see tools.
    Qualified(String),
    /// A configured server and its own tool name (`warden call S T`).
    Remote { server: String, tool: String },
    /// A name the caller's front end could not map to a tool (e.g. a
    /// gateway name it does not list): refused as `unknown_tool`, and
    /// recorded as asked.
    Unlisted(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct DecisionSummary {
    pub effect: Effect,
    pub stage: Stage,
    pub reasons: Vec<String>,
}

/// What a call came to: `warden call --json` prints exactly this
/// (CONTRACT §2), with `decision` null when the call was refused before
/// the pipeline and `result` null when nothing came back.
#[derive(Debug, Clone, Serialize)]
pub struct CallReport {
    /// `None` when the name resolves to no server.
    pub server: Option<String>,
    pub tool: Option<String>,
    pub decision: Option<DecisionSummary>,
    pub outcome: Outcome,
    /// The `CallToolResult` as the server sent it (every content block).
    pub result: Option<Value>,
    pub error: Option<String>,
    pub duration_ms: u64,
    /// `mcp__S__T`, or the name as asked when it resolves to no tool.
    #[serde(skip)]
    pub qualified: String,
    /// The audit records' `call_id`.
    #[serde(skip)]
    pub call_id: String,
}

impl CallReport {
    /// What a model or an MCP client is told about a denial: the deciding
    /// stage and the reasons, so it can adapt.
    pub fn denial_text(&self) -> String {
        match &self.decision {
            Some(d) => format!(
                "Denied by warden's {} stage: {}",
                d.stage,
                d.reasons.join("; ")
            ),
            None => self.error.clone().unwrap_or_default(),
        }
    }

    /// This report with warden's own texts (reasons, error) cleaned of
    /// secrets and credentials in URLs ([`crate::scrub`]); the server's
    /// result is left as it sent it.
    pub fn scrubbed(&self) -> CallReport {
        let mut out = self.clone();
        if let Some(decision) = &mut out.decision {
            for r in &mut decision.reasons {
                *r = crate::scrub::clean(r).into_owned();
            }
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

/// The tool a request resolved to.
enum Target {
    /// A listed tool of a connected server.
    Listed(ToolEntry),
    /// A tool of a `blocked` server: never started, so never listed. The
    /// pipeline decides it like any call, and its trust stage denies it.
    Blocked { server: String, tool: String },
}

impl Target {
    fn names(&self) -> (String, String, String) {
        match self {
            Target::Listed(entry) => (
                entry.server.clone(),
                entry.remote.clone(),
                entry.qualified.clone(),
            ),
            Target::Blocked { server, tool } => {
                (server.clone(), tool.clone(), qualified_name(server, tool))
            }
        }
    }
}

/// A call refused before the pipeline.
struct Refusal {
    outcome: Outcome,
    server: Option<String>,
    tool: Option<String>,
    qualified: String,
    error: String,
}

impl Host {
    /// Decides, records, performs and records one tool call. Never fails:
    /// every way a call can end is a [`CallReport`] (and a record).
    pub async fn call(
        &self,
        request: CallRequest,
        asker: Option<&dyn Asker>,
        cancel: CancellationToken,
    ) -> CallReport {
        let started = Instant::now();
        let call_id = uuid::Uuid::new_v4().to_string();
        let view = self.tools();
        let target = match self.resolve(&request.target, &view) {
            Ok(target) => target,
            Err(refusal) => return self.refuse(&request, call_id, refusal, started),
        };
        let (server, tool, qualified) = target.names();
        let facts = self.facts_for(&target, &view, &request.arguments);
        // Decided off this task, with a deadline: a runaway schema or
        // policy is a deny at the deadline, never a wedged caller; the
        // caller's cancellation (SIGTERM, --timeout, a client going away)
        // ends the wait at once.
        let facts = std::sync::Arc::new(facts);
        // One pipeline for the whole call, even if a reload swaps it meanwhile.
        let pipeline = self.pipeline();
        let decided = tokio::select! {
            decision = pipeline.decide_within(facts.clone()) => Some(decision),
            () = cancel.cancelled() => None,
            () = self.exiting.cancelled() => None,
        };
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        let recording = asker.map(|inner| RecordingAsker {
            inner,
            host: self,
            call_id: &call_id,
        });
        let asker = recording.as_ref().map(|a| a as &dyn Asker);
        let mut report = CallReport {
            server: Some(server),
            tool: Some(tool),
            decision: None,
            outcome: Outcome::Pending,
            result: None,
            error: None,
            duration_ms: 0,
            qualified,
            call_id: call_id.clone(),
        };
        let Some(decision) = decided else {
            let decision = cancelled_before_decision(pipeline.policy_sha256());
            report.decision = Some(summary(&decision));
            report.outcome = Outcome::Cancelled;
            report.error = Some("cancelled before warden decided".into());
            report.duration_ms = elapsed_ms(started);
            self.audit
                .record(self.call_record(&request, &report, Some(&decision)));
            return report;
        };
        let permit = match pipeline.authorize(&facts, decision, asker).await {
            Ok(permit) => permit,
            Err(decision) => {
                self.stats.denied.fetch_add(1, Ordering::Relaxed);
                report.decision = Some(summary(&decision));
                report.outcome = Outcome::Denied;
                report.error = Some(format!(
                    "denied by the {} stage: {}",
                    decision.stage,
                    decision.reasons.join("; ")
                ));
                report.duration_ms = elapsed_ms(started);
                self.audit
                    .record(self.call_record(&request, &report, Some(&decision)));
                return report;
            }
        };
        let decision = permit.decision().clone();
        report.decision = Some(summary(&decision));

        // Write-ahead: nothing is sent that is not in the log first.
        if let Err(refusal) =
            self.audit
                .write_ahead(self.call_record(&request, &report, Some(&decision)))
        {
            report.outcome = Outcome::AuditFailed;
            report.error = Some(refusal.to_string());
            report.duration_ms = elapsed_ms(started);
            return report;
        }
        let pending = PendingCall::new(self, RequestKind::Tool, &report.call_id, started);

        let arguments = match &request.arguments {
            Value::Object(map) => Some(map.clone()),
            _ => None,
        };
        let sent = self.manager.call(permit, arguments, cancel);
        let answer = tokio::select! {
            biased;
            () = self.exiting.cancelled() => None,
            answer = sent => Some(answer),
        };
        match answer {
            Some(Ok(result)) => {
                report.outcome = if result.is_error.unwrap_or(false) {
                    Outcome::ToolError
                } else {
                    Outcome::Ok
                };
                report.result = serde_json::to_value(&result).ok();
            }
            Some(Err(CallError::Cancelled)) if !self.exiting.is_cancelled() => {
                report.outcome = Outcome::Cancelled;
                report.error = Some(CallError::Cancelled.to_string());
            }
            Some(Err(CallError::Cancelled)) | None => {
                report.outcome = Outcome::Abandoned;
                report.error = Some(EXITING.to_string());
            }
            Some(Err(error)) => {
                report.outcome = match error {
                    CallError::Timeout(_) => Outcome::Timeout,
                    _ => Outcome::RpcError,
                };
                report.error = Some(error.to_string());
            }
        }
        report.duration_ms = elapsed_ms(started);
        pending.finish(&report);
        report
    }

    /// The tool a request names, or why it is refused before the pipeline.
    fn resolve(&self, target: &ToolRef, view: &ToolView) -> Result<Target, Refusal> {
        let (server, tool) = match target {
            ToolRef::Qualified(name) | ToolRef::Unlisted(name) => {
                let listed = match target {
                    ToolRef::Qualified(_) => view.get(name),
                    _ => None,
                };
                return match listed {
                    Some(entry) => Ok(Target::Listed(entry.clone())),
                    None => Err(Refusal {
                        outcome: Outcome::UnknownTool,
                        server: None,
                        tool: None,
                        qualified: name.clone(),
                        error: format!("unknown tool `{name}`"),
                    }),
                };
            }
            ToolRef::Remote { server, tool } => (server, tool),
        };
        let refusal = |outcome, error: String| Refusal {
            outcome,
            server: Some(server.clone()),
            tool: Some(tool.clone()),
            qualified: qualified_name(server, tool),
            error,
        };
        if self.server_config(server).is_none() {
            let mut known: Vec<String> = self.config.servers.keys().cloned().collect();
            known.extend(super::lock(&self.session_servers).keys().cloned());
            known.sort();
            known.dedup();
            return Err(refusal(
                Outcome::UnknownServer,
                format!(
                    "unknown server `{server}`; configured: {}",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        }
        let statuses = self.statuses();
        let Some(status) = statuses.iter().find(|s| &s.name == server) else {
            return Err(refusal(
                Outcome::ServerUnavailable,
                format!("server `{server}` is not started in this session"),
            ));
        };
        match status.state {
            ServerState::Connected => {}
            ServerState::Blocked => {
                return Ok(Target::Blocked {
                    server: server.clone(),
                    tool: tool.clone(),
                });
            }
            state => {
                let reason = status.error.clone().unwrap_or_else(|| format!("{state:?}"));
                let hint = match state {
                    ServerState::PendingApproval => {
                        format!(" (run `warden mcp approve {server}`)")
                    }
                    _ => String::new(),
                };
                let outcome = if status.sandbox_unavailable {
                    Outcome::SandboxUnavailable
                } else {
                    Outcome::ServerUnavailable
                };
                return Err(refusal(
                    outcome,
                    format!("server `{server}` is not available: {reason}{hint}"),
                ));
            }
        }
        match view.find(server, tool) {
            Some(entry) => Ok(Target::Listed(entry.clone())),
            None => {
                if let Some(skipped) = view
                    .skipped()
                    .iter()
                    .find(|s| &s.server == server && &s.name == tool)
                {
                    return Err(refusal(
                        Outcome::UnknownTool,
                        format!(
                            "tool `{tool}` of server `{server}` is not served: {}",
                            skipped.reason
                        ),
                    ));
                }
                let mut names: Vec<String> = view
                    .visible()
                    .filter(|t| &t.server == server)
                    .map(|t| t.remote.clone())
                    .collect();
                names.sort();
                Err(refusal(
                    Outcome::UnknownTool,
                    format!(
                        "unknown tool `{tool}` on server `{server}`; it has: {}",
                        if names.is_empty() {
                            "no tools".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                ))
            }
        }
    }

    /// The pipeline's facts, from warden's own state only: trust, scope and
    /// transport from the configuration; annotations, schema and pin state
    /// from the server's listing (a blocked server has none).
    fn facts_for(&self, target: &Target, view: &ToolView, arguments: &Value) -> CallFacts {
        let (server, tool, qualified) = target.names();
        let config = self.server_config(&server);
        let config = config.as_ref();
        let call_index = self.call_index.fetch_add(1, Ordering::Relaxed) + 1;
        let (annotations, input_schema, pin) = match target {
            Target::Listed(entry) => (
                entry
                    .definition
                    .annotations
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok())
                    .unwrap_or(Value::Null),
                Value::Object((*entry.definition.input_schema).clone()),
                view.pin(&entry.qualified),
            ),
            // Never listed: no definition to check or pin; the trust stage
            // decides.
            Target::Blocked { .. } => (
                Value::Null,
                serde_json::json!({"type": "object"}),
                PinState::Pinned,
            ),
        };
        CallFacts {
            server: ServerFacts {
                name: server,
                trust: config.map(|s| s.trust).unwrap_or_default(),
                transport: config.map_or(TransportKind::Stdio, |s| s.transport.kind()),
                scope: config.map_or(crate::config::Scope::Project, |s| s.scope),
            },
            tool: ToolFacts {
                name: tool,
                qualified,
                annotations,
                input_schema,
                pin,
            },
            arguments: arguments.clone(),
            context: CallContext {
                mode: self.mode,
                session: self.session.clone(),
                call_index,
            },
        }
    }

    /// Records and reports a call refused before the pipeline.
    fn refuse(
        &self,
        request: &CallRequest,
        call_id: String,
        refusal: Refusal,
        started: Instant,
    ) -> CallReport {
        let report = CallReport {
            server: refusal.server,
            tool: refusal.tool,
            decision: None,
            outcome: refusal.outcome,
            result: None,
            error: Some(refusal.error),
            duration_ms: elapsed_ms(started),
            qualified: refusal.qualified,
            call_id,
        };
        self.audit.record(self.call_record(request, &report, None));
        report
    }

    /// The `tool_call` record of a report: pending, or a refusal.
    fn call_record(
        &self,
        request: &CallRequest,
        report: &CallReport,
        decision: Option<&Decision>,
    ) -> Event {
        Event::ToolCall(ToolCallRecord {
            call_id: report.call_id.clone(),
            server: report.server.clone(),
            tool: report.tool.clone(),
            qualified: report.qualified.clone(),
            caller: request.caller,
            // The log redacts and shortens them; the digest is of all of them.
            arguments: request.arguments.clone(),
            args_sha256: sha256_json(&request.arguments),
            decision: decision.map(|d| DecisionRecord {
                effect: d.effect,
                stage: d.stage,
                reasons: d.reasons.clone(),
                policy_sha256: d.policy_sha256.clone(),
            }),
            outcome: report.outcome,
            error: report.error.clone(),
        })
    }
}

/// Why an `abandoned` call ended, when warden is exiting.
const EXITING: &str = "warden is exiting: it stopped waiting, and the call's outcome is unknown";
/// Why an `abandoned` call ended, when its caller stopped waiting.
const DROPPED: &str =
    "the caller stopped waiting (a deadline, or it went away); the call's outcome is unknown";

/// A request whose pending record is written: its result record
/// (`tool_result`, or `request_result` for the other kinds of CONTRACT §8)
/// is written by [`PendingCall::finish`], or as `abandoned` if the
/// request's future is dropped first (a run's deadline, a client that went
/// away).
struct PendingCall<'a> {
    host: &'a Host,
    kind: RequestKind,
    call_id: String,
    started: Instant,
    done: bool,
}

impl<'a> PendingCall<'a> {
    fn new(host: &'a Host, kind: RequestKind, call_id: &str, started: Instant) -> Self {
        host.in_flight.fetch_add(1, Ordering::SeqCst);
        PendingCall {
            host,
            kind,
            call_id: call_id.to_string(),
            started,
            done: false,
        }
    }

    fn finish(mut self, report: &CallReport) {
        self.done = true;
        self.write(ResultRecord {
            call_id: self.call_id.clone(),
            outcome: report.outcome,
            duration_ms: report.duration_ms,
            result_sha256: report.result.as_ref().map(sha256_json),
            error: report.error.clone(),
        });
    }

    fn write(&self, result: ResultRecord) {
        let event = match self.kind {
            RequestKind::Tool => Event::ToolResult(result),
            kind => Event::RequestResult(RequestResultRecord { kind, result }),
        };
        self.host.audit.record(event);
    }
}

impl Drop for PendingCall<'_> {
    fn drop(&mut self) {
        if !self.done {
            let call_id = std::mem::take(&mut self.call_id);
            self.write(ResultRecord {
                call_id,
                outcome: Outcome::Abandoned,
                duration_ms: elapsed_ms(self.started),
                result_sha256: None,
                error: Some(DROPPED.to_string()),
            });
        }
        if self.host.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.host.settled.notify_waiters();
        }
    }
}

/// Passes an `ask` to the person (or client) and records the answer in the
/// audit log as an `approval` event linked to the call.
struct RecordingAsker<'a> {
    inner: &'a dyn Asker,
    host: &'a Host,
    call_id: &'a str,
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
                .server_config(&prompt.server)
                .map(|s| s.digest)
                .unwrap_or_default();
            self.host.audit_event(Event::Approval {
                server: prompt.server.clone(),
                config_sha256,
                action,
                subject: prompt.qualified.clone(),
                call_id: Some(self.call_id.to_string()),
            });
            answer
        })
    }
}

fn summary(decision: &Decision) -> DecisionSummary {
    DecisionSummary {
        effect: decision.effect,
        stage: decision.stage,
        reasons: decision.reasons.clone(),
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
