//! The agent: a model that proposes tool calls, and the loop that runs them
//! through the host. Providers sit behind [`Model`].
//!
//! - [`model_from_spec`] builds a provider from `--model`:
//!   [`scripted`] (`scripted:FILE`), [`openai`] (`openai:MODEL`, Chat
//!   Completions), [`anthropic`] (`anthropic:MODEL`, Messages API). HTTP,
//!   retries and error texts live in `http` ([`HttpSettings`]).
//! - [`run_task`] ([`run_loop`]) is the loop. It knows nothing of servers or
//!   policies: every call goes through a [`ToolExecutor`], the seam where the
//!   host plugs in its permission pipeline.
//!
//! Invariants: API keys are never logged, never in an error text (errors are
//! scrubbed of the key) and never in `Debug` output; tool results reach the
//! model only wrapped as data (`<tool_result …>`), cut to
//! [`Limits::max_result_chars`].

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod anthropic;
mod host_executor;
mod http;
mod openai;
mod run_loop;
mod scripted;

pub use anthropic::AnthropicModel;
pub use host_executor::HostExecutor;
pub use http::HttpSettings;
pub use openai::OpenAiModel;
pub use run_loop::{
    Limits, RunReport, RunStatus, SYSTEM_PROMPT, ToolExecutor, ToolOutcome, record_calls_not_run,
    run_conversation, run_task,
};
pub use scripted::ScriptedModel;

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

impl Usage {
    /// Adds another turn's usage (saturating).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
    }
}

/// One assistant turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelTurn {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// The provider says the turn was cut at its output-token limit
    /// (Anthropic `stop_reason: max_tokens`, OpenAI `finish_reason:
    /// length`): its text is incomplete and a tool call in it may carry
    /// cut arguments (a path cut to its parent folder).
    pub truncated: bool,
}

#[derive(Debug, Clone)]
pub struct ModelRequest {
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    /// At most this many output tokens (a server's sampling request,
    /// capped); `None`: the provider's own setting.
    pub max_tokens: Option<u32>,
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
    /// The API key variable is unset or empty. Names the variable, never a value.
    #[error("{provider}: the API key is missing: set {var} in the environment")]
    MissingKey {
        provider: &'static str,
        var: &'static str,
    },
    /// HTTP 401/403: the key was refused.
    #[error("{provider}: the API key was rejected (HTTP {status}): {message}; check {var}")]
    Unauthorized {
        provider: &'static str,
        status: u16,
        var: &'static str,
        message: String,
    },
    /// HTTP 404: usually an unknown model (or a wrong base URL).
    #[error(
        "{provider}: model '{model}' not found (HTTP 404): {message}; check the model name and the base URL"
    )]
    UnknownModel {
        provider: &'static str,
        model: String,
        message: String,
    },
    /// A turn with tool calls of which at least one cannot be read
    /// (arguments that are not JSON, or not the object the API promises):
    /// `error` says what was wrong; `calls` are every call of the turn, in
    /// order, so that each is recorded as not run (an unreadable call's
    /// arguments by size and digest when they are no JSON).
    #[error("{error}")]
    UnreadableCalls {
        error: Box<ModelError>,
        /// What was wrong, without the excerpt of the response `error`
        /// carries (the record names the calls itself).
        what: String,
        calls: Vec<ToolCall>,
    },
    /// A scripted model's file is unreadable or malformed.
    #[error("scripted model {file}: {message}")]
    Script { file: String, message: String },
}

/// Why a provider's answer could not be used: what was wrong, and the
/// tool calls of the turn when one of them could not be read
/// ([`ModelError::UnreadableCalls`]).
pub(crate) struct BadTurn {
    pub what: String,
    pub calls: Vec<ToolCall>,
}

impl From<String> for BadTurn {
    fn from(what: String) -> Self {
        BadTurn {
            what,
            calls: Vec::new(),
        }
    }
}

impl From<&str> for BadTurn {
    fn from(what: &str) -> Self {
        what.to_string().into()
    }
}

impl BadTurn {
    /// The error `provider` returns for it: what was wrong with an excerpt
    /// of its `response` (`http::malformed`), and the calls when there are
    /// any.
    pub(crate) fn into_error(
        self,
        provider: &str,
        response: &Value,
        key: &http::ApiKey,
    ) -> ModelError {
        let error = http::malformed(provider, &self.what, response, key);
        if self.calls.is_empty() {
            error
        } else {
            ModelError::UnreadableCalls {
                error: Box::new(error),
                what: format!("{provider}: {}", self.what),
                calls: self.calls,
            }
        }
    }
}

