//! `anthropic:MODEL` against a loopback server speaking the Messages API:
//! requests checked field by field, tool_use / tool_result blocks, retries,
//! errors.

mod agent_support;

use std::time::Duration;

use agent_support::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden::agent::{
    AnthropicModel, HttpSettings, Limits, Message, Model, ModelError, ModelRequest, RunStatus,
    SYSTEM_PROMPT, ToolCall, model_from_spec, model_from_spec_with, run_task,
};

const KEY: &str = "sk-ant-test-0123456789";

fn env_for(url: &str) -> impl Fn(&str) -> Option<String> + use<> {
    let base = url.to_string();
    move |k: &str| match k {
        "ANTHROPIC_API_KEY" => Some(KEY.to_string()),
        "ANTHROPIC_BASE_URL" => Some(base.clone()),
        _ => None,
    }
}

fn model_for(server: &MockServer, http: HttpSettings) -> Box<dyn Model> {
    model_from_spec_with("anthropic:claude-test", &env_for(&server.url), http).unwrap()
}

fn simple_request() -> ModelRequest {
    ModelRequest {
        system: "sys".into(),
        messages: vec![Message::User { text: "hi".into() }],
        tools: vec![],
        max_tokens: None,
    }
}

fn text_response(text: &str) -> Value {
    json!({
        "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 30, "output_tokens": 8}
    })
}

fn tool_use_response() -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "text", "text": "I'll read the note and save it."},
            {"type": "tool_use", "id": "toolu_a", "name": "mcp__notes__read_note", "input": {"id": "a"}},
            {"type": "tool_use", "id": "toolu_b", "name": "mcp__fs__write_file",
             "input": {"path": "/etc/x", "content": "y"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 9}
    })
}

#[tokio::test]
async fn full_run_sends_exact_messages_requests() {
    let server = MockServer::start(vec![
        Canned::json(200, tool_use_response()),
        Canned::json(
            200,
            text_response("Note a: buy milk. The write was denied."),
        ),
    ])
    .await;
    let model = model_for(&server, fast_http());
    assert_eq!(model.name(), "anthropic:claude-test");
    let report = run_task(
        model.as_ref(),
        &NotesTools,
        "Read note a and save it to /etc/x",
        &Limits::default(),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(report.status, RunStatus::Completed, "{report:?}");
    assert_eq!(
        report.final_text.as_deref(),
        Some("Note a: buy milk. The write was denied.")
    );
    assert_eq!(
        (report.usage.input_tokens, report.usage.output_tokens),
        (42, 17)
    );
    assert_eq!(report.turns, 2);
    assert_eq!(report.denied_calls, 1);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.header("x-api-key"), Some(KEY));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(r.header("authorization"), None);
        assert!(
            r.header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
        assert_eq!(
            keys(&r.body),
            ["max_tokens", "messages", "model", "system", "tools"]
        );
        assert_eq!(r.body["model"], "claude-test");
        assert_eq!(r.body["max_tokens"], 4096);
        assert_eq!(r.body["system"], SYSTEM_PROMPT);
        assert_eq!(
            r.body["tools"],
            json!([
                {"name": "mcp__notes__read_note", "description": "Read a note by id",
                 "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
                {"name": "mcp__fs__write_file", "description": "Write a file",
                 "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}
            ])
        );
    }
    assert_eq!(
        reqs[0].body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Read note a and save it to /etc/x"}]}])
    );

    let second = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(
        second.len(),
        3,
        "user, assistant, one user message with both results"
    );
    assert_eq!(second[0], reqs[0].body["messages"][0]);
    assert_eq!(
        second[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "I'll read the note and save it."},
            {"type": "tool_use", "id": "toolu_a", "name": "mcp__notes__read_note", "input": {"id": "a"}},
            {"type": "tool_use", "id": "toolu_b", "name": "mcp__fs__write_file",
             "input": {"path": "/etc/x", "content": "y"}}
        ]})
    );
    assert_eq!(second[2]["role"], "user");
    let results = second[2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results[0],
        json!({"type": "tool_result", "tool_use_id": "toolu_a", "is_error": false,
               "content": "<tool_result name=\"mcp__notes__read_note\" status=\"ok\">\nnote a: buy milk\n</tool_result>"})
    );
    assert_eq!(
        keys(&results[1]),
        ["content", "is_error", "tool_use_id", "type"]
    );
    assert_eq!(results[1]["tool_use_id"], "toolu_b");
    assert_eq!(results[1]["is_error"], true);
    let denied = results[1]["content"].as_str().unwrap();
    assert!(
        denied.contains("status=\"denied\"") && denied.contains("stage: rules"),
        "{denied}"
    );
}

#[tokio::test]
async fn a_user_turn_after_tool_results_joins_their_message() {
    let m = AnthropicModel::new("claude-test", KEY.into(), "http://127.0.0.1:9", fast_http())
        .unwrap()
        .with_max_tokens(100);
    let call = ToolCall {
        id: "t1".into(),
        name: "x".into(),
        arguments: json!({}),
    };
    let body = m.request_body(&ModelRequest {
        system: String::new(),
        messages: vec![
            Message::User { text: "a".into() },
            Message::Assistant {
                text: None,
                tool_calls: vec![call],
            },
            Message::Tool {
                call_id: "t1".into(),
                name: "x".into(),
                content: "r".into(),
                is_error: false,
            },
            Message::User { text: "b".into() },
        ],
        tools: vec![],
        max_tokens: None,
    });
    assert_eq!(keys(&body), ["max_tokens", "messages", "model"]);
    assert_eq!(body["max_tokens"], 100);
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(
        msgs[1],
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]})
    );
    assert_eq!(
        msgs[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "r", "is_error": false},
            {"type": "text", "text": "b"}
        ]})
    );
}

