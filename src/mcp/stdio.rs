//! A stdio server as an rmcp transport. The process is built by
//! [`warden_sandbox::prepare`] (filtered environment, own process group,
//! sandbox) and spawned here; [`super::wire`] does the framing.
//!
//! Why not rmcp's `TokioChildProcess`: it keeps the child to itself and only
//! logs its exit status, while the audit log needs the status (or signal) of
//! every server exit; and its kill targets the leader only, while the
//! sandbox's [`ProcessGuard`] owns the whole group. So one reaper task owns
//! the `Child` and publishes its exit status; closing follows the MCP stdio
//! shutdown sequence for the group: close stdin, wait, SIGTERM, wait, SIGKILL.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, watch};

use super::LifecycleEvent;
use super::wire::WireTransport;
use crate::config::{ServerConfig, StdioConfig};
use warden_sandbox::{LaunchContext, ProcessGuard, SandboxError, SandboxSummary};

/// How long each step of the graceful close waits for the process to exit:
/// the official MCP SDKs' clients (Python's `PROCESS_TERMINATION_TIMEOUT`,
/// TypeScript's `StdioClientTransport.close`) give a server 2 s after its
/// stdin closes, and servers are written for them. Longer only made every
/// `warden call` of a server that ignores stdin's end (npm
/// server-everything, whose timers keep node alive) take a second more.
const CLOSE_STEP: Duration = Duration::from_secs(2);
/// Longest server stderr line forwarded to the log; the rest is cut.
const MAX_STDERR_LINE: usize = 4096;

/// How a server process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit status {code}"),
            (None, Some(signal)) => match Signal::try_from(signal) {
                Ok(sig) => write!(f, "killed by {sig}"),
                Err(_) => write!(f, "killed by signal {signal}"),
            },
            (None, None) => f.write_str("unknown exit status"),
        }
    }
}

/// Why the process is being stopped, read by the reaper when it exits.
#[derive(Debug, Default)]
pub(crate) struct StopNote {
    pub reason: Option<String>,
    pub connected: bool,
}

pub(crate) type SharedStopNote = Arc<Mutex<StopNote>>;

pub(crate) fn note(stop: &SharedStopNote, f: impl FnOnce(&mut StopNote)) {
    if let Ok(mut guard) = stop.lock() {
        f(&mut guard);
    }
}

/// A spawned server process, ready to hand to rmcp.
pub(crate) struct Spawned {
    pub transport: ChildTransport,
    pub pid: u32,
    pub summary: SandboxSummary,
    pub exit: watch::Receiver<Option<ExitInfo>>,
    pub stop: SharedStopNote,
    /// The last line the server wrote to stderr, as shown in the log
    /// (neutralised), and `true` once its stderr is closed: what a server
    /// that dies during the handshake said about why.
    pub stderr_tail: watch::Receiver<(Option<String>, bool)>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("starting `{program}` failed: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("the server process has no {0} pipe")]
    Pipe(&'static str),
}

pub(crate) fn spawn(
    config: &ServerConfig,
    stdio: &StdioConfig,
    ctx: &LaunchContext,
    events: &mpsc::UnboundedSender<LifecycleEvent>,
) -> Result<Spawned, SpawnError> {
    let spec = crate::launch::stdio_spec(config, stdio);
    let prepared = warden_sandbox::prepare(&spec, ctx)?;
    let program = prepared
        .command
        .get_program()
        .to_string_lossy()
        .into_owned();
    let mut command = tokio::process::Command::from(prepared.command);
    command.kill_on_drop(true);
    let mut guard = prepared.guard;
    let mut child = command
        .spawn()
        .map_err(|source| SpawnError::Spawn { program, source })?;
    let pid = child.id().ok_or(SpawnError::Pipe("pid"))?;
    guard.attach(pid);
    let stdin = child.stdin.take().ok_or(SpawnError::Pipe("stdin"))?;
    let stdout = child.stdout.take().ok_or(SpawnError::Pipe("stdout"))?;
    // A large message crosses each pipe in one turn, not a turn per 64 KiB.
    for (pipe, widened) in [
        (
            "stdin",
            warden_sandbox::widen_pipe(&stdin, warden_sandbox::STDIO_PIPE_BYTES),
        ),
        (
            "stdout",
            warden_sandbox::widen_pipe(&stdout, warden_sandbox::STDIO_PIPE_BYTES),
        ),
    ] {
        if let Err(error) = widened {
            tracing::debug!(server = %config.name, pipe, %error, "pipe left at its size");
        }
    }
    let (tail_tx, stderr_tail) = watch::channel((None, false));
    match child.stderr.take() {
        Some(stderr) => {
            tokio::spawn(forward_stderr(config.name.clone(), stderr, tail_tx));
        }
        None => {
            let _ = tail_tx.send((None, true));
        }
    }
    let _ = events.send(LifecycleEvent::Started {
        server: config.name.clone(),
        pid: Some(pid),
        transport: warden_core::TransportKind::Stdio,
        sandbox: Some(Box::new(prepared.summary.clone())),
    });
    tracing::info!(server = %config.name, pid, "server process started");

    let (exit_tx, exit_rx) = watch::channel(None);
    let stop: SharedStopNote = Arc::default();
    let reaper_stop = stop.clone();
    let server = config.name.clone();
    let reaper_events = events.clone();
    tokio::spawn(async move {
        let info = match child.wait().await {
            Ok(status) => ExitInfo {
                code: status.code(),
                signal: status.signal(),
            },
            Err(error) => {
                tracing::warn!(%server, %error, "waiting for the server process failed");
                ExitInfo {
                    code: None,
                    signal: None,
                }
            }
        };
        let reason = reaper_stop
            .lock()
            .ok()
            .and_then(|note| {
                note.reason.clone().or_else(|| {
                    Some(if note.connected {
                        "the server exited on its own".to_string()
                    } else {
                        "the server exited before the connection was set up".to_string()
                    })
                })
            })
            .unwrap_or_default();
        tracing::info!(%server, pid, status = %info, %reason, "server process exited");
        let _ = exit_tx.send(Some(info));
        let _ = reaper_events.send(LifecycleEvent::Exited {
            server,
            pid: Some(pid),
            code: info.code,
            signal: info.signal,
            reason,
        });
    });

    Ok(Spawned {
        transport: ChildTransport {
            inner: WireTransport::new(stdout, stdin, MAX_LINE),
            exit: exit_rx.clone(),
            pid,
            guard: Some(guard),
        },
        pid,
        summary: prepared.summary,
        exit: exit_rx,
        stop,
        stderr_tail,
    })
}

/// Forwards a server's stderr to `tracing`, one event per line, labelled
/// with the server's name; lines are cut at [`MAX_STDERR_LINE`] bytes.
async fn forward_stderr(
    server: String,
    stderr: ChildStderr,
    tail: watch::Sender<(Option<String>, bool)>,
) {
    let mut reader = BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let (consumed, end_of_line) = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buf) => {
                let (chunk, consumed, eol) = match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => (&buf[..i], i + 1, true),
                    None => (buf, buf.len(), false),
                };
                let room = MAX_STDERR_LINE.saturating_sub(line.len());
                if chunk.len() > room {
                    cut = true;
                }
                line.extend_from_slice(&chunk[..chunk.len().min(room)]);
                (consumed, eol)
            }
        };
        reader.consume(consumed);
        if end_of_line {
            let shown = emit_stderr(&server, &line, cut);
            tail.send_modify(|t| t.0 = Some(shown));
            line.clear();
            cut = false;
        }
    }
    if !line.is_empty() {
        let shown = emit_stderr(&server, &line, cut);
        tail.send_modify(|t| t.0 = Some(shown));
    }
    tail.send_modify(|t| t.1 = true);
}

