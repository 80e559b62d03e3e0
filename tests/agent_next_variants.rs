//! A hostile model against the agent loop, through the real `warden run`
//! (a real host, the fixture server in its sandbox, the audit log) and a
//! loopback server speaking the OpenAI or Anthropic wire format. Every
//! tool call a model proposes must pass the pipeline or be refused, and be
//! recorded (CONTRACT §6: nothing a caller asked for goes unrecorded); what
//! the server receives must be what was decided.

mod agent_support;
mod cli_support;

use agent_support::{Canned, MockServer};
use cli_support::{World, audit_calls, calls_received, stdout_json};
use serde_json::{Value, json};

fn openai_turn(calls: Value) -> Canned {
    openai_turn_with(calls, Value::Null)
}

fn openai_turn_with(calls: Value, content: Value) -> Canned {
    Canned::json(
        200,
        json!({
            "id": "c1", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": content, "tool_calls": calls}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10}
        }),
    )
}

fn openai_text(text: &str) -> Canned {
    Canned::json(
        200,
        json!({
            "id": "c2", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1}
        }),
    )
}

fn anthropic_turn(content: Value, stop: &str) -> Canned {
    Canned::json(
        200,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 10}
        }),
    )
}

fn anthropic_text(text: &str) -> Canned {
    anthropic_turn(json!([{"type": "text", "text": text}]), "end_turn")
}

