//! The tool registry (CONTRACT §4): every connected server's tools under
//! their qualified names `mcp__S__T`. Remote names are kept in a table and
//! never parsed back out of the qualified string. Names that are too long or
//! collide after sanitising are skipped and reported, never truncated.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::mcp::Tool;

use warden_core::MAX_QUALIFIED_LEN;

/// One registered tool.
#[derive(Debug, Clone)]
pub struct ToolEntry {
    pub server: String,
    /// The server's own name for the tool, sent back on calls.
    pub remote: String,
    pub qualified: String,
    pub definition: Tool,
    /// `definition.input_schema` as a JSON value, made once when the tool
    /// is listed and shared with every call's facts.
    pub input_schema: Arc<Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedTool {
    pub server: String,
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// Shared: a call resolves its tool to the entry, not to a copy.
    tools: BTreeMap<String, Arc<ToolEntry>>,
    skipped: Vec<SkippedTool>,
}

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

pub fn qualified_name(server: &str, tool: &str) -> String {
    format!("mcp__{}__{}", sanitize(server), sanitize(tool))
}

/// Why a listed tool's input schema (as the JSON value its entry will
/// share) keeps it from being registered (e.g. too complex to validate in
/// bounded time), if it does.
pub type Refuse<'a> = &'a dyn Fn(&Value) -> Option<String>;

impl Registry {
    /// Builds the registry from each server's listed tools.
    #[cfg(test)]
    pub fn build<'a>(servers: impl IntoIterator<Item = (&'a str, &'a [Tool])>) -> Self {
        Registry::build_with(servers, &|_| None)
    }

    /// Builds the registry, skipping (and reporting) every tool `refuse`
    /// has a reason against.
    pub fn build_with<'a>(
        servers: impl IntoIterator<Item = (&'a str, &'a [Tool])>,
        refuse: Refuse<'_>,
    ) -> Self {
        let mut registry = Registry::default();
        for (server, tools) in servers {
            registry.add_server(server, tools, refuse);
        }
        registry
    }

    fn add_server(&mut self, server: &str, tools: &[Tool], refuse: Refuse<'_>) {
        // Group by qualified name first so that collisions drop every party.
        let mut by_name: HashMap<String, Vec<&Tool>> = HashMap::new();
        for tool in tools {
            by_name
                .entry(qualified_name(server, &tool.name))
                .or_default()
                .push(tool);
        }
        let mut names: Vec<_> = by_name.into_iter().collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (qualified, group) in names {
            if group.len() > 1 {
                let all: Vec<&str> = group.iter().map(|t| t.name.as_ref()).collect();
                for tool in &group {
                    self.skipped.push(SkippedTool {
                        server: server.to_string(),
                        name: tool.name.to_string(),
                        reason: format!("ambiguous: {} all become `{qualified}`", all.join(", ")),
                    });
                }
                continue;
            }
            let tool = group[0];
            if qualified.len() > MAX_QUALIFIED_LEN {
                self.skipped.push(SkippedTool {
                    server: server.to_string(),
                    name: tool.name.to_string(),
                    reason: format!(
                        "qualified name `{qualified}` is {} characters; the limit is {MAX_QUALIFIED_LEN}",
                        qualified.len()
                    ),
                });
                continue;
            }
            let input_schema = Arc::new(Value::Object((*tool.input_schema).clone()));
            if let Some(reason) = refuse(&input_schema) {
                self.skipped.push(SkippedTool {
                    server: server.to_string(),
                    name: tool.name.to_string(),
                    reason,
                });
                continue;
            }
            if self.tools.contains_key(&qualified) {
                // Two servers whose names sanitise alike (config validation
                // forbids it, but never register a guess).
                self.skipped.push(SkippedTool {
                    server: server.to_string(),
                    name: tool.name.to_string(),
                    reason: format!("`{qualified}` is already registered by another server"),
                });
                continue;
            }
            self.tools.insert(
                qualified.clone(),
                Arc::new(ToolEntry {
                    server: server.to_string(),
                    remote: tool.name.to_string(),
                    qualified,
                    definition: tool.clone(),
                    input_schema,
                }),
            );
        }
    }

    pub fn get(&self, qualified: &str) -> Option<&Arc<ToolEntry>> {
        self.tools.get(qualified)
    }

    /// Finds a tool by server and the server's own tool name.
    pub fn find(&self, server: &str, remote: &str) -> Option<&Arc<ToolEntry>> {
        // Every tool is registered under `qualified_name(server, name)`:
        // one lookup, not a scan of every tool on each call. Names that
        // sanitise alike share a key, so the entry is checked too.
        self.tools
            .get(&qualified_name(server, remote))
            .filter(|t| t.server == server && t.remote == remote)
    }

    pub fn tools(&self) -> impl Iterator<Item = &ToolEntry> {
        self.tools.values().map(|entry| &**entry)
    }

    pub fn skipped(&self) -> &[SkippedTool] {
        &self.skipped
    }
}

/// The input schema as an object schema every model provider accepts.
pub fn object_schema(tool: &Tool) -> Value {
    normalize_object_schema(&Value::Object((*tool.input_schema).clone()))
}

/// A missing or non-object `type` becomes `"object"`, missing `properties`
/// becomes `{}`; anything that is not an object becomes the empty object
/// schema. The provider adapters (`crate::agent`) wrap the result in their
/// own tool formats.
pub fn normalize_object_schema(schema: &Value) -> Value {
    let mut schema = match schema {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        schema.insert("type".into(), Value::String("object".into()));
    }
    schema
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    Value::Object(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tool(name: &str) -> Tool {
        let schema: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"type": "object"})).unwrap_or_default();
        Tool::new(name.to_string(), "d", Arc::new(schema))
    }

    #[test]
    fn names_are_sanitised_and_kept_in_a_table() {
        let tools = [tool("read.note"), tool("list")];
        let r = Registry::build([("notes", &tools[..])]);
        let e = r.get("mcp__notes__read_note").map(|e| e.remote.clone());
        assert_eq!(e.as_deref(), Some("read.note"));
        assert!(r.get("mcp__notes__list").is_some());
    }

    #[test]
    fn collisions_register_neither() {
        let tools = [tool("a.b"), tool("a_b"), tool("c")];
        let r = Registry::build([("s", &tools[..])]);
        assert!(r.get("mcp__s__a_b").is_none());
        assert_eq!(r.skipped().len(), 2);
        assert_eq!(r.tools().count(), 1);
    }

    #[test]
    fn overlong_names_are_skipped_not_truncated() {
        let long = "x".repeat(60);
        let tools = [tool(&long)];
        let r = Registry::build([("srv", &tools[..])]);
        assert_eq!(r.tools().count(), 0);
        assert!(r.skipped()[0].reason.contains("limit is 64"));
    }

    #[test]
    fn schema_conversion_forces_object() {
        let t = tool("x");
        assert_eq!(object_schema(&t)["properties"], serde_json::json!({}));
        assert_eq!(object_schema(&t)["type"], "object");
        assert_eq!(
            normalize_object_schema(&serde_json::json!(true)),
            serde_json::json!({"type": "object", "properties": {}})
        );
    }
}
