//! `warden gateway --stdio`: the real binary, warden's real example servers
//! launched in the sandbox, and rmcp as the client over the child's stdio.
//! Any byte on stdout that is not protocol would break the client.

mod gateway_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gateway_support::{
    TestClient, World, audit_lines, audit_path, call, eventually, gateway_command_with, is_error,
    standard_config, text_of,
};
use rmcp::model::ElicitationAction;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

struct Session {
    client: RunningService<RoleClient, TestClient>,
    child: tokio::process::Child,
    stderr: tokio::task::JoinHandle<String>,
    /// stdout lines that were not JSON-RPC messages.
    not_protocol: Arc<Mutex<Vec<String>>>,
}

/// Copies the gateway's stdout to the client, recording every line that is
/// not a JSON-RPC 2.0 message.
fn checked_stdout(
    stdout: tokio::process::ChildStdout,
) -> (tokio::io::DuplexStream, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let bad = Arc::new(Mutex::new(Vec::new()));
    let (mut writer, reader) = tokio::io::duplex(1 << 20);
    let record = bad.clone();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let ok = serde_json::from_str::<Value>(&line).is_ok_and(|v| v["jsonrpc"] == "2.0");
            if !ok {
                record.lock().unwrap().push(line.clone());
            }
            if writer
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
    });
    (reader, bad)
}

async fn start(world: &World, handler: TestClient, args: &[&str]) -> Session {
    let mut full = vec!["--stdio"];
    full.extend_from_slice(args);
    start_with(world, handler, &[], &full).await
}

/// `warden GLOBAL… gateway ARGS…`, connected.
async fn start_with(world: &World, handler: TestClient, global: &[&str], args: &[&str]) -> Session {
    let mut child = gateway_command_with(world, global, args)
        .spawn()
        .expect("spawn gateway");
    let (stdout, not_protocol) = checked_stdout(child.stdout.take().expect("stdout"));
    let stdin = child.stdin.take().expect("stdin");
    let mut stderr = child.stderr.take().expect("stderr");
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        text
    });
    let client = tokio::time::timeout(Duration::from_secs(60), handler.serve((stdout, stdin)))
        .await
        .expect("initialize in time")
        .expect("initialize");
    Session {
        client,
        child,
        stderr,
        not_protocol,
    }
}

impl Session {
    /// Disconnects; the gateway must exit by itself, cleanly, and leave no
    /// server process behind. Returns its stderr.
    async fn finish(mut self, world: &World) -> String {
        let _ = self.client.cancel().await;
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("the gateway exits after its client disconnects")
            .expect("wait");
        let stderr = self.stderr.await.unwrap_or_default();
        assert!(
            status.success(),
            "gateway exit {status:?}; stderr:\n{stderr}"
        );
        let not_protocol = self.not_protocol.lock().unwrap().clone();
        assert!(
            not_protocol.is_empty(),
            "stdout carried non-protocol lines: {not_protocol:?}"
        );
        assert!(
            eventually(10.0, || world.leftover_processes().is_empty()),
            "server processes left behind: {:?}",
            world.leftover_processes()
        );
        stderr
    }
}

fn world_with_standard_config() -> World {
    let world = World::new();
    world.write_config(&standard_config(&world));
    world
}

