//! The audit key and the digests recorded beside redacted values.

use std::path::Path;

use serde_json::Value;

use crate::error::AuditError;
use crate::record::KEY_ENV;

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
