//! `openai:MODEL`: the Chat Completions API with function tools. Works with
//! any compatible server (vLLM, llama.cpp, Ollama) through `OPENAI_BASE_URL`.

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};

use super::http::{self, ApiKey, HttpSettings, Target};
use super::{
    BadTurn, Message, Model, ModelError, ModelRequest, ModelTurn, ToolCall, ToolSpec, Usage,
};

const PROVIDER: &str = "openai";

/// A Chat Completions model.
#[derive(Debug)]
pub struct OpenAiModel {
    model: String,
    base_url: String,
    key: ApiKey,
    client: reqwest::Client,
    settings: HttpSettings,
}

impl OpenAiModel {
    /// The variable holding the API key.
    pub const KEY_VAR: &'static str = "OPENAI_API_KEY";
    /// The variable overriding the base URL.
    pub const BASE_URL_VAR: &'static str = "OPENAI_BASE_URL";
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// Reads the key (`OPENAI_API_KEY`, required) and base URL
    /// (`OPENAI_BASE_URL`, optional) through `env`.
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

    /// With an explicit key and base URL (e.g. `https://api.openai.com/v1`).
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

    fn build(
        model: &str,
        key: ApiKey,
        base_url: &str,
        settings: HttpSettings,
    ) -> Result<Self, ModelError> {
        let model = model.trim();
        if model.is_empty() {
            return Err(ModelError::Config(
                "openai: no model name given (openai:MODEL)".into(),
            ));
        }
        let base_url = http::base_url(PROVIDER, Self::BASE_URL_VAR, base_url)?;
        let client = http::build_client(&settings)?;
        Ok(Self {
            model: model.to_string(),
            base_url,
            key,
            client,
            settings,
        })
    }

    /// The JSON body of a Chat Completions request.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for m in &request.messages {
            messages.push(match m {
                Message::User { text } => json!({"role": "user", "content": text}),
                Message::Assistant { text, tool_calls } => {
                    let mut o = Map::new();
                    o.insert("role".into(), json!("assistant"));
                    o.insert("content".into(), json!(text));
                    if !tool_calls.is_empty() {
                        let calls: Vec<Value> = tool_calls
                            .iter()
                            .map(|c| {
                                json!({
                                    "id": c.id,
                                    "type": "function",
                                    "function": {"name": c.name, "arguments": c.arguments.to_string()},
                                })
                            })
                            .collect();
                        o.insert("tool_calls".into(), Value::Array(calls));
                    }
                    Value::Object(o)
                }
                Message::Tool {
                    call_id, content, ..
                } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
            });
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert("messages".into(), Value::Array(messages));
        if let Some(max_tokens) = request.max_tokens {
            body.insert("max_completion_tokens".into(), json!(max_tokens.max(1)));
        }
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request.tools.iter().map(tool_json).collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        Value::Object(body)
    }

    async fn complete_inner(&self, request: &ModelRequest) -> Result<ModelTurn, ModelError> {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", self.key.header_value("Bearer ")?);
        headers.insert("accept", HeaderValue::from_static("application/json"));
        let target = Target {
            provider: PROVIDER,
            key_var: Self::KEY_VAR,
            model: &self.model,
            url: format!("{}/chat/completions", self.base_url),
            key: &self.key,
            headers,
        };
        let body = self.request_body(request);
        let response = http::post_json(&self.client, &self.settings, &target, &body).await?;
        parse_response(&response).map_err(|bad| bad.into_error(PROVIDER, &response, &self.key))
    }
}

impl Model for OpenAiModel {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
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
        "type": "function",
        "function": {
            "name": t.name,
            "description": t.description,
            "parameters": super::object_schema(&t.input_schema),
        },
    })
}

