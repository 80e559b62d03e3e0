//! The tamper-evident audit log (CONTRACT §6).
//!
//! Depends on neither warden's configuration nor its pipeline: options come
//! in as [`AuditOptions`] (with this crate's [`FsyncMode`]), decisions as
//! warden-core's `Effect`/`Stage`, secrets as plain strings.
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
//! Independently, every secret value ([`AuditOptions::secrets`]: warden
//! passes the values of `env`, `env_from` and `headers`) is replaced by `"[REDACTED]"` inside every string and
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

#![forbid(unsafe_code)]

mod chain;
mod error;
mod key;
mod log;
mod record;
mod scrub;
mod verify;

pub use error::AuditError;
pub use key::{args_digest, load_key, result_digest};
pub use log::{AuditLog, AuditOptions, BATCH_INTERVAL, BATCH_MAX_RECORDS, BATCH_QUEUE_CAP};
pub use record::{
    ApprovalAction, Caller, DecisionRecord, Event, FsyncMode, KEY_ENV, Outcome, RECORD_VERSION,
    REDACTED, ToolCallRecord, ZERO_HASH,
};
pub use verify::{Problem, VerifyFailure, VerifyReport, verify, verify_reader};

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
