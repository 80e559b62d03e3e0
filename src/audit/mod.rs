//! The tamper-evident audit log (CONTRACT §6): JSON Lines, hash-chained over
//! canonical JSON, append-only, one writer per file.
//!
//! The record vocabulary below is what callers hand in; this module adds
//! `v`, `seq`, `ts`, `session`, `prev` and `hash`.

use serde::Serialize;
use serde_json::Value;

/// How a call ended, as recorded and as printed by `warden call --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The server answered with `isError: true`.
    ToolError,
    /// The server answered with a JSON-RPC error, or the transport failed.
    RpcError,
    Timeout,
    Denied,
    Cancelled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::RpcError => "rpc_error",
            Outcome::Timeout => "timeout",
            Outcome::Denied => "denied",
            Outcome::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DecisionRecord {
    pub effect: crate::policy::Effect,
    pub stage: crate::policy::Stage,
    pub reasons: Vec<String>,
    pub policy_sha256: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolCallRecord {
    pub server: String,
    pub tool: String,
    pub qualified: String,
    /// Who proposed the call: `model`, `cli`, `gateway`.
    pub caller: String,
    /// Arguments with `redact` pointers replaced by `"[REDACTED]"`.
    pub arguments: Value,
    pub args_sha256: String,
    pub decision: DecisionRecord,
    pub outcome: Outcome,
    pub duration_ms: u64,
    pub result_sha256: Option<String>,
    pub error: Option<String>,
}

/// One audit event before the log adds its chain fields.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    SessionStart {
        warden_version: String,
        config_sha256: String,
        policy_sha256: Option<String>,
        mode: crate::policy::Mode,
        workspace: String,
    },
    ServerStart {
        server: String,
        transport: String,
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
    Approval {
        server: String,
        config_sha256: String,
        /// `approved` or `revoked` (servers), or `allow_once` /
        /// `allow_session` / `deny` (an `ask` answered at the terminal).
        action: String,
        subject: String,
    },
    SessionEnd {
        tool_calls: u64,
        denied: u64,
    },
}
