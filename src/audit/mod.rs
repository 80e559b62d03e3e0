//! The tamper-evident audit log (CONTRACT §6).
//!
//! # Record format
//!
//! The log is JSON Lines: one record per line, each line terminated by `\n`,
//! written with a single `write(2)` on a file opened `O_APPEND`. A record is
//! the event's own fields (see [`Event`]) plus these chain fields:
//!
//! | field | meaning |
//! | --- | --- |
//! | `v` | record format version, `1` |
//! | `seq` | 1 for the first record of the file, then +1 per record, no gaps, continuing across sessions |
//! | `ts` | time of writing, RFC 3339 UTC with microseconds (`2026-11-30T08:34:46.123456Z`) |
//! | `session` | the writing session's id |
//! | `event` | `session_start`, `server_start`, `server_exit`, `tool_call`, `approval`, `session_end` |
//! | `alg` | `sha256` or `hmac-sha256`: how `hash` was computed (an extension of CONTRACT §6) |
//! | `prev` | the previous record's `hash`; 64 `0`s for the first record |
//! | `hash` | lowercase hex SHA-256, or HMAC-SHA-256 under the audit key, of the record's canonical JSON **without** `hash` |
//!
//! # Canonical JSON
//!
//! [`warden_core::digest::canonical_json`]: object keys sorted bytewise (UTF-8) at
//! every level; no whitespace; strings and numbers exactly as `serde_json`
//! writes them (strings UTF-8 with only `"`, `\`, and control characters
//! escaped; integers in decimal; floats in the shortest form that round-trips,
//! e.g. `1.5`, `1e20`); `null` fields are kept, never omitted. Every line of
//! the file is itself the canonical JSON of the whole record (with `hash`),
//! and `verify` insists on it, so any byte change is detected even where
//! it would parse to the same value (whitespace, escapes, key order, `1E5`).
//!
//! To check a record by hand: parse the line, remove `hash`, write the rest
//! canonically, SHA-256 it (or HMAC-SHA-256 with the key), compare with
//! `hash`; then check `prev` equals the previous line's `hash` and `seq` is
//! the previous `seq` + 1.
//!
//! # Keys
//!
//! With a key (`WARDEN_AUDIT_KEY`, or a key file: its raw bytes, trailing
//! `\r`/`\n` removed; see [`load_key`]) every `hash` is an HMAC, so someone who
//! can write the file but lacks the key cannot re-forge the chain. Verifying
//! with a key accepts only `hmac-sha256` records: a chain recomputed with plain
//! SHA-256 fails. A log is single-mode: opening a log whose last record was
//! written in the other mode, or under another key, is refused.
//!
//! # Content rules
//!
//! `tool_call.arguments` have the `redact` JSON pointers (RFC 6901; a `*`
//! segment matches every member or element) replaced by `"[REDACTED]"`.
//! Independently, every secret value (`env`, `env_from`, `headers`; see
//! [`secrets_of`]) is replaced by `"[REDACTED]"` inside every string and
//! object key of every record, and a number whose decimal form contains a
//! secret becomes `"[REDACTED]"`, whatever the pointers say. Values shorter
//! than 4 bytes (`1`, `on`) are replaced only where a whole string or key
//! equals them. Only the fixed `event` tag and the chain fields are exempt. `args_sha256` /
//! `result_sha256` are SHA-256 of the canonical JSON of the arguments as sent
//! (before redaction) and of the result as received ([`args_digest`],
//! [`result_digest`]).
//!
//! # Durability
//!
//! `fsync` (CONTRACT §3 `audit.fsync`) decides when `append` returns and
//! what survives:
//!
//! | mode | `append` returns after | `kill -9` of warden loses | power loss loses |
//! | --- | --- | --- | --- |
//! | `every_record` (default) | the line is written and `fdatasync`ed | nothing acknowledged | nothing acknowledged |
//! | `batch` (group commit) | the event is time-stamped and queued | the records queued in the last moments | up to [`BATCH_INTERVAL`] of records |
//! | `never` | the line is written | nothing acknowledged | what the kernel had not flushed |
//!
//! In `batch` a writer thread drains the queue as soon as it is woken,
//! serialising, chaining and writing the whole batch with one `write(2)`
//! under one file lock, and `fdatasync`s at most [`BATCH_INTERVAL`] after the
//! first unsynced record or once [`BATCH_MAX_RECORDS`] are unsynced, and on
//! close/drop; a write or sync failure is returned by the next `append` and
//! by `close`. A sync failure makes the log refuse further appends (the
//! kernel may have dropped the pages; retrying would claim durability
//! falsely). Lines are written whole with `O_APPEND`, so a crash mid-write
//! leaves at worst one torn final line (no `\n`), which [`verify`] reports
//! as [`Problem::TornTail`], distinct from tampering; a failed write is cut
//! back off the file.
//!
//! **Torn tail on open:** [`AuditLog::open`] refuses a log that ends with a
//! torn line, naming the file, the byte offset and the fix (verify, then
//! `truncate -s OFFSET FILE`, or use a new file). Appending after it would
//! bury the torn line mid-file, where it is indistinguishable from tampering.
//!
//! # Several writers
//!
//! Each append takes an exclusive `flock(2)` on the file for the write (and,
//! in `every_record`, the fsync). Under the lock the writer compares the file
//! size with the end of its own last write; if another process appended in
//! between, it re-reads the last record and continues that chain. So any
//! number of warden processes (and threads: [`AuditLog`] is `Send + Sync`)
//! can share one log and still produce one chain with no gaps. Writers that
//! do not take the lock, and a log file replaced by rename, are not covered.
//!
//! # Verification
//!
//! [`verify`] (`warden audit verify FILE [--key FILE]`) reads the file once,
//! line by line, and stops at the first problem ([`Problem`]): a torn final
//! line; an unparseable line (with its number); a line that is not the
//! canonical form of its record; a malformed record (missing chain field,
//! `v` ≠ 1); a record in the other mode (`alg`; with a key every record
//! must be `hmac-sha256`); a hash mismatch; a `seq` gap, reordering or
//! duplicate; a `prev` that does not name the previous record. It reports the
//! `seq` the bad line should have had, its line number, and how many records
//! before it verified. The CLI exits 0 (count, last hash, mode), 1 (first
//! bad `seq` and why), or 2 (file unreadable, or an `hmac-sha256` log and
//! no key: only structure and links could be checked).
//!
//! # What the chain cannot show
//!
//! Removing records from the end at a record boundary leaves a shorter valid
//! chain. Keep the last hash `verify` prints (or ship records elsewhere) when
//! that matters; a session without its `session_end` record is also a hint.

