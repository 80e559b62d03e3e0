//! `warden mcp list`, `warden mcp approve NAME`, `warden mcp revoke NAME`.
//!
//! Secrets never reach the terminal: remote URLs are shown without query or
//! credentials, stdio arguments as written (`${VAR}` unexpanded), and `env`
//! and `headers` values as `[REDACTED]`.

#![allow(dead_code)] // wired into clap by the lead

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use serde_json::{Value, json};

use super::{CliError, exit};
use crate::config::{
    Approvals, Config, NetworkSpec, ServerConfig, TransportConfig, raw_server_entry,
    referenced_vars,
};
use warden_core::display;

/// `warden mcp list [--json]`: every configured server, one per line, or
/// `{"servers": [...]}`.
pub fn list(cfg: &Config, json: bool) -> anyhow::Result<u8> {
    if json {
        super::json::print("mcp list", json!({ "servers": list_rows(cfg)? }))?;
        return Ok(exit::OK);
    }
    list_to(cfg, &mut std::io::stdout().lock())
}

/// One object per configured server, as `mcp list --json` shows them.
fn list_rows(cfg: &Config) -> anyhow::Result<Vec<Value>> {
    let approvals = Approvals::load(&cfg.config_dir)?;
    Ok(cfg
        .servers
        .values()
        .map(|s| {
            json!({
                "name": s.name,
                "scope": s.scope,
                "transport": s.transport.kind(),
                "trust": s.trust.as_str(),
                "disabled": s.disabled,
                "target": cfg.hide(&target(s)),
                "approval_required": s.needs_approval(),
                "approved": approvals.is_approved(s),
                "source": s.source.to_string_lossy(),
                "digest": s.digest,
            })
        })
        .collect())
}

