//! A model turn cut at the output-token limit (Anthropic `stop_reason:
//! max_tokens`, OpenAI `finish_reason: length`), against loopback servers
//! speaking each wire format. Such a turn's tool calls may carry cut
//! arguments (the Messages API hands back a `tool_use` whose `input` was
//! cut; here a path cut to its parent folder), and its text is no finished
//! answer: the calls must not run and the run must not end as completed.

mod agent_support;

use agent_support::*;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden::agent::{
    Limits, Model, RunStatus, ToolCall, ToolExecutor, ToolOutcome, ToolSpec, model_from_spec_with,
    run_task,
};

fn anthropic(server: &MockServer) -> Box<dyn Model> {
    let base = server.url.clone();
    let env = move |k: &str| match k {
        "ANTHROPIC_API_KEY" => Some("sk-ant-test-0123456789".to_string()),
        "ANTHROPIC_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    model_from_spec_with("anthropic:claude-test", &env, fast_http()).expect("model")
}

fn openai(server: &MockServer) -> Box<dyn Model> {
    let base = format!("{}/v1", server.url);
    let env = move |k: &str| match k {
        "OPENAI_API_KEY" => Some("sk-test-0123456789".to_string()),
        "OPENAI_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    model_from_spec_with("openai:gpt-test", &env, fast_http()).expect("model")
}

fn anthropic_turn(content: Value, stop: &str) -> Canned {
    Canned::json(
        200,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 4096}
        }),
    )
}

fn openai_turn(message: Value, finish: &str) -> Canned {
    Canned::json(
        200,
        json!({
            "id": "c1", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 4096}
        }),
    )
}

/// The cut call was not run (the executor's record would carry its
/// arguments), and the run failed as the model's fault.
fn assert_cut(report: &warden::agent::RunReport, calls: usize) {
    match &report.status {
        RunStatus::ModelError(e) => assert!(e.contains("output-token limit"), "{e}"),
        other => panic!("a cut turn must fail the run, got {other:?}: {report:?}"),
    }
    assert_eq!(report.exit_code(false), 1);
    assert_eq!(report.calls.len(), calls, "{:?}", report.calls);
    for call in &report.calls {
        assert_eq!(call["outcome"], "skipped", "{call}");
        assert!(call.get("arguments").is_none(), "ran: {call}");
    }
}

async fn run(model: &dyn Model) -> warden::agent::RunReport {
    run_task(
        model,
        &NotesTools,
        "read note a",
        &Limits::default(),
        CancellationToken::new(),
    )
    .await
}

#[tokio::test]
async fn anthropic_a_tool_use_cut_at_max_tokens_is_not_run() {
    let cut_call = json!([
        {"type": "text", "text": "Reading"},
        {"type": "tool_use", "id": "toolu_a", "name": "mcp__notes__read_note", "input": {"id": "a"}}
    ]);
    let server = MockServer::start(vec![
        anthropic_turn(cut_call, "max_tokens"),
        anthropic_turn(json!([{"type": "text", "text": "done"}]), "end_turn"),
    ])
    .await;
    let report = run(anthropic(&server).as_ref()).await;
    assert_cut(&report, 1);
    assert_eq!(server.requests().len(), 1, "no turn after the cut one");
}

#[tokio::test]
async fn anthropic_an_answer_cut_at_max_tokens_is_no_completed_run() {
    let server = MockServer::start(vec![anthropic_turn(
        json!([{"type": "text", "text": "The deploy is safe becau"}]),
        "max_tokens",
    )])
    .await;
    let report = run(anthropic(&server).as_ref()).await;
    assert_cut(&report, 0);
    // What it wrote is still there to read.
    assert_eq!(
        report.final_text.as_deref(),
        Some("The deploy is safe becau")
    );
}

#[tokio::test]
async fn openai_tool_calls_cut_at_length_are_not_run() {
    let cut_call = json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "mcp__notes__read_note", "arguments": "{\"id\": \"a\"}"}}
    ]});
    let server = MockServer::start(vec![
        openai_turn(cut_call, "length"),
        openai_turn(json!({"role": "assistant", "content": "done"}), "stop"),
    ])
    .await;
    let report = run(openai(&server).as_ref()).await;
    assert_cut(&report, 1);
    assert_eq!(server.requests().len(), 1, "no turn after the cut one");
}

#[tokio::test]
async fn openai_an_answer_cut_at_length_is_no_completed_run() {
    let server = MockServer::start(vec![openai_turn(
        json!({"role": "assistant", "content": "All tests pa"}),
        "length",
    )])
    .await;
    let report = run(openai(&server).as_ref()).await;
    assert_cut(&report, 0);
}

/// `stop_reason` is not trusted the other way either: a turn that says
/// `end_turn` but carries a call still has that call decided and run.
#[tokio::test]
async fn a_stop_reason_that_lies_about_calls_changes_nothing() {
    let call = json!([
        {"type": "tool_use", "id": "toolu_a", "name": "mcp__notes__read_note", "input": {"id": "a"}}
    ]);
    let server = MockServer::start(vec![
        anthropic_turn(call, "end_turn"),
        anthropic_turn(json!([{"type": "text", "text": "done"}]), "tool_use"),
    ])
    .await;
    let report = run(anthropic(&server).as_ref()).await;
    assert_eq!(report.status, RunStatus::Completed, "{report:?}");
    assert_eq!(report.calls.len(), 1);
    assert_eq!(report.calls[0]["arguments"], json!({"id": "a"}));
}

/// What the executor was told of calls it never ran: the host records
/// each in the audit log as `skipped`.
struct Recording {
    skipped: std::sync::Mutex<Vec<(String, String)>>,
}

impl ToolExecutor for Recording {
    fn tools(&self) -> Vec<ToolSpec> {
        NotesTools.tools()
    }
    fn execute<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolOutcome> {
        NotesTools.execute(call)
    }
    fn record_skipped(&self, call: &ToolCall, reason: &str) {
        self.skipped
            .lock()
            .unwrap()
            .push((call.name.clone(), reason.to_string()));
    }
}

#[tokio::test]
async fn the_calls_of_a_cut_turn_are_handed_over_to_be_recorded() {
    let cut_call = json!([
        {"type": "tool_use", "id": "toolu_a", "name": "mcp__notes__read_note", "input": {"id": "a"}},
        {"type": "tool_use", "id": "toolu_b", "name": "mcp__fs__write_file", "input": {"path": "/x"}}
    ]);
    let server = MockServer::start(vec![anthropic_turn(cut_call, "max_tokens")]).await;
    let tools = Recording {
        skipped: std::sync::Mutex::default(),
    };
    let report = run_task(
        anthropic(&server).as_ref(),
        &tools,
        "read note a",
        &Limits::default(),
        CancellationToken::new(),
    )
    .await;
    assert_cut(&report, 2);
    let skipped = tools.skipped.lock().unwrap().clone();
    let names: Vec<&str> = skipped.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["mcp__notes__read_note", "mcp__fs__write_file"]);
    assert!(
        skipped
            .iter()
            .all(|(_, why)| why.contains("output-token limit")),
        "{skipped:?}"
    );
}