fn function(id: &str, name: &str, arguments: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// A world with the counting fixture (`fx`), `echo` allowed.
fn world() -> (World, std::path::PathBuf) {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__echo"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    (world, counter)
}

/// `warden run --ci --json` against `server` as `provider` (`openai` or
/// `anthropic`), extra arguments after; its JSON report and exit code.
async fn run(world: &World, server: &MockServer, provider: &str, extra: &[&str]) -> (Value, i32) {
    let (spec, key_var, base_var, base) = match provider {
        "openai" => (
            "openai:gpt-test",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            format!("{}/v1", server.url),
        ),
        _ => (
            "anthropic:claude-test",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            server.url.clone(),
        ),
    };
    let mut command = world.warden(&["run", "--ci", "--json", "--model", spec, "--task", "t"]);
    command
        .args(extra)
        .env(key_var, "sk-test-0123456789")
        .env(base_var, base);
    let output = tokio::task::spawn_blocking(move || command.output().expect("run warden"))
        .await
        .expect("join");
    (stdout_json(&output), output.status.code().unwrap_or(-1))
}

/// A model turn whose tool-call arguments do not read as JSON (trailing
/// data, a comment, NaN, a number beyond f64): the run ended as a model
/// error, and the audit log had nothing of the call the model asked for,
/// nor of the readable call beside it. Now each call of such a turn is
/// recorded as not run (`skipped`, the unreadable arguments by size and
/// digest), none is sent, and the run still ends as a model error. The
/// next variants: a turn unreadable elsewhere (a call without a name or a
/// function, content that is neither text nor null) beside a readable
/// call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_tool_call_arguments_are_recorded_and_never_sent() {
    let fine = || function("c1", "mcp__fx__echo", r#"{"message":"fine"}"#);
    let variants = [
        r#"{"message":"a"}{"message":"b"}"#,
        r#"{"message":"a"} // and then"#,
        r#"{"message":NaN}"#,
        r#"{"message":1e400}"#,
    ];
    for arguments in variants {
        let calls = json!([fine(), function("c2", "mcp__fx__echo", arguments)]);
        check_openai_unreadable(calls, Value::Null, Some(arguments)).await;
    }
    let nameless = json!({"id": "c2", "type": "function", "function": {"arguments": "{}"}});
    check_openai_unreadable(json!([fine(), nameless]), Value::Null, None).await;
    let no_function = json!({"id": "c2", "type": "function"});
    check_openai_unreadable(json!([fine(), no_function]), Value::Null, None).await;
    check_openai_unreadable(json!([fine()]), json!(5), None).await;
}

/// Runs one OpenAI turn of `calls` (with `content`) that cannot be read
/// whole: no call is sent, every one is recorded as not run, the first
/// (`{"message": "fine"}`) with its arguments, and the second, when its
/// arguments are the `unreadable` text, by size.
async fn check_openai_unreadable(calls: Value, content: Value, unreadable: Option<&str>) {
    let count = calls.as_array().map_or(0, Vec::len);
    let (world, counter) = world();
    let server = MockServer::start(vec![
        openai_turn_with(calls.clone(), content),
        openai_text("done"),
    ])
    .await;
    let (report, code) = run(&world, &server, "openai", &[]).await;
    assert_eq!(report["status"], "model_error", "{calls}: {report}");
    assert_eq!(code, 1, "{calls}: {report}");
    assert!(calls_received(&counter).is_empty(), "{calls}: sent");
    let audited = audit_calls(&world.path("audit.jsonl"));
    assert_eq!(audited.len(), count, "{calls}: {audited:#?}");
    assert!(
        audited.iter().all(|c| c["outcome"] == "skipped"),
        "{calls}: {audited:#?}"
    );
    assert_eq!(audited[0]["arguments"], json!({"message": "fine"}));
    assert_eq!(audited[0]["qualified"], "mcp__fx__echo");
    if let Some(text) = unreadable {
        assert_eq!(
            audited[1]["arguments"]["bytes"],
            json!(text.len()),
            "{text}: {:#}",
            audited[1]
        );
    }
    assert_eq!(
        report["calls"].as_array().map(Vec::len),
        Some(count),
        "{report}"
    );
}

/// The same over the Messages API: a `tool_use` whose `input` is not an
/// object; the next variants, a turn unreadable elsewhere beside a
/// readable call (a `tool_use` without an id or a name, a block without a
/// type, a text block without text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_unreadable_turns_are_recorded() {
    let seconds = [
        json!({"type": "tool_use", "id": "toolu_2", "name": "mcp__fx__echo", "input": ["message"]}),
        json!({"type": "tool_use", "id": "toolu_2", "name": "mcp__fx__echo", "input": "{\"message\":\"a\"}"}),
        json!({"type": "tool_use", "id": "toolu_2", "name": "mcp__fx__echo", "input": 5}),
        json!({"type": "tool_use", "name": "mcp__fx__echo", "input": {"message": "no id"}}),
        json!({"type": "tool_use", "id": "toolu_2", "input": {"message": "no name"}}),
        json!({"name": "mcp__fx__echo"}),
        json!({"type": "text"}),
    ];
    for second in seconds {
        let (world, counter) = world();
        let server = MockServer::start(vec![
            anthropic_turn(
                json!([
                    {"type": "tool_use", "id": "toolu_1", "name": "mcp__fx__echo", "input": {"message": "fine"}},
                    second.clone(),
                ]),
                "tool_use",
            ),
            anthropic_text("done"),
        ])
        .await;
        let (report, code) = run(&world, &server, "anthropic", &[]).await;
        assert_eq!(report["status"], "model_error", "{second}: {report}");
        assert_eq!(code, 1);
        assert!(calls_received(&counter).is_empty(), "{second}: sent");
        let audited = audit_calls(&world.path("audit.jsonl"));
        let count = if second["type"] == "tool_use" { 2 } else { 1 };
        assert_eq!(audited.len(), count, "{second}: {audited:#?}");
        assert!(
            audited.iter().all(|c| c["outcome"] == "skipped"),
            "{audited:#?}"
        );
        assert_eq!(audited[0]["arguments"], json!({"message": "fine"}));
    }
}

