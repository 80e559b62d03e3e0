//! Codex CLI: `config.toml` (`$CODEX_HOME/config.toml`, default
//! `~/.codex/config.toml`), each `[mcp_servers.NAME]` with `command`,
//! `args`, `env`, `env_vars`, `cwd` (stdio) or `url`,
//! `bearer_token_env_var`, `http_headers`, `env_http_headers` (streamable
//! HTTP); `enabled`, `tool_timeout_sec`, `enabled_tools`, `disabled_tools`.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Ctx, Import, ImportError, absolute_from, secrets, type_name};

pub fn import(file: &Path, text: &str, out: &mut Import) -> Result<(), ImportError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ImportError::Syntax {
        path: file.to_path_buf(),
        message: format!("invalid TOML: {}", e.to_string().trim_end()),
    })?;
    let value = serde_json::to_value(&table).map_err(|e| ImportError::Syntax {
        path: file.to_path_buf(),
        message: format!("unreadable TOML value: {e}"),
    })?;
    let ctx = Ctx { file };
    let Some(servers) = value.get("mcp_servers") else {
        return Err(ctx.shape(
            "mcp_servers",
            "missing: no [mcp_servers.NAME] table in this file",
        ));
    };
    for (name, entry) in ctx.object(servers, "mcp_servers")? {
        let key = format!("mcp_servers.{name}");
        let server = server(&ctx, out, &key, name, entry)?;
        out.add_server(file, &key, name, server);
    }
    Ok(())
}

fn server(
    ctx: &Ctx<'_>,
    out: &mut Import,
    key: &str,
    name: &str,
    value: &Value,
) -> Result<Map<String, Value>, ImportError> {
    let fields = ctx.object(value, key)?;
    let sub = |k: &str| format!("{key}.{k}");
    let same = |s: &str| s.to_string();
    let remote = fields.contains_key("url");
    let mut entry = Map::new();
    if remote {
        entry.insert("type".into(), json!("http"));
    }
    for (k, v) in fields {
        let k = k.as_str();
        match (k, remote) {
            ("command", false) => {
                entry.insert("command".into(), json!(ctx.string(v, &sub(k))?));
            }
            ("args", false) => {
                let args = ctx.strings(v, &sub(k))?;
                let args = secrets::args(ctx, out, &sub(k), name, &args);
                entry.insert("args".into(), json!(args));
            }
            ("env", false) => {
                let pairs = ctx.string_map(v, &sub(k))?;
                secrets::env(ctx, out, &sub(k), name, &pairs, &same, &mut entry);
            }
            ("env_vars", false) => {
                let mut names = Vec::new();
                let list = v.as_array().ok_or_else(|| {
                    ctx.shape(&sub(k), format!("expected a list, found {}", type_name(v)))
                })?;
                for (i, item) in list.iter().enumerate() {
                    let item_key = format!("{}[{i}]", sub(k));
                    // Newer Codex also takes {name = "VAR", …}.
                    let name = match item {
                        Value::Object(o) => o.get("name").unwrap_or(&Value::Null),
                        other => other,
                    };
                    names.push(json!(ctx.string(name, &item_key)?));
                }
                let mut from = entry
                    .remove("env_from")
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default();
                for n in names {
                    if !from.contains(&n) {
                        from.push(n);
                    }
                }
                entry.insert("env_from".into(), Value::Array(from));
            }
            ("cwd", false) => {
                let cwd = ctx.string(v, &sub(k))?;
                entry.insert("cwd".into(), json!(absolute_from(ctx.file, cwd, out, &sub(k))));
            }
            ("url", true) => {
                let url = ctx.string(v, &sub(k))?;
                entry.insert("url".into(), json!(secrets::url(ctx, out, &sub(k), url)));
            }
            ("bearer_token_env_var", true) => {
                let var = ctx.string(v, &sub(k))?;
                header(&mut entry, "Authorization", format!("Bearer ${{{var}}}"));
            }
            ("http_headers", true) => {
                let pairs = ctx.string_map(v, &sub(k))?;
                secrets::headers(ctx, out, &sub(k), name, &pairs, &same, &mut entry);
            }
            ("env_http_headers", true) => {
                for (header_name, var) in ctx.string_map(v, &sub(k))? {
                    header(&mut entry, &header_name, format!("${{{var}}}"));
                }
            }
            ("enabled", _) => match v.as_bool() {
                Some(enabled) => {
                    if !enabled {
                        entry.insert("disabled".into(), json!(true));
                    }
                }
                None => {
                    return Err(ctx.shape(&sub(k), format!("expected a boolean, found {}", type_name(v))));
                }
            },
            ("tool_timeout_sec", _) => secrets::timeout(ctx, out, &sub(k), v, 1.0, &mut entry),
            ("disabled_tools", _) => {
                for (i, tool) in ctx.strings(v, &sub(k))?.iter().enumerate() {
                    // The tool as warden's registry names it (`files.delete`
                    // is served as `files_delete`).
                    let rule = format!(
                        "mcp__{}__{}",
                        super::valid_name(name),
                        super::rules::claude_name(tool)
                    );
                    out.add_rule(ctx.file, &format!("{}[{i}]", sub(k)), "deny", &rule);
                }
            }
            ("enabled_tools", _) => {
                let tools = ctx.strings(v, &sub(k))?;
                out.note(
                    ctx.file,
                    &sub(k),
                    format!(
                        "warden cannot show only some of a server's tools: {} and the \
                         server's other tools are all listed, each decided by your rules and \
                         policy (ask by default; deny with --ci). Add a `deny` rule for each \
                         tool you do not want (`warden mcp status` lists them)",
                        tools.join(", ")
                    ),
                );
            }
            ("startup_timeout_sec" | "startup_timeout_ms", _) => out.note(
                ctx.file,
                &sub(k),
                "warden has no separate start-up timeout (the per-request `timeout` covers the handshake): left out",
            ),
            ("required", _) => out.note(
                ctx.file,
                &sub(k),
                "warden starts without a server that fails (its state shows the error): left out",
            ),
            (other, _) => out.note(
                ctx.file,
                &sub(other),
                format!(
                    "`{other}` has no warden equivalent{}: left out",
                    if remote { " for a remote server" } else { " for a stdio server" }
                ),
            ),
        }
    }
    if !remote && !entry.contains_key("command") {
        return Err(ctx.shape(
            key,
            "needs `command` (a stdio server) or `url` (a remote one)",
        ));
    }
    Ok(entry)
}

fn header(entry: &mut Map<String, Value>, name: &str, value: String) {
    let headers = entry
        .entry("headers")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(map) = headers {
        map.insert(name.to_string(), json!(value));
    }
}
