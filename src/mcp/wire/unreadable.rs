//! What the gateway answers to a client message it cannot read, so that
//! the client is told (rather than waiting out its timeout) and the audit
//! log has the attempt (CONTRACT §6: nothing a caller asked for goes
//! unrecorded).
//!
//! JSON-RPC 2.0: a line that is not JSON gets a parse error, a request
//! that is no valid request an invalid-request error, each with the
//! request's `id` when it can be read (rmcp's `JsonRpcError` then omits
//! the `id`, as MCP 2026-07-28 allows). A request naming a method the
//! gateway serves whose parameters do not read as that method's gets
//! invalid params. The `id` and `method` are recovered with serde's
//! skipping reader, which neither checks a string's escapes nor the
//! nesting depth of what it skips: a request carrying a lone surrogate or
//! nesting deeper than serde_json's limit in its arguments (unreadable as
//! a whole, so never decided nor sent) is still answered under its `id`.
//! A response (no `method`, a `result` or `error`) is never answered.

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use rmcp::model::{
    CallToolRequestMethod, CompleteRequestMethod, ConstString, ErrorData, GetPromptRequestMethod,
    InitializeResultMethod, ListPromptsRequestMethod, ListResourceTemplatesRequestMethod,
    ListResourcesRequestMethod, ListToolsRequestMethod, PingRequestMethod,
    ReadResourceRequestMethod, RequestId, SetLevelRequestMethod, SubscribeRequestMethod,
    UnsubscribeRequestMethod,
};

/// A client's message answered with an error instead of being served.
#[derive(Debug, Clone)]
pub(crate) struct Unreadable {
    /// The request's id, when it could be read.
    pub id: Option<RequestId>,
    /// The method it named, when it could be read.
    pub method: Option<String>,
    /// The answer (parse error, invalid request or invalid params).
    pub error: ErrorData,
    /// What the record keeps of it: the message's `params` (the whole
    /// message when it has none) when it reads as JSON, so that the log
    /// applies `redact` pointers, scrubs secrets and shortens long values
    /// as for any request's arguments; else only its size and digest
    /// (`{"bytes", "sha256"}`), since no pointer can be applied to text
    /// that does not read, and a value it would hide could be in it.
    pub recorded: Value,
}

/// The methods whose typed parameters rmcp reads (a request for one that
/// rmcp could not read as its type arrives as a `CustomRequest`).
pub(crate) fn is_served_method(method: &str) -> bool {
    [
        CallToolRequestMethod::VALUE,
        ListToolsRequestMethod::VALUE,
        ReadResourceRequestMethod::VALUE,
        ListResourcesRequestMethod::VALUE,
        ListResourceTemplatesRequestMethod::VALUE,
        SubscribeRequestMethod::VALUE,
        UnsubscribeRequestMethod::VALUE,
        GetPromptRequestMethod::VALUE,
        ListPromptsRequestMethod::VALUE,
        CompleteRequestMethod::VALUE,
        SetLevelRequestMethod::VALUE,
        PingRequestMethod::VALUE,
        InitializeResultMethod::VALUE,
    ]
    .contains(&method)
}

/// The answer to a request for a method the gateway does not serve, as
/// rmcp gives it (the method as the message).
pub(crate) fn method_not_found(method: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        method.to_string(),
        None,
    )
}

/// The invalid-params answer to a request for `method` whose parameters
/// rmcp could not read as that method's.
pub(crate) fn invalid_params(method: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("Invalid params: the parameters are not those of {method}"),
        None,
    )
}

/// An `initialize` whose parameters are not initialize's (rmcp reads it as
/// a custom request): rmcp answers it before any handler runs, with an
/// error about something else (over stdio a missing `_meta`, over HTTP a
/// missing session), and nothing records it. Answered invalid params
/// under its id, and recorded, by the gateway's transports instead.
pub(crate) fn unread_initialize(
    request: &rmcp::model::JsonRpcRequest<rmcp::model::ClientRequest>,
) -> Option<Unreadable> {
    let rmcp::model::ClientRequest::CustomRequest(custom) = &request.request else {
        return None;
    };
    (custom.method == "initialize").then(|| Unreadable {
        id: Some(request.id.clone()),
        method: Some(custom.method.clone()),
        error: invalid_params(&custom.method),
        recorded: custom.params.clone().unwrap_or_default(),
    })
}

/// Only the envelope; every other value is skipped unchecked.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<IdOrOther>,
    #[serde(default)]
    method: Option<MethodOrOther>,
    #[serde(default)]
    result: Option<IgnoredAny>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// An id of JSON-RPC's kinds, or anything else (skipped).
