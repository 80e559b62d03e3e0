//! The argument a condition names, as servers find it.
//!
//! A rule names an argument by its key (`path`, `/options/cwd`), but
//! servers do not all find arguments by exact key: Go's `encoding/json`
//! (behind mcp-go's typed handlers and `BindArguments`) binds `PATH` or
//! `Path` to the field `path`, and `pathſ` to `paths` (Unicode case
//! folding: `ſ` is `s`, the Kelvin sign `K` is `k`), the last one in the
//! text winning; .NET's web defaults (the C# SDK's) match names ignoring
//! case. A `deny` on `path` missed
//! `{"PATH": "/etc/shadow"}`, and an `allow` on `path` held while another
//! spelling carried what the server opened. So a condition reads every
//! key equal to its name when case is folded: a `deny`/`ask` fires when
//! any of them fires, an `allow` holds only when all of them hold.

use super::CanonValue;
use crate::canon::Shape;

/// Whether `key` may name the argument `name` to a server: equal, or equal
/// when both are case-folded (each character upper- then lower-cased, so
/// `ſ`, `S` and `s` are one, and `K`, `K` and `k`). Folding more than a
/// server does only makes a `deny` fire on more keys and an `allow` need
/// more of them.
pub(super) fn same_key(key: &str, name: &str) -> bool {
    if key == name {
        return true;
    }
    if key.is_ascii() && name.is_ascii() {
        return key.eq_ignore_ascii_case(name);
    }
    fold(key).eq(fold(name))
}

fn fold(s: &str) -> impl Iterator<Item = char> + '_ {
    s.chars()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
}

/// Every value under a top-level key that may name `name`, with its key.
pub(super) fn by_name<'a>(args: &'a CanonValue, name: &str) -> Vec<(&'a str, &'a CanonValue)> {
    match args {
        CanonValue::Object(map) => map
            .iter()
            .filter(|(key, _)| same_key(key, name))
            .map(|(key, value)| (key.as_str(), value))
            .collect(),
        _ => Vec::new(),
    }
}

/// Every value an RFC 6901 pointer may reach when each object key along
/// it is matched as [`same_key`] (array indices exactly).
pub(super) fn by_pointer<'a>(args: &'a CanonValue, pointer: &str) -> Vec<&'a CanonValue> {
    let Some(rest) = pointer.strip_prefix('/') else {
        return if pointer.is_empty() {
            vec![args]
        } else {
            Vec::new()
        };
    };
    let mut at = vec![args];
    for token in rest.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        let mut next = Vec::new();
        for value in at {
            match value {
                CanonValue::Object(map) => next.extend(
                    map.iter()
                        .filter(|(key, _)| same_key(key, &token))
                        .map(|(_, v)| v),
                ),
                // JSON text (`"{\"path\": \"/etc\"}"`): the Python SDK parses
                // it into the object a pointer walks, so the text itself,
                // whose readings are the strings inside, stands for what
                // the rest of the pointer reaches (it is uncertain: no
                // allow holds on it).
                CanonValue::Str(s) if matches!(s.shape, Shape::JsonText { .. }) => next.push(value),
                CanonValue::Array(items) => {
                    if token.starts_with('+') || (token.len() > 1 && token.starts_with('0')) {
                        continue;
                    }
                    if let Some(item) = token.parse::<usize>().ok().and_then(|i| items.get(i)) {
                        next.push(item);
                    }
                }
                _ => {}
            }
        }
        at = next;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_a_server_binds_to_a_name() {
        for key in ["path", "PATH", "Path", "pAtH"] {
            assert!(same_key(key, "path"), "{key}");
        }
        // Go's encoding/json folds these too.
        assert!(same_key("pathſ", "paths"));
        assert!(same_key("\u{212a}ey", "key"));
        for key in ["paths", "path ", "path\0", "file_path", "pat"] {
            assert!(!same_key(key, "path"), "{key}");
        }
    }
}
