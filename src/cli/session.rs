//! Shared start-up for commands that run a session: options from the
//! common flags, the tokio runtime, and signal handling.

use std::future::Future;
use std::path::PathBuf;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::{CliError, GlobalArgs};
use crate::config::{self, LoadOptions};
use crate::host::answers::{Answerer, AnswersFile};
use crate::host::{Host, HostError, HostOptions};
use crate::terminal::TerminalAsker;
use crate::terminal::form::{TerminalForm, Tty};
use warden_policy::Mode;

pub fn workspace(global: &GlobalArgs) -> anyhow::Result<PathBuf> {
    let dir = match &global.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    std::fs::canonicalize(&dir)
        .map_err(|e| CliError::usage(format!("workspace {}: {e}", dir.display())))
}

pub fn config_dir() -> anyhow::Result<PathBuf> {
    config::default_config_dir().ok_or_else(|| {
        CliError::usage(
            "neither WARDEN_CONFIG_DIR nor HOME is set: cannot find the user configuration",
        )
    })
}

pub fn load_options(global: &GlobalArgs) -> anyhow::Result<LoadOptions> {
    Ok(LoadOptions {
        config_file: global.config.clone(),
        workspace: workspace(global)?,
        config_dir: config_dir()?,
    })
}

pub fn load_config(global: &GlobalArgs) -> anyhow::Result<config::Config> {
    config::load(&load_options(global)?).map_err(|e| CliError::config(e.to_string()))
}

pub fn host_options(global: &GlobalArgs, mode: Mode) -> anyhow::Result<HostOptions> {
    Ok(HostOptions {
        load: load_options(global)?,
        extra_policies: global.policies.clone(),
        mode: if global.ci { Mode::Ci } else { mode },
        audit_path: global.audit.clone(),
        lock: global.lock.clone(),
        locked: global.locked,
        protect: Vec::new(),
        hide: Vec::new(),
        only_servers: Vec::new(),
        sandbox_helper: None,
        exit: None,
    })
}

/// Configuration, policy and audit-key problems are configuration errors
/// (exit 2); an audit log that cannot record the session is
/// `audit_failed` (exit 1).
pub fn host_error(error: HostError) -> anyhow::Error {
    match error {
        HostError::AuditFailed(_) => {
            CliError::kind(super::exit::FAILED, "audit_failed", error.to_string())
        }
        HostError::Setup(_) => CliError::kind(super::exit::USAGE, "setup_error", error.to_string()),
        _ => CliError::config(error.to_string()),
    }
}

/// A long-lived session (`gateway`, the repl) during which the audit log
/// lost records, fail-closed: exit 1 (`audit_failed`), as `call` and `run`
/// do, so a CI job running it learns that its log has a gap; the message
/// says how many and how to find where. `None`: nothing was lost (or
/// `on_failure: continue` chose to run unaudited). Asked after the
/// session's shutdown, so a lost `session_end` counts too.
pub fn lost_records(host: &Host, session: &str) -> Option<anyhow::Error> {
    let (lost, error) = host.audit_records_lost()?;
    let verify = match host.audit_path() {
        Some(path) => format!("`warden audit verify {}`", path.display()),
        None => "`warden audit verify FILE`".to_string(),
    };
    Some(CliError::kind(
        super::exit::FAILED,
        "audit_failed",
        format!(
            "the audit log lost {lost} record(s) during this {session} (requests it could not \
             record were not sent; the first failure: {error}); {verify} shows where the gap is"
        ),
    ))
}

/// The usage error for a server name the configuration does not have.
pub fn unknown_server(config: &config::Config, name: &str) -> anyhow::Error {
    let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
    CliError::kind(
        super::exit::USAGE,
        "unknown_server",
        format!(
            "unknown server `{name}`; configured: {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ),
    )
}

/// Connects the host's servers unless the command is cancelled first;
/// on cancellation the servers are stopped and `false` is returned.
pub async fn connect_or_cancel(host: &Host, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = host.connect() => true,
        _ = cancel.cancelled() => {
            host.shutdown().await;
            false
        }
    }
}

/// The person at the terminal answers `ask` in interactive mode; in CI and
/// gateway modes nobody here can.
pub fn terminal_asker(mode: Mode) -> Option<TerminalAsker> {
    (mode == Mode::Interactive).then(TerminalAsker::new)
}