#[tokio::test]
async fn retry_after_on_429_is_honoured() {
    let server = MockServer::start(vec![
        Canned::json(
            429,
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"}}),
        )
        .with_header("retry-after", "1"),
        Canned::json(200, text_response("ok")),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let turn = model.complete(&simple_request()).await.unwrap();
    assert_eq!(turn.text.as_deref(), Some("ok"));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    assert!(gap >= Duration::from_millis(900), "gap {gap:?}");
}

#[tokio::test]
async fn overloaded_and_500_are_retried_then_succeed() {
    let server = MockServer::start(vec![
        Canned::json(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        Canned::json(500, json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})),
        Canned::json(200, text_response("done")),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let turn = model.complete(&simple_request()).await.unwrap();
    assert_eq!(turn.text.as_deref(), Some("done"));
    assert_eq!(turn.usage.input_tokens, 30);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn exhausted_retries_report_the_api_message() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let server = MockServer::start(vec![
        Canned::json(529, overloaded.clone()),
        Canned::json(529, overloaded.clone()),
        Canned::json(529, overloaded),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let e = model.complete(&simple_request()).await.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ModelError::Api { status: 529, .. }), "{e:?}");
    assert!(text.contains("overloaded_error: Overloaded"), "{text}");
    assert!(text.contains("gave up after 3 attempts"), "{text}");
}

#[tokio::test]
async fn malformed_json_is_a_clear_error() {
    let server = MockServer::start(vec![
        Canned::raw(200, "<html>Bad gateway</html>"),
        Canned::json(
            200,
            json!({"type": "message", "content": [{"type": "tool_use", "name": "x", "input": {}}]}),
        ),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let e = model.complete(&simple_request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Malformed(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("anthropic") && text.contains("not valid JSON"),
        "{text}"
    );
    assert!(text.contains("<html>Bad gateway</html>"), "{text}");
    let e = model
        .complete(&simple_request())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("content[0] (tool_use 'x') has no 'id'"), "{e}");
}

#[tokio::test]
async fn missing_key_names_the_variable() {
    let only_url = |k: &str| (k == "ANTHROPIC_BASE_URL").then(|| "http://127.0.0.1:9".to_string());
    let err = model_from_spec("anthropic:claude-x", &only_url)
        .err()
        .unwrap();
    assert!(matches!(
        err,
        ModelError::MissingKey {
            var: "ANTHROPIC_API_KEY",
            ..
        }
    ));
    assert!(err.to_string().contains("set ANTHROPIC_API_KEY"), "{err}");
}

#[tokio::test]
async fn unknown_model_and_bad_key() {
    let server = MockServer::start(vec![
        Canned::json(404, json!({"type": "error", "error": {"type": "not_found_error", "message": "model: claude-test"}})),
        Canned::json(401, json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let e = model.complete(&simple_request()).await.unwrap_err();
    assert!(matches!(e, ModelError::UnknownModel { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("not_found_error: model: claude-test"),
        "{e}"
    );
    let e = model.complete(&simple_request()).await.unwrap_err();
    assert!(
        matches!(e, ModelError::Unauthorized { status: 401, .. }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("ANTHROPIC_API_KEY") && !text.contains(KEY),
        "{text}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn the_key_never_shows_in_debug() {
    let m = AnthropicModel::new("c", KEY.into(), "http://127.0.0.1:9", fast_http()).unwrap();
    assert!(!format!("{m:?}").contains(KEY));
}

/// The model endpoint answering with a redirect to another origin: reqwest
/// followed it, keeping the `x-api-key` header (it strips only
/// `Authorization` and cookies) and, for a 307, the whole conversation. A
/// redirect is now followed only on the same origin; another one is an
/// error and the other origin sees nothing.
#[tokio::test]
async fn a_redirect_to_another_origin_gets_neither_the_key_nor_the_conversation() {
    let elsewhere = MockServer::start(vec![Canned::json(200, text_response("stolen"))]).await;
    let server = MockServer::start(vec![
        Canned::raw(307, "").with_header("location", &format!("{}/v1/messages", elsewhere.url)),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let turn = model.complete(&simple_request()).await;
    assert!(
        elsewhere.requests().is_empty(),
        "the other origin received: {:?}",
        elsewhere
            .requests()
            .iter()
            .map(|r| r.header("x-api-key").map(str::to_string))
            .collect::<Vec<_>>()
    );
    assert!(turn.is_err(), "{turn:?}");

    // The same origin may still redirect (a moved path).
    let server = MockServer::start(vec![
        Canned::raw(307, "").with_header("location", "/v2/messages"),
        Canned::json(200, text_response("moved")),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let turn = model.complete(&simple_request()).await;
    assert!(turn.is_ok(), "{turn:?}");
    assert_eq!(server.requests().len(), 2);
}