/// How an unreadable call's arguments are recorded: no `redact` pointer
/// can be applied to text that does not read, and a value it would hide
/// could be in it, so only its size and digest.
pub(crate) fn unreadable_arguments(text: &str) -> Value {
    serde_json::json!({
        "bytes": text.len(),
        "sha256": warden_core::digest::sha256_hex(text.as_bytes()),
    })
}

/// Builds a model from a `--model` spec: `scripted:FILE`, `openai:MODEL` or
/// `anthropic:MODEL`. `env` looks up environment variables (API keys, base
/// URLs); pass `&|k| std::env::var(k).ok()` for the real environment.
pub fn model_from_spec(
    spec: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Model>, ModelError> {
    model_from_spec_with(spec, env, HttpSettings::default())
}

/// As [`model_from_spec`], with explicit HTTP settings (timeouts, retries).
pub fn model_from_spec_with(
    spec: &str,
    env: &dyn Fn(&str) -> Option<String>,
    http: HttpSettings,
) -> Result<Box<dyn Model>, ModelError> {
    let Some((provider, rest)) = spec.split_once(':') else {
        return Err(ModelError::Config(format!(
            "model spec '{spec}' has no provider: use scripted:FILE, openai:MODEL or anthropic:MODEL"
        )));
    };
    if rest.trim().is_empty() {
        return Err(ModelError::Config(format!(
            "model spec '{spec}' names no {}: use {provider}:{}",
            if provider == "scripted" {
                "file"
            } else {
                "model"
            },
            if provider == "scripted" {
                "FILE"
            } else {
                "MODEL"
            }
        )));
    }
    match provider {
        "scripted" => Ok(Box::new(ScriptedModel::from_file(std::path::Path::new(
            rest,
        ))?)),
        "openai" => Ok(Box::new(OpenAiModel::from_env(rest, env, http)?)),
        "anthropic" => Ok(Box::new(AnthropicModel::from_env(rest, env, http)?)),
        other => Err(ModelError::Config(format!(
            "unknown model provider '{other}' in '{spec}': use scripted:FILE, openai:MODEL or anthropic:MODEL"
        ))),
    }
}

/// A model provider. Implementations must never log API keys.
pub trait Model: Send + Sync {
    fn name(&self) -> String;
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>>;
}

/// The tool's input schema as an object schema, as providers require. The
/// registry already normalises ([`crate::registry::object_schema`]); this
/// guards a hand-made [`ToolSpec`] the same way.
pub(crate) fn object_schema(schema: &Value) -> Value {
    crate::registry::normalize_object_schema(schema)
}

impl ToolSpec {
    /// The spec a model sees for a registered tool: its qualified name, its
    /// description and its normalised object schema.
    pub fn from_entry(entry: &crate::registry::ToolEntry) -> Self {
        Self {
            name: entry.qualified.clone(),
            description: entry
                .definition
                .description
                .as_deref()
                .unwrap_or("")
                .to_string(),
            input_schema: crate::registry::object_schema(&entry.definition),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_become_object_schemas() {
        assert_eq!(
            object_schema(&json!(true)),
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(
            object_schema(&json!({"properties": {"a": {}}})),
            json!({"type": "object", "properties": {"a": {}}})
        );
    }

    #[test]
    fn a_registry_entry_becomes_a_spec() {
        let schema: serde_json::Map<String, Value> =
            serde_json::from_value(json!({"properties": {"p": {"type": "string"}}}))
                .unwrap_or_default();
        let entry = crate::registry::ToolEntry {
            server: "fs".into(),
            remote: "read file".into(),
            qualified: "mcp__fs__read_file".into(),
            definition: rmcp::model::Tool::new(
                "read file".to_string(),
                "Reads",
                std::sync::Arc::new(schema.clone()),
            ),
            input_schema: std::sync::Arc::new(Value::Object(schema)),
        };
        let spec = ToolSpec::from_entry(&entry);
        assert_eq!(spec.name, "mcp__fs__read_file");
        assert_eq!(spec.description, "Reads");
        assert_eq!(
            spec.input_schema,
            json!({"type": "object", "properties": {"p": {"type": "string"}}})
        );
    }

    #[test]
    fn specs_are_checked() {
        let env = |_: &str| None;
        for (spec, want) in [
            ("gpt-4o", "has no provider"),
            ("scripted:", "names no file"),
            ("anthropic: ", "names no model"),
            ("llama:x", "unknown model provider 'llama'"),
        ] {
            let e = model_from_spec(spec, &env)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }
}
