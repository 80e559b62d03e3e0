//! `warden call SERVER TOOL [--args JSON|@FILE]`: one tool call through the
//! full pipeline, no model.

use std::path::Path;

use serde_json::Value;

use super::{CliError, GlobalArgs, exit, output, session};
use crate::host::{CallRequest, Caller, Host};
use crate::mcp::ServerState;
use warden_audit::Outcome;
use warden_policy::Mode;

pub fn run(
    global: &GlobalArgs,
    server: &str,
    tool: &str,
    args: Option<&str>,
) -> anyhow::Result<u8> {
    let arguments = parse_arguments(args)?;
    let mut options = session::host_options(global, Mode::Interactive)?;
    options.only_servers = vec![server.to_string()];
    let json = global.json;
    let limit = super::run::limits(global)?.timeout;
    session::run_async(|cancel| async move {
        // `--timeout`: the whole command, connecting included.
        let deadline = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            tracing::warn!("--timeout reached; cancelling");
            deadline.cancel();
        });
        let host = Host::open(options).map_err(session::host_error)?;
        if !host.config().servers.contains_key(server) {
            return Err(session::unknown_server(host.config(), server));
        }
        if !session::connect_or_cancel(&host, &cancel).await {
            return Ok(exit::FAILED);
        }
        let code = call_connected(&host, server, tool, arguments, json, cancel).await;
        host.shutdown().await;
        code
    })
}

async fn call_connected(
    host: &Host,
    server: &str,
    tool: &str,
    arguments: Value,
    json: bool,
    cancel: tokio_util::sync::CancellationToken,
) -> anyhow::Result<u8> {
    let status = host.statuses().into_iter().find(|s| s.name == server);
    if let Some(status) = &status
        && status.state != ServerState::Connected
    {
        let reason = status
            .error
            .clone()
            .unwrap_or_else(|| format!("{:?}", status.state));
        let code = if host.sandbox_unavailable(server) {
            exit::SANDBOX_UNAVAILABLE
        } else {
            match status.state {
                ServerState::PendingApproval | ServerState::Disabled => exit::USAGE,
                ServerState::Blocked => exit::DENIED,
                _ => exit::FAILED,
            }
        };
        let hint = match status.state {
            ServerState::PendingApproval => format!(" (run `warden mcp approve {server}`)"),
            _ => String::new(),
        };
        return Err(CliError::with_code(
            code,
            format!("server `{server}` is not available: {reason}{hint}"),
        ));
    }
    let view = host.tools();
    let Some(entry) = view.find(server, tool) else {
        if let Some(skipped) = view
            .skipped()
            .iter()
            .find(|s| s.server == server && s.name == tool)
        {
            return Err(CliError::usage(format!(
                "tool `{tool}` of server `{server}` is not served: {}",
                skipped.reason
            )));
        }
        let mut names: Vec<String> = view
            .visible()
            .filter(|t| t.server == server)
            .map(|t| t.remote.clone())
            .collect();
        names.sort();
        return Err(CliError::usage(format!(
            "unknown tool `{tool}` on server `{server}`; it has: {}",
            if names.is_empty() {
                "no tools".to_string()
            } else {
                names.join(", ")
            }
        )));
    };
    let asker = session::terminal_asker(host.mode());
    let asker = asker.as_ref().map(|a| a as &dyn warden_policy::Asker);
    let report = host
        .call(
            CallRequest {
                qualified: entry.qualified.clone(),
                arguments,
                caller: Caller::Cli,
            },
            asker,
            cancel,
        )
        .await
        .map_err(|e| CliError::usage(e.to_string()))?;
    let report = report.scrubbed();
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        output::print_call_report(&report);
    }
    Ok(match report.outcome {
        Outcome::Ok => exit::OK,
        Outcome::Denied => exit::DENIED,
        _ => exit::FAILED,
    })
}

/// `--args` is inline JSON or `@FILE`; it must be an object.
fn parse_arguments(args: Option<&str>) -> anyhow::Result<Value> {
    let Some(args) = args else {
        return Ok(Value::Object(Default::default()));
    };
    let (text, origin) = match args.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(Path::new(path))
                .map_err(|e| CliError::usage(format!("--args @{path}: {e}")))?,
            format!("--args @{path}"),
        ),
        None => (args.to_string(), "--args".to_string()),
    };
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{origin}: invalid JSON: {e}")))?;
    if !value.is_object() {
        return Err(CliError::usage(format!(
            "{origin}: arguments must be a JSON object"
        )));
    }
    Ok(value)
}
