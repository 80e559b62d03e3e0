//! The records of the log: every [`Event`] and the types its fields use.
//! Serialised exactly as CONTRACT §6 and `warden call --json` spell them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use warden_core::{Effect, Mode, Stage, TransportKind};

/// Who proposed a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Caller {
    /// The agent loop's model.
    Model,
    /// `warden call`.
    Cli,
    /// A client of `warden gateway`.
    Gateway,
}

/// What an `approval` record says was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    /// A project server's configuration was approved.
    Approved,
    /// A project server's approval was taken back.
    Revoked,
    /// An `ask` was allowed for this call.
    AllowOnce,
    /// An `ask` was allowed for the rest of the session.
    AllowSession,
    /// An `ask` was denied.
    Deny,
    /// `warden pin reset`: a server's tool pins (`server` `*`: every
    /// server's) forgotten, so its definitions as they are now are
    /// accepted at the next listing, a changed one included.
    PinsReset,
}

/// When `append` returns and what survives a crash (module docs,
/// "Durability").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncMode {
    #[default]
    EveryRecord,
    Batch,
    Never,
}

/// What a session does when its audit log cannot be written
/// (`audit.on_failure`, CONTRACT §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Fail closed (default): a call whose pending record cannot be written
    /// is not sent; a session whose `session_start` cannot be written does
    /// not start.
    #[default]
    FailClosed,
    /// Run unaudited rather than stop, and say so: on stderr at start, in
    /// `mcp status`, and with an `audit_gap` record once the log can be
    /// written again.
    Continue,
}

impl OnFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::FailClosed => "fail_closed",
            OnFailure::Continue => "continue",
        }
    }
}

/// What became of a call: the `outcome` of `tool_call` / `tool_result`
/// records (and of `request` / `request_result`), and of `warden call
/// --json`. Three groups, and which record carries which:
///
/// * [`Outcome::Pending`]: only in a `tool_call` record, written *before*
///   the call is sent (write-ahead); its `tool_result` says how it ended.
/// * refusals ([`Outcome::is_refusal`]): the call was never sent; the
///   `tool_call` record is the only record of it.
/// * results ([`Outcome::is_result`]): only in the `tool_result` record
///   that follows a pending `tool_call` with the same `call_id`.
///
/// [`Outcome::AuditFailed`] is never in a record: it is what a caller is
/// told when the pending record could not be written, so the call was not
/// sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Allowed and about to be sent (write-ahead record).
    Pending,
    Ok,
    /// The server answered with `isError: true`.
    ToolError,
    /// The server answered with a JSON-RPC error, or the transport failed.
    RpcError,
    /// The server's timeout passed; `notifications/cancelled` was sent.
    Timeout,
    /// The caller or the person cancelled; `notifications/cancelled` was sent.
    Cancelled,
    /// warden stopped waiting without knowing the outcome: a run's deadline,
    /// warden exiting (SIGTERM, SIGINT), or the caller going away. The
    /// server may or may not have acted.
    Abandoned,
    /// Denied by the pipeline (`decision` says by which stage and why).
    Denied,
    /// No tool of that name (the record's `qualified` is the name asked for).
    UnknownTool,
    /// No server of that name in the configuration.
    UnknownServer,
    /// No connected server lists that resource URI (or a template that
    /// matches it).
    UnknownResource,
    /// Two or more servers claim that resource URI: refused, never guessed.
    AmbiguousResource,
    /// No prompt of that name.
    UnknownPrompt,
    /// The server is configured but not connected (failed to start,
    /// disabled, pending approval, exited).
    ServerUnavailable,
    /// The server cannot start because the sandbox it requires is missing.
    SandboxUnavailable,
    /// A run did not send it: the model asked for it past the run's
    /// `--max-tool-calls`, or in a turn cut at the model's output-token
    /// limit (its arguments may be incomplete). Never decided.
    Skipped,
    /// The pending record could not be written, so the call was not sent
    /// (never in a record).
    AuditFailed,
    /// A gateway client's message that could not be read as a request
    /// (not JSON, no valid request, or parameters that are not its
    /// method's): answered with a JSON-RPC error (`error` says which),
    /// never decided nor sent (kind `malformed`).
    InvalidRequest,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pending => "pending",
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::RpcError => "rpc_error",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::Abandoned => "abandoned",
            Outcome::Denied => "denied",
            Outcome::UnknownTool => "unknown_tool",
            Outcome::UnknownServer => "unknown_server",
            Outcome::UnknownResource => "unknown_resource",
            Outcome::AmbiguousResource => "ambiguous_resource",
            Outcome::UnknownPrompt => "unknown_prompt",
            Outcome::ServerUnavailable => "server_unavailable",
            Outcome::SandboxUnavailable => "sandbox_unavailable",
            Outcome::Skipped => "skipped",
            Outcome::AuditFailed => "audit_failed",
            Outcome::InvalidRequest => "invalid_request",
        }
    }

    /// A call that was never sent, recorded by its `tool_call` alone.
    pub fn is_refusal(self) -> bool {
        matches!(
            self,
            Outcome::Denied
                | Outcome::UnknownTool
                | Outcome::UnknownServer
                | Outcome::UnknownResource
                | Outcome::AmbiguousResource
                | Outcome::UnknownPrompt
                | Outcome::ServerUnavailable
                | Outcome::SandboxUnavailable
                | Outcome::Skipped
                | Outcome::AuditFailed
                | Outcome::InvalidRequest
        )
    }

    /// How a sent call ended (the outcome of a `tool_result`).
    pub fn is_result(self) -> bool {
        matches!(
            self,
            Outcome::Ok
                | Outcome::ToolError
                | Outcome::RpcError
                | Outcome::Timeout
                | Outcome::Cancelled
                | Outcome::Abandoned
        )
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kind of an MCP request (CONTRACT §8). `tool` requests are recorded
/// as `tool_call` / `tool_result`; the other kinds as `request` /
/// `request_result` records carrying this `kind`, under the same
/// write-ahead and fail-closed rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    Tool,
    Resource,
    Prompt,
    Sampling,
    Elicitation,
    /// `logging/setLevel` passed on to a server: recorded (target
    /// `logging__S`, `decision: null`) but not decided, since a level
    /// only sets how much a server logs and what it logs is mediated on
    /// the way back. Not a pipeline kind (no rule or Rego targets it).
    Logging,
    /// A server's `roots/list`, answered by warden itself with the
    /// workspace: recorded (target `roots__S`, `decision: null`,
    /// `answered_by: "warden"`), not decided. Not a pipeline kind.
    Roots,
    /// A gateway client's message that could not be read as a request
    /// (target `malformed`, `method` when it could be read, `decision:
    /// null`, outcome `invalid_request`, `arguments`: its `params` when it
    /// reads as JSON, else `{"bytes", "sha256"}` of the line):
    /// answered with a JSON-RPC error, never decided nor sent. Not a
    /// pipeline kind.
    Malformed,
}

