//! `anthropic:MODEL`: the Messages API with `tool_use` / `tool_result`
//! content blocks.

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};

use super::http::{self, ApiKey, HttpSettings, Target};
use super::{
    BadTurn, Message, Model, ModelError, ModelRequest, ModelTurn, ToolCall, ToolSpec, Usage,
};

const PROVIDER: &str = "anthropic";

/// A Messages API model.
#[derive(Debug)]
pub struct AnthropicModel {
    model: String,
    base_url: String,
    key: ApiKey,
    max_tokens: u32,
    client: reqwest::Client,
    settings: HttpSettings,
}

impl AnthropicModel {
    pub const KEY_VAR: &'static str = "ANTHROPIC_API_KEY";
    pub const BASE_URL_VAR: &'static str = "ANTHROPIC_BASE_URL";
    pub const DEFAULT_BASE_URL: &'static str = "https://api.anthropic.com";
    pub const API_VERSION: &'static str = "2023-06-01";
    pub const DEFAULT_MAX_TOKENS: u32 = 4096;

    /// Reads the key (`ANTHROPIC_API_KEY`, required) and base URL
    /// (`ANTHROPIC_BASE_URL`, optional) through `env`.
    pub fn from_env(
        model: &str,
        env: &dyn Fn(&str) -> Option<String>,
        settings: HttpSettings,
    ) -> Result<Self, ModelError> {
        let key = ApiKey::from_env(PROVIDER, Self::KEY_VAR, env)?;
        let base = env(Self::BASE_URL_VAR)
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| Self::DEFAULT_BASE_URL.to_string());
        Self::build(model, key, &base, settings)
    }

    /// With an explicit key and base URL (e.g. `https://api.anthropic.com`).
    pub fn new(
        model: &str,
        api_key: String,
        base_url: &str,
        settings: HttpSettings,
    ) -> Result<Self, ModelError> {
        if api_key.trim().is_empty() {
            return Err(ModelError::MissingKey {
                provider: PROVIDER,
                var: Self::KEY_VAR,
            });
        }
        Self::build(
            model,
            ApiKey::new(api_key.trim().to_string()),
            base_url,
            settings,
        )
    }

    /// Sets `max_tokens` of each request (default 4096).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens.max(1);
        self
    }

    fn build(
        model: &str,
        key: ApiKey,
        base_url: &str,
        settings: HttpSettings,
    ) -> Result<Self, ModelError> {
        let model = model.trim();
        if model.is_empty() {
            return Err(ModelError::Config(
                "anthropic: no model name given (anthropic:MODEL)".into(),
            ));
        }
        let base_url = http::base_url(PROVIDER, Self::BASE_URL_VAR, base_url)?;
        let client = http::build_client(&settings)?;
        Ok(Self {
            model: model.to_string(),
            base_url,
            key,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            client,
            settings,
        })
    }

    /// The JSON body of a Messages request. Consecutive tool results (and a
    /// user text that follows them) share one `user` message, as the API
    /// requires alternating roles.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
        let mut push = |role: &'static str, blocks: Vec<Value>| {
            if blocks.is_empty() {
                return;
            }
            match messages.last_mut() {
                Some((last, content)) if *last == role => content.extend(blocks),
                _ => messages.push((role, blocks)),
            }
        };
        for m in &request.messages {
            match m {
                Message::User { text } => push("user", vec![json!({"type": "text", "text": text})]),
                Message::Assistant { text, tool_calls } => {
                    let mut blocks = Vec::new();
                    if let Some(t) = text.as_deref().filter(|t| !t.is_empty()) {
                        blocks.push(json!({"type": "text", "text": t}));
                    }
                    for c in tool_calls {
                        blocks.push(json!({
                            "type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments,
                        }));
                    }
                    push("assistant", blocks);
                }
                Message::Tool {
                    call_id,
                    content,
                    is_error,
                    ..
                } => push(
                    "user",
                    vec![json!({
                        "type": "tool_result", "tool_use_id": call_id,
                        "content": content, "is_error": is_error,
                    })],
                ),
            }
        }
        let messages: Vec<Value> = messages
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect();
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        let max_tokens = request
            .max_tokens
            .map_or(self.max_tokens, |m| m.clamp(1, self.max_tokens));
        body.insert("max_tokens".into(), json!(max_tokens));
        if !request.system.is_empty() {
            body.insert("system".into(), json!(request.system));
        }
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request.tools.iter().map(tool_json).collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        Value::Object(body)
    }

    async fn complete_inner(&self, request: &ModelRequest) -> Result<ModelTurn, ModelError> {
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", self.key.header_value("")?);
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(Self::API_VERSION),
        );
        headers.insert("accept", HeaderValue::from_static("application/json"));
        let target = Target {
            provider: PROVIDER,
            key_var: Self::KEY_VAR,
            model: &self.model,
            url: format!("{}/v1/messages", self.base_url),
            key: &self.key,
            headers,
        };
        let body = self.request_body(request);
        let response = http::post_json(&self.client, &self.settings, &target, &body).await?;
        parse_response(&response).map_err(|bad| bad.into_error(PROVIDER, &response, &self.key))
    }
}