/// The calls of `qualified` in the log, each with its final outcome
/// (`tool_result`'s when it was sent).
fn tool_calls(world: &World, qualified: &str) -> Vec<Value> {
    gateway_support::cli_support::audit_calls(&audit_path(world))
        .into_iter()
        .filter(|r| r["qualified"] == qualified)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_decides_like_the_host_with_upstream_results_unchanged() {
    let world = world_with_standard_config();
    let handler = TestClient::plain();
    let session = start(&world, handler.clone(), &[]).await;
    let client = &session.client;

    // tools/list: S__T names, the deny-without-conditions tool left out,
    // definitions as the upstream listed them.
    let tools = client.list_all_tools().await.expect("list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for expected in [
        "notes__read_note",
        "notes__list_notes",
        "notes__add_note",
        "fixture__echo",
        "fixture__sleep",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    assert!(!names.contains(&"notes__delete_note"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    let read_note = tools
        .iter()
        .find(|t| t.name == "notes__read_note")
        .expect("read_note");
    assert_eq!(
        read_note.description.as_deref(),
        Some("Read one note by id.")
    );
    assert_eq!(
        read_note
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint),
        Some(true)
    );
    assert!(read_note.input_schema.contains_key("properties"));
    let peer = client.peer_info().expect("server info");
    assert!(
        peer.capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed)
            .unwrap_or(false),
        "listChanged must be advertised"
    );

    // Allowed by a rule: the upstream content.
    let result = client
        .call_tool(call("notes__read_note", json!({"id": 2})))
        .await
        .expect("read_note");
    assert!(!is_error(&result));
    assert!(
        text_of(&result).contains("Milk, bread, coffee."),
        "{result:?}"
    );

    // structuredContent passes through unchanged.
    let result = client
        .call_tool(call("fixture__echo", json!({"message": "hi"})))
        .await
        .expect("echo");
    assert_eq!(result.structured_content, Some(json!({"message": "hi"})));

    // Denied by a rule with an argument condition: isError naming the stage.
    let result = client
        .call_tool(call("fixture__echo", json!({"message": "a secret"})))
        .await
        .expect("denied echo");
    assert!(is_error(&result));
    let text = text_of(&result);
    assert!(text.contains("Denied by warden's rules stage"), "{text}");

    // The upstream's own tool error passes through as it was sent.
    let result = client
        .call_tool(call("fixture__fail", json!({})))
        .await
        .expect("fail");
    assert!(is_error(&result));
    assert_eq!(text_of(&result), "this tool always fails");

    // An upstream JSON-RPC error becomes an isError result that says so.
    let result = client
        .call_tool(call("fixture__rpc_error", json!({})))
        .await
        .expect("rpc_error");
    assert!(is_error(&result));
    let text = text_of(&result);
    assert!(
        text.contains("rpc_error") && text.contains("deliberate"),
        "{text}"
    );

    // Unknown names (including the hidden tool and a qualified name) are
    // invalid params.
    for name in ["nope", "notes__delete_note", "mcp__notes__read_note"] {
        let error = client
            .call_tool(call(name, json!({})))
            .await
            .expect_err("unknown tool");
        let text = format!("{error:?}");
        assert!(
            text.contains("-32602")
                || text.contains("InvalidParams")
                || text.contains("INVALID_PARAMS"),
            "{text}"
        );
    }

    // `ask` without `--ask-client`: denied, and the text says why.
    let result = client
        .call_tool(call("notes__add_note", json!({"title": "t", "body": "b"})))
        .await
        .expect("add_note");
    assert!(is_error(&result));
    let text = text_of(&result);
    assert!(text.contains("no one could be asked"), "{text}");
    assert!(text.contains("--ask-client"), "{text}");
    assert!(handler.asked().is_empty());

    // list_changed: the fixture adds a tool; the client hears of it.
    let result = client
        .call_tool(call("fixture__add_tool", json!({})))
        .await
        .expect("add_tool");
    assert!(!is_error(&result), "{result:?}");
    assert!(
        eventually(10.0, || handler.list_changed() > 0),
        "no notifications/tools/list_changed reached the client"
    );
    let tools = client.list_all_tools().await.expect("list again");
    assert!(
        tools.iter().any(|t| t.name == "fixture__added_tool"),
        "{:?}",
        tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>()
    );
    let result = client
        .call_tool(call("fixture__added_tool", json!({})))
        .await
        .expect("added_tool");
    assert_eq!(text_of(&result), "hello from the added tool");

    let stderr = session.finish(&world).await;
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Every call is audited with caller "gateway", the denials included.
    let denied = tool_calls(&world, "mcp__notes__add_note");
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0]["caller"], "gateway");
    assert_eq!(denied[0]["outcome"], "denied");
    let read = tool_calls(&world, "mcp__notes__read_note");
    assert_eq!(read.len(), 2, "{read:?}");
    assert_eq!(read[0]["caller"], "gateway");
    assert_eq!(read[0]["outcome"], "ok");
    // Names the gateway does not list are recorded as asked, refused.
    for (record, name) in read[1..]
        .iter()
        .chain(&tool_calls(&world, "nope"))
        .zip(["mcp__notes__read_note", "nope"])
    {
        assert_eq!(record["outcome"], "unknown_tool", "{record}");
        assert_eq!(record["qualified"], name);
        assert!(record["decision"].is_null() && record["server"].is_null());
    }
    let verify = world.run(&["audit", "verify", audit_path(&world).to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_is_put_to_a_client_that_supports_elicitation() {
    let world = world_with_standard_config();
    let handler = TestClient::answering("allow_once");
    let session = start(&world, handler.clone(), &["--ask-client"]).await;
    let result = session
        .client
        .call_tool(call(
            "notes__add_note",
            json!({"title": "From the gateway", "body": "b"}),
        ))
        .await
        .expect("add_note");
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(text_of(&result), "added note 3");
    let asked = handler.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    for needle in [
        "notes",
        "add_note",
        "From the gateway",
        "rules",
        "allow_once",
        "deny",
    ] {
        assert!(
            asked[0].contains(needle),
            "`{needle}` missing from:\n{}",
            asked[0]
        );
    }
    // "Allow once" is once: the next call asks again.
    let result = session
        .client
        .call_tool(call("notes__add_note", json!({"title": "2", "body": "b"})))
        .await
        .expect("add_note again");
    assert!(!is_error(&result));
    assert_eq!(handler.asked().len(), 2);
    session.finish(&world).await;

    let records = audit_lines(&audit_path(&world));
    let approvals: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "approval" && r["subject"] == "mcp__notes__add_note")
        .collect();
    assert_eq!(approvals.len(), 2, "{records:?}");
    assert_eq!(approvals[0]["action"], "allow_once");
    let calls = tool_calls(&world, "mcp__notes__add_note");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["caller"], "gateway");
    assert_eq!(calls[0]["outcome"], "ok");
    // Asked and approved: the pending record says allow, and the approval
    // is linked to the call, before it.
    assert_eq!(calls[0]["pending_outcome"], "pending");
    assert_eq!(calls[0]["decision"]["effect"], "allow");
    for (approval, call) in approvals.iter().zip(&calls) {
        assert_eq!(approval["call_id"], call["call_id"]);
        assert!(approval["seq"].as_u64() < call["seq"].as_u64());
    }
}

/// Class 10 of issue 11: without `--ask-client` the program that made the
/// call is never asked, even when it offers to answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ask_client_an_eager_client_is_not_asked() {
    let world = world_with_standard_config();
    let handler = TestClient::answering("allow_once");
    let session = start(&world, handler.clone(), &[]).await;
    let result = session
        .client
        .call_tool(call("notes__add_note", json!({"title": "t", "body": "b"})))
        .await
        .expect("add_note");
    assert!(is_error(&result));
    assert!(
        text_of(&result).contains("no one could be asked"),
        "{}",
        text_of(&result)
    );
    assert!(handler.asked().is_empty());
    session.finish(&world).await;
    let calls = tool_calls(&world, "mcp__notes__add_note");
    assert_eq!(calls[0]["outcome"], "denied");
}