impl From<warden_core::RequestKind> for RequestKind {
    fn from(kind: warden_core::RequestKind) -> Self {
        match kind {
            warden_core::RequestKind::Tool => RequestKind::Tool,
            warden_core::RequestKind::Resource => RequestKind::Resource,
            warden_core::RequestKind::Prompt => RequestKind::Prompt,
            warden_core::RequestKind::Sampling => RequestKind::Sampling,
            warden_core::RequestKind::Elicitation => RequestKind::Elicitation,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub effect: Effect,
    pub stage: Stage,
    pub reasons: Vec<String>,
    pub policy_sha256: Option<String>,
}

/// `tool_call`: a call as asked for and decided. Written *before* the call
/// is sent (`outcome: pending`), or as the only record of a refusal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// Links the `tool_result` (and an `approval` given for this call).
    pub call_id: String,
    /// `None` when the name asked for resolves to no server.
    pub server: Option<String>,
    /// The server's own tool name; `None` when unknown.
    pub tool: Option<String>,
    /// `mcp__S__T`; for an unknown tool, the name as the caller gave it.
    pub qualified: String,
    /// Who proposed the call.
    pub caller: Caller,
    /// Arguments with `redact` pointers replaced by `"[REDACTED]"` and
    /// strings longer than `max_value_bytes` replaced by `{"prefix",
    /// "bytes", "sha256"}` (the log does both).
    pub arguments: Value,
    /// Of the arguments as sent, whole.
    pub args_sha256: String,
    /// `None` when the call was refused before the pipeline.
    pub decision: Option<DecisionRecord>,
    /// [`Outcome::Pending`] or a refusal.
    pub outcome: Outcome,
    pub error: Option<String>,
}

/// `tool_result` (and, with a `kind`, `request_result`): how a call whose
/// pending record was written ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRecord {
    pub call_id: String,
    /// One of [`Outcome::is_result`].
    pub outcome: Outcome,
    /// From the decision to the end of the call.
    pub duration_ms: u64,
    /// Of the result as received; `None` when there is none.
    pub result_sha256: Option<String>,
    pub error: Option<String>,
}

