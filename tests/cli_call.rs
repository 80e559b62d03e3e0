//! `warden call`: one tool call through the full pipeline, against warden's
//! real example servers launched in the sandbox; output and exit codes as
//! CONTRACT §2 fixes them.

mod cli_support;

use cli_support::{World, stderr, stdout_json};
use serde_json::{Value, json};

fn fixture_world(permissions: Value) -> World {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": permissions,
    }));
    world
}

fn allow_all() -> Value {
    json!({"allow": ["mcp__fx__*"]})
}

#[test]
fn json_output_has_exactly_the_contract_fields() {
    let world = fixture_world(allow_all());
    let out = world.run(&[
        "call",
        "fx",
        "echo",
        "--json",
        "--args",
        r#"{"message":"hi"}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = stdout_json(&out);
    let mut keys: Vec<&str> = report
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "decision",
            "duration_ms",
            "error",
            "outcome",
            "result",
            "server",
            "tool"
        ]
    );
    assert_eq!(report["server"], "fx");
    assert_eq!(report["tool"], "echo");
    assert_eq!(report["outcome"], "ok");
    assert_eq!(report["error"], Value::Null);
    assert_eq!(report["decision"]["effect"], "allow");
    assert_eq!(report["decision"]["stage"], "rules");
    assert!(
        report["decision"]["reasons"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    );
    assert_eq!(report["result"]["isError"], false);
    assert_eq!(report["result"]["structuredContent"]["message"], "hi");
}

#[test]
fn every_content_block_is_kept() {
    let world = fixture_world(allow_all());
    let out = world.run(&["call", "fx", "mixed_content", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = stdout_json(&out);
    let kinds: Vec<&str> = report["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    for kind in ["text", "image", "audio", "resource", "resource_link"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    assert!(!report["result"]["structuredContent"].is_null());
}

/// CONTRACT §2's `result` always has `structuredContent` and `isError`,
/// also from a server that sent neither (`say` answers with one text block).
#[test]
fn json_result_always_has_structured_content_and_is_error() {
    let world = fixture_world(allow_all());
    let out = world.run(&[
        "call",
        "fx",
        "say",
        "--json",
        "--args",
        r#"{"text":"plain"}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = stdout_json(&out);
    let result = report["result"].as_object().expect("a result");
    assert_eq!(
        result.get("structuredContent"),
        Some(&Value::Null),
        "{report}"
    );
    assert_eq!(result.get("isError"), Some(&Value::Bool(false)), "{report}");
    assert_eq!(report["result"]["content"][0]["text"], "plain");
}

#[test]
fn human_output_prints_text_blocks() {
    let world = fixture_world(allow_all());
    let out = world.run(&[
        "call",
        "fx",
        "echo",
        "--args",
        r#"{"message":"plain words"}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("plain words"));
}

#[test]
fn tool_error_and_rpc_error_are_distinct_outcomes_with_exit_1() {
    let world = fixture_world(allow_all());
    let out = world.run(&["call", "fx", "fail", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = stdout_json(&out);
    assert_eq!(report["outcome"], "tool_error");
    assert_eq!(report["result"]["isError"], true);

    let out = world.run(&["call", "fx", "rpc_error", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = stdout_json(&out);
    assert_eq!(report["outcome"], "rpc_error");
    assert_eq!(report["result"], Value::Null);
    assert!(report["error"].as_str().unwrap().contains("JSON-RPC error"));
}

#[test]
fn a_deny_rule_with_arguments_exits_3_and_names_the_stage() {
    let world = fixture_world(json!({
        "allow": ["mcp__fx__*"],
        "deny": ["mcp__fx__echo(message: *secret*)"],
    }));
    let out = world.run(&[
        "call",
        "fx",
        "echo",
        "--json",
        "--args",
        r#"{"message":"a secret"}"#,
    ]);
    assert_eq!(out.status.code(), Some(3));
    let report = stdout_json(&out);
    assert_eq!(report["outcome"], "denied");
    assert_eq!(report["decision"]["stage"], "rules");
    assert_eq!(report["result"], Value::Null);
    // The same tool with other arguments is still allowed.
    let out = world.run(&["call", "fx", "echo", "--args", r#"{"message":"fine"}"#]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn ci_mode_turns_the_default_ask_into_deny() {
    // No rules: the shipped default.rego asks about a non-read-only tool of
    // an untrusted server; nobody can answer in CI.
    let world = fixture_world(json!({}));
    let out = world.run(&["--ci", "call", "fx", "echo", "--json", "--args", "{}"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let report = stdout_json(&out);
    assert_eq!(report["decision"]["effect"], "deny");
    let reasons = report["decision"]["reasons"].to_string();
    assert!(reasons.contains("no one could be asked"), "{reasons}");
}

#[test]
fn schema_invalid_arguments_are_denied_before_the_server() {
    let world = fixture_world(allow_all());
    let out = world.run(&[
        "call",
        "fx",
        "sleep",
        "--json",
        "--args",
        r#"{"ms":"soon"}"#,
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stdout_json(&out)["decision"]["stage"], "schema");
}

#[test]
fn unknown_server_and_tool_are_usage_errors() {
    let world = fixture_world(allow_all());
    let out = world.run(&["call", "nope", "echo"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown server `nope`"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("fx"));

    let out = world.run(&["call", "fx", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown tool `nope`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_arguments_and_bad_config_are_usage_errors() {
    let world = fixture_world(allow_all());
    let out = world.run(&["call", "fx", "echo", "--args", "[1,2]"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("must be a JSON object"));

    std::fs::write(
        world.path("warden.json"),
        r#"{"mcpServers": {"fx": {"command": "x", "bogus": 1}}}"#,
    )
    .unwrap();
    let out = world.run(&["call", "fx", "echo"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("warden.json") && err.contains("bogus"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_blocked_server_is_never_started_and_its_calls_are_denied() {
    let world = World::new();
    let mut fixture = world.fixture();
    fixture["trust"] = json!("blocked");
    world.write_config(&json!({"mcpServers": {"fx": fixture}}));
    let out = world.run(&["call", "fx", "echo"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(world.leftover_processes().is_empty());
}

#[test]
fn a_real_third_party_server_answers_through_warden() {
    let npm = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/npm");
    let bin = npm.join("node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "run scripts/test-deps.sh first ({} missing)",
        bin.display()
    );
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"everything": {
            "command": bin, "args": ["stdio"],
            "sandbox": {"read": [npm]}
        }},
        "permissions": {"allow": ["mcp__everything__echo"]},
    }));
    let out = world.run(&[
        "call",
        "everything",
        "echo",
        "--json",
        "--args",
        r#"{"message":"hello from warden"}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = stdout_json(&out);
    assert!(
        report["result"].to_string().contains("hello from warden"),
        "{report}"
    );
}

/// The answer is printed as soon as it arrives, before warden stops the
/// server: a server that ignores its stdin closing and SIGTERM holds the
/// process for the shutdown's grace periods, never the person's answer.
#[test]
fn the_answer_is_printed_before_a_slow_server_shutdown() {
    use std::io::BufRead;
    let world = World::new();
    let mut stubborn = world.fixture();
    stubborn["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("--stubborn"));
    world.write_config(&json!({
        "mcpServers": {"fx": stubborn},
        "permissions": allow_all(),
    }));
    let mut child = world
        .warden(&["call", "fx", "echo", "--args", r#"{"message":"early"}"#])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // The answer arrived while warden was still stopping the server.
    let running = child.try_wait().unwrap().is_none();
    let status = child.wait().unwrap();
    assert!(line.contains("early"), "{line}");
    assert!(running, "warden printed the answer only when it exited");
    assert_eq!(status.code(), Some(0));
    assert!(world.leftover_processes().is_empty());
}

/// A server that dies while warden waits for its handshake: the error
/// says how it ended and the last line it wrote to stderr (neutralised),
/// so the person sees why without turning the log level up.
#[test]
fn a_server_dying_at_the_handshake_is_explained_with_its_last_stderr_line() {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"dies": {
            "command": "/bin/sh",
            "args": ["-c", "echo starting >&2; printf 'cannot load module \\033[31mfoo\\n' >&2; exit 3"]
        }},
        "permissions": {"allow": ["mcp__dies__*"]},
    }));
    let out = world.run(&["call", "dies", "anything", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = stdout_json(&out);
    let error = report["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("exit status 3"), "{report}");
    assert!(
        error.contains("its last line on stderr: cannot load module ^[[31mfoo"),
        "{report}"
    );
    assert!(!stderr(&out).contains('\u{1b}'), "{}", stderr(&out));
}

/// warden's allocator must not change what its servers inherit: mimalloc's
/// `allow_thp=0` option would `prctl(PR_SET_THP_DISABLE)`, which survives
/// `exec`, and every server would run without transparent huge pages
/// (warden is built with mimalloc's `no_thp` instead, see Cargo.toml).
#[test]
fn servers_keep_the_transparent_huge_page_setting_of_the_system() {
    let thp = |status: &str| {
        status
            .lines()
            .find(|l| l.starts_with("THP_enabled:"))
            .map(|l| l.trim_start_matches("THP_enabled:").trim().to_string())
    };
    let mine = std::fs::read_to_string("/proc/self/status").expect("own status");
    let Some(mine) = thp(&mine) else {
        eprintln!("SKIPPED: this kernel shows no THP_enabled in /proc/PID/status");
        return;
    };
    for sandboxed in [false, true] {
        let world = World::new();
        let mut server = json!({
            "command": cli_support::WARDEN,
            "args": ["example-server", "hostile"],
        });
        if !sandboxed {
            server["trust"] = json!("trusted");
            server["sandbox"] = json!(false);
        }
        world.write_config(&json!({
            "mcpServers": {"h": server},
            "permissions": {"allow": ["mcp__h__read_file"]},
        }));
        let out = world.run(&[
            "call",
            "h",
            "read_file",
            "--json",
            "--args",
            r#"{"path":"/proc/self/status"}"#,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let report = stdout_json(&out);
        let text = report["result"]["content"][0]["text"]
            .as_str()
            .expect("a text block");
        let read: Value = serde_json::from_str(text).expect("the server's report");
        let status = read["detail"].as_str().expect("the status file");
        assert_eq!(
            thp(status).as_deref(),
            Some(mine.as_str()),
            "sandboxed: {sandboxed}: {status}"
        );
    }
}

/// A session's async worker count comes from `TOKIO_WORKER_THREADS` when
/// it is set (README, "Threads"); a value it cannot use is refused with
/// an error naming it, before anything starts, not a panic inside tokio.
#[test]
fn the_worker_thread_variable_is_honoured_or_refused_clearly() {
    let world = fixture_world(allow_all());
    let call = |value: &str| {
        world
            .warden(&["call", "fx", "echo", "--args", r#"{"message":"hi"}"#])
            .env("TOKIO_WORKER_THREADS", value)
            .output()
            .expect("run warden")
    };
    let ok = call("3");
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    for bad in ["0", "two", "100000"] {
        let out = call(bad);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(
            err.contains(&format!(
                "TOKIO_WORKER_THREADS={bad}: expected a whole number"
            )),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.stdout.is_empty(), "{bad}: nothing ran");
    }
    assert!(world.leftover_processes().is_empty());
}