/// Parses a Chat Completions response; the error says what was wrong.
fn parse_response(v: &Value) -> Result<ModelTurn, BadTurn> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)");
        return Err(format!("the response is an error object: {msg}").into());
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .ok_or("no 'choices' array")?
        .first()
        .ok_or("'choices' is empty")?;
    let message = choice
        .get("message")
        .and_then(Value::as_object)
        .ok_or("choices[0] has no 'message' object")?;
    // The first thing in the message that does not read: the turn is not
    // run, but every call in it that can be named is, to be recorded.
    let mut unreadable: Option<String> = None;
    let text = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        // Some compatible servers send content parts.
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        Some(_) => {
            unreadable = Some("choices[0].message.content is neither a string nor null".into());
            None
        }
    }
    .or_else(|| {
        message
            .get("refusal")
            .and_then(Value::as_str)
            .map(str::to_string)
    })
    .filter(|t| !t.is_empty());
    let mut tool_calls = Vec::new();
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, c) in calls.iter().enumerate() {
                let at = format!("choices[0].message.tool_calls[{i}]");
                // A call without a function or a name is still one the
                // model asked for: recorded under the name it has (none).
                let empty = Map::new();
                let function = c.get("function").and_then(Value::as_object);
                if function.is_none() {
                    unreadable.get_or_insert_with(|| format!("{at} has no 'function' object"));
                }
                let function = function.unwrap_or(&empty);
                let name = function
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty());
                if name.is_none() {
                    unreadable.get_or_insert_with(|| format!("{at}.function.name is missing"));
                }
                let name = name.unwrap_or_default();
                let arguments = match function.get("arguments") {
                    None | Some(Value::Null) => json!({}),
                    Some(Value::String(s)) if s.trim().is_empty() => json!({}),
                    // JSON that is not an object reads, and the schema
                    // stage denies it; text that is no JSON (trailing
                    // data, a comment, NaN, a number beyond f64) does not.
                    Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                        Ok(arguments) => arguments,
                        Err(e) => {
                            unreadable.get_or_insert_with(|| {
                                format!(
                                    "{at}.function.arguments (tool '{name}') is not valid JSON: {e}"
                                )
                            });
                            super::unreadable_arguments(s)
                        }
                    },
                    // Lenient: some compatible servers send an object.
                    Some(o @ Value::Object(_)) => o.clone(),
                    Some(other) => {
                        unreadable.get_or_insert_with(|| {
                            format!("{at}.function.arguments is not a JSON string")
                        });
                        other.clone()
                    }
                };
                let id = c
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("call_{}", uuid::Uuid::new_v4().simple()));
                tool_calls.push(ToolCall {
                    id,
                    name: name.to_string(),
                    arguments,
                });
            }
        }
        Some(_) => return Err("choices[0].message.tool_calls is not an array".into()),
    }
    if let Some(what) = unreadable {
        return Err(BadTurn {
            what,
            calls: tool_calls,
        });
    }
    let usage = v.get("usage");
    let count = |k: &str| {
        usage
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let truncated = choice.get("finish_reason").and_then(Value::as_str) == Some("length");
    Ok(ModelTurn {
        text,
        tool_calls,
        usage: Usage {
            input_tokens: count("prompt_tokens"),
            output_tokens: count("completion_tokens"),
        },
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tool_calls_with_string_arguments() {
        let v = json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{\"a\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "u", "arguments": ""}}
            ]}, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3}
        });
        let t = parse_response(&v).unwrap_or_else(|e| panic!("{}", e.what));
        assert_eq!(t.text, None);
        assert_eq!(t.tool_calls.len(), 2);
        assert_eq!(t.tool_calls[0].arguments, json!({"a": 1}));
        assert_eq!(t.tool_calls[1].arguments, json!({}));
        assert_eq!(
            t.usage,
            Usage {
                input_tokens: 7,
                output_tokens: 3
            }
        );
    }

    #[test]
    fn bad_arguments_are_named() {
        let v = json!({"choices": [{"message": {"tool_calls": [
            {"id": "c1", "function": {"name": "t", "arguments": "{oops"}}]}}]});
        let e = parse_response(&v).err().map(|b| b.what).unwrap_or_default();
        assert!(
            e.contains("tool_calls[0].function.arguments") && e.contains("'t'"),
            "{e}"
        );
        // Every call of the turn is named, to be recorded as not run.
        let calls = parse_response(&v)
            .err()
            .map(|b| b.calls)
            .unwrap_or_default();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].arguments["bytes"], json!(5));
        assert!(parse_response(&json!({"choices": []})).is_err());
        assert!(parse_response(&json!({"id": "x"})).is_err());
    }
}
