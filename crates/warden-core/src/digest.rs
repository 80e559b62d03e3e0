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

/// Where canonical JSON is written: a buffer, or a hasher fed the pieces
/// as they are produced ([`sha256_json`]: a 100 KB argument is hashed
/// straight from its string, not first copied into a buffer that grows
/// by reallocation).
pub trait JsonSink {
    fn put(&mut self, bytes: &[u8]);
    fn put_byte(&mut self, byte: u8) {
        self.put(&[byte]);
    }
    /// A hint that about `additional` more bytes follow.
    fn reserve(&mut self, _additional: usize) {}
}

impl JsonSink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    fn put_byte(&mut self, byte: u8) {
        self.push(byte);
    }
    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional);
    }
}

impl JsonSink for Sha256 {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// Appends `value` in canonical form.
pub fn write_canonical(value: &Value, out: &mut impl JsonSink) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.put_byte(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.put_byte(b',');
                }
                write_json_str(out, key);
                out.put_byte(b':');
                write_canonical(&map[key], out);
            }
            out.put_byte(b'}');
        }
        Value::Array(items) => {
            out.put_byte(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put_byte(b',');
                }
                write_canonical(item, out);
            }
            out.put_byte(b']');
        }
        Value::String(s) => write_json_str(out, s),
        // A number, boolean or null as serde_json writes it: a few bytes
        // (a float at most 24), written on the stack. Only a number longer
        // than the buffer, possible if some crate turns on serde_json's
        // `arbitrary_precision`, takes the allocating way.
        scalar => {
            let mut buf = [0u8; 64];
            let mut cursor = std::io::Cursor::new(&mut buf[..]);
            if serde_json::to_writer(&mut cursor, scalar).is_ok() {
                let len = usize::try_from(cursor.position()).unwrap_or(0);
                out.put(&buf[..len]);
            } else {
                let mut text = Vec::new();
                let _ = serde_json::to_writer(&mut text, scalar);
                out.put(&text);
            }
        }
    }
}

/// Appends `s` as a JSON string exactly as `serde_json` writes it: `"`,
/// `\` and control characters below U+0020 escaped (`\b`, `\f`, `\n`,
/// `\r`, `\t`, else `\u00xx`), everything else as is.
///
/// Every relayed message and every digest of a call's arguments and
/// result passes through here, so it looks at eight bytes at a time, jumps
/// straight to the next byte to escape in a word that has one, and after a
/// clean word skips 32-byte blocks with a test the compiler vectorises: a
/// 100 KB argument with nothing to escape took 34 µs a byte-word at a time
/// and takes 16 µs; text with an escape every 50 bytes 72 → 67 µs
/// (BENCHMARKS.md, "Ninth pass").
pub fn write_json_str(out: &mut impl JsonSink, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    const BLOCK: usize = 32;
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.put_byte(b'"');
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8) {
            let mut le = [0u8; 8];
            le.copy_from_slice(word);
            let mask = escape_mask(u64::from_le_bytes(le));
            if mask == 0 {
                at += 8;
                while let Some(block) = bytes.get(at..at + BLOCK)
                    && !block.iter().fold(false, |any, &b| any | escapes(b))
                {
                    at += BLOCK;
                }
                continue;
            }
            // The lowest flagged byte is the first to escape in the word.
            at += (mask.trailing_zeros() / 8) as usize;
        } else if !escapes(bytes[at]) {
            at += 1;
            continue;
        }
        let b = bytes[at];
        // An ASCII byte: `copied..at` ends on a character boundary.
        out.put(&bytes[copied..at]);
        match b {
            b'"' => out.put(b"\\\""),
            b'\\' => out.put(b"\\\\"),
            0x08 => out.put(b"\\b"),
            0x0c => out.put(b"\\f"),
            b'\n' => out.put(b"\\n"),
            b'\r' => out.put(b"\\r"),
            b'\t' => out.put(b"\\t"),
            _ => out.put(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
        at += 1;
        copied = at;
    }
    out.put(&bytes[copied..]);
    out.put_byte(b'"');
}

/// Whether [`write_json_str`] escapes `b`.
#[inline(always)]
fn escapes(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The bytes of the little-endian word `w` that [`write_json_str`]
/// escapes, as their top bits. A word has a zero byte exactly when
/// `(w - 0x0101…) & !w & 0x8080…` is not zero, and a byte below 0x20
/// likewise with `0x2020…`; `"` and `\` are zero bytes of `w` XOR that byte
/// repeated. Bits above the lowest may be false (a borrow runs upward from
/// a true hit), but the lowest set bit is always a byte to escape.
#[inline(always)]
fn escape_mask(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |w: u64| w.wrapping_sub(ONES) & !w & TOPS;
    (w.wrapping_sub(ONES * 0x20) & !w & TOPS)
        | zero_byte(w ^ (ONES * u64::from(b'"')))
        | zero_byte(w ^ (ONES * u64::from(b'\\')))
}

/// Hex SHA-256 of raw bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex_of(&Sha256::digest(bytes).into())
}

