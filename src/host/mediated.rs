//! The one mediated path (CONTRACT §5, §6, §8) that every request warden
//! decides goes through, tool calls and resource reads, subscriptions and
//! prompts alike: `Pipeline::decide_within` → `authorize` (the only source
//! of a `Permit`) → write-ahead record (`tool_call`, or `request` with its
//! kind; fail closed) → `Manager::send` → result record (`tool_result` /
//! `request_result`, `abandoned` when the caller goes away). Resolving
//! what a request names is the caller's part (`call.rs` for tools,
//! `requests.rs` for resources and prompts); from [`Resolved`] on, every
//! kind takes the same steps.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::audit::AuditRefusal;
use futures::future::BoxFuture;
use rmcp::model::ServerResult;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_audit::{
    ApprovalAction, Caller, Event, Outcome, RequestKind as AuditKind, RequestResultRecord,
    ResultRecord,
};
use warden_core::digest::sha256_json;
use warden_policy::{AskAnswer, AskPrompt, Asker, CallFacts, Decision, Effect, Stage};

use super::Host;
use super::call::{CallReport, DecisionSummary};
use crate::mcp::{CallError, Mediated, ProgressSink, SendOptions};

/// A request resolved to one server and subject: the pipeline's facts
/// (kind, server, subject, target, arguments) and the request as it will
/// be sent if allowed.
pub(super) struct Resolved {
    pub facts: CallFacts,
    pub outbound: Mediated,
}

/// How one request is mediated: who may be asked, the caller's
/// cancellation, where its progress goes, its `call_id` and start.
pub(super) struct Mediation<'a> {
    pub asker: Option<&'a dyn Asker>,
    pub cancel: CancellationToken,
    pub progress: Option<ProgressSink>,
    pub call_id: String,
    pub started: Instant,
    /// Who the server's own requests during this one may be passed to.
    pub downstream: Option<Arc<dyn crate::mcp::Downstream>>,
}

impl Host {
    /// Decides, records, performs and records one resolved request. Never
    /// fails: every way it can end is a [`CallReport`] (and a record).
    /// `arguments` are the request's arguments as asked (recorded).
    pub(super) async fn mediate(
        &self,
        resolved: Resolved,
        caller: Caller,
        arguments: &Value,
        how: Mediation<'_>,
    ) -> CallReport {
        self.mediate_typed(resolved, caller, arguments, how).await.0
    }

    /// [`Host::mediate`], also returning the server's answer as it came
    /// (so the gateway passes a tool result on without reading it back
    /// from the report's JSON).
    pub(super) async fn mediate_typed(
        &self,
        resolved: Resolved,
        caller: Caller,
        arguments: &Value,
        how: Mediation<'_>,
    ) -> (CallReport, Option<ServerResult>) {
        let Mediation {
            asker,
            cancel,
            progress,
            call_id,
            started,
            downstream,
        } = how;
        let Resolved { facts, outbound } = resolved;
        let kind = facts.kind;
        let method = outbound.method();
        // Decided off this task, with a deadline (in place only when
        // bounded small before it starts): a runaway schema or policy is
        // a deny at the deadline, never a wedged caller; the caller's
        // cancellation (SIGTERM, --timeout, a client going away) ends the
        // wait at once.
        let facts = Arc::new(facts);
        // One pipeline for the whole request, even if a reload swaps it
        // meanwhile.
        let pipeline = self.pipeline();
        // Also what tests wait for before they interrupt a decision.
        tracing::debug!(%call_id, target = %facts.tool.qualified, "deciding");
        let mut report = pending_report(&facts, &call_id, method);
        // Until a record of the request is written (its refusal, or the
        // pending record), dropping this future (a run's deadline, a
        // client gone) records it as cancelled before it was sent.
        let mut unrecorded = Unrecorded {
            host: self,
            caller,
            arguments,
            facts: Some(facts.clone()),
            call_id: &call_id,
            method,
            policy_sha256: pipeline.policy_sha256(),
            started,
        };
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
        let Some(decision) = decided else {
            unrecorded.disarm();
            let decision = cancelled_before_decision(pipeline.policy_sha256());
            report.decision = Some(summary(&decision));
            report.outcome = Outcome::Cancelled;
            report.error = Some("cancelled before warden decided".into());
            report.duration_ms = elapsed_ms(started);
            self.audit
                .record(self.request_record(caller, arguments, &report, Some(&decision)));
            return (report, None);
        };
        // An ask waits for a person: SIGTERM, --timeout or a client going
        // away ends the wait (the question is abandoned, never answered).
        let asked = (decision.effect == Effect::Ask).then(|| decision.clone());
        // Biased: an asker that gives up because of the same cancellation
        // must not be recorded as the person's deny.
        let authorized = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            () = self.exiting.cancelled() => None,
            authorized = pipeline.authorize(&facts, decision, asker) => Some(authorized),
        };
        let Some(authorized) = authorized else {
            unrecorded.disarm();
            report.decision = asked.as_ref().map(summary);
            report.outcome = Outcome::Cancelled;
            report.error = Some("cancelled while waiting for the person's answer".into());
            report.duration_ms = elapsed_ms(started);
            self.audit
                .record(self.request_record(caller, arguments, &report, asked.as_ref()));
            return (report, None);
        };
        let permit = match authorized {
            Ok(permit) => permit,
            Err(decision) => {
                unrecorded.disarm();
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
                    .record(self.request_record(caller, arguments, &report, Some(&decision)));
                return (report, None);
            }
        };
        let decision = permit.decision().clone();
        report.decision = Some(summary(&decision));

