//! `warden call SERVER TOOL [--args JSON|@FILE]`: one tool call through the
//! full pipeline, no model.

use std::path::Path;

use serde_json::Value;

use tokio_util::sync::CancellationToken;

use super::{CliError, GlobalArgs, exit, output, session};
use crate::host::{CallReport, CallRequest, Caller, Host, ServerRequestsSetup, ToolRef};
use crate::mcp::ServerState;
use warden_audit::Outcome;
use warden_policy::Mode;

pub fn run(
    global: &GlobalArgs,
    server: &str,
    tool: &str,
    args: Option<&str>,
    answers: Option<&Path>,
) -> anyhow::Result<u8> {
    let arguments = parse_arguments(args)?;
    let mut options = session::host_options(global, Mode::Interactive)?;
    let answerer = session::answerer(options.mode, answers)?;
    options.protect.extend(answers.map(Path::to_path_buf));
    options.only_servers = vec![server.to_string()];
    let json = global.json;
    let stdout = output::Stdout::for_results(global);
    let limit = super::run::limits(global)?.timeout;
    session::run_async(|cancel| async move {
        // `--timeout`: the whole command, connecting included.
        let deadline = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            tracing::warn!("--timeout reached; giving up");
            deadline.cancel();
        });
        // A signal or the deadline: warden is exiting, and a call in
        // flight is given up (`abandoned`), not cancelled by a person.
        options.exit = Some(cancel.clone());
        let host = std::sync::Arc::new(Host::open(options).map_err(session::host_error)?);
        host.install_server_requests_with(ServerRequestsSetup {
            answerer,
            ..ServerRequestsSetup::new(warden_audit::Caller::Cli)
        });
        tokio::select! {
            () = host.connect() => {}
            () = cancel.cancelled() => {}
        }
        let asker = session::terminal_asker(host.mode());
        let asker = asker.as_ref().map(|a| a as &dyn warden_policy::Asker);
        let mut report = host
            .call(
                CallRequest {
                    target: ToolRef::Remote {
                        server: server.to_string(),
                        tool: tool.to_string(),
                    },
                    arguments,
                    caller: Caller::Cli,
                },
                asker,
                CancellationToken::new(),
            )
            .await
            .scrubbed();
        lost_records_fail(&host, &mut report);
        // The result first in text mode: stopping the server can take
        // seconds (a server that ignores its stdin closing gets SIGTERM
        // only after a grace period), and the person should not wait for it
        // to see the answer. The process still exits only after the
        // shutdown, so the audit log is complete when a script sees warden
        // exit. `--json` prints after the shutdown: its one object must
        // say whether the session's last records (`server_exit`,
        // `session_end`) were lost too.
        if !json {
            output::print_call_report(&report, stdout);
            let _ = std::io::Write::flush(&mut std::io::stdout());
        }
        let shown = report.outcome;
        host.shutdown().await;
        lost_records_fail(&host, &mut report);
        if json {
            // stderr carries the message too (CONTRACT §2).
            if let Some(error) = &report.error {
                eprintln!("warden: {}", warden_core::display::text(error));
            }
            let mut document = serde_json::to_value(&report)?;
            contract_result_fields(&mut document["result"]);
            super::json::print("call", document)?;
        } else if report.outcome != shown
            && let Some(error) = &report.error
        {
            eprintln!("warden: {}", warden_core::display::text(error));
        }
        Ok(exit_code(&host, server, &report))
    })
}

/// Fail-closed (CONTRACT §6): a call during which the audit log lost
/// records (its result, or the session's records around it) is no
/// success, whatever the server answered: `audit_failed`, exit 1, the
/// error naming the lost records. `on_failure: continue` chose to run
/// unaudited and keeps the call's own outcome.
fn lost_records_fail(host: &Host, report: &mut CallReport) {
    let Some((lost, error)) = host.audit_records_lost() else {
        return;
    };
    // Already refused or withheld, with the record that was lost named.
    if report.outcome == Outcome::AuditFailed {
        return;
    }
    report.outcome = Outcome::AuditFailed;
    report.result = None;
    report.error = Some(format!(
        "the audit log lost {lost} record(s) of this call's session (a call or result it \
         could not record is not passed on): {error}"
    ));
}

/// CONTRACT §2's exit code for how a call ended.
fn exit_code(host: &Host, server: &str, report: &CallReport) -> u8 {
    match report.outcome {
        Outcome::Ok => exit::OK,
        Outcome::Denied => exit::DENIED,
        Outcome::UnknownTool | Outcome::UnknownServer => exit::USAGE,
        Outcome::SandboxUnavailable => exit::SANDBOX_UNAVAILABLE,
        Outcome::ServerUnavailable => {
            let state = host
                .statuses()
                .into_iter()
                .find(|s| s.name == server)
                .map(|s| s.state);
            match state {
                Some(ServerState::PendingApproval | ServerState::Disabled) => exit::USAGE,
                _ => exit::FAILED,
            }
        }
        _ => exit::FAILED,
    }
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

/// `result` as CONTRACT §2 spells it: `structuredContent` (null when the
/// server sent none) and `isError` (a boolean, false when the server left
/// it out) are always there, so a script can read them without checking.
/// The content is otherwise exactly what the server sent.
fn contract_result_fields(result: &mut Value) {
    if let Value::Object(fields) = result {
        fields.entry("structuredContent").or_insert(Value::Null);
        let is_error = fields.entry("isError").or_insert(Value::Bool(false));
        if is_error.is_null() {
            *is_error = Value::Bool(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::contract_result_fields;
    use serde_json::json;

    #[test]
    fn missing_or_null_fields_are_filled_and_the_rest_kept() {
        for (sent, expected) in [
            (
                json!({"content": []}),
                json!({"content": [], "structuredContent": null, "isError": false}),
            ),
            (
                json!({"content": [], "isError": null}),
                json!({"content": [], "structuredContent": null, "isError": false}),
            ),
            (
                json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1}, "isError": true, "_meta": {"k": 1}}),
                json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1}, "isError": true, "_meta": {"k": 1}}),
            ),
            (json!(null), json!(null)),
        ] {
            let mut result = sent.clone();
            contract_result_fields(&mut result);
            assert_eq!(result, expected, "{sent}");
        }
    }
}
