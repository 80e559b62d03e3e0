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
//! | `event` | `session_start`, `server_start`, `server_exit`, `tool_call`, `tool_result`, `request`, `request_result`, `approval`, `audit_gap`, `session_end` |
//! | `alg` | `sha256` or `hmac-sha256`: how `hash` was computed (an extension of CONTRACT §6) |
//! | `prev` | the previous record's `hash`; 64 `0`s for the first record |
//! | `hash` | lowercase hex SHA-256, or HMAC-SHA-256 under the audit key, of the record's canonical JSON **without** `hash` |
//!
//! # Calls: written ahead
//!
//! A call is recorded *before* it is sent: a `tool_call` record ([`ToolCallRecord`])
//! with a fresh `call_id`, the arguments, their digest, the decision and
//! `outcome: "pending"`, written with [`AuditLog::write_ahead`] (in the file
//! when it returns, whatever the fsync mode; see "Durability"). How the call
//! ended follows as a `tool_result` ([`ResultRecord`]) with the same
//! `call_id`: `ok`, `tool_error`, `rpc_error`, `timeout`, `cancelled` or
//! `abandoned` (warden stopped waiting without knowing), `duration_ms` and
//! `result_sha256`. A call refused before it was sent (denied, unknown tool
//! or server, server unavailable) is one `tool_call` record with that
//! outcome and no `tool_result`. A pending `tool_call` without a
//! `tool_result` is a call whose end was never seen (warden was killed).
//! An `approval` given for a call carries its `call_id`. Requests of the
//! other kinds of CONTRACT §8 use `request` / `request_result` with a
//! `kind` ([`RequestKind`]), under the same rules; so do
//! `logging/setLevel` (kind `logging`) and a server's `roots/list` (kind
//! `roots`, answered by warden), with `decision: null`: not decided,
//! recorded all the same.
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
//! `tool_call.arguments` (and `request.arguments`) have the `redact` JSON
//! pointers (RFC 6901; a `*` segment matches every member or element)
//! replaced by `"[REDACTED]"`; then every string in them longer than
//! [`AuditOptions::max_value_bytes`] (`audit.max_value_bytes`, default
//! 4096) is replaced by `{"prefix", "bytes", "sha256"}`: the first 256
//! bytes (fewer when the limit is lower; cut at a character boundary, taken
//! after secrets were scrubbed from the whole string), the length in bytes
//! and the SHA-256 of the UTF-8 bytes of the value as sent.
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
//! Every record is bounded, whatever a caller, server or policy sends:
//! arguments that would take more than [`MAX_ARGUMENTS_BYTES`] even with
//! their long strings shortened (many keys or values) are recorded as
//! `{"omitted", "bytes", "sha256"}` (why; the length of their canonical
//! JSON; `args_sha256`); a free-text field (`error`, a decision's reason,
//! `qualified` / `target` as the caller gave it, a `server_exit` reason)
//! longer than [`MAX_TEXT_BYTES`] keeps its first [`TEXT_KEPT`] bytes
//! (cut after scrubbing) followed by `… [N bytes, sha256 H]`; a decision
//! keeps its first [`MAX_REASONS`] − 1 reasons and one saying how many more
//! there were, with the digest of them all.
//!
//! # Durability
//!
//! `fsync` (CONTRACT §3 `audit.fsync`) decides when `append` returns and
//! what survives:
//!
//! | mode | `append` returns after | `kill -9` of warden loses | power loss loses |
//! | --- | --- | --- | --- |
//! | `every_record` (default) | the line is written and `fdatasync`ed | nothing acknowledged | nothing acknowledged |
//! | `batch` (group commit) | the event is time-stamped and queued | up to [`BATCH_INTERVAL`] of records (never a pending record) | up to [`BATCH_INTERVAL`] of records |
//! | `never` | the line is written | nothing acknowledged | what the kernel had not flushed |
//!
//! [`AuditLog::write_ahead`], for the pending record of a call, returns
//! only once the record is *in the file* in every mode: `every_record`
//! writes and `fdatasync`s it (a pending record survives a power loss);
//! `batch` writes it on the caller's thread with one `write(2)`, after
//! every record queued before it, and leaves the `fdatasync` to the writer
//! thread (it survives `kill -9` of warden at once, a power loss after at
//! most [`BATCH_INTERVAL`]); `never` writes it (it survives `kill -9`, not
//! a power loss). So with any mode, a call that reached a server has its
//! pending record in the log unless the machine lost power. A failed write
//! is an error and leaves nothing behind: the caller must not send the
//! call (fail closed). Cost per call: BENCHMARKS.md.
//!
//! In `batch` the queue is drained by the next `write_ahead`, on its
//! caller's thread, or by a writer thread, each serialising, chaining and
//! writing the whole batch with one `write(2)` under one file lock. The
//! writer `fdatasync`s at most [`BATCH_INTERVAL`] after the first unsynced
//! record or once [`BATCH_SYNC_RECORDS`] are unsynced, and on close/drop. It
//! is woken by an `append` only when no sync is pending (else the record
//! waits for the next `write_ahead` or for that sync, at most
//! [`BATCH_INTERVAL`]) or the queue holds a batch: a call's result record
//! then costs no thread switch, and goes out with the next call's pending
//! record in one `write(2)`. A failed write that left the file as it was
//! (a full disk, a file size limit: the part written is cut back) loses
//! the queued records it carried, and only those: the next write that
//! succeeds begins with an `audit_gap` record counting them (a session's
//! own `audit_gap` among them counts for its `lost`), and the chain goes
//! on from the last record in the file. (It used to stop the log for the
//! rest of the session, the disk free again or not, with nothing in the
//! log saying so; two refused calls in a row were enough.) A sync failure,
//! or a write that could not be cut back, makes the log refuse further appends (the
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
//! # Several writers, and a log changed under a writer
//!
//! Each append takes an exclusive `flock(2)` on the file for the write (and,
//! in `every_record`, the fsync). Under the lock the writer compares the file
//! size with the end of its own last write; if another process appended in
//! between, it checks that its own last record is still where it wrote it,
//! then re-reads the last record and continues that chain. So any number of
//! warden processes (and threads: [`AuditLog`] is `Send + Sync`) can share
//! one log and still produce one chain with no gaps. Writers that do not
//! take the lock are not covered.
//!
//! What no writer does is a change from outside, and each is refused for
//! good (the write fails and so does every later one: the caller fails
//! closed, [`AuditError::is_permanent`]):
//!
//! * the path no longer names the file the log opened (renamed, removed,
//!   replaced, a symlink pointed elsewhere): [`AuditError::Moved`]. Checked
//!   before every write with one `stat(2)` of the path, whose size then
//!   serves the write (no `fstat`);
//! * the file is shorter than this writer's last end, or its last record
//!   is no longer where it wrote it (cut, then padded back): never chained
//!   onto, [`AuditError::Cut`];
//! * the head names a record the log no longer has (another writer's, cut
//!   back to exactly this writer's end and written over): the head is not
//!   moved past it, [`AuditError::HeadMismatch`].
//!
//! An edit of earlier bytes that keeps the size is not looked for while
//! writing: the chain goes on from this writer's own last hash, so `verify`
//! finds it.
//!
//! [`AuditLog::open`] refuses a path that is not a regular file once
//! symlinks are followed (`/dev/null` would keep nothing, a FIFO no head):
//! [`AuditError::NotRegular`].
//!
//! # Verification
//!
//! [`verify`] (`warden audit verify FILE [--key FILE]`) reads the file once,
//! line by line, and stops at the first problem ([`Problem`]): a torn final
//! line; an unparseable line (with its number); a line that is not the
//! canonical form of its record; a malformed record (missing chain field,
//! `v` ≠ 1); a record in the other mode (`alg`; with a key every record
//! must be `hmac-sha256`); a hash mismatch; a `seq` gap, reordering or
//! duplicate; a `prev` that does not name the previous record.
//! A line longer than [`MAX_LINE_BYTES`] is [`Problem::TooLong`], read no
//! further (memory stays bounded whatever the file holds). It reports the
//! `seq` the bad line should have had, its line number, and how many records
//! before it verified. The CLI exits 0 (count, last hash, mode), 1 (first
//! bad `seq` and why), or 2 (file unreadable, or an `hmac-sha256` log and
//! no key: only structure and links could be checked).
//!
//! A whole log also reports its calls of unknown outcome
//! ([`Unfinished`]): a pending `tool_call` / `request` with no
//! `tool_result` / `request_result` after it (warden was killed, or the
//! call is still running). A warning, not a failure: the log is intact.
//!
//! # The head file: truncation and downgrade
//!
//! A hash chain alone cannot show that its last records were cut off: a
//! shorter chain is still a valid chain. Beside the log, `FILE.head` holds
//! the last `seq` and `hash` and the log's mode, in two fixed-size slots
//! rewritten in place, each with its own SHA-256 (HMAC with the key when
//! the log is keyed); see the `head` module for the format. It is moved
//! only to records already in the file (and synced, where the mode
//! syncs): after each record (`every_record`, `never`), after each sync of
//! the writer thread (`batch`), and at close; never backwards, so several
//! processes sharing the log keep one head; and never past a record the
//! log no longer has (the chain must extend the head, not replace it). A
//! head may lag behind its log, never run ahead of it. [`AuditLog::open`]
//! refuses a log shorter than its head, one that no longer has the record
//! the head names, and a head in the other mode or that does not verify.
//! A new, empty log gets a head; a log with records and no head file, or
//! an empty one, is refused ([`AuditError::NoHead`]): a head created then
//! would vouch for an end no one checked. [`accept_head`] (`warden audit
//! verify FILE --accept-head`) writes one once the chain verifies.
//!
//! [`verify`] compares the log with its head: the log must reach the
//! head's `seq` ([`Problem::Truncated`], naming the first missing `seq`)
//! and have the head's `hash` there ([`Problem::HeadMismatch`]: a rewritten
//! log). A head saying the log is keyed makes plain `sha256` records a
//! [`Problem::ModeMismatch`], as a key does. [`verify_with`] also takes
//! heads kept elsewhere (`warden audit verify --head SEQ:HASH`; `warden
//! audit head FILE` prints one). Without a head file, `verify` says so: the
//! end of the log cannot be vouched for. An empty head file is damaged
//! ([`Problem::HeadInvalid`]), like a zeroed one.
//!
//! What each protects against, and what none of them can: README.md,
//! "The audit log".

