//! One record as a line: canonical JSON, hashed, with `hash` spliced in at
//! its sorted place, serialised once.

use std::sync::OnceLock;

use serde_json::{Map, Value};
use warden_core::digest::canonical_json;

use crate::chain::Hasher;

/// Whether `serde_json::Map` iterates in sorted key order, as it does
/// unless some crate in the build enables serde_json's `preserve_order`.
/// Then `serde_json::to_writer` already writes canonical JSON (compact,
/// keys sorted bytewise, the same escapes and numbers), in one pass; else
/// [`canonical_json`] sorts explicitly. `verify` always uses
/// [`canonical_json`], so the two are checked against each other.
fn maps_are_sorted() -> bool {
    static SORTED: OnceLock<bool> = OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut map = Map::new();
        map.insert("b".into(), Value::Null);
        map.insert("a".into(), Value::Null);
        map.insert("B".into(), Value::Null);
        map.keys().map(String::as_str).eq(["B", "a", "b"])
    })
}

fn write_canonical(out: &mut Vec<u8>, value: &Value) {
    if maps_are_sorted() && serde_json::to_writer(&mut *out, value).is_ok() {
        return;
    }
    out.extend_from_slice(canonical_json(value).as_bytes());
}

/// The record's `hash` and its line: the canonical JSON of `body` (which
/// has no `hash`) is hashed, then `"hash":"…"` is spliced in at its sorted
/// place and `\n` added, so the record is serialised once.
pub(super) fn chain_line(body: &Map<String, Value>, hasher: &Hasher) -> (String, Vec<u8>) {
    let mut keys: Vec<&String> = body.keys().collect();
    if !maps_are_sorted() {
        keys.sort();
    }
    let mut buf = Vec::with_capacity(1024);
    buf.push(b'{');
    // Where `"hash":…` goes, and whether a comma goes before (it follows a
    // member) or after it (it precedes one).
    let mut splice: Option<(usize, bool, bool)> = None;
    for (i, key) in keys.iter().enumerate() {
        if splice.is_none() && key.as_str() > "hash" {
            splice = Some((buf.len(), i > 0, i == 0));
        }
        if i > 0 {
            buf.push(b',');
        }
        if serde_json::to_writer(&mut buf, key.as_str()).is_err() {
            buf.extend_from_slice(canonical_json(&Value::String((*key).clone())).as_bytes());
        }
        buf.push(b':');
        write_canonical(&mut buf, &body[key.as_str()]);
    }
    buf.push(b'}');
    let hash = hasher.hash(&buf);

    let (at, comma_before, comma_after) =
        splice.unwrap_or((buf.len() - 1, !keys.is_empty(), false));
    let member = format!("\"hash\":\"{hash}\"");
    let mut line = Vec::with_capacity(buf.len() + member.len() + 2);
    line.extend_from_slice(&buf[..at]);
    if comma_before {
        line.push(b',');
    }
    line.extend_from_slice(member.as_bytes());
    if comma_after {
        line.push(b',');
    }
    line.extend_from_slice(&buf[at..]);
    line.push(b'\n');
    (hash, line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chain_line_is_the_canonical_record_with_its_hash() {
        for key in [None, Some(b"k".as_slice())] {
            let hasher = Hasher::new(key).unwrap();
            for body in [
                json!({}),
                json!({"a": 1}),
                json!({"z": "\u{1}é\"", "hasg": null, "hasi": [1.5, -0.0, 1e300]}),
                json!({"b": {"y": 1, "x": [{"d": 1, "c": 2}]}, "a": "x", "seq": 7, "v": 1}),
            ] {
                let Value::Object(map) = body else {
                    unreachable!()
                };
                let (hash, line) = chain_line(&map, &hasher);
                assert_eq!(
                    hash,
                    hasher.hash(canonical_json(&Value::Object(map.clone())).as_bytes())
                );
                let mut with = map.clone();
                with.insert("hash".into(), hash.into());
                let expected = canonical_json(&Value::Object(with)) + "\n";
                assert_eq!(String::from_utf8(line).unwrap(), expected);
            }
        }
    }
}
