//! What the pipeline knows about one proposed call. Every fact comes from
//! warden's own state (config, the server's `tools/list`, the pin store),
//! never from the caller, except `arguments`.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use warden_core::{Mode, RequestKind, Scope, TransportKind, Trust};

/// How the pinning stage's reason for a changed tool starts; what follows
/// is the list of changes, in the words of `PinState::Changed`.
pub const PIN_CHANGED: &str = "tool definition changed since approval:";

/// Pin state of a tool definition, computed when the tool was listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PinState {
    /// The definition matches the pinned digest (or was pinned just now).
    Pinned,
    /// The definition changed since it was pinned; `changes` says how.
    Changed { changes: Vec<String> },
    /// `--locked` and the lock file has no entry for this tool.
    Unpinned,
    /// First seen now, but its pin could not be saved (`error` says why):
    /// there is no baseline to detect a later change against, so the
    /// tool is treated as unpinned: `ask` (a deny with `--ci`).
    Unsaved { error: String },
}

/// One proposed request (CONTRACT §8): a tool call, or a request of
/// another kind. For a `resource` request `tool.name` is the URI and
/// `tool.qualified` the rule target `resource__S`, `arguments` is
/// `{"uri": …}`; for a `prompt`, `tool.name` is the prompt's name,
/// `tool.qualified` is `prompt__S__P` and `arguments` the prompt's
/// arguments. Only tools have annotations, a schema and a pin.
#[derive(Debug, Clone)]
pub struct CallFacts {
    pub kind: RequestKind,
    pub server: ServerFacts,
    pub tool: ToolFacts,
    pub arguments: Value,
    pub context: CallContext,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerFacts {
    pub name: String,
    pub trust: Trust,
    pub transport: TransportKind,
    pub scope: Scope,
    /// Where the server opens what it is given (for reading arguments).
    #[serde(skip)]
    pub dirs: ServerDirs,
}

/// The directories a server resolves paths against, from its
/// configuration (never from the server): a relative path is opened from
/// its working directory, `~` and `$HOME` from its HOME. Unknown
/// (a remote server, or facts built without a configuration): the
/// default, a server working in the workspace with no HOME of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerDirs {
    /// Absolute, normalised; `None` when it is the workspace.
    pub cwd: Option<String>,
    /// Every HOME the server may have (absolute), besides the host's.
    pub homes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolFacts {
    /// The server's own name for the tool.
    pub name: String,
    /// `mcp__S__T`.
    pub qualified: String,
    /// As the server listed them (`null` when absent).
    pub annotations: Value,
    /// Shared with the registry's entry: a call does not copy the schema.
    pub input_schema: Arc<Value>,
    pub pin: PinState,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallContext {
    pub mode: Mode,
    pub session: String,
    pub call_index: u64,
}
