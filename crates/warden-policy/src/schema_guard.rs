//! Refusing input schemas whose validation could take unbounded time,
//! before anything validates against them.
//!
//! JSON Schema validation has no step limit: `anyOf` of two `$ref`s to the
//! next level, 22 levels deep (3 KB of schema), took 23.6 s per call, and
//! 40 levels would take days. The work of validating one value is bounded
//! by the schema *as expanded*: every `$ref` replaced by its target, every
//! combinator branch counted. [`check`] computes that size, per kind of
//! value (an `items` keyword does nothing to an object, so the two
//! branches of `{"anyOf": [{"items": R}, {"additionalProperties": R}]}`
//! never both descend), and unrolls recursion only as deep as arguments
//! may nest ([`crate::canon::Limits::max_depth`]). A schema over
//! [`SchemaLimits`] is refused with the reason, when the server lists its
//! tools (the tool is skipped and reported) and again by the schema stage.
//!
//! Also refused: a `$ref` cycle that does not descend into the value
//! (validation would loop at one place), and a `$ref` warden cannot
//! resolve inside the schema (remote references are never fetched).

use std::collections::HashMap;

use serde_json::Value;

/// Caps on one tool's `inputSchema`. Generous for real servers: the
/// largest schema of the npm and PyPI servers warden is tested with
/// expands to a few hundred nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaLimits {
    /// Nesting of the schema document itself.
    pub max_depth: usize,
    /// `$ref`s in the document.
    pub max_refs: usize,
    /// Schema nodes visited to validate one value, references expanded and
    /// combinator branches counted (the fan-out).
    pub max_expanded: u64,
    /// How deep arguments may nest (recursive schemas are unrolled to it).
    pub value_depth: usize,
}

impl Default for SchemaLimits {
    fn default() -> Self {
        SchemaLimits {
            max_depth: 64,
            max_refs: 1_000,
            max_expanded: 50_000,
            value_depth: crate::canon::Limits::default().max_depth,
        }
    }
}

/// In-place applicators: evaluated against the same value.
const IN_PLACE_LIST: &[&str] = &["allOf", "anyOf", "oneOf"];
const IN_PLACE_ONE: &[&str] = &["not", "if", "then", "else"];
/// Descend into an object's members.
const OBJECT_MAP: &[&str] = &["properties", "patternProperties", "dependentSchemas"];
const OBJECT_ONE: &[&str] = &[
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
];
/// Descend into an array's items.
const ARRAY_ONE: &[&str] = &["additionalItems", "contains", "unevaluatedItems"];
const ARRAY_LIST: &[&str] = &["prefixItems"];

/// Why `schema` is refused, if it is.
pub fn check(schema: &Value, limits: &SchemaLimits) -> Result<(), String> {
    expanded_cost(schema, limits).map(|_| ())
}

/// Schema nodes visited to validate one value against `schema`, `$ref`s
/// expanded and combinator branches counted (capped just above
/// `limits.max_expanded`), or why the schema is refused.
pub fn expanded_cost(schema: &Value, limits: &SchemaLimits) -> Result<u64, String> {
    let mut refs = 0usize;
    document_shape(schema, 1, limits, &mut refs)?;
    let mut walker = Walker {
        root: schema,
        limits,
        memo: HashMap::new(),
        in_progress: Vec::new(),
    };
    let mut total = 0u64;
    for kind in [ValueKind::Object, ValueKind::Array, ValueKind::Scalar] {
        total = total.max(walker.cost(schema, "", kind, limits.value_depth)?);
    }
    if total > limits.max_expanded {
        return Err(format!(
            "inputSchema is too complex to validate in bounded time: validating one value \
             visits more than {} schema nodes once `$ref`s and `anyOf`/`oneOf`/`allOf` \
             branches are expanded (warden allows {})",
            limits.max_expanded, limits.max_expanded
        ));
    }
    Ok(total)
}

