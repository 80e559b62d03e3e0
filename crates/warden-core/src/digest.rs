//! Canonical JSON and SHA-256 digests shared by pinning, approvals, policy
//! and audit.
//!
//! Canonical form: object keys sorted bytewise at every level, no
//! insignificant whitespace, UTF-8, numbers and string escapes exactly as
//! `serde_json` writes them. Sorting is done here explicitly so the result
//! does not depend on whether some dependency enables `preserve_order`.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `value` in canonical form.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // Serialising a &str cannot fail.
                out.push_str(&serde_json::to_string(key).unwrap_or_default());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Hex SHA-256 of raw bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Hex SHA-256 of a file's content, read in pieces (executables can be
/// large).
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Hex SHA-256 of a value's canonical JSON.
pub fn sha256_json(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_level() {
        let v = json!({"b": 1, "a": {"z": [3, {"y": 1, "x": 2}], "c": "é"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":"é","z":[3,{"x":2,"y":1}]},"b":1}"#
        );
    }

    #[test]
    fn digest_ignores_key_order() {
        assert_eq!(
            sha256_json(&json!({"a": 1, "b": 2})),
            sha256_json(&json!({"b": 2, "a": 1}))
        );
    }
}
