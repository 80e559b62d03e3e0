//! `openai:MODEL` against a loopback server speaking Chat Completions:
//! requests checked field by field, tool calls and results, retries,
//! errors.

mod agent_support;

use std::time::Duration;

use agent_support::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden::agent::{
    HttpSettings, Limits, Model, ModelError, ModelRequest, OpenAiModel, RunStatus, SYSTEM_PROMPT,
    model_from_spec, model_from_spec_with, run_task,
};

const KEY: &str = "sk-test-0123456789";

fn env_for(url: &str) -> impl Fn(&str) -> Option<String> + use<> {
    let base = format!("{url}/v1");
    move |k: &str| match k {
        "OPENAI_API_KEY" => Some(KEY.to_string()),
        "OPENAI_BASE_URL" => Some(base.clone()),
        _ => None,
    }
}

fn model_for(server: &MockServer, http: HttpSettings) -> Box<dyn Model> {
    model_from_spec_with("openai:gpt-test", &env_for(&server.url), http).unwrap()
}

fn simple_request() -> ModelRequest {
    ModelRequest {
        system: "sys".into(),
        messages: vec![warden::agent::Message::User { text: "hi".into() }],
        tools: vec![],
        max_tokens: None,
    }
}

fn text_response(text: &str) -> Value {
    json!({
        "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}
    })
}

fn tool_call_response() -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "mcp__notes__read_note", "arguments": "{\"id\":\"a\"}"}},
            {"id": "call_b", "type": "function",
             "function": {"name": "mcp__fs__write_file", "arguments": "{\"path\":\"/etc/x\",\"content\":\"y\"}"}}
        ]}, "logprobs": null, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
    })
}

#[tokio::test]
async fn full_run_sends_exact_chat_completions_requests() {
    let server = MockServer::start(vec![
        Canned::json(200, tool_call_response()),
        Canned::json(
            200,
            text_response("Note a says: buy milk. Writing was denied."),
        ),
    ])
    .await;
    let model = model_for(&server, fast_http());
    assert_eq!(model.name(), "openai:gpt-test");
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
        Some("Note a says: buy milk. Writing was denied.")
    );
    assert_eq!(
        (report.usage.input_tokens, report.usage.output_tokens),
        (31, 10)
    );
    assert_eq!(report.turns, 2);
    assert_eq!(report.calls.len(), 2);
    assert_eq!(report.denied_calls, 1);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert!(
            r.header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
        assert_eq!(keys(&r.body), ["messages", "model", "tools"]);
        assert_eq!(r.body["model"], "gpt-test");
        assert_eq!(
            r.body["tools"],
            json!([
                {"type": "function", "function": {"name": "mcp__notes__read_note",
                  "description": "Read a note by id",
                  "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}},
                {"type": "function", "function": {"name": "mcp__fs__write_file",
                  "description": "Write a file",
                  "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}
            ])
        );
    }
    let first = reqs[0].body["messages"].as_array().unwrap();
    assert_eq!(
        first,
        &vec![
            json!({"role": "system", "content": SYSTEM_PROMPT}),
            json!({"role": "user", "content": "Read note a and save it to /etc/x"}),
        ]
    );

    let second = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(second.len(), 5);
    assert_eq!(&second[..2], first.as_slice());
    let assistant = &second[2];
    assert_eq!(keys(assistant), ["content", "role", "tool_calls"]);
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], Value::Null);
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["id"], "call_a");
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "mcp__notes__read_note");
    // arguments travel as a JSON *string*
    let args = calls[0]["function"]["arguments"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(args).unwrap(),
        json!({"id": "a"})
    );
    assert_eq!(calls[1]["id"], "call_b");

    assert_eq!(keys(&second[3]), ["content", "role", "tool_call_id"]);
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_a");
    assert_eq!(
        second[3]["content"],
        "<tool_result name=\"mcp__notes__read_note\" status=\"ok\">\nnote a: buy milk\n</tool_result>"
    );
    assert_eq!(second[4]["tool_call_id"], "call_b");
    let denied = second[4]["content"].as_str().unwrap();
    assert!(
        denied.starts_with("<tool_result name=\"mcp__fs__write_file\" status=\"denied\">"),
        "{denied}"
    );
    assert!(denied.contains("stage: rules"), "{denied}");
}