/// A digest in lower-case hex. `hex::encode` builds its `String` a `char`
/// at a time (1.7 k instructions per digest, two digests per call);
/// this writes the 64 bytes into one buffer.
fn hex_of(digest: &[u8; 32]) -> String {
    let mut text = [0u8; 64];
    // Cannot fail: the buffer is exactly twice the digest's length.
    let _ = hex::encode_to_slice(digest, &mut text);
    // Hex digits are ASCII, so this borrows and copies once.
    String::from_utf8_lossy(&text).into_owned()
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
    Ok(hex_of(&hasher.finalize().into()))
}

/// Hex SHA-256 of a value's canonical JSON, hashed as it is written.
pub fn sha256_json(value: &Value) -> String {
    let mut hasher = Sha256::new();
    write_canonical(value, &mut hasher);
    hex_of(&hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The digest hashed as it is written is the digest of the written
    /// text: every kind of scalar at its longest, escapes at a long
    /// string's ends and in its middle, nesting, non-ASCII keys.
    #[test]
    fn hashing_while_writing_is_hashing_the_text() {
        let long = format!("\"{}\u{1}{}\\é", "x".repeat(100_000), "y".repeat(9));
        let values = [
            json!(null),
            json!(true),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-0.0),
            json!(f64::MAX),
            json!(f64::MIN_POSITIVE),
            json!(-1.234_567_890_123_456_7e-300),
            json!(long),
            json!({"é": [1, 2.5, {"b": long, "a": null}], "": false, "\n": "\u{7f}"}),
            json!([[], {}, "", [[[0]]]]),
        ];
        for value in values {
            if !(value.is_object() || value.is_array()) {
                assert_eq!(canonical_json(&value), value.to_string());
            }
            assert_eq!(
                sha256_json(&value),
                sha256_hex(canonical_json(&value).as_bytes()),
                "{value}"
            );
        }
    }

    /// Known answers (FIPS 180-2's "abc", and the empty input), so the hex
    /// encoding itself is checked, not only its agreement with itself.
    #[test]
    fn digests_are_lower_case_hex_of_sha256() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(sha256_json(&json!("abc")), sha256_hex(br#""abc""#));
    }

    #[test]
    fn keys_are_sorted_at_every_level() {
        let v = json!({"b": 1, "a": {"z": [3, {"y": 1, "x": 2}], "c": "é"}});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":{"c":"é","z":[3,{"x":2,"y":1}]},"b":1}"#
        );
    }

    /// Every ASCII byte at every place of two 8-byte words and a tail, and
    /// of a run long enough for the 32-byte blocks (83 characters), alone
    /// and after an earlier escape, among plain bytes and among bytes of
    /// multi-byte characters, as a value and as a key: exactly what
    /// `serde_json` writes.
    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut texts: Vec<String> = (0u8..=0x7f).map(|b| format!("a{}b", b as char)).collect();
        for fill in ["x", "é"] {
            for len in [19, 83] {
                for at in 0..len {
                    for b in 0u8..=0x7f {
                        let mut chars: Vec<String> = vec![fill.to_string(); len];
                        chars[at] = (b as char).to_string();
                        texts.push(chars.concat());
                        // And after an escape in the first word.
                        chars[at.min(len - 1) / 3] = "\"".to_string();
                        texts.push(chars.concat());
                    }
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
        let word = |text: &[u8; 8]| escape_mask(u64::from_le_bytes(*text));
        assert_eq!(word(b"plain te"), 0);
        assert_eq!(word("é plain".as_bytes().try_into().unwrap()), 0);
        // The lowest flag is the first byte to escape, whatever follows.
        assert_eq!(word(b"tab\there").trailing_zeros() / 8, 3);
        assert_eq!(word(b"\"\x00\x01\x1f\\\"\\\x7f").trailing_zeros() / 8, 0);
        assert_eq!(word(b"abcdefg\x00").trailing_zeros() / 8, 7);
    }

    #[test]
    fn digest_ignores_key_order() {
        assert_eq!(
            sha256_json(&json!({"a": 1, "b": 2})),
            sha256_json(&json!({"b": 2, "a": 1}))
        );
    }
}