fn list_to(cfg: &Config, out: &mut dyn Write) -> anyhow::Result<u8> {
    let approvals = Approvals::load(&cfg.config_dir)?;
    if cfg.servers.is_empty() {
        writeln!(out, "no MCP servers configured")?;
        return Ok(exit::OK);
    }
    let header = [
        "NAME",
        "SCOPE",
        "TRANSPORT",
        "TRUST",
        "APPROVED",
        "COMMAND/URL",
        "SOURCE",
    ];
    let table: Vec<[String; 7]> = cfg
        .servers
        .values()
        .map(|s| {
            let name = if s.disabled {
                format!("{} (disabled)", s.name)
            } else {
                s.name.clone()
            };
            let approved = match (s.needs_approval(), approvals.is_approved(s)) {
                (false, _) => "-",
                (true, true) => "yes",
                (true, false) => "no",
            };
            [
                name,
                format!("{:?}", s.scope).to_lowercase(),
                s.transport.kind().to_string(),
                s.trust.as_str().to_string(),
                approved.to_string(),
                cfg.hide(&target(s)),
                s.source.display().to_string(),
            ]
            // Commands, URLs and paths come from project files a
            // repository ships: each cell is one neutralised field.
            .map(|cell| display::line(&cell).into_owned())
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    writeln!(out, "{}", line(&header))?;
    for row in &table {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    Ok(exit::OK)
}

/// `warden mcp approve NAME [--yes]`: shows the server's exact configuration
/// on stderr, asks, and records approval of that configuration's digest.
/// Returns the exit code and what happened (`approved`, `already_approved`,
/// `not_needed`, `not_approved`).
pub fn approve(
    cfg: &Config,
    config_dir: &Path,
    name: &str,
    assume_yes: bool,
    record: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<(u8, &'static str)> {
    let server = find(cfg, name)?;
    if !server.needs_approval() {
        eprintln!(
            "`{name}` comes from your own configuration ({}, {} scope) and needs no approval.",
            server.source.display(),
            format!("{:?}", server.scope).to_lowercase()
        );
        return Ok((exit::OK, "not_needed"));
    }
    let mut approvals = Approvals::load(config_dir)?;
    let raw = raw_server_entry(server).map_err(|e| CliError::usage(e.to_string()))?;
    eprint!("{}", describe(cfg, server, &raw));
    if approvals.is_approved(server) {
        eprintln!("`{name}` is already approved with exactly this configuration.");
        return Ok((exit::OK, "already_approved"));
    }
    if !assume_yes {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            return Err(CliError::usage(format!(
                "cannot ask for approval of `{name}`: standard input is not a terminal; \
                 review the configuration above and pass --yes to approve it"
            )));
        }
        eprint!("Approve `{name}` with exactly this configuration? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        stdin.lock().read_line(&mut answer)?;
        if !matches!(answer.trim().to_lowercase().as_str(), "y" | "yes") {
            eprintln!("Not approved; `{name}` will not start.");
            return Ok((exit::FAILED, "not_approved"));
        }
    }
    // Written ahead, as a call is: an approval the audit log cannot take
    // is not made (made first, it let the server run in later sessions
    // with no approval anywhere in the log).
    record()?;
    approvals.approve(server).map_err(|e| {
        CliError::with_code(
            exit::FAILED,
            format!(
                "the approval is in the audit log but could not be saved, so `{name}` is still \
                 not approved: {e:#}"
            ),
        )
    })?;
    eprintln!(
        "Approved `{name}` (digest {}); recorded in {}.",
        &server.approval_digest[..server.approval_digest.len().min(12)],
        approvals.path().display()
    );
    Ok((exit::OK, "approved"))
}

/// `warden mcp revoke NAME`: forgets every approval of NAME. Works for names
/// no longer in the configuration, so stale approvals can be cleaned up.
/// Returns the exit code and what happened (`revoked`, `not_approved`).
pub fn revoke(_cfg: &Config, config_dir: &Path, name: &str) -> anyhow::Result<(u8, &'static str)> {
    let mut approvals = Approvals::load(config_dir)?;
    if approvals.revoke(name)? {
        eprintln!("Revoked the approval of `{name}`; it will ask again before starting.");
        Ok((exit::OK, "revoked"))
    } else {
        eprintln!("`{name}` had no approval; nothing changed.");
        Ok((exit::OK, "not_approved"))
    }
}

fn find<'c>(cfg: &'c Config, name: &str) -> anyhow::Result<&'c ServerConfig> {
    cfg.servers.get(name).ok_or_else(|| {
        let known: Vec<&str> = cfg.servers.keys().map(String::as_str).collect();
        CliError::usage(if known.is_empty() {
            format!("no server named `{name}`: no servers are configured")
        } else {
            format!("no server named `{name}`; configured: {}", known.join(", "))
        })
    })
}

/// What `list` shows: the resolved program, or the URL without anything
/// that may carry a credential (userinfo, query, fragment).
fn target(s: &ServerConfig) -> String {
    match &s.transport {
        TransportConfig::Stdio(stdio) => stdio.program.display().to_string(),
        TransportConfig::Http(r) | TransportConfig::Sse(r) => match url::Url::parse(&r.url) {
            Ok(mut u) => {
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.set_query(None);
                u.set_fragment(None);
                u.to_string()
            }
            Err(_) => "(invalid url)".to_string(),
        },
    }
}

/// The full text shown before approval.
/// Values the project file expanded from the host environment are shown
/// as `${NAME}`, never in the clear.
pub(super) fn describe(cfg: &Config, server: &ServerConfig, raw: &Value) -> String {
    let mut shown = raw.clone();
    for key in ["env", "headers"] {
        if let Some(Value::Object(map)) = shown.get_mut(key) {
            for v in map.values_mut() {
                *v = Value::String("[REDACTED]".into());
            }
        }
    }
    if let Some(Value::String(url)) = shown.get_mut("url") {
        *url = redact_userinfo(url);
    }
    let pretty = serde_json::to_string_pretty(&shown).unwrap_or_default();
    let mut out = format!(
        "Server `{}` from {} (project scope: shipped by the repository)\n\
         Exact configuration as written (env and header values redacted):\n{}\n",
        server.name,
        display::line(&server.source.display().to_string()),
        indent(&pretty)
    );
    match &server.transport {
        TransportConfig::Stdio(s) => {
            let path = |p: &Path| display::line(&p.display().to_string()).into_owned();
            out.push_str(&format!("  runs:        {}\n", path(&s.program)));
            if let Some(cwd) = &s.cwd {
                out.push_str(&format!("  in:          {}\n", path(cwd)));
            }
            let sb = &server.sandbox;
            out.push_str(&format!(
                "  sandbox:     {}; network {}\n",
                if sb.enabled { "on" } else { "OFF" },
                match &sb.network {
                    NetworkSpec::None => "none".to_string(),
                    NetworkSpec::Host => "unrestricted".to_string(),
                    NetworkSpec::Ports {
                        connect_tcp,
                        bind_tcp,
                    } => format!("tcp connect {connect_tcp:?}, bind {bind_tcp:?}"),
                }
            ));
            for (label, paths) in [("reads:", &sb.read), ("writes:", &sb.write)] {
                if !paths.is_empty() {
                    let list: Vec<String> = paths.iter().map(|p| path(p)).collect();
                    out.push_str(&format!("  {label:<12} {}\n", list.join(", ")));
                }
            }
            let mut passed: Vec<String> = s.env_from.clone();
            passed.extend(sb.env.iter().cloned());
            if !passed.is_empty() {
                out.push_str(&format!("  host env:    {}\n", passed.join(", ")));
            }
        }
        TransportConfig::Http(_) | TransportConfig::Sse(_) => {
            out.push_str(&format!("  connects to: {}\n", target(server)));
        }
    }
    // A repository can write `${AWS_SECRET_ACCESS_KEY}` into an argument or
    // URL; say plainly which host variables end up with the server.
    let mut vars = referenced_vars(&raw.to_string());
    vars.sort();
    vars.dedup();
    if !vars.is_empty() {
        out.push_str(&format!("  expands:     ${{{}}}\n", vars.join("}, ${")));
    }
    // What runs from the repository: a change to any of these files asks
    // for approval again.
    for (i, (path, sha)) in server.content.iter().enumerate() {
        let label = if i == 0 { "files:" } else { "" };
        out.push_str(&format!(
            "  {label:<12} {} (sha256 {})\n",
            display::line(&path.display().to_string()),
            &sha[..sha.len().min(12)]
        ));
    }
    out.push_str(&format!("  trust:       {}\n", server.trust.as_str()));
    out.push_str(&format!("  digest:      {}\n", server.approval_digest));
    // A repository wrote this configuration; the person approving it must
    // see exactly what it says (JSON escapes only C0 controls, not C1,
    // bidi or zero-width characters).
    display::text(&cfg.hide(&out)).into_owned()
}

/// `https://user:pass@host/…` → `https://[REDACTED]@host/…`, on the text as
/// written (which may hold `${VAR}`s and so not parse as a URL).
fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://[REDACTED]{}", &rest[at..]),
        None => url.to_string(),
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, load_with_env};

    fn project_config(text: &str) -> (tempfile::TempDir, Config) {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        let exe = root.join("bin/srv");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(root.join(".mcp.json"), text).unwrap();
        let opts = LoadOptions {
            config_file: None,
            workspace: root.clone(),
            config_dir: root.join("cfg"),
        };
        let path = root.join("bin").to_string_lossy().into_owned();
        let env = move |k: &str| match k {
            "PATH" => Some(path.clone()),
            "TOKEN" => Some("sk-VERYSECRET".to_string()),
            _ => None,
        };
        let cfg = load_with_env(&opts, &env).unwrap();
        (tmp, cfg)
    }

    #[test]
    fn approval_text_shows_everything_but_secret_values() {
        let (_tmp, cfg) = project_config(
            r#"{"mcpServers": {
                "s": {"command": "srv", "args": ["--key", "${TOKEN}"], "env": {"LITERAL": "sk-WRITTEN", "T": "${TOKEN}"},
                      "env_from": ["AWS_SECRET_ACCESS_KEY"], "sandbox": {"write": ["${WORKSPACE}"]}},
                "r": {"type": "http", "url": "https://u:sk-VERYSECRET@x.test/mcp?k=${TOKEN}", "headers": {"Authorization": "Bearer ${TOKEN}"}}}}"#,
        );
        let s = &cfg.servers["s"];
        let text = describe(&cfg, s, &raw_server_entry(s).unwrap());
        eprintln!("{text}");
        assert!(
            !text.contains("sk-VERYSECRET") && !text.contains("sk-WRITTEN"),
            "{text}"
        );
        assert!(text.contains("[REDACTED]"), "{text}");
        assert!(
            text.contains("${TOKEN}"),
            "args are shown as written: {text}"
        );
        assert!(text.contains("AWS_SECRET_ACCESS_KEY"), "{text}");
        assert!(text.contains("expands:     ${TOKEN}"), "{text}");
        assert!(text.contains(&s.approval_digest), "{text}");
        assert!(
            text.contains("files:"),
            "the executable lives in the repository: {text}"
        );

        let r = &cfg.servers["r"];
        let text = describe(&cfg, r, &raw_server_entry(r).unwrap());
        assert!(!text.contains("sk-VERYSECRET"), "{text}");
        assert_eq!(target(r), "https://x.test/mcp");
    }

    /// What a person approves is what the repository wrote: JSON escapes
    /// C0 controls, `describe` the C1, bidi and zero-width ones.
    #[test]
    fn approval_text_shows_hidden_characters() {
        let (_tmp, cfg) = project_config(
            r#"{"mcpServers": {"s": {"command": "srv", "args": ["--safe\u202e--delete-all\u200b", "\u009b2J"]}}}"#,
        );
        let s = &cfg.servers["s"];
        let text = describe(&cfg, s, &raw_server_entry(s).unwrap());
        assert!(
            text.contains("--safe<U+202E>--delete-all<U+200B>") && text.contains("<U+009B>2J"),
            "{text}"
        );
        assert!(
            !text
                .chars()
                .any(|c| matches!(c, '\u{80}'..='\u{9f}' | '\u{200b}' | '\u{202e}'))
        );
    }

    #[test]
    fn list_shows_a_table_and_json() {
        let (_tmp, cfg) = project_config(
            r#"{"mcpServers": {"s": {"command": "srv"}, "r": {"type": "sse", "url": "https://x.test/sse?k=${TOKEN}"}}}"#,
        );
        let mut out = Vec::new();
        list_to(&cfg, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("NAME  SCOPE    TRANSPORT  TRUST      APPROVED  COMMAND/URL"),
            "{text}"
        );
        assert!(text.contains("https://x.test/sse "), "{text}");
        assert!(!text.contains("VERYSECRET"), "{text}");
        let rows = list_rows(&cfg).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["name"], "s");
        assert_eq!(rows[1]["scope"], "project");
        assert_eq!(rows[1]["approved"], false);
        assert_eq!(rows[1]["approval_required"], true);
    }

    #[test]
    fn approval_refuses_a_file_changed_since_loading() {
        let (tmp, cfg) = project_config(r#"{"mcpServers": {"s": {"command": "srv"}}}"#);
        let file = std::fs::canonicalize(tmp.path()).unwrap().join(".mcp.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {"s": {"command": "srv", "args": ["x"]}}}"#,
        )
        .unwrap();
        let err = raw_server_entry(&cfg.servers["s"]).unwrap_err();
        assert!(err.to_string().contains("changed"), "{err}");
    }

    #[test]
    fn approve_with_yes_records_and_revoke_removes() {
        let (tmp, cfg) = project_config(r#"{"mcpServers": {"s": {"command": "srv"}}}"#);
        let dir = tmp.path().join("cfg");
        assert_eq!(
            approve(&cfg, &dir, "s", true, || Ok(())).unwrap(),
            (exit::OK, "approved")
        );
        assert!(
            Approvals::load(&dir)
                .unwrap()
                .is_approved(&cfg.servers["s"])
        );
        assert!(approve(&cfg, &dir, "nope", true, || Ok(())).is_err());
        // An approval whose record cannot be written is not made.
        assert_eq!(revoke(&cfg, &dir, "s").unwrap(), (exit::OK, "revoked"));
        assert!(approve(&cfg, &dir, "s", true, || anyhow::bail!("log full")).is_err());
        assert!(
            !Approvals::load(&dir)
                .unwrap()
                .is_approved(&cfg.servers["s"])
        );
        approve(&cfg, &dir, "s", true, || Ok(())).unwrap();
        assert_eq!(revoke(&cfg, &dir, "s").unwrap(), (exit::OK, "revoked"));
        assert!(
            !Approvals::load(&dir)
                .unwrap()
                .is_approved(&cfg.servers["s"])
        );
    }
}