mod chain;
mod log;
mod scrub;
mod verify;

use std::path::Path;

pub use log::{AuditLog, AuditOptions, BATCH_INTERVAL, BATCH_MAX_RECORDS, BATCH_QUEUE_CAP};
pub use verify::{Problem, VerifyFailure, VerifyReport, verify, verify_reader};

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    pub effect: warden_policy::Effect,
    pub stage: warden_policy::Stage,
    pub reasons: Vec<String>,
    pub policy_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        mode: warden_policy::Mode,
        workspace: String,
    },
    ServerStart {
        server: String,
        transport: warden_core::TransportKind,
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

/// Record format version written in `v`.
pub const RECORD_VERSION: u64 = 1;
/// `prev` of the first record of a file.
pub const ZERO_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The placeholder for redacted values and scrubbed secrets.
pub const REDACTED: &str = "[REDACTED]";
/// Environment variable holding the audit HMAC key.
pub const KEY_ENV: &str = "WARDEN_AUDIT_KEY";

/// How the chain's `hash` fields are computed (the record's `alg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashMode {
    Sha256,
    HmacSha256,
}

impl HashMode {
    pub fn as_str(self) -> &'static str {
        match self {
            HashMode::Sha256 => "sha256",
            HashMode::HmacSha256 => "hmac-sha256",
        }
    }

    pub fn from_alg(alg: &str) -> Option<HashMode> {
        match alg {
            "sha256" => Some(HashMode::Sha256),
            "hmac-sha256" => Some(HashMode::HmacSha256),
            _ => None,
        }
    }
}