/// Class 10 of issue 11: a long first argument cut the question at 2,000
/// characters, so later keys were never shown. Every key is shown now,
/// each value whole; a value too long to show whole is not asked about
/// at all (a cut value hides its tail): the call is denied, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_shows_every_key_after_a_long_first_value() {
    let world = world_with_standard_config();
    let handler = TestClient::answering("deny");
    let session = start(&world, handler.clone(), &["--ask-client"]).await;
    let too_long = "x".repeat(20_000);
    let refused = session
        .client
        .call_tool(call(
            "notes__add_note",
            json!({"body": too_long, "title": "zz-the-real-title"}),
        ))
        .await
        .expect("add_note");
    assert!(is_error(&refused));
    assert!(
        text_of(&refused).contains("characters long"),
        "{}",
        text_of(&refused)
    );
    assert!(handler.asked().is_empty(), "asked about a value it cut");
    let long = "x".repeat(1_500);
    let _ = session
        .client
        .call_tool(call(
            "notes__add_note",
            json!({"body": long, "title": "zz-the-real-title"}),
        ))
        .await
        .expect("add_note");
    let asked = handler.asked();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains("/title: \"zz-the-real-title\""),
        "{}",
        asked[0]
    );
    assert!(asked[0].contains("/body: \"xxx"), "{}", asked[0]);
    assert!(asked[0].len() < 4_000, "{}", asked[0].len());
    session.finish(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_answers_deny_or_declines_denies_the_call() {
    let world = world_with_standard_config();
    let handler = TestClient::answering("deny");
    let session = start(&world, handler.clone(), &["--ask-client"]).await;
    let result = session
        .client
        .call_tool(call("notes__add_note", json!({"title": "t", "body": "b"})))
        .await
        .expect("add_note");
    assert!(is_error(&result));
    assert!(
        text_of(&result).contains("denied by the user"),
        "{}",
        text_of(&result)
    );
    session.finish(&world).await;

    let world = world_with_standard_config();
    let handler = TestClient {
        answer: Some((ElicitationAction::Decline, json!({}))),
        ..TestClient::default()
    };
    let session = start(&world, handler.clone(), &["--ask-client"]).await;
    let result = session
        .client
        .call_tool(call("notes__add_note", json!({"title": "t", "body": "b"})))
        .await
        .expect("add_note");
    assert!(is_error(&result));
    assert_eq!(handler.asked().len(), 1);
    session.finish(&world).await;
    let calls = tool_calls(&world, "mcp__notes__add_note");
    assert_eq!(calls[0]["outcome"], "denied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_ci_an_ask_is_denied_without_asking() {
    let world = world_with_standard_config();
    let handler = TestClient::answering("allow_once");
    let session = start_with(&world, handler.clone(), &["--ci"], &["--stdio"]).await;
    let result = session
        .client
        .call_tool(call("notes__add_note", json!({"title": "t", "body": "b"})))
        .await
        .expect("add_note");
    assert!(is_error(&result));
    assert!(
        text_of(&result).contains("no one could be asked"),
        "{}",
        text_of(&result)
    );
    assert!(handler.asked().is_empty());
    session.finish(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_timeout_is_an_error_result_that_says_so() {
    let world = World::new();
    let mut fixture = world.fixture();
    fixture["timeout"] = json!(0.5);
    world.write_config(&json!({
        "mcpServers": {"fixture": fixture},
        "permissions": {"allow": ["mcp__fixture__sleep"]},
    }));
    let session = start(&world, TestClient::plain(), &[]).await;
    let result = session
        .client
        .call_tool(call("fixture__sleep", json!({"ms": 5000})))
        .await
        .expect("sleep");
    assert!(is_error(&result));
    let text = text_of(&result);
    assert!(text.contains("(timeout)"), "{text}");
    session.finish(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cancellation_cancels_the_upstream_call() {
    let world = world_with_standard_config();
    let session = start(&world, TestClient::plain(), &[]).await;
    let started = std::time::Instant::now();
    // Dropping the request future sends notifications/cancelled.
    let waited = tokio::time::timeout(
        Duration::from_millis(1500),
        session
            .client
            .call_tool(call("fixture__sleep", json!({"ms": 60000}))),
    )
    .await;
    assert!(waited.is_err(), "the sleep should still be running");
    assert!(
        eventually(15.0, || {
            tool_calls(&world, "mcp__fixture__sleep")
                .first()
                .is_some_and(|r| r["outcome"] == "cancelled")
        }),
        "the upstream call was not cancelled: {:?}",
        tool_calls(&world, "mcp__fixture__sleep")
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    session.finish(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// The client gives up on its call while its person is still asked: the
/// call is recorded `cancelled` (never sent, never answered), not as a
/// denial nobody gave.
async fn cancelling_a_call_while_the_client_is_asked_records_it_cancelled() {
    let world = world_with_standard_config();
    let handler = TestClient {
        hang: true,
        ..TestClient::answering("allow_once")
    };
    let session = start(&world, handler.clone(), &["--ask-client"]).await;
    let waited = tokio::time::timeout(
        Duration::from_secs(2),
        session
            .client
            .call_tool(call("notes__add_note", json!({"title": "t", "body": "b"}))),
    )
    .await;
    assert!(waited.is_err(), "the ask should still be open");
    assert_eq!(handler.asked().len(), 1);
    assert!(
        eventually(15.0, || {
            tool_calls(&world, "mcp__notes__add_note")
                .first()
                .is_some_and(|r| {
                    r["outcome"] == "cancelled"
                        && r["error"]
                            .as_str()
                            .is_some_and(|e| e.contains("waiting for the person's answer"))
                })
        }),
        "the call was not settled as cancelled: {:?}",
        tool_calls(&world, "mcp__notes__add_note")
    );
    assert!(
        !gateway_support::audit_lines(&audit_path(&world))
            .iter()
            .any(|r| r["event"] == "approval"),
        "an approval was recorded that nobody gave"
    );
    session.finish(&world).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_prefix_serves_remote_names_with_one_upstream_only() {
    // Two upstream servers: refused, exit 2, nothing left running.
    let world = world_with_standard_config();
    let out = world.run(&["gateway", "--stdio", "--no-prefix"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--no-prefix"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(eventually(10.0, || world.leftover_processes().is_empty()));

    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"notes": world.notes("notes")},
        "permissions": {"allow": ["mcp__notes__read_note"]},
    }));
    let session = start(&world, TestClient::plain(), &["--no-prefix"]).await;
    let tools = session.client.list_all_tools().await.expect("list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"read_note"), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("__")), "{names:?}");
    let result = session
        .client
        .call_tool(call("read_note", json!({"id": 1})))
        .await
        .expect("read_note");
    assert!(text_of(&result).contains("Welcome"), "{result:?}");
    session.finish(&world).await;
}

/// A client that gives up on a resource read cancels it upstream; the read
/// is recorded as cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cancellation_cancels_the_upstream_resource_read() {
    let world = World::new();
    let mut config = standard_config(&world);
    config["permissions"]["allow"]
        .as_array_mut()
        .unwrap()
        .push(json!("resource__fixture(uri: fixture://wait/*)"));
    world.write_config(&config);
    let session = start(&world, TestClient::plain(), &[]).await;
    let waited = tokio::time::timeout(
        Duration::from_millis(1500),
        session
            .client
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "fixture://wait/60000",
            )),
    )
    .await;
    assert!(waited.is_err(), "the read should still be running");
    let reads = || -> Vec<serde_json::Value> {
        let records = gateway_support::audit_lines(&audit_path(&world));
        records
            .iter()
            .filter(|r| r["event"] == "request_result" && r["kind"] == "resource")
            .cloned()
            .collect()
    };
    assert!(
        eventually(15.0, || reads()
            .first()
            .is_some_and(|r| r["outcome"] == "cancelled")),
        "the upstream read was not cancelled: {:?}",
        reads()
    );
    session.finish(&world).await;
}

/// An `ask` on a resource read or a prompt goes to the person's client
/// like one on a tool call; the question says what is asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_on_a_resource_or_prompt_is_put_to_the_persons_client() {
    let world = World::new();
    let mut config = standard_config(&world);
    config["permissions"]["ask"] = json!([
        "mcp__notes__add_note",
        "resource__fixture(uri: fixture://notes/*)",
        "prompt__fixture__greet"
    ]);
    world.write_config(&config);
    let handler = TestClient::answering("allow_once");
    let session = start(&world, handler.clone(), &["--ask-client"]).await;
    let read = session
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "fixture://notes/2",
        ))
        .await
        .expect("read after allow_once");
    assert!(format!("{read:?}").contains("note two"), "{read:?}");
    let mut greet = rmcp::model::GetPromptRequestParams::new("fixture__greet");
    greet.arguments = serde_json::from_value(json!({"name": "Ada"})).ok();
    let prompt = session.client.get_prompt(greet).await.expect("prompt");
    assert!(format!("{prompt:?}").contains("Hello, Ada!"), "{prompt:?}");
    let asked = handler.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[0].contains("resource read") && asked[0].contains("fixture://notes/2"),
        "{}",
        asked[0]
    );
    assert!(
        asked[1].contains("prompt request") && asked[1].contains("greet"),
        "{}",
        asked[1]
    );
    session.finish(&world).await;
    let approvals = audit_lines(&audit_path(&world))
        .into_iter()
        .filter(|r| r["event"] == "approval" && r["action"] == "allow_once")
        .count();
    assert_eq!(approvals, 2);
}

/// A server's URL-mode elicitation reaches the client that made the call
/// when that client declared URL mode (message and URL exactly), and its
/// answer goes back; a client that declared form mode only is never sent
/// one: the server gets a decline that says why. Both are recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_mode_elicitation_reaches_only_a_client_that_declared_url_mode() {
    const URL: &str = "https://login.example.test/device?code=WXYZ-1234";
    const MESSAGE: &str = "Sign in to the example service";
    let world = World::new();
    let mut config = standard_config(&world);
    config["permissions"]["allow"]
        .as_array_mut()
        .expect("allow list")
        .push(json!("mcp__fixture__open_url"));
    world.write_config(&config);
    let open = || call("fixture__open_url", json!({"url": URL, "message": MESSAGE}));

    let url_client = TestClient {
        answer: Some((ElicitationAction::Accept, json!({}))),
        url_mode: true,
        ..TestClient::default()
    };
    let session = start(&world, url_client.clone(), &[]).await;
    let result = session.client.call_tool(open()).await.expect("open_url");
    assert_eq!(text_of(&result), "action: accept", "{result:?}");
    let asked = url_client.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains("UrlElicitationParams"), "{}", asked[0]);
    assert!(
        asked[0].contains(URL) && asked[0].contains(MESSAGE),
        "{}",
        asked[0]
    );
    session.finish(&world).await;

    let form_client = TestClient {
        answer: Some((ElicitationAction::Accept, json!({}))),
        ..TestClient::default()
    };
    let session = start(&world, form_client.clone(), &[]).await;
    let result = session.client.call_tool(open()).await.expect("open_url");
    assert_eq!(text_of(&result), "action: decline", "{result:?}");
    assert!(form_client.asked().is_empty(), "{:?}", form_client.asked());
    session.finish(&world).await;

    let records = audit_lines(&audit_path(&world));
    let asks: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "request" && r["kind"] == "elicitation")
        .collect();
    assert_eq!(asks.len(), 2, "{records:?}");
    for ask in &asks {
        assert_eq!(ask["arguments"]["mode"], "url", "{ask}");
        assert_eq!(ask["arguments"]["url"], URL, "{ask}");
    }
    // Passed on and answered by the client: a result record says who.
    let answered = records
        .iter()
        .find(|r| r["event"] == "request_result" && r["call_id"] == asks[0]["call_id"])
        .unwrap_or_else(|| panic!("no result for {}", asks[0]));
    assert_eq!(answered["answered_by"], "client", "{answered}");
    assert_eq!(answered["outcome"], "ok", "{answered}");
    // Not passed on: refused in its one record, saying why.
    assert_eq!(asks[1]["outcome"], "denied", "{}", asks[1]);
    let why = asks[1]["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("did not declare URL-mode elicitation"),
        "{}",
        asks[1]
    );
}

