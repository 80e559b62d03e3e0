//! What the readers share: typed access to a parsed file whose errors name
//! the file and key ([`Ctx`]), JSON parsing with line and column, and the
//! `mcpServers` entry shape Claude Code and Cursor have in common.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Import, ImportError, secrets};

/// Type helpers shared by the readers: each error names file and key.
pub(crate) struct Ctx<'a> {
    pub file: &'a Path,
}

impl Ctx<'_> {
    pub fn shape(&self, key: &str, message: impl Into<String>) -> ImportError {
        ImportError::Shape {
            path: self.file.to_path_buf(),
            key: key.to_string(),
            message: message.into(),
        }
    }
    pub fn object<'v>(
        &self,
        value: &'v Value,
        key: &str,
    ) -> Result<&'v Map<String, Value>, ImportError> {
        value.as_object().ok_or_else(|| {
            self.shape(
                key,
                format!("expected an object, found {}", type_name(value)),
            )
        })
    }
    pub fn string<'v>(&self, value: &'v Value, key: &str) -> Result<&'v str, ImportError> {
        value.as_str().ok_or_else(|| {
            self.shape(
                key,
                format!("expected a string, found {}", type_name(value)),
            )
        })
    }
    pub fn strings(&self, value: &Value, key: &str) -> Result<Vec<String>, ImportError> {
        let list = value.as_array().ok_or_else(|| {
            self.shape(
                key,
                format!("expected a list of strings, found {}", type_name(value)),
            )
        })?;
        list.iter()
            .enumerate()
            .map(|(i, v)| self.string(v, &format!("{key}[{i}]")).map(str::to_string))
            .collect()
    }
    pub fn string_map(
        &self,
        value: &Value,
        key: &str,
    ) -> Result<Vec<(String, String)>, ImportError> {
        let map = self.object(value, key)?;
        map.iter()
            .map(|(k, v)| {
                let s = match v {
                    Value::String(s) => s.clone(),
                    // Numbers and booleans in env are common; they mean their text.
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        return Err(self.shape(
                            &format!("{key}.{k}"),
                            format!("expected a string, found {}", type_name(other)),
                        ));
                    }
                };
                Ok((k.clone(), s))
            })
            .collect()
    }
}

pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// JSON text → value; a syntax error names the line and column.
pub fn parse_json(file: &Path, text: &str) -> Result<Value, ImportError> {
    serde_json::from_str(text).map_err(|e| ImportError::Syntax {
        path: file.to_path_buf(),
        message: format!("invalid JSON: {e}"),
    })
}

