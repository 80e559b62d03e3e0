//! A server's sampling and roots in the agent host (`warden run`, `warden
//! repl`), with the Python conformance fixture (official MCP SDK) as the
//! server, sandboxed, and a scripted model as the session's model.
//!
//! Checked: allowed sampling is answered by the session's model (in `run`
//! and in the repl), with `maxTokens` over the server's
//! `sampling.max_tokens` capped, not refused, and the capping recorded; an
//! `ask` about sampling is put to the person (here an `--answers` file) and
//! its answer recorded as an `approval`; the repl's `/workspace DIR` narrows
//! the root, connected servers are told (`notifications/roots/list_changed`)
//! and the server's `roots/list` then returns only the new folder.

mod gateway_support;

use std::path::{Path, PathBuf};

use gateway_support::{World, audit_lines, interpreter_prefix, python_venv, run_detached};
use serde_json::{Value, json};

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

fn write_config(world: &World, sampling: Value, permissions: Value) {
    let venv = python_venv();
    world.write_config(&json!({
        "mcpServers": {"fx": {
            "command": venv.join("bin/python"),
            "args": [scripts().join("conformance_fixture_server.py"), "--marker", world.marker],
            "timeout": 30,
            "sampling": sampling,
            "sandbox": {"read": [venv, interpreter_prefix(&venv), scripts()]}
        }},
        "permissions": permissions,
        "audit": {"path": world.path("audit.jsonl")}
    }));
}

fn write_script(world: &World, turns: Value) -> String {
    let path = world.path("script.json");
    std::fs::write(&path, turns.to_string()).expect("write script");
    format!("scripted:{}", path.display())
}

fn sampling_records(world: &World) -> Vec<Value> {
    audit_lines(&world.path("audit.jsonl"))
        .into_iter()
        .filter(|r| r["kind"] == "sampling")
        .collect()
}

/// `warden run` of task "go" with `model`, which must end well; its stdout.
fn run_to_the_end(world: &World, model: &str) -> String {
    let out = run_detached(world, &["--model", model, "run", "--task", "go"], "");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The three model turns of a sampling round trip: call the tool, answer
/// the server's sampling request (seeing the server's prompt), then see
/// the tool's result.
fn sampling_turns(answer: &str, done: &str) -> Vec<Value> {
    vec![
        json!({"tool_calls": [{"name": "mcp__fx__test_sampling", "arguments": {"prompt": "say hello"}}]}),
        json!({"expect": ["say hello", "<server_messages>"], "text": answer}),
        json!({"expect": format!("LLM response: {answer}"), "text": done}),
    ]
}

#[test]
fn run_answers_allowed_sampling_with_its_model_and_caps_max_tokens() {
    let world = World::new();
    // The fixture asks for maxTokens 100; the cap is 50.
    write_config(
        &world,
        json!({"max_tokens": 50}),
        json!({"allow": ["mcp__fx__*", "sampling__fx"]}),
    );
    let model = write_script(
        &world,
        json!(sampling_turns("hello from the model", "done")),
    );
    let stdout = run_to_the_end(&world, &model);
    assert!(stdout.contains("done"), "{stdout}");
    let records = sampling_records(&world);
    let request = records
        .iter()
        .find(|r| r["event"] == "request")
        .expect("a sampling request record");
    assert_eq!(request["outcome"], "pending", "{request}");
    assert_eq!(request["arguments"]["max_tokens"], 100);
    assert_eq!(
        request["capped"],
        json!({"max_tokens": {"asked": 100, "sent": 50}})
    );
    let result = records
        .iter()
        .find(|r| r["event"] == "request_result")
        .expect("a sampling result record");
    assert_eq!(result["outcome"], "ok");
    assert_eq!(result["answered_by"], "model");
    assert_eq!(result["call_id"], request["call_id"]);
}

/// The session's model is offered no tools when it answers a server's
/// sampling request; one that asks for tool calls anyway (a model's turn
/// is not warden's to trust) had them dropped without a trace. Each is
/// recorded `skipped` with why, and none is run: the server's tool that
/// would have been called is called only by the run's own first turn.
#[test]
fn tool_calls_in_a_models_answer_to_sampling_are_recorded_and_not_run() {
    let world = World::new();
    write_config(
        &world,
        json!({}),
        json!({"allow": ["mcp__fx__*", "sampling__fx"]}),
    );
    let mut turns = sampling_turns("hello from the model", "done");
    turns[1]["tool_calls"] = json!([
        {"name": "mcp__fx__test_sampling", "arguments": {"prompt": "again"}},
        {"name": "mcp__fx__no_such_tool", "arguments": {"x": 1}}
    ]);
    let model = write_script(&world, Value::Array(turns));
    run_to_the_end(&world, &model);
    let records = audit_lines(&world.path("audit.jsonl"));
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "tool_call")
        .collect();
    let skipped: Vec<&&Value> = calls.iter().filter(|r| r["outcome"] == "skipped").collect();
    assert_eq!(skipped.len(), 2, "{calls:#?}");
    for record in &skipped {
        assert!(
            record["error"]
                .as_str()
                .is_some_and(|e| e.contains("sampling request") && e.contains("not run")),
            "{record}"
        );
        assert_eq!(record["caller"], "model", "{record}");
    }
    assert_eq!(skipped[0]["arguments"]["prompt"], "again", "{}", skipped[0]);
    // Sent once (the first turn's call), never for the answer's.
    let sent: Vec<&&Value> = calls.iter().filter(|r| r["outcome"] != "skipped").collect();
    assert_eq!(sent.len(), 1, "{calls:#?}");
    assert_eq!(sent[0]["arguments"]["prompt"], "say hello", "{calls:#?}");
    let result = sampling_records(&world)
        .into_iter()
        .find(|r| r["event"] == "request_result")
        .expect("a sampling result record");
    assert_eq!(result["outcome"], "ok", "{result}");
}