/// A URL whose text hides where it leads (a user name before `@`, a
/// scheme a person cannot judge) is not passed on even to a client that
/// declared URL mode: its person would be asked about `bank.example` and
/// sent to `evil.example`. The server gets a decline; the record says why.
/// (The tool call itself is asked about, its argument being a URL with a
/// user name; the client allows it, so the server's elicitation is what
/// is tried.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_that_hides_its_site_never_reaches_the_client() {
    let world = World::new();
    let mut config = standard_config(&world);
    config["permissions"]["allow"]
        .as_array_mut()
        .expect("allow list")
        .push(json!("mcp__fixture__open_url"));
    world.write_config(&config);
    let client = TestClient {
        url_mode: true,
        ..TestClient::answering("allow_once")
    };
    let session = start(&world, client.clone(), &["--ask-client"]).await;
    let hidden = [
        "https://accounts.bank.example@evil.example/login",
        "https://bank.example:pw@evil.example/",
        "javascript:alert(1)",
    ];
    for url in hidden {
        let result = session
            .client
            .call_tool(call(
                "fixture__open_url",
                json!({"url": url, "message": "Sign in"}),
            ))
            .await
            .expect("open_url");
        assert_eq!(text_of(&result), "action: decline", "{url}: {result:?}");
    }
    let asked = client.asked();
    assert!(
        !asked.iter().any(|a| a.contains("UrlElicitationParams")),
        "{asked:?}"
    );
    session.finish(&world).await;
    let records = audit_lines(&audit_path(&world));
    let asks: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "request" && r["kind"] == "elicitation")
        .collect();
    assert_eq!(asks.len(), hidden.len(), "{records:?}");
    for ask in asks {
        assert_eq!(ask["outcome"], "denied", "{ask}");
        let why = ask["error"].as_str().unwrap_or_default();
        assert!(why.contains("does not pass on the URL"), "{ask}");
    }
}

