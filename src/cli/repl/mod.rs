//! `warden repl`: an interactive agent session (CONTRACT §2).
//!
//! The host lives in an `Arc`; servers connect in a background task so the
//! prompt appears at once, and the first model request waits until every
//! connection attempt has settled. Each line typed is one turn of a
//! conversation kept across lines; every tool call goes through
//! [`HostExecutor`] (the permission pipeline and the audit log), and an
//! `ask` is put to the person through the line editor ([`ReplAsker`]).
//! Ctrl-C during a turn cancels that turn (its own `CancellationToken`),
//! never the servers; Ctrl-C at the prompt clears the line; Ctrl-D or
//! `/quit` stops the servers and ends the session.

mod commands;
mod editor;
mod resources;
mod spinner;
mod workspace;

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{CliError, GlobalArgs, exit, session};
use crate::agent::HostExecutor;
use crate::agent::{Limits, RunStatus, ToolExecutor, ToolOutcome, run_conversation};
use crate::agent::{Message, Model, ModelError, ModelRequest, ModelTurn, ToolCall, ToolSpec};
use crate::host::answers::Answerer;
use crate::host::{Host, ServerRequestsSetup};
use crate::terminal::TerminalAsker;
use crate::terminal::form::{Lines, TerminalForm, Tty};
use crate::terminal::{parse_answer, render_prompt};
use warden_core::display;
use warden_policy::{AskAnswer, AskPrompt, Asker, Mode};

use editor::{Editor, Read};
use spinner::Spinner;

/// Everything one repl session holds.
pub(super) struct Repl {
    host: Arc<Host>,
    editor: Editor,
    spinner: Spinner,
    model: Option<Arc<dyn Model>>,
    limits: Limits,
    messages: Vec<Message>,
    /// `true` once the background connection attempts have settled.
    settled: watch::Receiver<bool>,
    /// The running turn's token, cancelled by Ctrl-C (SIGINT).
    turn: Arc<Mutex<Option<CancellationToken>>>,
}

pub fn run(global: &GlobalArgs, answers: Option<&std::path::Path>) -> anyhow::Result<u8> {
    let model: Option<Arc<dyn Model>> = match &global.model {
        Some(spec) => Some(
            crate::agent::model_from_spec(spec, &|name| std::env::var(name).ok())
                .map_err(|e| CliError::usage(e.to_string()))?
                .into(),
        ),
        None => None,
    };
    let limits = super::run::limits(global)?;
    let mut options = session::host_options(global, Mode::Interactive)?;
    options
        .protect
        .extend(answers.map(std::path::Path::to_path_buf));
    let answers_file = match answers {
        Some(path) => session::answerer(options.mode, Some(path))?,
        None => None,
    };
    let history = session::config_dir()?.join("history");
    let runtime = session::runtime()?;
    // The terminal's settings, to put back if a signal ends the session
    // while the editor holds the terminal in raw mode.
    let terminal = nix::sys::termios::tcgetattr(std::io::stdin()).ok();
    let (editor, editor_thread) = editor::start(Some(history))?;
    let (code, lost) = runtime.block_on(async move {
        let turn = Arc::new(Mutex::new(None));
        let quit = CancellationToken::new();
        watch_signals(turn.clone(), quit.clone());
        let host = Arc::new(Host::open(options).map_err(session::host_error)?);
        let spinner = Spinner::new();
        // A server's questions go to the person through the line editor
        // (or the answers file); sampling to the session's model.
        let answerer = match answers_file {
            Some(file) => Some(file),
            None if host.mode() != Mode::Interactive => None,
            None if std::io::stdin().is_terminal() => {
                Some(Arc::new(TerminalForm::new(EditorLines {
                    editor: editor.clone(),
                    spinner: spinner.clone(),
                })) as Arc<dyn Answerer>)
            }
            None => Some(Arc::new(TerminalForm::new(Tty::default())) as Arc<dyn Answerer>),
        };
        host.install_server_requests_with(ServerRequestsSetup {
            model: model.clone(),
            answerer,
            ..ServerRequestsSetup::new(warden_audit::Caller::Model)
        });
        let mut repl = Repl {
            host,
            editor,
            spinner,
            model,
            limits,
            messages: Vec::new(),
            settled: watch::channel(true).1,
            turn,
        };
        repl.offer_approvals().await;
        repl.settled = repl.connect_in_background();
        let code = repl.main_loop(quit).await;
        repl.spinner.stop();
        repl.host.shutdown().await;
        // Fail-closed, as `run`: a session whose log lost records is exit 1.
        let lost = session::lost_records(&repl.host, "repl session");
        anyhow::Ok((code, lost))
    })?;
    // Every editor handle is gone with the session: the thread saves the
    // history and ends, unless a read is still pending.
    if code == exit::FAILED {
        // Only SIGTERM/SIGHUP end the loop with FAILED, possibly in the middle of
        // a read: leave that thread, and put the terminal back as it was.
        if let Some(settings) = terminal {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                &settings,
            );
        }
    } else {
        editor_thread.join();
    }
    match lost {
        Some(lost) => Err(lost),
        None => Ok(code),
    }
}

