//! `warden mcp status`: connect to every configured server and show its
//! state, protocol version and tools.

use serde_json::{Value, json};

use super::{GlobalArgs, exit, session};
use crate::host::Host;
use warden_policy::Mode;

pub fn status(global: &GlobalArgs) -> anyhow::Result<u8> {
    let options = session::host_options(global, Mode::Interactive)?;
    let json_out = global.json;
    session::run_async(|cancel| async move {
        let host = std::sync::Arc::new(Host::open(options).map_err(session::host_error)?);
        // A server may ask for roots, sampling or elicitation while it is
        // listed: decided and recorded like in any session (CONTRACT §6),
        // with no model and no one to answer (sampling refused,
        // elicitation declined, roots the workspace).
        host.install_server_requests(warden_audit::Caller::Cli);
        tokio::select! {
            _ = host.connect() => {}
            _ = cancel.cancelled() => {}
        }
        let document = status_document(&host);
        host.shutdown().await;
        if json_out {
            super::json::print("mcp status", document)?;
        } else {
            // Names, descriptions, errors and reasons come from servers:
            // every string is one neutralised field before it is laid out.
            let mut shown = document;
            warden_core::display::neutralise_json(&mut shown, warden_core::display::Layout::Line);
            print_status(&shown);
        }
        Ok(exit::OK)
    })
}

/// The `mcp status --json` document of CONTRACT §2.
pub fn status_document(host: &Host) -> Value {
    let view = host.tools();
    let servers: Vec<Value> = host
        .statuses()
        .into_iter()
        .map(|status| {
            let tools: Vec<Value> = view
                .visible()
                .filter(|t| t.server == status.name)
                .map(|t| {
                    json!({
                        "name": t.remote,
                        "qualified": t.qualified,
                        "description": t.definition.description,
                        "annotations": t.definition.annotations,
                    })
                })
                .collect();
            let skipped: Vec<Value> = view
                .skipped()
                .iter()
                .filter(|s| s.server == status.name)
                .map(|s| json!({"name": s.name, "reason": s.reason}))
                .collect();
            json!({
                "name": status.name,
                "state": status.state,
                "transport": status.transport,
                "protocol": status.protocol,
                // A server's own words (its last stderr line) may hold a
                // secret it was given.
                "error": status.error.as_deref().map(|e| crate::scrub::clean(e).into_owned()),
                "sandbox": status.sandbox,
                "oauth": oauth_status(host.server_config(&status.name).as_ref(), status.oauth_challenged),
                "tools": tools,
                "skipped_tools": skipped,
            })
        })
        .collect();
    json!({ "servers": servers, "audit": host.audit_status() })
}

/// `oauth` of a server in `mcp status --json`: `null` for a server that
/// does not use OAuth, else whether a login is stored (`login`: `valid`,
/// `refreshable`, `expired` or `missing`). Never a token. A server that
/// answered with an OAuth challenge uses OAuth, before any login too.
fn oauth_status(server: Option<&crate::config::ServerConfig>, challenged: bool) -> Value {
    use crate::config::TransportConfig;
    use crate::mcp::oauth;
    match server.map(|s| &s.transport) {
        Some(TransportConfig::Http(remote)) if challenged || oauth::uses_oauth(remote) => {
            let state = oauth::login_state(remote);
            json!({"uses_oauth": true, "logged_in": state.present(), "login": state})
        }
        _ => Value::Null,
    }
}

fn print_status(document: &Value) {
    let audit = &document["audit"];
    match audit["path"].as_str() {
        Some(path) => println!(
            "audit: {path} ({}, fsync {}, {})",
            audit["mode"].as_str().unwrap_or("?"),
            audit["fsync"].as_str().unwrap_or("?"),
            match audit["on_failure"].as_str() {
                Some("continue") => {
                    "on_failure: continue: calls are sent UNAUDITED when the log cannot be written"
                }
                _ => "fail-closed: a call that cannot be recorded is not sent",
            }
        ),
        None if audit["state"] == "unavailable" => println!(
            "audit: UNAVAILABLE, calls are sent unaudited (on_failure: continue): {}",
            audit["error"].as_str().unwrap_or("?")
        ),
        None => println!("audit: off (no audit.path in the configuration, no --audit)"),
    }
    if audit["state"] == "failing" {
        println!(
            "    FAILING: {} record(s) lost: {}",
            audit["lost"],
            audit["error"].as_str().unwrap_or("?")
        );
    }
    let servers = document["servers"].as_array().cloned().unwrap_or_default();
    if servers.is_empty() {
        println!("no servers configured");
    }
    for server in servers {
        let state = server["state"].as_str().unwrap_or("?");
        let protocol = server["protocol"].as_str().unwrap_or("-");
        let tools = server["tools"].as_array().map_or(0, Vec::len);
        println!(
            "{:<16} {:<16} {:<6} protocol {:<11} {} tools",
            server["name"].as_str().unwrap_or("?"),
            state,
            server["transport"].as_str().unwrap_or("?"),
            protocol,
            tools
        );
        if let Some(error) = server["error"].as_str() {
            println!("    error: {error}");
        }
        if let Some(login) = server["oauth"]["login"].as_str() {
            println!("    oauth: login {login}");
        }
        match server["sandbox"]["enabled"].as_bool() {
            Some(true) => println!(
                "    sandbox: network {}; {}",
                server["sandbox"]["network"].as_str().unwrap_or("?"),
                server["sandbox"]["mechanisms"]
                    .as_array()
                    .map(|m| m
                        .iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_default()
            ),
            Some(false) => println!("    sandbox: off (trusted server)"),
            None => {}
        }
        // Limits this host enforces only as well as it allows (defaults;
        // an explicit one would have stopped the server).
        for limit in server["sandbox"]["limit_report"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["exact"] == false)
        {
            println!(
                "    limit {} {}: not exact here: {} ({})",
                limit["limit"].as_str().unwrap_or("?"),
                limit["value"],
                limit["mechanism"].as_str().unwrap_or("?"),
                limit["why_not_exact"].as_str().unwrap_or("?")
            );
        }
        for gap in server["sandbox"]["gaps"].as_array().into_iter().flatten() {
            println!("    sandbox gap: {}", gap.as_str().unwrap_or("?"));
        }
        for tool in server["tools"].as_array().into_iter().flatten() {
            println!("    {}", tool["qualified"].as_str().unwrap_or("?"));
        }
        for skipped in server["skipped_tools"].as_array().into_iter().flatten() {
            println!(
                "    skipped {}: {}",
                skipped["name"].as_str().unwrap_or("?"),
                skipped["reason"].as_str().unwrap_or("?")
            );
        }
    }
}