/// Who answers a server's elicitation (and an `ask` about its sampling)
/// when this session is the client: the `--answers` file when given,
/// else the person at the terminal in interactive mode, else no one (a
/// decline).
pub fn answerer(
    mode: Mode,
    answers: Option<&std::path::Path>,
) -> anyhow::Result<Option<std::sync::Arc<dyn Answerer>>> {
    if let Some(path) = answers {
        let file =
            AnswersFile::load(path).map_err(|e| CliError::usage(format!("--answers {e}")))?;
        return Ok(Some(std::sync::Arc::new(file)));
    }
    Ok((mode == Mode::Interactive).then(|| {
        std::sync::Arc::new(TerminalForm::new(Tty::default())) as std::sync::Arc<dyn Answerer>
    }))
}

/// The environment variable (tokio's own) that sets how many async worker
/// threads a session runs on.
pub const WORKER_THREADS_VAR: &str = "TOKIO_WORKER_THREADS";

/// The runtime every session command runs on: one async worker thread,
/// unless `TOKIO_WORKER_THREADS` asks for more.
///
/// Why one: what a session does on its workers is small (relaying
/// messages, a decision bounded small, a write-ahead record); whatever
/// may take long runs elsewhere already (decisions that are not bounded
/// small on the policy crate's evaluation threads, one per core; the
/// audit log's writer thread; terminal reads on the blocking pool). With
/// a second worker, tokio wakes it to steal each task a message makes
/// runnable, and on a small machine that wake-up crosses CPUs: a 16 B
/// call through the gateway made 4.3 context switches instead of 2.3 and
/// cost 60 µs more CPU and 50 µs more wall time, with no measurable gain
/// in throughput for 64 concurrent callers at 16 B and 100 KB
/// (BENCHMARKS.md, "Tenth pass"). A multi-threaded runtime still (not a
/// current-thread one): `block_in_place` moves an `every_record` audit
/// sync off the worker.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    // Set here whatever the variable says: tokio reads it only when no
    // count is set, and panics on a value it cannot use.
    let workers = worker_threads(std::env::var_os(WORKER_THREADS_VAR).as_deref())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
}

/// Most async workers `TOKIO_WORKER_THREADS` may ask for.
const MAX_WORKER_THREADS: usize = 256;

/// How many async workers a session gets for the value of
/// `TOKIO_WORKER_THREADS` (`None`: not set).
fn worker_threads(value: Option<&std::ffi::OsStr>) -> Result<usize, String> {
    let Some(value) = value else {
        return Ok(1);
    };
    value
        .to_str()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=MAX_WORKER_THREADS).contains(n))
        .ok_or_else(|| {
            format!(
                "{WORKER_THREADS_VAR}={}: expected a whole number of async worker threads \
                 from 1 to {MAX_WORKER_THREADS}",
                value.to_string_lossy()
            )
        })
}

/// Runs `body` on the session [`runtime`], cancelling its token on SIGINT
/// or SIGTERM so the command can stop its servers and exit cleanly.
pub fn run_async<F, Fut>(body: F) -> anyhow::Result<u8>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = anyhow::Result<u8>>,
{
    run_async_with(Stops::OnHangupToo, body)
}

/// Which signals cancel a session command's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stops {
    /// SIGINT, SIGTERM and SIGHUP. SIGHUP's default action would kill
    /// warden outright (a CI runner cancelling a job, a closed terminal
    /// or ssh session): no `--json` object, a call in flight never
    /// recorded as ended, no `session_end`.
    OnHangupToo,
    /// SIGINT and SIGTERM: the command gives SIGHUP a meaning of its own
    /// (the gateway reloads its policy).
    HangupHandledElsewhere,
}

/// [`run_async`], choosing what SIGHUP does.
pub fn run_async_with<F, Fut>(stops: Stops, body: F) -> anyhow::Result<u8>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = anyhow::Result<u8>>,
{
    let runtime = runtime().context("cannot start the async runtime")?;
    let result = runtime.block_on(async move {
        let cancel = CancellationToken::new();
        spawn_signal_watch(cancel.clone(), stops);
        body(cancel).await
    });
    // Dropping a runtime waits for every blocking task (a terminal read
    // nobody will answer, say) without limit: the command has finished, so
    // give stragglers a moment and leave.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result
}

