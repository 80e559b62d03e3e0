//! Claude Code: `.mcp.json` and `~/.claude.json` (`mcpServers` at the top
//! and under `projects.<path>.mcpServers`), and `settings.json`
//! (`permissions.allow|ask|deny`, whose `mcp__` rules warden shares).
//! Claude Code's `${VAR}` and `${VAR:-default}` are warden's too.

use std::path::Path;

use serde_json::Value;

use super::{Ctx, Import, ImportError, json_server, parse_json};

/// `explicit`: the file was named on the command line (a default file
/// without servers or rules, such as a fresh `~/.claude.json`, is a note).
pub fn import(
    file: &Path,
    text: &str,
    out: &mut Import,
    explicit: bool,
) -> Result<(), ImportError> {
    let value = parse_json(file, text)?;
    let ctx = Ctx { file };
    let top = ctx.object(&value, "(top level)")?;
    let mut found = false;
    if let Some(servers) = top.get("mcpServers") {
        found = true;
        servers_of(&ctx, out, "mcpServers", servers)?;
    }
    if let Some(projects) = top.get("projects") {
        found = true;
        for (path, project) in ctx.object(projects, "projects")? {
            let key = format!("projects.{path}");
            let project = ctx.object(project, &key)?;
            if let Some(servers) = project.get("mcpServers") {
                let key = format!("{key}.mcpServers");
                if !ctx.object(servers, &key)?.is_empty() {
                    out.note(
                        file,
                        &key,
                        format!(
                            "servers Claude Code uses only in {path}: imported into your \
                             user configuration, where every workspace sees them"
                        ),
                    );
                }
                servers_of(&ctx, out, &key, servers)?;
            }
        }
    }
    if let Some(permissions) = top.get("permissions") {
        found = true;
        rules(&ctx, out, permissions)?;
    }
    for key in [
        "enabledMcpjsonServers",
        "disabledMcpjsonServers",
        "enableAllProjectMcpServers",
    ] {
        if top.contains_key(key) {
            out.note(
                file,
                key,
                "project-server approvals do not carry over: approve a project's servers \
                 with `warden mcp approve NAME`",
            );
        }
    }
    if !found && !explicit {
        out.note(file, "(top level)", "no MCP servers or permissions here");
    } else if !found {
        return Err(ctx.shape(
            "(top level)",
            "no `mcpServers`, `projects` or `permissions`: not a Claude Code configuration",
        ));
    }
    Ok(())
}

fn servers_of(
    ctx: &Ctx<'_>,
    out: &mut Import,
    key: &str,
    servers: &Value,
) -> Result<(), ImportError> {
    for (name, entry) in ctx.object(servers, key)? {
        let key = format!("{key}.{name}");
        let server = json_server(ctx, out, &key, name, entry, &|s: &str| s.to_string())?;
        out.add_server(ctx.file, &key, name, server);
    }
    Ok(())
}

/// `permissions.allow|ask|deny`: `mcp__` rules are kept (warden's syntax is
/// Claude Code's for them); rules for Claude Code's own tools are counted in
/// one note.
fn rules(ctx: &Ctx<'_>, out: &mut Import, permissions: &Value) -> Result<(), ImportError> {
    let permissions = ctx.object(permissions, "permissions")?;
    let mut other = Vec::new();
    for (effect, list) in permissions {
        let key = format!("permissions.{effect}");
        if !matches!(effect.as_str(), "allow" | "ask" | "deny") {
            out.note(ctx.file, &key, "no warden equivalent: left out");
            continue;
        }
        for (i, rule) in ctx.strings(list, &key)?.iter().enumerate() {
            if rule.starts_with("mcp__") {
                out.add_rule(ctx.file, &format!("{key}[{i}]"), effect, rule);
            } else {
                other.push(rule.clone());
            }
        }
    }
    if !other.is_empty() {
        let shown: Vec<&str> = other.iter().take(3).map(String::as_str).collect();
        out.note(
            ctx.file,
            "permissions",
            format!(
                "{} rule(s) for Claude Code's own tools ({}{}) have no equivalent: warden \
                 decides MCP tool calls only",
                other.len(),
                shown.join(", "),
                if other.len() > 3 { ", …" } else { "" }
            ),
        );
    }
    Ok(())
}