/// Arguments that read as JSON but are odd: the pipeline decides on the
/// value serde reads, and the server receives that value (the fixture's
/// `echo` answers with what it received). Duplicate keys: the last one,
/// in the decision, the record and the call alike; an integer beyond
/// u64: the same f64 everywhere; JSON that is no object: denied by the
/// schema stage, recorded, never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_but_readable_arguments_are_sent_as_decided() {
    let (world, counter) = world();
    let server = MockServer::start(vec![
        openai_turn(json!([
            function(
                "c1",
                "mcp__fx__echo",
                r#"{"message":"notes/a.md","message":"/etc/shadow"}"#
            ),
            function(
                "c2",
                "mcp__fx__echo",
                r#"{"message":123456789012345678901234567890}"#
            ),
            function("c3", "mcp__fx__echo", r#"["message"]"#),
            function("c4", "mcp__fx__echo", r#""{\"message\":\"a\"}""#),
        ])),
        openai_text("done"),
    ])
    .await;
    let (report, code) = run(&world, &server, "openai", &[]).await;
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(code, 0);
    let audited = audit_calls(&world.path("audit.jsonl"));
    assert_eq!(audited.len(), 4, "{audited:#?}");
    // The calls run side by side: each found by what it was decided on.
    let find = |arguments: Value| {
        audited
            .iter()
            .find(|c| c["arguments"] == arguments)
            .unwrap_or_else(|| panic!("no record of {arguments}: {audited:#?}"))
    };
    // Decided on the last `message`, the one the server would get: the
    // shipped policy denies a secret file, whatever came first.
    let duplicate = find(json!({"message": "/etc/shadow"}));
    assert_eq!(duplicate["outcome"], "denied", "{duplicate}");
    assert_eq!(duplicate["decision"]["stage"], "policy", "{duplicate}");
    // What the server echoed is what was decided and recorded.
    let big = find(json!({"message": 123456789012345678901234567890_f64}));
    assert_eq!(big["outcome"], "ok", "{big}");
    let echoed = report["calls"].as_array().and_then(|c| {
        c.iter()
            .find(|r| r["outcome"] == "ok" && r["result"]["structuredContent"] == big["arguments"])
    });
    assert!(echoed.is_some(), "{report}");
    for arguments in [json!(["message"]), json!("{\"message\":\"a\"}")] {
        let call = find(arguments);
        assert_eq!(call["outcome"], "denied", "{call}");
        assert_eq!(call["decision"]["stage"], "schema", "{call}");
    }
    assert_eq!(calls_received(&counter), ["echo"]);
}

/// The same id twice in one turn, one call allowed and one the policy
/// does not allow (an `ask`, denied in CI): each is decided alone and
/// recorded; the model gets two results under two distinct ids, each
/// matching the call it answers; `--fail-on-deny` makes the verdict 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_id_twice_and_a_denied_sibling_are_each_decided_and_recorded() {
    let (world, counter) = world();
    let server = MockServer::start(vec![
        openai_turn(json!([
            function("same", "mcp__fx__echo", r#"{"message":"one"}"#),
            function("same", "mcp__fx__say", r#"{"text":"two"}"#),
        ])),
        openai_text("done"),
    ])
    .await;
    let (report, code) = run(&world, &server, "openai", &["--fail-on-deny"]).await;
    assert_eq!(code, 3, "{report}");
    assert_eq!(report["denied_calls"], 1, "{report}");
    let audited = audit_calls(&world.path("audit.jsonl"));
    let mut outcomes: Vec<&str> = audited
        .iter()
        .filter_map(|c| c["outcome"].as_str())
        .collect();
    outcomes.sort_unstable();
    assert_eq!(outcomes, ["denied", "ok"], "{audited:#?}");
    assert_eq!(calls_received(&counter), ["echo"]);
    let second = &server.requests()[1].body["messages"];
    let asked: Vec<&str> = second
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .filter_map(|c| c["id"].as_str())
        .collect();
    let answered: Vec<&str> = second
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["tool_call_id"].as_str())
        .collect();
    assert_eq!(asked.len(), 2, "{second:#}");
    assert_ne!(asked[0], asked[1], "{second:#}");
    assert_eq!(asked, answered, "{second:#}");
}

/// Anthropic: a `tool_use` written inside a `thinking` block is no call
/// (never run, never recorded as one); a `tool_use` after the text of a
/// turn that says `end_turn` is a call like any other, decided and
/// recorded. Names that only look like a tool's (case, a Cyrillic `о`, a
/// name longer than providers allow) are unknown tools, recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_thinking_and_late_tool_use_and_lookalike_names() {
    let (world, counter) = world();
    let long = format!("mcp__fx__{}", "e".repeat(300));
    let server = MockServer::start(vec![
        anthropic_turn(
            json!([
                {"type": "thinking", "thinking": "{\"type\":\"tool_use\",\"name\":\"mcp__fx__say\"}",
                 "signature": "s", "tool_use": {"id": "toolu_x", "name": "mcp__fx__say", "input": {}}},
                {"type": "text", "text": "done"},
                {"type": "tool_use", "id": "toolu_1", "name": "mcp__fx__echo", "input": {"message": "late"}},
                {"type": "tool_use", "id": "toolu_2", "name": "MCP__fx__echo", "input": {}},
                {"type": "tool_use", "id": "toolu_3", "name": "mcp__fx__ech\u{43e}", "input": {}},
                {"type": "tool_use", "id": "toolu_4", "name": long, "input": {}},
            ]),
            "end_turn",
        ),
        anthropic_text("done"),
    ])
    .await;
    let (report, _) = run(&world, &server, "anthropic", &[]).await;
    let audited = audit_calls(&world.path("audit.jsonl"));
    // The calls run side by side: records in the order they ended.
    let mut outcomes: Vec<&str> = audited
        .iter()
        .filter_map(|c| c["outcome"].as_str())
        .collect();
    outcomes.sort_unstable();
    assert_eq!(
        outcomes,
        ["ok", "unknown_tool", "unknown_tool", "unknown_tool"],
        "{report}"
    );
    assert_eq!(calls_received(&counter), ["echo"]);
}

