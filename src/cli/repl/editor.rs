//! The line editor: one `rustyline` editor on its own thread, the only
//! reader of the terminal in a repl session. The prompt, the `ask` question
//! and server approvals all go through it, so a Ctrl-C at any of them is
//! seen as a key (the terminal is raw while reading) and no second reader
//! can ever take a line meant for another.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use tokio::sync::oneshot;

/// What one read came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Line(String),
    /// Ctrl-C: rustyline has already cleared the line.
    Interrupted,
    /// Ctrl-D on an empty line, or the input ended.
    Eof,
}

struct Request {
    /// Written to stderr just before the prompt (e.g. what an `ask` is about).
    preamble: String,
    prompt: String,
    /// Keep the line in the history (not for answers to questions, which
    /// also discard what was typed before they were shown).
    history: bool,
    reply: oneshot::Sender<Read>,
}

/// A handle to the editor thread; cheap to clone.
#[derive(Clone)]
pub struct Editor {
    requests: mpsc::Sender<Request>,
}

/// Owns the thread; dropping every [`Editor`] and calling [`EditorThread::join`]
/// saves the history.
pub struct EditorThread {
    handle: Option<JoinHandle<()>>,
}

impl EditorThread {
    /// Waits for the thread to save the history and end. Call only after
    /// every [`Editor`] handle is gone and no read is pending.
    pub fn join(mut self) {
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Starts the editor thread; `history` is the history file (created on the
/// first save), or `None` for no history file.
pub fn start(history: Option<PathBuf>) -> anyhow::Result<(Editor, EditorThread)> {
    let mut editor = DefaultEditor::new()?;
    if let Some(path) = &history
        && path.exists()
        && let Err(error) = editor.load_history(path)
    {
        tracing::warn!(file = %path.display(), %error, "cannot read the repl history");
    }
    let (tx, rx) = mpsc::channel::<Request>();
    let handle = std::thread::Builder::new()
        .name("warden-repl-editor".into())
        .spawn(move || serve(editor, rx, history))?;
    Ok((
        Editor { requests: tx },
        EditorThread {
            handle: Some(handle),
        },
    ))
}

fn serve(mut editor: DefaultEditor, requests: mpsc::Receiver<Request>, history: Option<PathBuf>) {
    while let Ok(request) = requests.recv() {
        if request.reply.is_closed() {
            // Asked for by a turn that has been cancelled meanwhile.
            continue;
        }
        if !request.history {
            // A question (an `ask`, a server's form): only a line typed
            // after it was shown answers it.
            crate::terminal::discard_typed_ahead(std::io::stdin());
        }
        if !request.preamble.is_empty() {
            eprint!("{}", request.preamble);
        }
        let read = match editor.readline(&request.prompt) {
            Ok(line) => {
                if request.history && !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.as_str());
                    save(&mut editor, history.as_ref());
                }
                Read::Line(line)
            }
            Err(ReadlineError::Interrupted) => Read::Interrupted,
            Err(ReadlineError::Eof) => Read::Eof,
            Err(error) => {
                tracing::warn!(%error, "reading the terminal failed");
                Read::Eof
            }
        };
        let _ = request.reply.send(read);
    }
    save(&mut editor, history.as_ref());
}

fn save(editor: &mut DefaultEditor, history: Option<&PathBuf>) {
    let Some(path) = history else {
        return;
    };
    if let Some(dir) = path.parent()
        && let Err(error) = std::fs::create_dir_all(dir)
    {
        tracing::warn!(dir = %dir.display(), %error, "cannot create the history folder");
        return;
    }
    if let Err(error) = editor.save_history(path) {
        tracing::warn!(file = %path.display(), %error, "cannot save the repl history");
    }
}

impl Editor {
    /// Reads one line after writing `preamble` to stderr.
    pub async fn read(&self, preamble: &str, prompt: &str, history: bool) -> Read {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            preamble: preamble.to_string(),
            prompt: prompt.to_string(),
            history,
            reply,
        };
        if self.requests.send(request).is_err() {
            return Read::Eof;
        }
        answer.await.unwrap_or(Read::Eof)
    }
}