/// How many JSON values the schema document holds (every object, array,
/// string, number…), whatever they mean: `enum` and `const` values are
/// compared with each argument value, and are not schema nodes to
/// [`expanded_cost`].
pub fn document_size(schema: &Value) -> u64 {
    match schema {
        Value::Object(map) => 1 + map.values().map(document_size).sum::<u64>(),
        Value::Array(items) => 1 + items.iter().map(document_size).sum::<u64>(),
        _ => 1,
    }
}

/// Whether any object in `schema` has a key that makes validation run a
/// regular expression: `pattern`, `patternProperties` (both backtracking,
/// bounded only by a step limit per match) or `format` (some formats are
/// checked with regexes, `regex` by compiling the value). A property
/// named so counts too: the answer only ever errs towards `true`.
pub fn uses_regexes(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.iter().any(|(key, value)| {
            matches!(key.as_str(), "pattern" | "patternProperties" | "format")
                || uses_regexes(value)
        }),
        Value::Array(items) => items.iter().any(uses_regexes),
        _ => false,
    }
}

fn document_shape(
    v: &Value,
    depth: usize,
    limits: &SchemaLimits,
    refs: &mut usize,
) -> Result<(), String> {
    if depth > limits.max_depth {
        return Err(format!(
            "inputSchema is nested deeper than {} levels",
            limits.max_depth
        ));
    }
    match v {
        Value::Object(map) => {
            if map.contains_key("$ref")
                || map.contains_key("$dynamicRef")
                || map.contains_key("$recursiveRef")
            {
                *refs += 1;
                if *refs > limits.max_refs {
                    return Err(format!(
                        "inputSchema has more than {} `$ref`s",
                        limits.max_refs
                    ));
                }
            }
            for item in map.values() {
                document_shape(item, depth + 1, limits, refs)?;
            }
        }
        Value::Array(items) => {
            for item in items {
                document_shape(item, depth + 1, limits, refs)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ValueKind {
    Object,
    Array,
    Scalar,
}

struct Walker<'a> {
    root: &'a Value,
    limits: &'a SchemaLimits,
    /// (schema pointer, value kind, remaining depth) → cost.
    memo: HashMap<(String, ValueKind, usize), u64>,
    /// Schemas being expanded at the current value (no descent yet).
    in_progress: Vec<(String, ValueKind, usize)>,
}

impl<'a> Walker<'a> {
    /// Nodes visited validating a value of `kind` at `depth` remaining
    /// levels against the schema at `ptr`.
    fn cost(
        &mut self,
        node: &'a Value,
        ptr: &str,
        kind: ValueKind,
        depth: usize,
    ) -> Result<u64, String> {
        let Value::Object(map) = node else {
            return Ok(1);
        };
        let key = (ptr.to_string(), kind, depth);
        if let Some(c) = self.memo.get(&key) {
            return Ok(*c);
        }
        if self.in_progress.contains(&key) {
            return Err(
                "inputSchema has a `$ref` cycle that does not descend into the value \
                 (validation would never end)"
                    .into(),
            );
        }
        self.in_progress.push(key.clone());
        let cap = self.limits.max_expanded.saturating_add(1);
        let mut total: u64 = 1;
        let add = |c: u64, total: &mut u64| *total = total.saturating_add(c).min(cap);
        for name in ["$ref", "$dynamicRef", "$recursiveRef"] {
            if let Some(reference) = map.get(name) {
                let reference = reference.as_str().unwrap_or_default();
                let (target, target_ptr) = self.resolve(reference)?;
                add(self.cost(target, &target_ptr, kind, depth)?, &mut total);
            }
        }
        for name in IN_PLACE_LIST {
            if let Some(Value::Array(items)) = map.get(*name) {
                for (i, item) in items.iter().enumerate() {
                    add(
                        self.cost(item, &format!("{ptr}/{name}/{i}"), kind, depth)?,
                        &mut total,
                    );
                }
            }
        }
        for name in IN_PLACE_ONE {
            if let Some(item) = map.get(*name) {
                add(
                    self.cost(item, &format!("{ptr}/{name}"), kind, depth)?,
                    &mut total,
                );
            }
        }
        // `dependencies` (draft 7): schema values apply in place.
        if let Some(Value::Object(deps)) = map.get("dependencies") {
            for (k, item) in deps {
                if item.is_object() {
                    add(
                        self.cost(
                            item,
                            &format!("{ptr}/dependencies/{}", crate::canon::pointer_token(k)),
                            kind,
                            depth,
                        )?,
                        &mut total,
                    );
                }
            }
        }
        if depth > 0 {
            let below = depth - 1;
            match kind {
                ValueKind::Object => {
                    for name in OBJECT_MAP {
                        if let Some(Value::Object(members)) = map.get(*name) {
                            for (k, item) in members {
                                let p = format!("{ptr}/{name}/{}", crate::canon::pointer_token(k));
                                let c = if *name == "dependentSchemas" {
                                    self.cost(item, &p, kind, depth)?
                                } else {
                                    self.any_kind(item, &p, below)?
                                };
                                add(c, &mut total);
                            }
                        }
                    }
                    for name in OBJECT_ONE {
                        if let Some(item) = map.get(*name) {
                            let p = format!("{ptr}/{name}");
                            let c = if *name == "propertyNames" {
                                self.cost(item, &p, ValueKind::Scalar, below)?
                            } else {
                                self.any_kind(item, &p, below)?
                            };
                            add(c, &mut total);
                        }
                    }
                }
                ValueKind::Array => {
                    match map.get("items") {
                        Some(Value::Array(items)) => {
                            for (i, item) in items.iter().enumerate() {
                                add(
                                    self.any_kind(item, &format!("{ptr}/items/{i}"), below)?,
                                    &mut total,
                                );
                            }
                        }
                        Some(item) => add(
                            self.any_kind(item, &format!("{ptr}/items"), below)?,
                            &mut total,
                        ),
                        None => {}
                    }
                    for name in ARRAY_LIST {
                        if let Some(Value::Array(items)) = map.get(*name) {
                            for (i, item) in items.iter().enumerate() {
                                add(
                                    self.any_kind(item, &format!("{ptr}/{name}/{i}"), below)?,
                                    &mut total,
                                );
                            }
                        }
                    }
                    for name in ARRAY_ONE {
                        if let Some(item) = map.get(*name) {
                            add(
                                self.any_kind(item, &format!("{ptr}/{name}"), below)?,
                                &mut total,
                            );
                        }
                    }
                }
                ValueKind::Scalar => {}
            }
        }
        self.in_progress.pop();
        self.memo.insert(key, total);
        Ok(total)
    }

    /// A value one level down may be of any kind: the costliest counts.
    fn any_kind(&mut self, node: &'a Value, ptr: &str, depth: usize) -> Result<u64, String> {
        let mut worst = 0;
        for kind in [ValueKind::Object, ValueKind::Array, ValueKind::Scalar] {
            worst = worst.max(self.cost(node, ptr, kind, depth)?);
        }
        Ok(worst)
    }

    /// The schema a `$ref` names, inside this document only.
    fn resolve(&self, reference: &str) -> Result<(&'a Value, String), String> {
        let unresolvable = || {
            format!(
                "inputSchema has a `$ref` warden cannot resolve inside the schema (`{}`; \
                 remote references are never fetched)",
                reference.chars().take(80).collect::<String>()
            )
        };
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(unresolvable());
        };
        if fragment.is_empty() || fragment.starts_with('/') {
            let decoded = crate::canon::percent_decode_lossy(fragment);
            return self
                .root
                .pointer(&decoded)
                .map(|v| (v, decoded))
                .ok_or_else(unresolvable);
        }
        // `#name`: a `$anchor` (or a draft-7 `$id: "#name"`) in the document.
        find_anchor(self.root, fragment, &mut String::new()).ok_or_else(unresolvable)
    }
}

fn find_anchor<'a>(v: &'a Value, name: &str, at: &mut String) -> Option<(&'a Value, String)> {
    match v {
        Value::Object(map) => {
            if map.get("$anchor").and_then(Value::as_str) == Some(name)
                || map.get("$id").and_then(Value::as_str) == Some(&format!("#{name}"))
            {
                return Some((v, at.clone()));
            }
            for (k, item) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&crate::canon::pointer_token(k));
                if let Some(found) = find_anchor(item, name, at) {
                    return Some(found);
                }
                at.truncate(len);
            }
            None
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                at.push('/');
                at.push_str(&i.to_string());
                if let Some(found) = find_anchor(item, name, at) {
                    return Some(found);
                }
                at.truncate(len);
            }
            None
        }
        _ => None,
    }
}