impl std::fmt::Display for HashMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors of the audit writer and of key loading. Messages name the file
/// and say what to do; they never contain key material.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit log {}: cannot {action}: {source}", .path.display())]
    Io {
        path: std::path::PathBuf,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "audit log {} ends with a torn record ({len} bytes at byte offset {offset}) left by a crash mid-write; \
         check the rest with `warden audit verify {}`, then cut the torn bytes off \
         (`truncate -s {offset} {}`) or use a new log file",
        .path.display(), .path.display(), .path.display()
    )]
    TornTail {
        path: std::path::PathBuf,
        offset: u64,
        len: u64,
    },
    #[error(
        "audit log {}: the last line (at byte offset {offset}) is not an audit record ({detail}); \
         run `warden audit verify {}` and use a new log file",
        .path.display(), .path.display()
    )]
    CorruptTail {
        path: std::path::PathBuf,
        offset: u64,
        detail: String,
    },
    #[error("audit log {} is chained with {log_mode} but this session uses {ours}: {}", .path.display(), mode_hint(*.ours))]
    ModeMismatch {
        path: std::path::PathBuf,
        log_mode: String,
        ours: HashMode,
    },
    #[error(
        "audit log {}: the last record (seq {seq}) does not verify with this session's {mode} \
         (a different key, or the log was altered); run `warden audit verify {}`",
        .path.display(), .path.display()
    )]
    TailMismatch {
        path: std::path::PathBuf,
        seq: u64,
        mode: HashMode,
    },
    #[error("audit key from {origin}: {detail}")]
    Key { origin: String, detail: String },
    #[error(
        "audit redact pointer {pointer:?} is not a JSON pointer: it must be empty or start with '/'"
    )]
    BadPointer { pointer: String },
    #[error("audit record could not be serialised: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("audit log {} is unusable after an earlier failure: {detail}", .path.display())]
    Failed {
        path: std::path::PathBuf,
        detail: String,
    },
}

fn mode_hint(ours: HashMode) -> &'static str {
    match ours {
        HashMode::Sha256 => "set WARDEN_AUDIT_KEY (or the key file) to the log's key",
        HashMode::HmacSha256 => {
            "the log was written without a key; use a new log file for keyed records, or no key"
        }
    }
}

/// The audit HMAC key: the bytes of `path` when given, else of
/// `WARDEN_AUDIT_KEY` when set, else `None`. Trailing `\n`/`\r` are removed
/// (so `openssl rand -hex 32 > key` works: the key is the hex text). An
/// empty key is an error, not "no key".
pub fn load_key(path: Option<&Path>) -> Result<Option<Vec<u8>>, AuditError> {
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::PermissionsExt;

    let (origin, mut bytes) = match path {
        Some(path) => {
            let origin = format!("key file {}", path.display());
            let bytes = std::fs::read(path).map_err(|e| AuditError::Key {
                origin: origin.clone(),
                detail: e.to_string(),
            })?;
            if let Ok(meta) = std::fs::metadata(path)
                && meta.permissions().mode() & 0o077 != 0
            {
                tracing::warn!(file = %path.display(), "audit key file is readable by group or others");
            }
            (origin, bytes)
        }
        None => match std::env::var_os(KEY_ENV) {
            None => return Ok(None),
            Some(value) => (KEY_ENV.to_string(), value.into_vec()),
        },
    };
    while matches!(bytes.last(), Some(b'\n' | b'\r')) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(AuditError::Key {
            origin,
            detail: "the key is empty".into(),
        });
    }
    if bytes.len() < 16 {
        tracing::warn!(%origin, "audit key is shorter than 16 bytes");
    }
    Ok(Some(bytes))
}

/// `args_sha256`: SHA-256 of the canonical JSON of the arguments as sent.
pub fn args_digest(args: &Value) -> String {
    warden_core::digest::sha256_json(args)
}

/// `result_sha256`: SHA-256 of the canonical JSON of the result as received.
pub fn result_digest(result: &Value) -> String {
    warden_core::digest::sha256_json(result)
}

/// The values the audit log must never contain, from a configuration: every
/// server's `env` values, the host values of its `env_from` variables, and
/// its `headers` values (for `Scheme credential` headers also the
/// credential alone). Feed them to [`AuditOptions::secrets`].
pub fn secrets_of(config: &crate::config::Config) -> Vec<String> {
    use crate::config::TransportConfig;
    let mut out = Vec::new();
    for server in config.servers.values() {
        match &server.transport {
            TransportConfig::Stdio(stdio) => {
                out.extend(stdio.env.values().map(|s| s.expose().to_string()));
                // `sandbox.env` passes host variables through like `env_from`.
                for name in stdio.env_from.iter().chain(&server.sandbox.env) {
                    if let Some(value) = std::env::var_os(name) {
                        out.push(value.to_string_lossy().into_owned());
                    }
                }
            }
            TransportConfig::Http(remote) | TransportConfig::Sse(remote) => {
                for value in remote.headers.values() {
                    let value = value.expose();
                    out.push(value.to_string());
                    if let Some((_, credential)) = value.trim().split_once(' ') {
                        out.push(credential.trim().to_string());
                    }
                }
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out.sort();
    out.dedup();
    out
}
