//! [`accept_head`]: a head file for a log that has none (`warden audit
//! verify FILE --accept-head`).
//!
//! warden does not append to a log with records and no usable head
//! ([`AuditError::NoHead`]): a head created then would vouch for an end
//! no one checked, so a cut tail plus a removed head would pass. Someone
//! who knows the log is as it should be (written by a warden without head
//! files, or its head lost) accepts its end explicitly, after its chain is
//! checked.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::chain::Hasher;
use crate::head::{Head, HeadError, HeadWriter, read_head};
use crate::verify::{VerifyOptions, VerifyReport, verify_with};
use crate::{AuditError, KEY_ENV};

/// What [`accept_head`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedHead {
    /// The head the file now holds.
    pub head: Head,
    /// What was there before: `None` when the head file was valid and
    /// matched the log (then it was only moved to the log's end, as a
    /// writer would); else "no head file", "an empty head file", or the
    /// damage found.
    pub replaced: Option<String>,
}

/// Checks the log at `path` (with `key` for a keyed log) and, if its chain
/// is whole, makes its head file name its last record. A valid head file
/// is kept and only moved forward, and only if the log matches it: a log
/// cut or rewritten under its head is refused (accepting it would hide
/// exactly what the head is for). A missing, empty or damaged head file is
/// replaced. Holds the log's lock meanwhile, so no warden appends between
/// the check and the head.
pub fn accept_head(path: &Path, key: Option<&[u8]>) -> Result<AcceptedHead, AuditError> {
    let hasher = Hasher::new(key)?;
    let refused = |detail: String| AuditError::AcceptRefused {
        path: path.to_path_buf(),
        detail,
    };
    let io_err = |action, source| AuditError::Io {
        path: path.to_path_buf(),
        action,
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| io_err("open", e))?;
    let meta = file.metadata().map_err(|e| io_err("stat", e))?;
    if !meta.file_type().is_file() {
        return Err(AuditError::NotRegular {
            path: path.to_path_buf(),
            kind: super::file_kind(&meta),
        });
    }
    let dup = file.try_clone().map_err(|e| io_err("lock", e))?;
    let held = crate::flock::lock_within(dup, true, crate::flock::LOCK_WAIT)
        .map_err(|(_, e)| io_err("lock", e))?;

    let head_path = crate::head_path(path);
    let replaced = match std::fs::metadata(&head_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("no head file".to_string()),
        Err(e) => return Err(refused(format!("{}: {e}", head_path.display()))),
        Ok(m) if !m.file_type().is_file() => {
            return Err(refused(format!(
                "its head file {} is {}",
                head_path.display(),
                super::file_kind(&m)
            )));
        }
        Ok(m) if m.len() == 0 => Some("an empty head file".to_string()),
        Ok(_) => match read_head(path, key) {
            Ok(Some(_)) => None,
            Ok(None) => Some("no head file".to_string()),
            Err(HeadError::Invalid { detail, .. }) => {
                Some(format!("a head file with no valid head ({detail})"))
            }
            Err(e @ HeadError::Unreadable { .. }) => return Err(refused(e.to_string())),
        },
    };
    let report = verify_with(
        path,
        &VerifyOptions {
            key,
            // A valid head must be matched; a missing or damaged one is
            // what is being replaced.
            head_file: replaced.is_none(),
            ..VerifyOptions::default()
        },
    );
    let (count, last_hash, mode) = match report {
        VerifyReport::Ok {
            count,
            last_hash,
            mode,
            ..
        } => (count, last_hash, mode),
        VerifyReport::KeyRequired { .. } => {
            return Err(refused(format!(
                "the log is keyed (hmac-sha256): give its key (--key FILE or {KEY_ENV}) so that \
                 its chain can be checked and its head keyed"
            )));
        }
        VerifyReport::Bad(f) if replaced.is_none() => {
            return Err(refused(format!(
                "it does not verify against its head file (seq {}: {}); accepting it would hide \
                 that. Keep it as evidence and use a new log file",
                f.seq, f.problem
            )));
        }
        VerifyReport::Bad(f) => {
            return Err(refused(format!(
                "its chain is not whole (seq {}, line {}: {}); a head is only written for a log \
                 that verifies",
                f.seq, f.line, f.problem
            )));
        }
        VerifyReport::Unreadable { message } => return Err(refused(message)),
    };
    if mode != hasher.mode() {
        // Verified without a key as plain SHA-256 while a key was given
        // cannot happen (a key makes `sha256` records a failure); kept so
        // a head never names a mode its log is not in.
        return Err(refused(format!(
            "the log is {mode} but the head would be {}",
            hasher.mode()
        )));
    }
    let Some(head_file) = HeadWriter::open(path, hasher, true)? else {
        return Err(refused("its head file could not be created".into()));
    };
    let result = match &replaced {
        Some(_) => head_file.reset(count, &last_hash),
        // The log matched its head: move it to the end like a writer.
        None => head_file.advance(count, &last_hash, |at| {
            let size = file.metadata().map_err(|e| io_err("stat", e))?.len();
            crate::chain::hash_at(&file, size, at)
                .map_err(|e| io_err("read the record its head names", e))
        }),
    };
    drop(held);
    result?;
    let head = match read_head(path, key) {
        Ok(Some(read)) => read.head,
        Ok(None) => return Err(refused("the head file vanished once written".into())),
        Err(e) => return Err(refused(e.to_string())),
    };
    Ok(AcceptedHead { head, replaced })
}