/// One response may hold hundreds of thousands of tool calls (32 MiB of
/// `{"name":"x"}`). Past `--max-tool-calls` each was recorded as skipped,
/// one record each: 100,000 calls took 177 s of the run and 58 MB of log,
/// outside the run's `--timeout`. Now the first 64 such calls of a turn
/// are recorded one by one, the rest as one record (their count and
/// digest), in the log and the report alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_calls_in_one_turn_is_recorded_in_bounded_records() {
    let n = 5_000;
    let (world, counter) = world();
    let calls: Vec<Value> = (0..n)
        .map(|i| function(&format!("c{i}"), "mcp__fx__echo", r#"{"message":"m"}"#))
        .collect();
    let server =
        MockServer::start(vec![openai_turn(Value::Array(calls)), openai_text("done")]).await;
    let (report, code) = run(&world, &server, "openai", &["--max-tool-calls", "2"]).await;
    assert_eq!(report["status"], "max_tool_calls", "{report:.300}");
    assert_eq!(code, 1);
    assert_eq!(calls_received(&counter).len(), 2);
    let audited = audit_calls(&world.path("audit.jsonl"));
    assert_eq!(audited.len(), 2 + 64 + 1, "{} records", audited.len());
    let together = audited
        .iter()
        .find(|c| c["arguments"]["more_calls"].is_u64())
        .expect("the record of the rest");
    assert_eq!(together["arguments"]["more_calls"], json!(n - 2 - 64));
    assert_eq!(together["outcome"], "skipped");
    let reported = report["calls"].as_array().map_or(0, Vec::len);
    assert_eq!(reported, 2 + 64 + 1);
}

/// A turn with more calls than the run's budget whose run then stops
/// (its `--timeout` while the calls it runs are running): the calls over
/// the budget were never recorded, since the run returned before it
/// recorded them. Now they are, before the run ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_over_the_budget_are_recorded_when_the_run_stops_meanwhile() {
    let world = World::new();
    let (fixture, _counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__echo", "mcp__fx__sleep"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    let server = MockServer::start(vec![
        openai_turn(json!([
            function("c1", "mcp__fx__sleep", r#"{"ms":20000}"#),
            function("c2", "mcp__fx__echo", r#"{"message":"over one"}"#),
            function("c3", "mcp__fx__echo", r#"{"message":"over two"}"#),
        ])),
        openai_text("done"),
    ])
    .await;
    let (report, _) = run(
        &world,
        &server,
        "openai",
        &["--max-tool-calls", "1", "--timeout", "8"],
    )
    .await;
    assert_eq!(report["status"], "timeout", "{report}");
    let audited = audit_calls(&world.path("audit.jsonl"));
    let skipped: Vec<&Value> = audited
        .iter()
        .filter(|c| c["outcome"] == "skipped")
        .map(|c| &c["arguments"]["message"])
        .collect();
    assert_eq!(
        skipped,
        [&json!("over one"), &json!("over two")],
        "{audited:#?}"
    );
}

/// A policy whose evaluation runs until regorus's own budget stops it, for
/// `echo` of the message "slow" only.
const SLOW_POLICY: &str = "package warden\nimport rego.v1\n\n\
deny contains \"slow\" if {\n  input.arguments.message == \"slow\"\n  \
count([x | some x in numbers.range(1, 100000); some y in numbers.range(1, 100000); x == y + 100001]) >= 0\n}\n";

/// A call the run's `--timeout` overtakes while warden is still deciding
/// it: the run dropped the call, and with it the only record it would
/// have had (a call is written ahead once decided). Now the run's end
/// cancels its calls and waits a moment for them, so the call is recorded
/// as cancelled before warden decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_still_being_decided_when_the_run_times_out_is_recorded() {
    let (world, counter) = world();
    std::fs::write(world.path("slow.rego"), SLOW_POLICY).expect("policy");
    world.write_config(&json!({
        "mcpServers": {"fx": world.counting_fixture().0},
        "permissions": {"allow": ["mcp__fx__echo"]},
        "policy": [world.path("slow.rego")],
        "audit": {"path": world.path("audit.jsonl")},
    }));
    let server = MockServer::start(vec![
        openai_turn(json!([function(
            "c1",
            "mcp__fx__echo",
            r#"{"message":"slow"}"#
        )])),
        openai_text("done"),
    ])
    .await;
    let (report, _) = run(&world, &server, "openai", &["--timeout", "1.5"]).await;
    assert_eq!(report["status"], "timeout", "{report}");
    let audited = audit_calls(&world.path("audit.jsonl"));
    assert_eq!(audited.len(), 1, "{report}");
    assert_eq!(audited[0]["arguments"], json!({"message": "slow"}));
    assert!(calls_received(&counter).is_empty());
}

/// `warden repl`: its executor (which shows each call) did not pass on
/// the record of a call it did not run, so a repl turn's calls past
/// `--max-tool-calls` were in no record at all. Now they are, as in `run`.
#[test]
fn the_repl_records_the_calls_it_does_not_run() {
    let (world, counter) = world();
    let script = world.path("script.json");
    let turns = json!([
        {"tool_calls": [
            {"name": "mcp__fx__echo", "arguments": {"message": "run"}},
            {"name": "mcp__fx__echo", "arguments": {"message": "over"}}
        ]},
        {"text": "done"}
    ]);
    std::fs::write(&script, turns.to_string()).expect("script");
    let model = format!("scripted:{}", script.display());
    let mut command = std::process::Command::new("setsid");
    let inner = world.warden(&["--max-tool-calls", "1", "--model", &model, "repl"]);
    command
        .arg(inner.get_program())
        .args(inner.get_args())
        .envs(
            inner
                .get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .env_remove("RUST_LOG")
        .current_dir(&world.workspace)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        stdin.write_all(b"echo twice\n/quit\n").expect("write");
    }
    let output = child.wait_with_output().expect("wait");
    let audited = audit_calls(&world.path("audit.jsonl"));
    let seen: Vec<(&Value, &Value)> = audited
        .iter()
        .map(|c| (&c["arguments"]["message"], &c["outcome"]))
        .collect();
    assert_eq!(
        seen,
        [
            (&json!("run"), &json!("ok")),
            (&json!("over"), &json!("skipped"))
        ],
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(calls_received(&counter), ["echo"]);
}

/// A tool hidden from the model because a `deny` rule without argument
/// conditions matches it (CONTRACT §4), called by its name anyway: a deny
/// through the pipeline (rules stage), counted by `--fail-on-deny`, never
/// an unknown tool that lets the run end 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_tool_hidden_by_a_deny_rule_is_a_deny_in_ci() {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__echo"], "deny": ["mcp__fx__say"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    let server = MockServer::start(vec![
        openai_turn(json!([function("c1", "mcp__fx__say", r#"{"text":"hi"}"#)])),
        openai_text("done"),
    ])
    .await;
    let (report, code) = run(&world, &server, "openai", &["--fail-on-deny"]).await;
    // The model was not offered the tool.
    let offered = server.requests()[0].body["tools"].to_string();
    assert!(!offered.contains("mcp__fx__say"), "{offered}");
    assert_eq!(report["calls"][0]["outcome"], "denied", "{report}");
    assert_eq!(code, 3, "{report}");
    assert!(calls_received(&counter).is_empty());
}
