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
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    // Only whole `&str`s and ASCII are written: always UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends `value` in canonical form.
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json_str(out, key);
                out.push(b':');
                write_canonical(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_json_str(out, s),
        // Writing a number, boolean or null to a Vec cannot fail.
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// Appends `s` as a JSON string exactly as `serde_json` writes it: `"`,
/// `\` and control characters below U+0020 escaped (`\b`, `\f`, `\n`,
/// `\r`, `\t`, else `\u00xx`), everything else as is. Runs of eight
/// bytes with nothing to escape are copied without looking at each byte
/// (a 100 KB argument is written for its digest on every call).
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8)
            && !needs_escape(word)
        {
            at += 8;
            continue;
        }
        let b = bytes[at];
        if b < 0x20 || b == b'"' || b == b'\\' {
            // An ASCII byte: `copied..at` ends on a character boundary.
            out.extend_from_slice(&bytes[copied..at]);
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                _ => out.extend_from_slice(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ]),
            }
            copied = at + 1;
        }
        at += 1;
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

/// Whether any byte of `bytes` is below 0x20, `"` or `\\` (what
/// [`write_json_str`] escapes), eight bytes at a time: a word `w` has a
/// zero byte exactly when `(w - 0x0101…) & !w & 0x8080…` is not zero, and
/// a byte below 0x20 likewise with `0x2020…`; `"` and `\\` are zero bytes
/// of `w` XOR that byte repeated.
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |w: u64| w.wrapping_sub(ONES) & !w & TOPS;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let control = w.wrapping_sub(ONES * 0x20) & !w & TOPS;
        if control
            | zero_byte(w ^ (ONES * u64::from(b'"')))
            | zero_byte(w ^ (ONES * u64::from(b'\\')))
            != 0
        {
            return true;
        }
    }
    chunks
        .remainder()
        .iter()
        .any(|&b| b < 0x20 || b == b'"' || b == b'\\')
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
    let mut out = Vec::new();
    write_canonical(value, &mut out);
    sha256_hex(&out)
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

    /// Every ASCII byte at every place of two 8-byte words and a tail,
    /// among plain bytes and among bytes of multi-byte characters, as a
    /// value and as a key: exactly what `serde_json` writes.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut texts: Vec<String> = (0u8..=0x7f).map(|b| format!("a{}b", b as char)).collect();
        for fill in ["x", "é"] {
            for at in 0..19 {
                for b in 0u8..=0x7f {
                    let mut chars: Vec<String> = vec![fill.to_string(); 19];
                    chars[at] = (b as char).to_string();
                    texts.push(chars.concat());
                }
            }
        }
        texts.extend(
            [
                "",
                "plain",
                "é\u{2028}\u{7f}𝄞",
                "\\\"",
                "\u{1f}x",
                "\n\n\n\n\n\n\n\n\n",
            ]
            .map(String::from),
        );
        for text in texts {
            let mut out = Vec::new();
            write_json_str(&mut out, &text);
            assert_eq!(out, serde_json::to_vec(&text).unwrap(), "{text:?}");
            let object = json!({ text.clone(): [text.clone(), 1.5, -2, null, true] });
            assert_eq!(
                canonical_json(&object),
                serde_json::to_string(&object).unwrap()
            );
        }
        assert!(!needs_escape("é plain text without escapes".as_bytes()));
        assert!(needs_escape("tab\there".as_bytes()));
    }

    #[test]
    fn digest_ignores_key_order() {
        assert_eq!(
            sha256_json(&json!({"a": 1, "b": 2})),
            sha256_json(&json!({"b": 2, "a": 1}))
        );
    }
}
