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

/// How a call ended, as recorded and as printed by `warden call --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub effect: Effect,
    pub stage: Stage,
    pub reasons: Vec<String>,
    pub policy_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub server: String,
    pub tool: String,
    pub qualified: String,
    /// Who proposed the call.
    pub caller: Caller,
    /// Arguments with `redact` pointers replaced by `"[REDACTED]"`.
    pub arguments: Value,
    pub args_sha256: String,
    pub decision: DecisionRecord,
    pub outcome: Outcome,
    pub duration_ms: u64,
    pub result_sha256: Option<String>,
    pub error: Option<String>,
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
    Approval {
        server: String,
        config_sha256: String,
        action: ApprovalAction,
        subject: String,
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