/// SIGINT cancels the running turn (outside a read the terminal is in
/// cooked mode, so Ctrl-C arrives as a signal); SIGTERM and SIGHUP (the
/// terminal went away) end the session, stopping the servers cleanly.
fn watch_signals(turn: Arc<Mutex<Option<CancellationToken>>>, quit: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    tokio::spawn(async move {
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            tracing::warn!("cannot install signal handlers");
            return;
        };
        loop {
            tokio::select! {
                _ = int.recv() => {
                    if let Some(token) = lock(&turn).as_ref() {
                        token.cancel();
                    }
                }
                _ = term.recv() => break,
                _ = hup.recv() => break,
            }
        }
        quit.cancel();
        if let Some(token) = lock(&turn).as_ref() {
            token.cancel();
        }
    });
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Repl {
    fn connect_in_background(&self) -> watch::Receiver<bool> {
        let (done, settled) = watch::channel(false);
        let host = self.host.clone();
        tokio::spawn(async move {
            host.connect().await;
            let _ = done.send(true);
        });
        settled
    }

    async fn main_loop(&mut self, quit: CancellationToken) -> u8 {
        let servers = self.host.statuses().len();
        eprintln!(
            "warden repl: {} server{} connecting in the background; model: {}. /help for commands, Ctrl-D to quit.",
            servers,
            if servers == 1 { "" } else { "s" },
            self.model
                .as_ref()
                .map_or("none (start with --model SPEC)".to_string(), |m| m.name())
        );
        let mut announced = false;
        loop {
            // Once the background connections have settled, say how they
            // went, above the next prompt (never in the middle of typing).
            let mut preamble = String::new();
            if !announced && *self.settled.borrow() {
                announced = true;
                preamble = format!("{}\n", connection_summary(&self.host));
            }
            let read = tokio::select! {
                read = self.editor.read(&preamble, "warden> ", true) => read,
                _ = quit.cancelled() => return exit::FAILED,
            };
            let line = match read {
                Read::Line(line) => line,
                Read::Interrupted => continue,
                Read::Eof => return exit::OK,
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            if line.starts_with('/') {
                if self.command(line).await == commands::Flow::Quit {
                    return exit::OK;
                }
            } else {
                self.turn(line).await;
            }
            if quit.is_cancelled() {
                return exit::FAILED;
            }
        }
    }

    /// Waits until the background connection attempts have settled (a
    /// spinner meanwhile); `false` when the turn was cancelled first.
    async fn wait_settled(&mut self, cancel: &CancellationToken) -> bool {
        if *self.settled.borrow() {
            return true;
        }
        self.spinner.start("connecting to servers…");
        let settled = tokio::select! {
            r = self.settled.wait_for(|s| *s) => r.is_ok(),
            _ = cancel.cancelled() => false,
        };
        self.spinner.stop();
        settled
    }

    /// One line typed by the person: a turn of the conversation.
    async fn turn(&mut self, line: &str) {
        if self.model.is_none() {
            eprintln!(
                "no model: start the repl with --model SPEC (scripted:FILE, openai:MODEL, anthropic:MODEL)"
            );
            return;
        }
        let token = CancellationToken::new();
        *lock(&self.turn) = Some(token.clone());
        if !self.wait_settled(&token).await {
            *lock(&self.turn) = None;
            eprintln!("turn cancelled");
            return;
        }
        let Some(model) = self.model.as_deref() else {
            return;
        };
        let before = self.messages.len();
        self.messages.push(Message::User {
            text: line.to_string(),
        });
        let asker = ReplAsker {
            editor: self.editor.clone(),
            spinner: self.spinner.clone(),
            turn: token.clone(),
        };
        let executor = HostExecutor::new(&self.host, Some(&asker), token.clone());
        let shown = ShowingExecutor {
            inner: &executor,
            spinner: self.spinner.clone(),
        };
        let narrated = NarratingModel {
            inner: model,
            spinner: self.spinner.clone(),
        };
        self.spinner.start("thinking…");
        let report = run_conversation(
            &narrated,
            &shown,
            &mut self.messages,
            &self.limits,
            token.clone(),
        )
        .await;
        self.spinner.stop();
        *lock(&self.turn) = None;
        if let Some(text) = &report.final_text
            && report.status == RunStatus::Completed
        {
            println!("{}", display::text(text));
        }
        let usage = &report.usage;
        match &report.status {
            RunStatus::Completed => {}
            RunStatus::ModelError(error) => {
                eprintln!(
                    "turn ended: model error: {}",
                    display::text(&error.to_string())
                )
            }
            RunStatus::Cancelled => eprintln!("turn cancelled"),
            other => eprintln!("turn ended: {}", other.as_str()),
        }
        eprintln!(
            "({} model turn{}, {} tool call{}, {} denied; tokens {} in / {} out)",
            report.turns,
            plural(report.turns as usize),
            report.calls.len(),
            plural(report.calls.len()),
            report.denied_calls,
            usage.input_tokens,
            usage.output_tokens
        );
        if report.status != RunStatus::Completed {
            // A turn that did not finish may end in tool calls without
            // results, which providers refuse: forget it.
            self.messages.truncate(before);
        }
    }
}

/// One line once the background connections have settled, e.g.
/// `servers: 2 connected (11 tools), 1 error (see /mcp)`.
fn connection_summary(host: &Host) -> String {
    use crate::mcp::ServerState;
    let statuses = host.statuses();
    let connected = statuses
        .iter()
        .filter(|s| s.state == ServerState::Connected)
        .count();
    let errors = statuses
        .iter()
        .filter(|s| s.state == ServerState::Error)
        .count();
    let pending = statuses
        .iter()
        .filter(|s| s.state == ServerState::PendingApproval)
        .count();
    let tools = host.tools().visible().count();
    let mut line = format!(
        "servers: {connected} connected ({tools} tool{})",
        plural(tools)
    );
    if errors > 0 {
        line.push_str(&format!(", {errors} failed (see /mcp)"));
    }
    if pending > 0 {
        line.push_str(&format!(
            ", {pending} awaiting approval (/mcp approve NAME)"
        ));
    }
    line
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Puts an `ask` to the person through the line editor. Ctrl-C or Ctrl-D
/// at the question denies the call and cancels the turn. When standard
/// input is not a terminal (lines piped in), the question goes to the
/// controlling terminal instead ([`TerminalAsker`]), as everywhere else in
/// warden: piped input can never answer an `ask`.
struct ReplAsker {
    editor: Editor,
    spinner: Spinner,
    turn: CancellationToken,
}

impl Asker for ReplAsker {
    fn ask<'a>(&'a self, prompt: &'a AskPrompt) -> BoxFuture<'a, AskAnswer> {
        Box::pin(async move {
            if self.turn.is_cancelled() {
                return AskAnswer::Deny;
            }
            let _hold = self.spinner.hold();
            if !std::io::stdin().is_terminal() {
                return TerminalAsker::new().ask(prompt).await;
            }
            let text = render_prompt(prompt);
            let (preamble, question) = match text.rfind('\n') {
                Some(i) => (&text[..=i], &text[i + 1..]),
                None => ("", text.as_str()),
            };
            let read = tokio::select! {
                read = self.editor.read(preamble, question, false) => read,
                _ = self.turn.cancelled() => Read::Eof,
            };
            match read {
                Read::Line(line) => parse_answer(&line),
                Read::Interrupted | Read::Eof => {
                    self.turn.cancel();
                    AskAnswer::Deny
                }
            }
        })
    }
}

/// A server's questions (elicitation, a sampling `ask`) read through the
/// line editor, the one reader of the terminal in a repl session. Ctrl-C
/// or Ctrl-D at one is no answer (the server is sent a decline).
struct EditorLines {
    editor: Editor,
    spinner: Spinner,
}

impl Lines for EditorLines {
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    fn read_line(&self, preamble: String, prompt: String) -> BoxFuture<'_, Option<String>> {
        Box::pin(async move {
            let _hold = self.spinner.hold();
            match self.editor.read(&preamble, &prompt, false).await {
                Read::Line(line) => Some(line),
                Read::Interrupted | Read::Eof => None,
            }
        })
    }
}

/// Shows each tool call and its result as it happens.
struct ShowingExecutor<'a> {
    inner: &'a HostExecutor<'a>,
    spinner: Spinner,
}