/// Logs one stderr line; returns it as logged (neutralised, without the
/// server's name).
fn emit_stderr(server: &str, line: &[u8], cut: bool) -> String {
    // Bytes that are not UTF-8 stay visible as `<0xNN>` (a lone 0x9B is
    // CSI to a terminal not in UTF-8 mode); the log writer neutralises
    // the rest.
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = warden_core::display::bytes(line, warden_core::display::Layout::Block);
    let shown = if cut { format!("{text} […]") } else { text };
    tracing::info!(target: "warden::server", server, "{shown}");
    shown
}

/// The longest line (one JSON-RPC message) read from a server's stdout.
/// A longer line is dropped as it arrives (never buffered whole; rmcp logs
/// an error) and the connection stays up: a server writing 100 MB in one
/// line costs warden at most this much memory. The same cap as rmcp's
/// streamable HTTP client per event.
pub const MAX_LINE: usize = 16 << 20;

/// rmcp transport over a server's stdin/stdout that owns the process group.
pub(crate) struct ChildTransport {
    inner: WireTransport<RoleClient, ChildStdout, ChildStdin>,
    exit: watch::Receiver<Option<ExitInfo>>,
    pid: u32,
    /// Dropping the guard kills the group and removes the private folders.
    guard: Option<ProcessGuard>,
}

impl ChildTransport {
    async fn exited_within(&mut self, wait: Duration) -> bool {
        tokio::time::timeout(wait, self.exit.wait_for(Option::is_some))
            .await
            .is_ok()
    }

    fn signal_group(&self, signal: Signal) {
        if let Ok(pgid) = i32::try_from(self.pid) {
            let _ = killpg(Pid::from_raw(pgid), signal);
        }
    }
}

/// How long a dropped transport lets a server that is already on its way
/// out finish by itself before its group is killed, so its real exit status
/// (not our SIGKILL) is what gets reported.
const DROP_GRACE: Duration = Duration::from_millis(300);

impl Drop for ChildTransport {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let mut exit = self.exit.clone();
        let exited = exit.borrow().is_some();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !exited => {
                runtime.spawn(async move {
                    let _ = tokio::time::timeout(DROP_GRACE, exit.wait_for(Option::is_some)).await;
                    drop(guard);
                });
            }
            // Exited already (only stragglers are left), or no runtime to
            // wait on: kill the group now.
            _ => drop(guard),
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    /// Close stdin, wait; SIGTERM to the group, wait; SIGKILL to the group.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await?;
        if !self.exited_within(CLOSE_STEP).await {
            self.signal_group(Signal::SIGTERM);
            if !self.exited_within(CLOSE_STEP).await {
                self.signal_group(Signal::SIGKILL);
                self.exited_within(CLOSE_STEP).await;
            }
        }
        // Whatever the leader left behind in its group goes too.
        if let Some(guard) = self.guard.take() {
            guard.kill_group();
        }
        Ok(())
    }
}