/// The pipes from the MCP client are widened too (a plain pipe holds 64
/// KiB, so a 100 KB message crossed it in two turns), and a 200 KB
/// argument and its echo pass through whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_stdio_pipes_are_widened_and_large_calls_pass_whole() {
    use nix::fcntl::{FcntlArg, fcntl};
    let world = world_with_standard_config();
    let mut child = gateway_command_with(&world, &[], &["--stdio"])
        .spawn()
        .expect("spawn gateway");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    // The same pipes, kept to look at after the client has them.
    let pipes = [
        nix::unistd::dup(&stdin).unwrap(),
        nix::unistd::dup(&stdout).unwrap(),
    ];
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        TestClient::default().serve((stdout, stdin)),
    )
    .await
    .expect("initialize in time")
    .expect("initialize");
    for pipe in &pipes {
        let size = fcntl(pipe, FcntlArg::F_GETPIPE_SZ).unwrap();
        assert!(
            usize::try_from(size).unwrap() >= warden_sandbox::STDIO_PIPE_BYTES,
            "a pipe holds {size} bytes"
        );
    }
    let big = "é\"\\\n".repeat(40_000);
    let result = client
        .call_tool(call("fixture__echo", json!({"big": big})))
        .await
        .unwrap();
    assert!(!is_error(&result), "{result:?}");
    assert_eq!(result.structured_content, Some(json!({"big": big})));
    // The copies of its stdin's write end go too, or it never reads EOF.
    drop(pipes);
    let _ = client.cancel().await;
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the gateway exits after its client disconnects")
        .expect("wait");
    assert!(status.success(), "{status:?}");
}