impl ToolExecutor for ShowingExecutor<'_> {
    fn tools(&self) -> Vec<ToolSpec> {
        self.inner.tools()
    }

    fn execute<'b>(&'b self, call: &'b ToolCall) -> BoxFuture<'b, ToolOutcome> {
        Box::pin(async move {
            self.spinner.suspend(|| {
                eprintln!(
                    "⚙ {} {}",
                    display::line(&call.name),
                    display::line(&clip(&call.arguments.to_string(), 200))
                );
            });
            let outcome = self.inner.execute(call).await;
            let record = &outcome.record;
            let effect = record["decision"]["effect"].as_str().unwrap_or("-");
            let stage = record["decision"]["stage"].as_str().unwrap_or("-");
            let result = record["outcome"].as_str().unwrap_or("?");
            self.spinner.suspend(|| {
                eprintln!("  {effect} ({stage}) → {result}");
                for line in clip(&outcome.content, 800).lines().take(12) {
                    eprintln!("  │ {}", display::line(line));
                }
            });
            outcome
        })
    }

    // Without it the repl recorded no call it did not run (past its
    // budget, in a cut or unreadable turn).
    fn record_skipped(&self, call: &ToolCall, reason: &str) {
        self.inner.record_skipped(call, reason);
    }
}

/// Shows the model's text on turns that also call tools (the final text
/// is printed when the turn ends).
struct NarratingModel<'a> {
    inner: &'a dyn Model,
    spinner: Spinner,
}

impl Model for NarratingModel<'_> {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        Box::pin(async move {
            let turn = self.inner.complete(request).await?;
            if !turn.tool_calls.is_empty()
                && let Some(text) = &turn.text
            {
                self.spinner.suspend(|| println!("{}", display::text(text)));
            }
            Ok(turn)
        })
    }
}

/// At most `max` characters, with an ellipsis when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}