/// One server entry in the `mcpServers` shape Claude Code and Cursor share,
/// as warden's entry. `vars` rewrites the client's `${…}` forms to warden's.
pub(crate) fn json_server(
    ctx: &Ctx<'_>,
    out: &mut Import,
    key: &str,
    name: &str,
    value: &Value,
    vars: &dyn Fn(&str) -> String,
) -> Result<Map<String, Value>, ImportError> {
    let fields = ctx.object(value, key)?;
    let sub = |k: &str| format!("{key}.{k}");
    let mut entry = Map::new();
    let url = match fields.get("url") {
        Some(v) => Some(vars(ctx.string(v, &sub("url"))?)),
        None => None,
    };
    let kind = match fields.get("type") {
        Some(v) => match ctx.string(v, &sub("type"))? {
            t @ ("stdio" | "http" | "sse") => t.to_string(),
            "streamable-http" | "streamableHttp" | "streamable_http" => "http".into(),
            other => {
                return Err(ctx.shape(
                    &sub("type"),
                    format!("unknown server type `{other}` (expected stdio, http or sse)"),
                ));
            }
        },
        None if url.is_some() => {
            let sse = url
                .as_deref()
                .is_some_and(|u| u.trim_end_matches('/').ends_with("/sse"));
            out.note(
                ctx.file,
                key,
                if sse {
                    "no `type`: the URL ends in /sse, imported as legacy `sse`"
                } else {
                    "no `type`: imported as streamable `http` (set \"type\": \"sse\" for a legacy SSE server)"
                },
            );
            if sse { "sse".into() } else { "http".into() }
        }
        None => "stdio".into(),
    };
    for (k, v) in fields {
        let k = k.as_str();
        match k {
            "type" | "url" => {}
            "command" if kind == "stdio" => {
                entry.insert("command".into(), json!(vars(ctx.string(v, &sub(k))?)));
            }
            "args" if kind == "stdio" => {
                let args: Vec<String> = ctx.strings(v, &sub(k))?.iter().map(|a| vars(a)).collect();
                let args = secrets::args(ctx, out, &sub(k), name, &args);
                entry.insert("args".into(), json!(args));
            }
            "env" if kind == "stdio" => {
                let pairs = ctx.string_map(v, &sub(k))?;
                secrets::env(ctx, out, &sub(k), name, &pairs, vars, &mut entry);
            }
            "headers" if kind != "stdio" => {
                let pairs = ctx.string_map(v, &sub(k))?;
                secrets::headers(ctx, out, &sub(k), name, &pairs, vars, &mut entry);
            }
            "cwd" if kind == "stdio" => {
                let cwd = vars(ctx.string(v, &sub(k))?);
                entry.insert(
                    "cwd".into(),
                    json!(absolute_from(ctx.file, &cwd, out, &sub(k))),
                );
            }
            "timeout" => {
                // Claude Code counts MCP timeouts in milliseconds, warden's own
                // files in seconds: a value above warden's 600 s maximum is read
                // as milliseconds.
                let ms = v.as_f64().is_some_and(|n| n > 600.0);
                if ms {
                    out.note(ctx.file, &sub(k), "read as milliseconds");
                }
                secrets::timeout(
                    ctx,
                    out,
                    &sub(k),
                    v,
                    if ms { 1000.0 } else { 1.0 },
                    &mut entry,
                );
            }
            "env_from" if kind == "stdio" => {
                let names = ctx.strings(v, &sub(k))?;
                entry.insert("env_from".into(), json!(names));
            }
            "disabled" => {
                if let Some(b) = v.as_bool() {
                    entry.insert("disabled".into(), json!(b));
                } else {
                    return Err(ctx.shape(
                        &sub(k),
                        format!("expected a boolean, found {}", type_name(v)),
                    ));
                }
            }
            "trust" | "sandbox" => out.note(
                ctx.file,
                &sub(k),
                "not imported: every imported server starts `untrusted` with the default \
                 sandbox; set it again after reviewing the server",
            ),
            other => out.note(
                ctx.file,
                &sub(other),
                format!(
                    "`{other}` has no warden equivalent{}: left out",
                    if matches!(other, "command" | "args" | "env" | "cwd" | "headers") {
                        format!(" for a `{kind}` server")
                    } else {
                        String::new()
                    }
                ),
            ),
        }
    }
    if kind == "stdio" {
        if !entry.contains_key("command") {
            return Err(ctx.shape(
                key,
                "a stdio server needs `command` (or a `url` for a remote one)",
            ));
        }
    } else {
        let Some(url) = url else {
            return Err(ctx.shape(key, format!("a `{kind}` server needs `url`")));
        };
        entry.insert("type".into(), json!(kind));
        entry.insert(
            "url".into(),
            json!(secrets::url(ctx, out, &sub("url"), &url)),
        );
    }
    Ok(entry)
}

/// A relative `cwd` meant the folder of the file that named it: warden's
/// user file lives elsewhere, so it is made absolute (with a note).
pub(crate) fn absolute_from(file: &Path, cwd: &str, out: &mut Import, key: &str) -> String {
    if cwd.starts_with('/') || cwd.starts_with("${") {
        return cwd.to_string();
    }
    let base = std::path::absolute(file)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let abs = warden_core::path::normalize(&base.join(cwd));
    out.note(
        file,
        key,
        format!("relative cwd `{cwd}` made absolute: {}", abs.display()),
    );
    abs.display().to_string()
}