/// The hostile schema of issue 11: `anyOf` of two `$ref`s to the next
/// level, `depth` levels deep, ending in a schema no object satisfies, so
/// validating any arguments (even `{}`) tries 2^depth paths. About 3 KB at
/// depth 22 (for tests, benchmarks and the test fixture servers).
pub fn exponential_schema(depth: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/n{}", i + 1);
        defs.insert(
            format!("n{i}"),
            serde_json::json!({"anyOf": [{"$ref": next}, {"$ref": next}]}),
        );
    }
    defs.insert(
        format!("n{depth}"),
        serde_json::json!({"type": "object", "required": ["never"]}),
    );
    serde_json::json!({"type": "object", "$ref": "#/$defs/n0", "$defs": defs})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(schema: Value) -> Result<(), String> {
        check(&schema, &SchemaLimits::default())
    }

    #[test]
    fn ordinary_schemas_pass() {
        ok(json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})).unwrap();
        ok(json!(true)).unwrap();
        ok(json!({})).unwrap();
        // A recursive tree (one recursive branch per level).
        ok(json!({
            "$defs": {"node": {"type": "object", "properties": {
                "value": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
            "type": "object", "properties": {"root": {"$ref": "#/$defs/node"}}
        }))
        .unwrap();
        // Any JSON value, recursively: arrays and objects never both descend.
        ok(json!({
            "$defs": {"json": {"anyOf": [
                {"type": ["string", "number", "boolean", "null"]},
                {"type": "array", "items": {"$ref": "#/$defs/json"}},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/json"}}]}},
            "type": "object", "properties": {"v": {"$ref": "#/$defs/json"}}
        }))
        .unwrap();
        ok(json!({"$ref": "#/definitions/a", "definitions": {"a": {"$anchor": "x", "type": "object"}}})).unwrap();
        ok(json!({"properties": {"a": {"$ref": "#x"}}, "$defs": {"b": {"$anchor": "x"}}})).unwrap();
    }

    #[test]
    fn the_hostile_schema_is_refused_quickly() {
        ok(exponential_schema(10)).unwrap();
        for depth in [22, 40, 200] {
            let started = std::time::Instant::now();
            let e = ok(exponential_schema(depth)).unwrap_err();
            assert!(e.contains("too complex"), "{e}");
            assert!(started.elapsed() < std::time::Duration::from_secs(1));
        }
    }

    #[test]
    fn cycles_and_remote_refs_are_refused() {
        let e =
            ok(json!({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}))
                .unwrap_err();
        assert!(e.contains("cycle"), "{e}");
        let e =
            ok(json!({"properties": {"a": {"$ref": "https://evil.example/s.json"}}})).unwrap_err();
        assert!(e.contains("cannot resolve"), "{e}");
        let e = ok(json!({"properties": {"a": {"$ref": "#/nope"}}})).unwrap_err();
        assert!(e.contains("cannot resolve"), "{e}");
    }

    #[test]
    fn deep_documents_and_many_refs_are_refused() {
        let mut deep = json!({"type": "string"});
        for _ in 0..70 {
            deep = json!({"properties": {"a": deep}});
        }
        assert!(ok(deep).unwrap_err().contains("deeper"));
        let props: serde_json::Map<String, Value> = (0..1100)
            .map(|i| (format!("p{i}"), json!({"$ref": "#/$defs/s"})))
            .collect();
        let e = ok(json!({"properties": props, "$defs": {"s": {"type": "string"}}})).unwrap_err();
        assert!(e.contains("`$ref`s"), "{e}");
    }
}
