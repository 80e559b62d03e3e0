//! Arguments as the server will use them: what was sent, and for each
//! top-level argument left out, the `default` its schema declares. The
//! official Python SDK (pydantic) and others fill those in, so `{}` to
//! `read_latest_note(id: int = 2)` reads note 2, and a `deny` on `id: 2`
//! that saw no `id` let it through. The defaults are the server's own
//! word, so they only ever restrict: the rules stage lets them raise a
//! decision to `ask` or `deny`, never make an `allow` hold.

use serde_json::{Map, Value};

/// Most bytes of defaults read (as JSON text): a schema is the server's, so
/// its defaults must not make a decision that was bounded small unbounded.
/// Defaults past it are not read.
const MAX_BYTES: usize = 4 << 10;

/// `arguments` with the schema's defaults of the top-level properties it
/// leaves out, and their names; `None` when no default applies.
pub(super) fn with_defaults(arguments: &Value, schema: &Value) -> Option<(Value, Vec<String>)> {
    let Value::Object(args) = arguments else {
        return None;
    };
    let props = schema.get("properties")?.as_object()?;
    let mut added = Map::new();
    let mut spent = 0usize;
    for (name, prop) in props {
        if args.contains_key(name) {
            continue;
        }
        let Some(default) = prop.get("default") else {
            continue;
        };
        spent += name.len() + default.to_string().len();
        if spent > MAX_BYTES {
            break;
        }
        added.insert(name.clone(), default.clone());
    }
    if added.is_empty() {
        return None;
    }
    let names = added.keys().cloned().collect();
    let mut out = args.clone();
    out.extend(added);
    Some((Value::Object(out), names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_absent_arguments_take_their_default() {
        let schema = json!({"type": "object", "properties": {
            "id": {"type": "integer", "default": 2},
            "db": {"type": "string", "default": "prod"},
            "q": {"type": "string"},
        }});
        let (args, names) = with_defaults(&json!({"db": "test"}), &schema).unwrap();
        assert_eq!(args, json!({"db": "test", "id": 2}));
        assert_eq!(names, ["id"]);
        assert!(with_defaults(&json!({"id": 1, "db": "x"}), &schema).is_none());
        assert!(with_defaults(&json!({}), &json!({"type": "object"})).is_none());
        let huge = json!({"properties": {"a": {"default": "x".repeat(MAX_BYTES)}}});
        assert!(with_defaults(&json!({}), &huge).is_none());
    }
}