impl Model for AnthropicModel {
    fn name(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelTurn, ModelError>> {
        Box::pin(self.complete_inner(request))
    }
}

fn tool_json(t: &ToolSpec) -> Value {
    json!({
        "name": t.name,
        "description": t.description,
        "input_schema": super::object_schema(&t.input_schema),
    })
}

/// Parses a Messages response; the error says what was wrong.
fn parse_response(v: &Value) -> Result<ModelTurn, BadTurn> {
    if v.get("type").and_then(Value::as_str) == Some("error") {
        let msg = v
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)");
        return Err(format!("the response is an error object: {msg}").into());
    }
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or("no 'content' array")?;
    let mut texts = Vec::new();
    let mut tool_calls = Vec::new();
    // The first block that does not read: the turn is not run, but every
    // call in it is named to be recorded (a `tool_use` without a name
    // under none, one without an id under one made here).
    let mut unreadable: Option<String> = None;
    for (i, block) in content.iter().enumerate() {
        let at = format!("content[{i}]");
        match block.get("type").and_then(Value::as_str) {
            Some("text") => match block.get("text").and_then(Value::as_str) {
                Some(t) => texts.push(t.to_string()),
                None => {
                    unreadable.get_or_insert_with(|| format!("{at} (text) has no 'text' string"));
                }
            },
            Some("tool_use") => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty());
                if name.is_none() {
                    unreadable.get_or_insert_with(|| format!("{at} (tool_use) has no 'name'"));
                }
                let name = name.unwrap_or_default();
                let id = block
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string);
                if id.is_none() {
                    unreadable
                        .get_or_insert_with(|| format!("{at} (tool_use '{name}') has no 'id'"));
                }
                let id = id.unwrap_or_else(|| format!("toolu_{}", uuid::Uuid::new_v4().simple()));
                let input = match block.get("input") {
                    None | Some(Value::Null) => json!({}),
                    Some(i @ Value::Object(_)) => i.clone(),
                    Some(other) => {
                        unreadable.get_or_insert_with(|| {
                            format!("{at} (tool_use '{name}'): 'input' is not an object")
                        });
                        other.clone()
                    }
                };
                tool_calls.push(ToolCall {
                    id,
                    name: name.to_string(),
                    arguments: input,
                });
            }
            // thinking, redacted_thinking and future block types carry no
            // answer text or calls.
            Some(_) => {}
            None => {
                unreadable.get_or_insert_with(|| format!("{at} has no 'type'"));
            }
        }
    }
    if let Some(what) = unreadable {
        return Err(BadTurn {
            what,
            calls: tool_calls,
        });
    }
    let text = Some(texts.join("")).filter(|t| !t.is_empty());
    let count = |k: &str| {
        v.get("usage")
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    // Cut at a limit: `max_tokens`, or the context window filled up.
    let truncated = matches!(
        v.get("stop_reason").and_then(Value::as_str),
        Some("max_tokens" | "model_context_window_exceeded")
    );
    Ok(ModelTurn {
        text,
        tool_calls,
        usage: Usage {
            input_tokens: count("input_tokens"),
            output_tokens: count("output_tokens"),
        },
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_text_and_tool_use() {
        let v = json!({
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "mcp__a__b", "input": {"x": 1}}
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 5}
        });
        let t = parse_response(&v).unwrap_or_else(|e| panic!("{}", e.what));
        assert_eq!(t.text.as_deref(), Some("Let me look."));
        assert_eq!(t.tool_calls[0].id, "toolu_1");
        assert_eq!(t.tool_calls[0].arguments, json!({"x": 1}));
        assert_eq!(t.usage.input_tokens, 10);
        assert!(parse_response(&json!({"content": [{"type": "tool_use", "name": "x"}]})).is_err());
    }
}