fn spawn_signal_watch(cancel: CancellationToken, stops: Stops) {
    use tokio::signal::unix::{SignalKind, signal};
    // Installed before the body runs: a signal that arrives while servers
    // start is already ours, not the default action.
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!("cannot install signal handlers");
        return;
    };
    let mut hangup = match stops {
        Stops::OnHangupToo => match signal(SignalKind::hangup()) {
            Ok(hangup) => Some(hangup),
            Err(error) => {
                tracing::warn!(%error, "cannot install the SIGHUP handler");
                None
            }
        },
        Stops::HangupHandledElsewhere => None,
    };
    tokio::spawn(async move {
        let hung_up = async {
            match hangup.as_mut() {
                Some(h) => h.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = int.recv() => tracing::info!("interrupted"),
            _ = term.recv() => tracing::info!("terminated"),
            _ = hung_up => tracing::info!("hung up"),
        }
        cancel.cancel();
    });
}

/// Records a server approval or revocation in the audit log, when one is
/// configured (or given with `--audit`).
pub fn audit_approval(
    global: &GlobalArgs,
    config: &config::Config,
    server: &str,
    action: warden_audit::ApprovalAction,
) -> anyhow::Result<()> {
    use warden_audit::{AuditLog, AuditOptions, Event};
    let Some(path) = global.audit.clone().or_else(|| config.audit.path.clone()) else {
        return Ok(());
    };
    let config_sha256 = config
        .servers
        .get(server)
        .map(|s| s.digest.clone())
        .unwrap_or_default();
    let failed = |e: warden_audit::AuditError| {
        CliError::kind(
            super::exit::FAILED,
            "audit_failed",
            match action {
                // Recorded first: nothing was changed.
                warden_audit::ApprovalAction::Approved => {
                    format!("not approved: the approval could not be recorded: {e}")
                }
                warden_audit::ApprovalAction::PinsReset => {
                    format!("no pin was forgotten: the reset could not be recorded: {e}")
                }
                // A revocation only takes a permission away: made first.
                _ => format!("the approval change was made but could not be recorded: {e}"),
            },
        )
    };
    let log = AuditLog::open(
        &path,
        AuditOptions {
            session: uuid::Uuid::new_v4().to_string(),
            fsync: config.audit.fsync,
            key: warden_audit::load_key(None).map_err(|e| CliError::config(e.to_string()))?,
            redact: Vec::new(),
            secrets: crate::config::secrets_of(config),
            max_value_bytes: config.audit.max_value_bytes,
        },
    )
    .map_err(failed)?;
    log.write_ahead(Event::Approval {
        server: server.to_string(),
        config_sha256,
        action,
        subject: match action {
            warden_audit::ApprovalAction::PinsReset => "tool pins",
            _ => "server configuration",
        }
        .to_string(),
        call_id: None,
    })
    .map_err(failed)?;
    log.close().map_err(failed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One worker when the variable is not set; otherwise its number, or
    /// an error naming it (tokio would panic).
    #[test]
    fn the_worker_count_is_one_unless_the_variable_names_a_usable_one() {
        use std::ffi::OsStr;
        assert_eq!(worker_threads(None), Ok(1));
        assert_eq!(worker_threads(Some(OsStr::new("4"))), Ok(4));
        assert_eq!(worker_threads(Some(OsStr::new(" 2 "))), Ok(2));
        assert_eq!(worker_threads(Some(OsStr::new("256"))), Ok(256));
        for bad in [
            "",
            "0",
            "-1",
            "two",
            "1.5",
            "257",
            "99999999999999999999999",
        ] {
            let error = worker_threads(Some(OsStr::new(bad))).expect_err(bad);
            assert!(error.starts_with("TOKIO_WORKER_THREADS="), "{error}");
            assert!(error.contains("from 1 to 256"), "{error}");
        }
        use std::os::unix::ffi::OsStrExt;
        assert!(worker_threads(Some(OsStr::from_bytes(b"\xff"))).is_err());
    }

    /// A session runs on one async worker unless tokio's variable says
    /// otherwise (the variable is left alone here: tests share the
    /// process environment).
    #[test]
    fn a_session_runs_on_one_worker_by_default() {
        let runtime = runtime().expect("runtime");
        let asked = worker_threads(std::env::var_os(WORKER_THREADS_VAR).as_deref());
        assert_eq!(Ok(runtime.metrics().num_workers()), asked);
        assert_eq!(
            runtime.handle().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::MultiThread,
            "block_in_place needs a multi-threaded runtime"
        );
    }
}
