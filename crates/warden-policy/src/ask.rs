//! Asking a person (or an MCP client) about an `ask` decision: what is
//! asked ([`AskPrompt`]), the possible answers, and the [`Asker`] trait.
//! Implementations live with their front ends: the terminal asker and the
//! repl in the warden crate, the gateway's elicitation asker, test doubles.

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use warden_core::Stage;

/// What is put to the person deciding.
#[derive(Debug, Clone, Serialize)]
pub struct AskPrompt {
    pub server: String,
    /// The server's own tool name.
    pub tool: String,
    pub qualified: String,
    pub arguments: Value,
    /// The stage that asked.
    pub stage: Stage,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AskAnswer {
    AllowOnce,
    /// Allow this tool for the rest of the session (for the same kind of ask).
    AllowSession,
    Deny,
}

/// Answers `ask` decisions. Anything but an explicit allow is a deny.
pub trait Asker: Send + Sync {
    fn ask<'a>(&'a self, prompt: &'a AskPrompt) -> BoxFuture<'a, AskAnswer>;
}