#[test]
fn an_ask_about_sampling_is_put_to_the_person_and_recorded() {
    for (action, approved) in [("approve", true), ("deny", false)] {
        let world = World::new();
        // No rule for `sampling__fx`: the default is `ask`.
        write_config(&world, json!({}), json!({"allow": ["mcp__fx__*"]}));
        let answers = world.path("answers.json");
        std::fs::write(
            &answers,
            json!([{"kind": "sampling", "action": action, "server": "fx"}]).to_string(),
        )
        .expect("answers");
        let mut turns = sampling_turns("approved answer", "done");
        if !approved {
            // The model is never asked to sample; it sees the tool fail.
            turns = vec![turns[0].clone(), json!({"text": "done"})];
        }
        let model = write_script(&world, Value::Array(turns));
        let out = run_detached(
            &world,
            &[
                "--model",
                &model,
                "run",
                "--task",
                "go",
                "--answers",
                answers.to_str().expect("utf-8"),
            ],
            "",
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("done"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let records = audit_lines(&world.path("audit.jsonl"));
        let request = records
            .iter()
            .find(|r| r["event"] == "request" && r["kind"] == "sampling")
            .expect("a sampling request record");
        let approval = records
            .iter()
            .find(|r| r["event"] == "approval" && r["subject"] == "sampling__fx")
            .expect("the answer recorded as an approval");
        assert_eq!(approval["call_id"], request["call_id"]);
        assert_eq!(request["decision"]["effect"], "ask");
        if approved {
            assert_eq!(approval["action"], "allow_once");
            assert_eq!(request["outcome"], "pending");
        } else {
            assert_eq!(approval["action"], "deny");
            assert_eq!(request["outcome"], "denied");
            assert!(
                request["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("the person denied it")),
                "{request}"
            );
        }
    }
}

/// A server past its `sampling.max_requests` was still put to the person
/// (here the answers file) for every further request, each approved answer
/// then refused: a server could ask again and again. Now a request past the
/// limit is refused before anyone is asked.
#[test]
fn sampling_past_its_limit_is_refused_without_asking_the_person() {
    let world = World::new();
    write_config(
        &world,
        json!({"max_requests": 1}),
        json!({"allow": ["mcp__fx__*"]}),
    );
    let answers = world.path("answers.json");
    let approve = json!({"kind": "sampling", "action": "approve", "server": "fx"});
    std::fs::write(&answers, json!([approve, approve]).to_string()).expect("answers");
    let call = json!({"name": "mcp__fx__test_sampling", "arguments": {"prompt": "say hello"}});
    let model = write_script(
        &world,
        json!([
            {"tool_calls": [call]},
            {"expect": "<server_messages>", "text": "first answer"},
            {"expect": "LLM response: first answer", "tool_calls": [call]},
            {"text": "done"}
        ]),
    );
    let answers_arg = answers.to_str().expect("utf-8");
    let out = run_detached(
        &world,
        &[
            "--model",
            &model,
            "run",
            "--task",
            "go",
            "--answers",
            answers_arg,
        ],
        "",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("done"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = audit_lines(&world.path("audit.jsonl"));
    let approvals: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "approval" && r["subject"] == "sampling__fx")
        .collect();
    assert_eq!(approvals.len(), 1, "asked past the limit: {approvals:#?}");
    let requests: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "request" && r["kind"] == "sampling")
        .collect();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert!(
        requests[1]["error"]
            .as_str()
            .is_some_and(|e| e.contains("sampling.max_requests (1) are used up")),
        "{}",
        requests[1]
    );
}

#[test]
fn the_repl_samples_with_its_model_and_workspace_narrows_the_roots() {
    let world = World::new();
    std::fs::create_dir_all(world.workspace.join("sub")).expect("mkdir");
    write_config(
        &world,
        json!({}),
        json!({"allow": ["mcp__fx__*", "sampling__fx"]}),
    );
    let sub = std::fs::canonicalize(world.workspace.join("sub")).expect("sub");
    // The fixture reports roots as JSON: exactly one root, the new folder.
    let roots = format!(
        r#"{{"roots": [{{"uri": "file://{}/", "name": "workspace"}}]}}"#,
        sub.display()
    );
    let mut turns = vec![json!({"text": "ready"})];
    turns.extend(sampling_turns("from the repl's model", "sampled ok"));
    turns.extend([
        // What the server listed when it was told the roots changed…
        json!({"tool_calls": [{"name": "mcp__fx__test_roots_seen", "arguments": {}}]}),
        // …and what `roots/list` answers now.
        json!({"expect": format!("[{roots}]"),
               "tool_calls": [{"name": "mcp__fx__test_roots", "arguments": {}}]}),
        json!({"expect": roots, "text": "roots ok"}),
    ]);
    let model = write_script(&world, Value::Array(turns));
    let out = run_detached(
        &world,
        &["--model", &model, "repl"],
        "hello\n/workspace\n/workspace sub\n/workspace ../..\nsample\nroots\n/quit\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for expected in ["ready", "sampled ok", "roots ok", "told: fx"] {
        assert!(stdout.contains(expected), "{expected}: {stdout}\n{stderr}");
    }
    // Only narrowing: the parent of the workspace is refused.
    assert!(
        stderr.contains("outside the workspace this session started with"),
        "{stderr}"
    );
    let sampled = sampling_records(&world);
    assert!(
        sampled
            .iter()
            .any(|r| r["event"] == "request_result" && r["answered_by"] == "model"),
        "{sampled:#?}"
    );
}
