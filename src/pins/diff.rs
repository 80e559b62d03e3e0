//! What changed between a pinned tool definition and the listed one, in
//! words a person can judge: descriptions old → new, schema properties
//! added/removed/changed, annotation hints.

use serde_json::Value;

use super::PINNED_FIELDS;

fn show(v: &Value, max: usize) -> String {
    let s = match v {
        Value::String(s) => format!("{s:?}"),
        other => warden_core::digest::canonical_json(other),
    };
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

/// Which pinned fields changed, readably: descriptions old → new, schema
/// properties added/removed/changed, annotation hints.
pub(super) fn diff_definitions(old: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for field in PINNED_FIELDS {
        let (a, b) = (old.get(*field), new.get(*field));
        if a == b {
            continue;
        }
        match (a, b) {
            (None, Some(v)) => out.push(format!("{field} added: {}", show(v, 120))),
            (Some(_), None) => out.push(format!("{field} removed")),
            (Some(a), Some(b)) => match *field {
                "inputSchema" | "outputSchema" => out.push(schema_diff(field, a, b)),
                "annotations" => {
                    let mut keys: Vec<&String> = a
                        .as_object()
                        .into_iter()
                        .chain(b.as_object())
                        .flat_map(|m| m.keys())
                        .collect();
                    keys.sort();
                    keys.dedup();
                    let parts: Vec<String> = keys
                        .into_iter()
                        .filter(|k| a.get(k.as_str()) != b.get(k.as_str()))
                        .map(|k| {
                            let s = |v: Option<&Value>| v.map_or("unset".into(), |v| show(v, 40));
                            format!("{k} {} → {}", s(a.get(k.as_str())), s(b.get(k.as_str())))
                        })
                        .collect();
                    out.push(format!("annotations changed: {}", parts.join(", ")));
                }
                _ => out.push(format!(
                    "{field} changed: {} → {}",
                    show(a, 120),
                    show(b, 120)
                )),
            },
            (None, None) => {}
        }
    }
    if out.is_empty() {
        out.push("definition changed".into());
    }
    out
}

fn schema_diff(field: &str, a: &Value, b: &Value) -> String {
    let props = |v: &Value| {
        v.get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (pa, pb) = (props(a), props(b));
    let mut parts = Vec::new();
    for k in pb.keys().filter(|k| !pa.contains_key(*k)) {
        parts.push(format!("property `{k}` added"));
    }
    for k in pa.keys().filter(|k| !pb.contains_key(*k)) {
        parts.push(format!("property `{k}` removed"));
    }
    for (k, v) in &pa {
        if let Some(w) = pb.get(k)
            && v != w
        {
            parts.push(format!("property `{k}` changed"));
        }
    }
    if a.get("required") != b.get("required") {
        parts.push(format!(
            "required {} → {}",
            a.get("required").map_or("unset".into(), |v| show(v, 80)),
            b.get("required").map_or("unset".into(), |v| show(v, 80))
        ));
    }
    if parts.is_empty() {
        parts.push("other keywords changed".into());
    }
    format!("{field} changed: {}", parts.join(", "))
}
