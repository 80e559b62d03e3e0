//! Write-ahead with real processes: a call is in the log before the server
//! sees it, so `kill -9` of warden mid-call leaves its pending record in a
//! log that verifies; SIGTERM/SIGINT and deadlines give calls up as
//! `abandoned` (and still write `session_end`).

mod cli_support;

use std::process::{Child, Stdio};

use cli_support::{World, audit_calls, audit_lines, calls_received, eventually, stderr};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// A world whose `fx` server counts calls, all tools allowed, the log in
/// `fsync` mode.
fn world_with(fsync: &str) -> (World, std::path::PathBuf) {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": world.path("audit.jsonl"), "fsync": fsync},
    }));
    (world, counter)
}

fn spawn(world: &World, args: &[&str]) -> Child {
    world
        .warden(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warden")
}

fn signal(child: &Child, signal: Signal) {
    kill(Pid::from_raw(child.id() as i32), signal).expect("signal warden");
}

fn verify(world: &World) -> std::process::Output {
    world.run(&[
        "audit",
        "verify",
        world.path("audit.jsonl").to_str().unwrap(),
    ])
}

fn no_server_left(world: &World) {
    assert!(
        eventually(10.0, || world.leftover_processes().is_empty()),
        "servers left behind: {:?}",
        world.leftover_processes()
    );
}

#[test]
fn kill_9_during_a_slow_call_leaves_a_verifiable_log_with_its_pending_record() {
    for fsync in ["every_record", "batch", "never"] {
        let (world, counter) = world_with(fsync);
        let child = spawn(
            &world,
            &["call", "fx", "sleep", "--args", r#"{"ms": 120000}"#],
        );
        // The server has the call: the pending record must already be in
        // the file, whatever the fsync mode.
        let reached = eventually(30.0, || calls_received(&counter) == ["sleep"]);
        signal(&child, Signal::SIGKILL);
        let output = child.wait_with_output().expect("wait");
        assert!(
            reached,
            "{fsync}: the call never reached the server: {}",
            stderr(&output)
        );

        let calls = audit_calls(&world.path("audit.jsonl"));
        assert_eq!(calls.len(), 1, "{fsync}: {calls:#?}");
        let call = &calls[0];
        assert_eq!(call["qualified"], "mcp__fx__sleep");
        assert_eq!(
            call["outcome"], "pending",
            "{fsync}: no result can exist: {call}"
        );
        assert_eq!(call["decision"]["effect"], "allow");
        assert_eq!(call["arguments"], json!({"ms": 120000}));
        assert!(call["call_id"].as_str().is_some_and(|id| !id.is_empty()));
        let records = audit_lines(&world.path("audit.jsonl"));
        assert!(!records.iter().any(|r| r["event"] == "session_end"));
        let verified = verify(&world);
        assert_eq!(
            verified.status.code(),
            Some(0),
            "{fsync}: {}{}",
            String::from_utf8_lossy(&verified.stdout),
            stderr(&verified)
        );
        no_server_left(&world);
    }
}

/// The call's records: exactly one pending `tool_call` and one
/// `abandoned` `tool_result` after it, and `session_end` after both.
fn assert_abandoned(world: &World, expected_calls: usize) {
    let records = audit_lines(&world.path("audit.jsonl"));
    let calls = audit_calls(&world.path("audit.jsonl"));
    assert_eq!(calls.len(), expected_calls, "{records:#?}");
    let end = records
        .iter()
        .position(|r| r["event"] == "session_end")
        .expect("session_end written");
    for call in &calls {
        assert_eq!(call["pending_outcome"], "pending", "{call}");
        assert_eq!(call["outcome"], "abandoned", "{call}");
        let result = &call["result"];
        assert!(
            result["error"]
                .as_str()
                .is_some_and(|e| e.contains("outcome is unknown")),
            "{result}"
        );
        let at = records.iter().position(|r| r == result).unwrap();
        assert!(at < end, "the result comes before session_end");
    }
    assert_eq!(verify(world).status.code(), Some(0));
}

#[test]
fn sigterm_during_a_call_records_it_abandoned_and_ends_the_session() {
    let (world, counter) = world_with("every_record");
    let child = spawn(
        &world,
        &[
            "--json",
            "call",
            "fx",
            "sleep",
            "--args",
            r#"{"ms": 120000}"#,
        ],
    );
    assert!(eventually(30.0, || calls_received(&counter) == ["sleep"]));
    signal(&child, Signal::SIGTERM);
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["outcome"], "abandoned");
    assert_eq!(report["decision"]["effect"], "allow");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("exiting"))
    );
    assert_abandoned(&world, 1);
    no_server_left(&world);
}

/// A scripted model proposing three slow calls in one turn.
fn slow_turn_script(world: &World) -> String {
    let turn = json!([{"tool_calls": (0..3)
        .map(|i| json!({"name": "mcp__fx__sleep", "arguments": {"ms": 120000 + i}}))
        .collect::<Vec<_>>()}]);
    let file = world.path("model.json");
    std::fs::write(&file, turn.to_string()).unwrap();
    format!("scripted:{}", file.display())
}

#[test]
fn sigint_during_a_run_records_every_call_in_flight_abandoned() {
    let (world, counter) = world_with("batch");
    let model = slow_turn_script(&world);
    let child = spawn(
        &world,
        &[
            "--ci",
            "--model",
            &model,
            "run",
            "--task",
            "sleep three times",
        ],
    );
    assert!(eventually(30.0, || calls_received(&counter).len() == 3));
    signal(&child, Signal::SIGINT);
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_abandoned(&world, 3);
    no_server_left(&world);
}

#[test]
fn a_run_deadline_records_the_calls_it_gave_up_abandoned() {
    let (world, counter) = world_with("never");
    let model = slow_turn_script(&world);
    let output = world.run(&[
        "--ci",
        "--model",
        &model,
        "--timeout",
        "3",
        "run",
        "--task",
        "sleep three times",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(calls_received(&counter).len(), 3);
    assert_abandoned(&world, 3);
    no_server_left(&world);
}

#[test]
fn a_call_deadline_records_the_call_abandoned() {
    let (world, counter) = world_with("every_record");
    let output = world.run(&[
        "--json",
        "--timeout",
        "3",
        "call",
        "fx",
        "sleep",
        "--args",
        r#"{"ms": 120000}"#,
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["outcome"], "abandoned", "{report}");
    assert_eq!(calls_received(&counter), ["sleep"]);
    assert_abandoned(&world, 1);
}