        // Write-ahead: nothing is sent that is not in the log first. The
        // permit's digest is of the facts' arguments; when those are the
        // arguments recorded (a tool call's always are), it is reused
        // rather than computed again over the whole arguments.
        let args_sha256 = if facts.arguments == *arguments {
            permit.args_sha256().to_string()
        } else {
            sha256_json(arguments)
        };
        let pending_record = self.request_record_with_digest(
            caller,
            arguments,
            args_sha256,
            &report,
            Some(&decision),
        );
        // From here a record exists (or its failure is the outcome), and
        // a drop is the pending call's to record.
        unrecorded.disarm();
        if let Err(refusal) = self.audit.write_ahead(pending_record) {
            report.outcome = Outcome::AuditFailed;
            report.error = Some(refusal.to_string());
            report.duration_ms = elapsed_ms(started);
            return (report, None);
        }
        let pending = PendingCall::new(self, kind, &report.call_id, started);

        let sent = self.manager.send(
            permit,
            outbound,
            SendOptions {
                cancel,
                progress,
                downstream,
            },
        );
        let mut answer_as_sent = None;
        let answer = tokio::select! {
            biased;
            () = self.exiting.cancelled() => None,
            answer = sent => Some(answer),
        };
        match answer {
            Some(Ok(result)) => {
                report.outcome = match &result {
                    ServerResult::CallToolResult(r) if r.is_error.unwrap_or(false) => {
                        Outcome::ToolError
                    }
                    _ => Outcome::Ok,
                };
                report.result = serde_json::to_value(&result).ok();
                answer_as_sent = Some(result);
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
        // Fail-closed (CONTRACT §6): a result the log could not record is
        // not passed on; the caller (a model, `warden call`, a gateway
        // client) gets an error naming the lost record instead.
        if let Err(refusal) = pending.finish(&report) {
            report.outcome = Outcome::AuditFailed;
            report.result = None;
            report.error = Some(format!(
                "the audit log could not record the result of the call, so it is withheld \
                 (the call was sent; its `tool_call` record is pending): {}",
                refusal.0
            ));
            answer_as_sent = None;
        }
        (report, answer_as_sent)
    }
}

/// A request not yet recorded in any way: dropped (its caller stopped
/// waiting while it was decided or asked about), it is recorded as
/// cancelled before it was sent, so that nothing asked goes unrecorded.
struct Unrecorded<'a> {
    host: &'a Host,
    caller: Caller,
    arguments: &'a Value,
    /// What the request is about; `None` once disarmed.
    facts: Option<Arc<CallFacts>>,
    call_id: &'a str,
    method: &'static str,
    policy_sha256: Option<&'a str>,
    started: Instant,
}

impl Unrecorded<'_> {
    /// A record of the request is written (or its failure is the outcome).
    fn disarm(&mut self) {
        self.facts = None;
    }
}

