//! `warden run --task TEXT`: one agent task, non-interactive, with a clear
//! verdict for CI (exit codes of CONTRACT §2).

use std::time::Duration;

use serde_json::json;

use super::{CliError, GlobalArgs, exit, session};
use crate::agent::HostExecutor;
use crate::agent::model_from_spec;
use crate::agent::{Limits, RunReport, RunStatus, run_task};
use crate::host::{Host, ServerRequestsSetup};
use crate::mcp::ServerState;
use warden_policy::Mode;

pub fn run(
    global: &GlobalArgs,
    task: &str,
    fail_on_deny: bool,
    answers: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    let spec = global.model.clone().ok_or_else(|| {
        CliError::usage(
            "`warden run` needs --model SPEC (scripted:FILE, openai:MODEL, anthropic:MODEL)",
        )
    })?;
    let model: std::sync::Arc<dyn crate::agent::Model> =
        model_from_spec(&spec, &|name| std::env::var(name).ok())
            .map_err(|e| CliError::usage(e.to_string()))?
            .into();
    let limits = limits(global)?;
    let mut options = session::host_options(global, Mode::Interactive)?;
    let answerer = session::answerer(options.mode, answers)?;
    options
        .protect
        .extend(answers.map(std::path::Path::to_path_buf));
    let json_out = global.json;
    let stdout = super::output::Stdout::for_results(global);
    let task = task.to_string();
    session::run_async(|cancel| async move {
        // A signal or the deadline ends the run: calls in flight are given
        // up and recorded as `abandoned`.
        let mut options = options;
        options.exit = Some(cancel.clone());
        let host = std::sync::Arc::new(Host::open(options).map_err(session::host_error)?);
        host.install_server_requests_with(ServerRequestsSetup {
            model: Some(model.clone()),
            answerer,
            ..ServerRequestsSetup::new(warden_audit::Caller::Model)
        });
        // `--timeout` bounds the whole run, connecting included: a server
        // that never answers its `initialize` (its own timeout up to
        // 600 s) must not hold a CI job past the deadline.
        let started = tokio::time::Instant::now();
        let stopped = tokio::select! {
            connected = session::connect_or_cancel(&host, &cancel) => {
                (!connected).then_some(RunStatus::Cancelled)
            }
            () = tokio::time::sleep(limits.timeout) => {
                tracing::warn!("--timeout reached while servers were connecting");
                host.shutdown().await;
                Some(RunStatus::Timeout)
            }
        };
        if let Some(status) = stopped {
            // Stopped before the run began: still the one verdict (and,
            // with --json, the one object) every run ends with.
            let report = RunReport {
                final_text: None,
                status,
                calls: Vec::new(),
                usage: Default::default(),
                turns: 0,
                denied_calls: 0,
            };
            return finish(&report, host.session(), json_out, stdout, fail_on_deny);
        }
        let mut limits = limits;
        limits.timeout = limits.timeout.saturating_sub(started.elapsed());
        if let Some(server) = host
            .statuses()
            .iter()
            .find(|s| s.state == ServerState::Error && s.sandbox_unavailable)
        {
            let message = format!(
                "server `{}` cannot start: {}",
                server.name,
                server
                    .error
                    .as_deref()
                    .unwrap_or("its sandbox is not available")
            );
            host.shutdown().await;
            return Err(CliError::with_code(exit::SANDBOX_UNAVAILABLE, message));
        }
        for status in host.statuses() {
            if let Some(error) = &status.error {
                tracing::warn!(server = %status.name, %error, "server unavailable for this run");
            }
        }
        let asker = session::terminal_asker(host.mode());
        let asker = asker.as_ref().map(|a| a as &dyn warden_policy::Asker);
        let executor = HostExecutor::new(&host, asker, cancel.clone());
        let mut report = run_task(model.as_ref(), &executor, &task, &limits, cancel.clone()).await;
        host.shutdown().await;
        // After the shutdown, so a lost `session_end` counts too.
        if let Some((lost, error)) = host.audit_records_lost() {
            report.status = RunStatus::AuditFailed(format!(
                "the audit log lost {lost} record(s) of this run (calls it could not record were not sent): {error}"
            ));
        }
        finish(&report, host.session(), json_out, stdout, fail_on_deny)
    })
}

/// Prints how the run ended (the JSON object, or the answer and a line on
/// stderr) and returns its exit code.
fn finish(
    report: &RunReport,
    session: &str,
    json_out: bool,
    stdout: super::output::Stdout,
    fail_on_deny: bool,
) -> anyhow::Result<u8> {
    if json_out {
        let mut document = report.to_json();
        document["session"] = json!(session);
        // An error in the object is on stderr too (CONTRACT §2).
        if let Some(message) = document["error"].as_str() {
            eprintln!(
                "warden: run ended: {}: {}",
                report.status.as_str().replace('_', " "),
                warden_core::display::text(message)
            );
        }
        super::json::print("run", document)?;
    } else {
        if let Some(text) = &report.final_text {
            super::output::print_result_text(text, stdout);
        }
        if report.status != RunStatus::Completed {
            match &report.status {
                RunStatus::ModelError(error) | RunStatus::AuditFailed(error) => eprintln!(
                    "warden: run ended: {}: {}",
                    report.status.as_str().replace('_', " "),
                    warden_core::display::text(error)
                ),
                other => eprintln!("warden: run ended: {}", other.as_str()),
            }
        }
    }
    Ok(report.exit_code(fail_on_deny))
}

/// The longest `--timeout`: a year. A deadline is an instant on the
/// monotonic clock, which cannot count `1e20` seconds ahead (converting
/// or adding panicked, exit 101 without the `--json` object).
const MAX_TIMEOUT_SECS: f64 = 365.0 * 24.0 * 3600.0;

pub fn limits(global: &GlobalArgs) -> anyhow::Result<Limits> {
    let timeout = Some(global.timeout)
        .filter(|t| t.is_finite() && *t > 0.0 && *t <= MAX_TIMEOUT_SECS)
        .and_then(|t| Duration::try_from_secs_f64(t).ok())
        .ok_or_else(|| {
            CliError::usage(format!(
                "--timeout must be a positive number of seconds, at most {MAX_TIMEOUT_SECS} (a year); got {}",
                global.timeout
            ))
        })?;
    Ok(Limits {
        max_turns: global.max_turns,
        max_tool_calls: global.max_tool_calls,
        timeout,
        max_result_chars: 20_000,
    })
}