#[tokio::test]
async fn retry_after_on_429_is_honoured() {
    let server = MockServer::start(vec![
        Canned::json(
            429,
            json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
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
    // the backoff alone would be ~10 ms: the gap proves Retry-After was used
    let gap = reqs[1].at - reqs[0].at;
    assert!(gap >= Duration::from_millis(900), "gap {gap:?}");
    assert_eq!(reqs[1].body, reqs[0].body);
}

#[tokio::test]
async fn retry_after_is_capped() {
    let server = MockServer::start(vec![
        Canned::json(429, json!({"error": {"message": "slow down"}}))
            .with_header("retry-after", "3600"),
        Canned::json(200, text_response("ok")),
    ])
    .await;
    let http = HttpSettings {
        max_retry_after: Duration::from_millis(100),
        ..fast_http()
    };
    let model = model_for(&server, http);
    let started = std::time::Instant::now();
    let turn = model.complete(&simple_request()).await.unwrap();
    assert_eq!(turn.text.as_deref(), Some("ok"));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn server_errors_are_retried_then_succeed() {
    let server = MockServer::start(vec![
        Canned::raw(500, "internal error"),
        Canned::json(503, json!({"error": {"message": "overloaded"}})),
        Canned::json(200, text_response("finally")),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let turn = model.complete(&simple_request()).await.unwrap();
    assert_eq!(turn.text.as_deref(), Some("finally"));
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn request_timeout_and_conflict_answers_are_retried() {
    let server = MockServer::start(vec![
        Canned::json(408, json!({"error": {"message": "request timeout"}})),
        Canned::json(409, json!({"error": {"message": "conflict"}})),
        Canned::json(200, text_response("ok")),
    ])
    .await;
    let model = model_for(&server, fast_http());
    assert_eq!(
        model
            .complete(&simple_request())
            .await
            .unwrap()
            .text
            .as_deref(),
        Some("ok")
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn gives_up_after_max_attempts() {
    let server = MockServer::start(vec![
        Canned::raw(500, "boom 1"),
        Canned::raw(502, "boom 2"),
        Canned::json(
            500,
            json!({"error": {"message": "still broken", "type": "server_error"}}),
        ),
        Canned::json(200, text_response("too late")),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let err = model.complete(&simple_request()).await.unwrap_err();
    assert_eq!(server.requests().len(), 3);
    match &err {
        ModelError::Api { status, message } => {
            assert_eq!(*status, 500);
            assert!(message.contains("still broken"), "{message}");
            assert!(message.contains("gave up after 3 attempts"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn malformed_json_is_a_clear_error_without_the_key() {
    let body = format!("{{\"choices\": [{{\"message\": \"{KEY}\" oops");
    let server = MockServer::start(vec![Canned::raw(200, &body)]).await;
    let model = model_for(&server, fast_http());
    let err = model.complete(&simple_request()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ModelError::Malformed(_)), "{err:?}");
    assert!(text.contains("not valid JSON"), "{text}");
    assert!(text.contains("body starts"), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    assert!(!text.contains(KEY), "{text}");
    assert_eq!(server.requests().len(), 1, "a malformed 200 is not retried");
}

#[tokio::test]
async fn wrong_shape_and_bad_arguments_are_named() {
    let server = MockServer::start(vec![
        Canned::json(200, json!({"id": "x", "object": "chat.completion"})),
        Canned::json(200, json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c", "type": "function",
                            "function": {"name": "mcp__notes__read_note", "arguments": "{\"id\": "}}]}}]})),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let e1 = model
        .complete(&simple_request())
        .await
        .unwrap_err()
        .to_string();
    assert!(e1.contains("no 'choices' array"), "{e1}");
    assert!(
        e1.contains("chat.completion"),
        "excerpt of the response: {e1}"
    );
    let e2 = model
        .complete(&simple_request())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e2.contains("tool_calls[0].function.arguments") && e2.contains("mcp__notes__read_note"),
        "{e2}"
    );
}

#[tokio::test]
async fn missing_key_names_the_variable() {
    let err = model_from_spec("openai:gpt-4o", &|_| None).err().unwrap();
    assert!(matches!(
        err,
        ModelError::MissingKey {
            var: "OPENAI_API_KEY",
            ..
        }
    ));
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
    let blank = |k: &str| (k == "OPENAI_API_KEY").then(|| "  ".to_string());
    assert!(matches!(
        model_from_spec("openai:gpt-4o", &blank).err().unwrap(),
        ModelError::MissingKey { .. }
    ));
    let err = model_from_spec("openai:", &|_| Some("k".into()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("openai:MODEL"), "{err}");
    let err = model_from_spec("gemini:x", &|_| None).err().unwrap();
    assert!(
        err.to_string().contains("unknown model provider 'gemini'"),
        "{err}"
    );
    let bad_url = |k: &str| match k {
        "OPENAI_API_KEY" => Some("k".to_string()),
        _ => Some("ftp://nope".to_string()),
    };
    let err = model_from_spec("openai:x", &bad_url).err().unwrap();
    assert!(err.to_string().contains("OPENAI_BASE_URL"), "{err}");
}

#[tokio::test]
async fn unauthorized_and_unknown_model_are_not_retried() {
    let server = MockServer::start(vec![
        Canned::json(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ),
        Canned::json(
            404,
            json!({"error": {"message": "The model `gpt-test` does not exist", "type": "invalid_request_error", "code": "model_not_found"}}),
        ),
    ])
    .await;
    let model = model_for(&server, fast_http());
    let e = model.complete(&simple_request()).await.unwrap_err();
    assert!(
        matches!(e, ModelError::Unauthorized { status: 401, .. }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("OPENAI_API_KEY") && !text.contains(KEY),
        "{text}"
    );
    let e = model.complete(&simple_request()).await.unwrap_err();
    assert!(matches!(e, ModelError::UnknownModel { .. }), "{e:?}");
    assert!(e.to_string().contains("'gpt-test' not found"), "{e}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn request_timeout_is_enforced() {
    let server = MockServer::start(vec![
        Canned::json(200, text_response("late")).delayed(Duration::from_secs(30)),
        Canned::json(200, text_response("late")).delayed(Duration::from_secs(30)),
    ])
    .await;
    let http = HttpSettings {
        timeout: Duration::from_millis(200),
        max_attempts: 2,
        ..fast_http()
    };
    let model = model_for(&server, http);
    let started = std::time::Instant::now();
    let e = model.complete(&simple_request()).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(matches!(e, ModelError::Http(_)), "{e:?}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(e.to_string().contains("2 attempt"), "{e}");
}

#[tokio::test]
async fn the_key_never_shows_in_debug() {
    let m = OpenAiModel::new("gpt-test", KEY.into(), "http://127.0.0.1:9/v1", fast_http()).unwrap();
    let dbg = format!("{m:?}");
    assert!(!dbg.contains(KEY), "{dbg}");
    assert!(dbg.contains("redacted"), "{dbg}");
}

#[tokio::test]
async fn an_unreachable_server_is_a_clear_error() {
    // A port bound but never listened on: a connection is refused, and no
    // other test's server can take the port while this test runs (a
    // listener bound and dropped would free it for one).
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockType, SockaddrIn, bind, getsockname, socket,
    };
    use std::os::fd::AsRawFd;
    let reserved = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .expect("socket");
    bind(reserved.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).expect("bind");
    let port = getsockname::<SockaddrIn>(reserved.as_raw_fd())
        .expect("getsockname")
        .port();
    let env = |k: &str| match k {
        "OPENAI_API_KEY" => Some(KEY.to_string()),
        "OPENAI_BASE_URL" => Some(format!("http://127.0.0.1:{port}/v1")),
        _ => None,
    };
    let model = model_from_spec_with("openai:gpt-test", &env, fast_http()).unwrap();
    let e = model.complete(&simple_request()).await.unwrap_err();
    assert!(matches!(e, ModelError::Http(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("/v1/chat/completions") && text.contains("after 3 attempt(s)"),
        "{text}"
    );
    assert!(!text.contains(KEY));
    drop(reserved);
}