impl Drop for Unrecorded<'_> {
    fn drop(&mut self) {
        if let Some(facts) = self.facts.take() {
            let mut report = pending_report(&facts, self.call_id, self.method);
            let decision = cancelled_before_decision(self.policy_sha256);
            report.decision = Some(summary(&decision));
            report.outcome = Outcome::Cancelled;
            report.error = Some(DROPPED_UNSENT.into());
            report.duration_ms = elapsed_ms(self.started);
            self.host.audit.record(self.host.request_record(
                self.caller,
                self.arguments,
                &report,
                Some(&decision),
            ));
        }
    }
}

/// The report of a request as it stands before its decision.
fn pending_report(facts: &CallFacts, call_id: &str, method: &'static str) -> CallReport {
    CallReport {
        server: Some(facts.server.name.clone()),
        tool: Some(facts.tool.name.clone()),
        decision: None,
        outcome: Outcome::Pending,
        result: None,
        error: None,
        duration_ms: 0,
        qualified: facts.tool.qualified.clone(),
        call_id: call_id.to_string(),
        kind: facts.kind,
        method,
    }
}

/// Why a request dropped before it was sent ended cancelled.
const DROPPED_UNSENT: &str =
    "the caller stopped waiting (a deadline, or it went away) before the request was sent";

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
pub(super) struct PendingCall<'a> {
    host: &'a Host,
    /// The audit's kind: also `logging`, which warden records but does
    /// not decide (`Host::set_log_level`).
    kind: AuditKind,
    call_id: String,
    started: Instant,
    done: bool,
}

impl<'a> PendingCall<'a> {
    pub(super) fn new(
        host: &'a Host,
        kind: impl Into<AuditKind>,
        call_id: &str,
        started: Instant,
    ) -> Self {
        let kind = kind.into();
        host.in_flight.fetch_add(1, Ordering::SeqCst);
        PendingCall {
            host,
            kind,
            call_id: call_id.to_string(),
            started,
            done: false,
        }
    }

    /// `Err`: the session fails closed and the result record is not in
    /// the log ([`SessionAudit::write_result`]).
    pub(super) fn finish(self, report: &CallReport) -> Result<(), AuditRefusal> {
        self.finish_answered(report, None)
    }

    /// [`PendingCall::finish`] for a server's own request, with who
    /// answered it (`request_result.answered_by`).
    pub(super) fn finish_answered(
        self,
        report: &CallReport,
        answered_by: Option<String>,
    ) -> Result<(), AuditRefusal> {
        self.finish_with(
            report.outcome,
            report.duration_ms,
            report.result.as_ref(),
            report.error.clone(),
            answered_by,
        )
    }

    /// Writes the result record: how the request ended, the digest of
    /// what came back, and who answered a server's own request.
    pub(super) fn finish_with(
        mut self,
        outcome: Outcome,
        duration_ms: u64,
        result: Option<&Value>,
        error: Option<String>,
        answered_by: Option<String>,
    ) -> Result<(), AuditRefusal> {
        self.done = true;
        self.write(
            ResultRecord {
                call_id: self.call_id.clone(),
                outcome,
                duration_ms,
                result_sha256: result.map(sha256_json),
                error,
            },
            answered_by,
        )
    }

    fn write(&self, result: ResultRecord, answered_by: Option<String>) -> Result<(), AuditRefusal> {
        let event = match self.kind {
            AuditKind::Tool => Event::ToolResult(result),
            kind => Event::RequestResult(RequestResultRecord {
                kind,
                result,
                answered_by,
            }),
        };
        self.host.audit.write_result(event)
    }
}

impl Drop for PendingCall<'_> {
    fn drop(&mut self) {
        if !self.done {
            let call_id = std::mem::take(&mut self.call_id);
            // No one is left to tell: a lost record is counted (the run's
            // verdict) and reported by the next `audit_gap`.
            let _ = self.write(
                ResultRecord {
                    call_id,
                    outcome: Outcome::Abandoned,
                    duration_ms: elapsed_ms(self.started),
                    result_sha256: None,
                    error: Some(DROPPED.to_string()),
                },
                None,
            );
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
                // No one answered: nothing to record as an approval (the
                // call's own record says why it was denied).
                AskAnswer::Unasked => return answer,
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

pub(super) fn summary(decision: &Decision) -> DecisionSummary {
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

pub(super) fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}
