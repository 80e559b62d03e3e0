//! The permission pipeline (CONTRACT §5). Every proposed tool call, whoever
//! proposes it, is decided by [`Pipeline::decide`]; the only way to obtain a
//! [`Permit`], which is what [`crate::mcp`] requires to send a call, is
//! [`Pipeline::authorize`] on a decision that allows (or an `ask` a person
//! approved). Nothing else in the crate can construct a `Permit`.
//!
//! Map: [`pipeline`] (load, the six stages, combination, `authorize`),
//! [`rules`] (permission-rule grammar, path normalisation), [`rego`]
//! (loading and evaluating policies with regorus; the shipped policies are
//! embedded), [`pins`] (tool-definition pins, the rug-pull check), [`ask`]
//! (the `Asker` trait and the terminal asker), [`testing`] (`policy test`).
//!
//! Invariants: `decide` never fails (an error inside a stage is that
//! stage's deny, with the error as the reason); a stage's `allow` never
//! outweighs another stage's `ask` or `deny`; project-scope rules and
//! policies can only restrict.

pub mod ask;
pub mod error;
mod permit;
pub mod pins;
pub mod pipeline;
pub mod rego;
pub mod rules;
pub mod testing;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

pub use ask::{AskAnswer, AskPrompt, Asker, TerminalAsker};
pub use error::PolicyError;
pub use permit::Permit;
pub use pins::{PinEntry, PinError, PinStore};
pub use pipeline::{Pipeline, PipelineConfig};
pub use warden_core::{Effect, Mode, Stage};

/// One stage's verdict: `effect == None` means the stage had no opinion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageVerdict {
    pub stage: Stage,
    pub effect: Option<Effect>,
    pub reasons: Vec<String>,
}

/// The pipeline's answer for one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub effect: Effect,
    /// The stage that decided (`default` when none did).
    pub stage: Stage,
    pub reasons: Vec<String>,
    /// Every stage's verdict, in order (for `policy eval` and audit).
    pub stages: Vec<StageVerdict>,
    /// Digest of the loaded Rego policies, `None` without a Rego stage.
    pub policy_sha256: Option<String>,
}

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
}

/// What the pipeline knows about one proposed call. Every fact comes from
/// warden's own state (config, the server's `tools/list`), never from the
/// caller, except `arguments`.
#[derive(Debug, Clone)]
pub struct CallFacts {
    pub server: ServerFacts,
    pub tool: ToolFacts,
    pub arguments: Value,
    pub context: CallContext,
}

#[derive(Debug, Clone, Serialize)]
pub struct ServerFacts {
    pub name: String,
    pub trust: crate::config::Trust,
    pub transport: String,
    pub scope: crate::config::Scope,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolFacts {
    /// The server's own name for the tool.
    pub name: String,
    /// `mcp__S__T`.
    pub qualified: String,
    /// As the server listed them (`null` when absent).
    pub annotations: Value,
    pub input_schema: Value,
    pub pin: PinState,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallContext {
    pub mode: Mode,
    pub session: String,
    pub workspace: String,
    pub call_index: u64,
}

/// Extra facts the Rego `input` carries, keyed by name (kept open so the
/// contract can grow without breaking callers).
pub type Extra = BTreeMap<String, Value>;