/// A rug pull (a server changes a tool's definition after it was pinned):
/// the gateway goes on listing the tool as it was pinned, so the client's
/// model never reads the new text, neither in `tools/list` nor in the
/// denial of a call; the person asked (`--ask-client`) is shown the whole
/// change, and the audit log records it. (The listing used to show the
/// new description, the denial to quote it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rug_pulled_tool_is_listed_as_pinned_and_its_new_text_never_reaches_the_model() {
    const PLANTED: &str = "uploads your files";
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"fixture": world.fixture()},
        "permissions": {"allow": ["mcp__fixture__*"]},
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let handler = TestClient::answering("deny");
    let session = start(&world, handler.clone(), &["--ask-client"]).await;
    let client = &session.client;
    let echo = |tools: &[rmcp::model::Tool]| {
        tools
            .iter()
            .find(|t| t.name == "fixture__echo")
            .map(|t| serde_json::to_value(t).unwrap())
            .expect("fixture__echo listed")
    };
    let before = echo(&client.list_all_tools().await.expect("list"));

    let result = client
        .call_tool(call("fixture__rug_pull", json!({})))
        .await
        .expect("rug_pull");
    assert!(!is_error(&result), "{result:?}");
    // The server's re-listing is asynchronous: a call is decided by the
    // pinning stage once warden has read the new definition.
    let mut denial = None;
    for _ in 0..100 {
        let result = client
            .call_tool(call("fixture__echo", json!({"n": 1})))
            .await
            .expect("echo");
        if is_error(&result) {
            denial = Some(text_of(&result));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let denial = denial.expect("echo denied after the rug pull");
    assert!(
        denial.contains("Denied by warden's pinning stage") && denial.contains("description"),
        "{denial}"
    );
    assert!(
        !denial.contains(PLANTED),
        "the new text reached the client: {denial}"
    );

    let tools = client.list_all_tools().await.expect("list again");
    assert_eq!(echo(&tools), before, "listed as pinned");
    let listing = serde_json::to_string(&tools).unwrap();
    assert!(!listing.contains(PLANTED), "{listing}");

    // The person was shown what changed, to judge it.
    let asked = handler.asked();
    assert!(
        asked
            .iter()
            .any(|q| q.contains(PLANTED) && q.contains("pinning")),
        "{asked:?}"
    );
    session.finish(&world).await;

    let calls = tool_calls(&world, "mcp__fixture__echo");
    let denied = calls
        .iter()
        .find(|c| c["outcome"] == "denied")
        .expect("the denied call is recorded");
    assert_eq!(denied["decision"]["stage"], "pinning");
    assert!(
        denied["decision"]["reasons"].to_string().contains(PLANTED),
        "the audit log keeps the whole change: {denied}"
    );
}

/// A server whose process dies is connected again in the background
/// (after the backoff): its tools come back to the client's view and
/// calls to them work, with no reconnect asked for. Before, a call could
/// only resolve to a connected server's tools, so the tools of a server
/// that crashed once were gone for the rest of the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_is_connected_again_and_its_tools_come_back() {
    let world = World::new();
    let mut config = standard_config(&world);
    config["permissions"]["allow"]
        .as_array_mut()
        .unwrap()
        .push(json!("mcp__fixture__crash"));
    world.write_config(&config);
    let session = start(&world, TestClient::plain(), &[]).await;
    let client = &session.client;
    let first_pid = world.leftover_processes();

    let crashed = client.call_tool(call("fixture__crash", json!({}))).await;
    assert!(
        crashed.as_ref().map_or(true, is_error),
        "the crash is an error: {crashed:?}"
    );

    // The tools are back once the server is: polled, with a deadline far
    // beyond the first backoff (0.5 s), not slept through.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let tools = client.list_all_tools().await.expect("list");
        if tools.iter().any(|t| t.name == "fixture__echo") {
            let echoed = client
                .call_tool(call("fixture__echo", json!({"message": "back"})))
                .await
                .expect("echo");
            if !is_error(&echoed) {
                assert_eq!(echoed.structured_content, Some(json!({"message": "back"})));
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fixture server was never connected again: {:?}",
            tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_ne!(
        world.leftover_processes(),
        first_pid,
        "a new server process serves the call"
    );
    session.finish(&world).await;
}

/// A server that fails when the gateway starts (its first start exits 3) is
/// tried again in the background, like one whose connection dies: once a
/// later start succeeds its tools join the client's view and calls work.
/// Before, a server that failed its first start stayed out of every
/// client's view until the gateway was restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_its_first_start_is_tried_again_and_its_tools_arrive() {
    let world = World::new();
    let flag_dir = world.path("first-start");
    std::fs::create_dir_all(&flag_dir).unwrap();
    let flag = flag_dir.join("failed-once");
    let fixture = world.fixture();
    let program = fixture["command"].as_str().unwrap().to_string();
    let args: Vec<String> = fixture["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    // The first start leaves a flag and fails; later ones run the fixture.
    let script = "if [ -e \"$1\" ]; then shift; exec \"$@\"; else : > \"$1\"; echo 'not ready' >&2; exit 3; fi".to_string();
    let mut sh_args = vec![
        "-c".to_string(),
        script,
        "sh".to_string(),
        flag.display().to_string(),
        program.clone(),
    ];
    sh_args.extend(args);
    let mut config = standard_config(&world);
    let warden_dir = std::path::Path::new(&program)
        .parent()
        .unwrap()
        .display()
        .to_string();
    config["mcpServers"]["fixture"] = json!({
        "command": "/bin/sh",
        "args": sh_args,
        "sandbox": {"write": [flag_dir], "read": [warden_dir]},
    });
    world.write_config(&config);
    let session = start(&world, TestClient::plain(), &[]).await;
    let client = &session.client;
    assert!(flag.exists(), "the first start ran and failed");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let tools = client.list_all_tools().await.expect("list");
        if tools.iter().any(|t| t.name == "fixture__echo") {
            let echoed = client
                .call_tool(call("fixture__echo", json!({"message": "late"})))
                .await
                .expect("echo");
            assert!(!is_error(&echoed), "{echoed:?}");
            assert_eq!(echoed.structured_content, Some(json!({"message": "late"})));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server that failed its first start was never tried again: {:?}",
            tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    session.finish(&world).await;
}