#![forbid(unsafe_code)]

mod chain;
pub mod create;
mod error;
pub mod flock;
mod head;
mod key;
mod log;
mod record;
mod scrub;
mod verify;

pub use error::AuditError;
pub use head::{Head, HeadError, HeadRead, SLOT_SIZE as HEAD_SLOT_SIZE, head_path, read_head};
pub use key::{args_digest, load_key, result_digest};
pub use log::{
    AcceptedHead, AuditLog, AuditOptions, BATCH_INTERVAL, BATCH_MAX_RECORDS, BATCH_QUEUE_CAP,
    BATCH_SYNC_RECORDS, DEFAULT_MAX_VALUE_BYTES, MAX_ARGUMENTS_BYTES, MAX_LINE_BYTES, MAX_REASONS,
    MAX_TEXT_BYTES, TEXT_KEPT, accept_head,
};
pub use record::{
    ApprovalAction, Caller, DecisionRecord, Event, FsyncMode, KEY_ENV, OnFailure, Outcome,
    RECORD_VERSION, REDACTED, RequestKind, RequestRecord, RequestResultRecord, ResultRecord,
    ToolCallRecord, ZERO_HASH,
};
pub use verify::{
    ExpectedHead, Problem, Unfinished, VerifyFailure, VerifyOptions, VerifyReport, verify,
    verify_reader, verify_reader_with, verify_with,
};

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
