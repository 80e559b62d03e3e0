//! The agent: a model that proposes tool calls, and the loop that runs them
//! through the host. Providers sit behind [`Model`].

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as offered to a model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The qualified name `mcp__S__T`.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments (an object schema).
    pub input_schema: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id (generated when the provider has none).
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        text: String,
    },
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, already wrapped as data for the model.
    Tool {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// One assistant turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelTurn {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
}

#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Config(String),
    #[error("model request failed: {0}")]
    Http(String),
    #[error("model API error (HTTP {status}): {message}")]
    Api { status: u16, message: String },
    #[error("malformed model response: {0}")]
    Malformed(String),
    #[error("scripted model has no turns left")]
    Exhausted,
}

/// A model provider. Implementations must never log API keys.
pub trait Model: Send + Sync {
    fn name(&self) -> String;
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>>;
}
