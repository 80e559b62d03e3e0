//! Cursor: `~/.cursor/mcp.json` or a project's `.cursor/mcp.json`,
//! `{"mcpServers": {NAME: {command, args, env} | {url, headers}}}`.
//! Cursor's `${env:VAR}` becomes warden's `${VAR}`, `${workspaceFolder}`
//! `${WORKSPACE}`, `${userHome}` the home folder.

use std::path::Path;

use super::{Ctx, Import, ImportError, json_server, parse_json};

pub fn import(file: &Path, text: &str, out: &mut Import) -> Result<(), ImportError> {
    let value = parse_json(file, text)?;
    let ctx = Ctx { file };
    let top = ctx.object(&value, "(top level)")?;
    let Some(servers) = top.get("mcpServers") else {
        return Err(ctx.shape("mcpServers", "missing: not a Cursor mcp.json"));
    };
    for (key, _) in top.iter().filter(|(k, _)| k.as_str() != "mcpServers") {
        out.note(file, key, "no warden equivalent: left out");
    }
    let home = std::env::var("HOME").unwrap_or_default();
    let vars = move |s: &str| cursor_vars(s, &home);
    for (name, entry) in ctx.object(servers, "mcpServers")? {
        let key = format!("mcpServers.{name}");
        let server = json_server(&ctx, out, &key, name, entry, &vars)?;
        out.add_server(file, &key, name, server);
    }
    Ok(())
}

/// Cursor's interpolation forms → warden's.
pub fn cursor_vars(text: &str, home: &str) -> String {
    text.replace("${env:", "${")
        .replace("${workspaceFolder}", "${WORKSPACE}")
        .replace("${userHome}", home)
}