#[derive(Deserialize)]
#[serde(untagged)]
enum IdOrOther {
    Id(RequestId),
    Other(IgnoredAny),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum MethodOrOther {
    Method(String),
    Other(IgnoredAny),
}

/// What to answer to `line`, which rmcp's decoder refused with `error`;
/// `None` for a response, which is never answered.
pub(crate) fn classify(line: &[u8], error: &serde_json::Error) -> Option<Unreadable> {
    let not_json = matches!(
        error.classify(),
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof
    );
    // Only an object is read for its envelope: serde would read a struct
    // from an array too, element by element.
    let is_object = line.trim_ascii_start().first() == Some(&b'{');
    let envelope = is_object
        .then(|| serde_json::from_slice::<Envelope>(line).ok())
        .flatten();
    let Some(envelope) = envelope else {
        let answer = if not_json {
            ErrorData::parse_error(format!("Parse error: {error}"), None)
        } else {
            ErrorData::invalid_request(format!("Invalid request: {error}"), None)
        };
        return Some(Unreadable {
            id: None,
            method: None,
            error: answer,
            recorded: recorded(line),
        });
    };
    let method = match envelope.method {
        Some(MethodOrOther::Method(method)) => Some(method),
        _ => None,
    };
    if method.is_none() && (envelope.result.is_some() || envelope.error.is_some()) {
        return None;
    }
    let id = match envelope.id {
        Some(IdOrOther::Id(id)) => Some(id),
        _ => None,
    };
    let answer = match (&id, &method) {
        (Some(_), Some(method)) if is_served_method(method) => ErrorData::invalid_params(
            format!("Invalid params: the request for {method} could not be read: {error}"),
            None,
        ),
        (None, _) if not_json => ErrorData::parse_error(format!("Parse error: {error}"), None),
        _ => ErrorData::invalid_request(format!("Invalid request: {error}"), None),
    };
    Some(Unreadable {
        id,
        method,
        error: answer,
        recorded: recorded(line),
    })
}

/// A message longer than the gateway reads (`limit` bytes): its `id`
/// is not read, so it is answered without one; the record says only how
/// long it was at least.
pub(crate) fn oversized(limit: usize) -> Unreadable {
    Unreadable {
        id: None,
        method: None,
        error: ErrorData::invalid_request(
            format!("Invalid request: a message longer than {limit} bytes is not read"),
            None,
        ),
        recorded: serde_json::json!({ "longer_than": limit }),
    }
}

/// See [`Unreadable::recorded`].
fn recorded(line: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(mut message)) => {
            message.remove("params").unwrap_or(Value::Object(message))
        }
        Ok(other) => other,
        Err(_) => serde_json::json!({
            "bytes": line.len(),
            "sha256": warden_core::digest::sha256_hex(line),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ErrorCode;

    fn answer(line: &str) -> Option<Unreadable> {
        let error = serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(line)
            .expect_err("a line rmcp refuses");
        classify(line.as_bytes(), &error)
    }

    #[test]
    fn a_line_that_is_not_json_is_a_parse_error_without_id() {
        let a = answer("{\"id\": 1, \"method\": ").expect("answered");
        assert_eq!(a.error.code, ErrorCode::PARSE_ERROR);
        assert!(a.id.is_none());
    }

    #[test]
    fn a_lone_surrogate_or_deep_nesting_in_arguments_is_answered_under_the_id() {
        let surrogate = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a","arguments":{"x":"\ud800"}}}"#;
        let a = answer(surrogate).expect("answered");
        assert_eq!(a.error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(a.id, Some(RequestId::Number(7)));
        assert_eq!(a.method.as_deref(), Some("tools/call"));
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{{"name":"a","arguments":{{"x":{}1{}}}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let a = answer(&deep).expect("answered");
        assert_eq!(a.error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(a.id, Some(RequestId::String("s".into())));
    }

    #[test]
    fn json_that_is_no_request_is_an_invalid_request_under_its_id() {
        let a = answer(r#"{"jsonrpc":"2.0","id":3,"method":5}"#).expect("answered");
        assert_eq!(a.error.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(a.id, Some(RequestId::Number(3)));
    }

    #[test]
    fn an_array_is_never_read_as_an_envelope() {
        let a = answer(r#"[7, "tools/call"]"#).expect("answered");
        assert_eq!(a.error.code, ErrorCode::INVALID_REQUEST);
        assert!(a.id.is_none() && a.method.is_none());
    }

    #[test]
    fn an_unreadable_line_is_recorded_by_size_and_digest_only() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a","arguments":{"password":"hunter2\ud800"}}}"#;
        let a = answer(line).expect("answered");
        assert!(
            !a.recorded.to_string().contains("hunter2"),
            "{}",
            a.recorded
        );
        assert_eq!(a.recorded["bytes"], line.len());
    }

    #[test]
    fn a_response_is_never_answered() {
        let line = r#"{"jsonrpc":"2.0","id":3,"result":{"x":"\ud800"}}"#;
        assert!(answer(line).is_none());
    }
}
