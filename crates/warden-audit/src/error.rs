//! Errors of the audit writer and of key loading.

use crate::HashMode;

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
    #[error(
        "audit head file {} holds no valid head ({detail}): it was altered or damaged, or \
         written under another key; run `warden audit verify {}`",
        .path.display(), log_of(.path)
    )]
    HeadInvalid {
        path: std::path::PathBuf,
        detail: String,
    },
    #[error(
        "audit log {} is shorter than its head file: the head says seq {head_seq}, the log ends at \
         seq {log_seq}, so records {} to {head_seq} were cut off; run `warden audit verify {}`. \
         Keep the evidence and start a new log file (or move both the log and its .head away)",
        .path.display(), .log_seq + 1, .path.display()
    )]
    Truncated {
        path: std::path::PathBuf,
        head_seq: u64,
        log_seq: u64,
    },
    #[error(
        "audit log {}: its record seq {seq} is not the one its head file names: the log \
         was rewritten; run `warden audit verify {}`. Keep the evidence and start a new log file",
        .path.display(), .path.display()
    )]
    HeadMismatch { path: std::path::PathBuf, seq: u64 },
    #[error(
        "audit log {} is not a regular file (it is {kind}): records written there could not be \
         kept, cut-checked or verified; name a regular file (`audit.path`, `--audit`)",
        .path.display()
    )]
    NotRegular {
        path: std::path::PathBuf,
        kind: &'static str,
    },
    #[error(
        "audit log {} has records but {}: records cut off its end would go unnoticed, so \
         warden does not append to it. If the log is as it should be (e.g. written by a warden \
         without head files), accept its end with `warden audit verify {} --accept-head` (it \
         checks the chain first); otherwise keep it as evidence and use a new log file",
        .path.display(), .why, .path.display()
    )]
    NoHead {
        path: std::path::PathBuf,
        /// "no head file (FILE.head)" or "an empty head file (FILE.head)".
        why: String,
    },
    #[error(
        "audit log {} was cut from outside while this session wrote it ({detail}): the records \
         there are gone or replaced. This session writes no more records to it; keep it as \
         evidence, run `warden audit verify {}`, and use a new log file",
        .path.display(), .path.display()
    )]
    Cut {
        path: std::path::PathBuf,
        detail: String,
    },
    #[error(
        "audit log {} was moved, removed or replaced while this session wrote it: the path no \
         longer names the file warden opened, so records would go where no one looks. This \
         session writes no more records; find the file (it holds this session's records) and \
         run `warden audit verify` on it",
        .path.display()
    )]
    Moved { path: std::path::PathBuf },
    #[error(
        "audit head file {} was moved, removed or replaced while this session kept it: the path \
         no longer names the file warden opened, so a cut of the log's end would go unnoticed",
        .path.display()
    )]
    HeadMoved { path: std::path::PathBuf },
    #[error("audit log {}: its head was not accepted: {detail}", .path.display())]
    AcceptRefused {
        path: std::path::PathBuf,
        detail: String,
    },
    #[error(
        "audit log {}: its head file says the log is {head_mode} but this session uses {ours}: {}",
        .path.display(), mode_hint(*.ours)
    )]
    HeadMode {
        path: std::path::PathBuf,
        head_mode: HashMode,
        ours: HashMode,
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

impl AuditError {
    /// The log must take no more records after this error: the file may
    /// hold a partial line, or it is no longer the log this session was
    /// writing (cut, rewritten under its head, moved or removed). Writing
    /// on would bury the evidence or send records where no one looks.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            AuditError::Failed { .. }
                | AuditError::Cut { .. }
                | AuditError::Moved { .. }
                | AuditError::HeadMismatch { .. }
        )
    }
}

fn mode_hint(ours: HashMode) -> &'static str {
    match ours {
        HashMode::Sha256 => "set WARDEN_AUDIT_KEY (or the key file) to the log's key",
        HashMode::HmacSha256 => {
            "the log was written without a key; use a new log file for keyed records, or no key"
        }
    }
}

/// The log a head file belongs to, for messages.
fn log_of(head: &std::path::Path) -> String {
    let shown = head.display().to_string();
    shown
        .strip_suffix(".head")
        .map_or(shown.clone(), str::to_string)
}