/// `request`: a request of another kind than `tool` (CONTRACT §8), written
/// like a `tool_call`: before it is sent (`pending`), or as the refusal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub call_id: String,
    pub kind: RequestKind,
    pub server: Option<String>,
    /// What the rules match: `resource__S`, `prompt__S__P`, `sampling__S`, …
    pub target: String,
    /// The MCP method asked for (`resources/read`, `resources/subscribe`,
    /// `prompts/get`, …), when one kind has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    pub caller: Caller,
    /// The request's parameters (a resource's `uri`, a prompt's arguments,
    /// sampling limits…), redacted and shortened like tool arguments.
    pub arguments: Value,
    pub args_sha256: String,
    pub decision: Option<DecisionRecord>,
    pub outcome: Outcome,
    pub error: Option<String>,
    /// What warden limited before passing the request on, e.g. a sampling
    /// request's `{"max_tokens": {"asked": 10000, "sent": 4096}}`. Absent
    /// when nothing was (added after the first release: readers must
    /// accept records without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped: Option<Value>,
}

/// `request_result`: a [`ResultRecord`] with the request's `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestResultRecord {
    pub kind: RequestKind,
    #[serde(flatten)]
    pub result: ResultRecord,
    /// Who gave the answer to a server's own request (elicitation,
    /// sampling): `person` (at warden's terminal), `file:/abs/path` (an
    /// `--answers` file), `client` (the gateway's client), `model` (the
    /// session's model); `warden` for `roots/list`, which warden answers
    /// itself. Absent for the other kinds, and when no one answered
    /// (added after the first release, like `capped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
}

/// One audit event before the log adds its chain fields. A record parses
/// back into an `Event` (`serde_json::from_str::<Event>(line)`: the chain
/// fields are ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    SessionStart {
        warden_version: String,
        config_sha256: String,
        policy_sha256: Option<String>,
        mode: Mode,
        workspace: String,
    },
    ServerStart {
        server: String,
        transport: TransportKind,
        pid: Option<u32>,
        sandbox: Value,
    },
    ServerExit {
        server: String,
        pid: Option<u32>,
        status: Option<i32>,
        signal: Option<i32>,
        reason: String,
    },
    ToolCall(ToolCallRecord),
    ToolResult(ResultRecord),
    Request(RequestRecord),
    RequestResult(RequestResultRecord),
    Approval {
        server: String,
        config_sha256: String,
        action: ApprovalAction,
        subject: String,
        /// The call an `ask` answer was given for (`None` for server
        /// approvals).
        #[serde(default)]
        call_id: Option<String>,
    },
    /// `audit.on_failure: "continue"`: records were lost while the log
    /// could not be written; written as soon as it can be again.
    AuditGap {
        /// Records that could not be written.
        lost: u64,
        /// When the first of them failed (RFC 3339).
        since: String,
        /// The first failure.
        error: String,
    },
    /// The rules and policies were loaded again during the session (the
    /// gateway's SIGHUP, the repl's `/policy reload`). `ok: false`: the new
    /// ones could not be loaded (`error` says why) and the session keeps
    /// deciding with the previous ones (`policy_sha256` is then theirs).
    PolicyReload {
        ok: bool,
        /// The policy set in force after the reload.
        policy_sha256: Option<String>,
        /// The policy set in force before it.
        previous_sha256: Option<String>,
        /// Permission rules in force after the reload.
        rules: u64,
        error: Option<String>,
    },
    SessionEnd {
        tool_calls: u64,
        denied: u64,
    },
}

/// Record format version written in `v`.
pub const RECORD_VERSION: u64 = 1;
/// `prev` of the first record of a file.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The placeholder for redacted values and scrubbed secrets.
pub const REDACTED: &str = "[REDACTED]";
/// Environment variable holding the audit HMAC key.
pub const KEY_ENV: &str = "WARDEN_AUDIT_KEY";
