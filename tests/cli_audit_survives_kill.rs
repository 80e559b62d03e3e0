//! `kill -9` of warden in the middle of a burst of model-driven calls leaves
//! an audit log that verifies up to its last whole record, in every fsync
//! mode.

mod cli_support;

use std::process::Stdio;

use cli_support::{World, audit_lines, eventually, stderr};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

fn burst(fsync: &str) {
    let world = World::new();
    let audit = world.path("audit.jsonl");
    world.write_config(&json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": audit, "fsync": fsync},
    }));
    // 400 turns of 5 parallel calls: far more than can finish before the kill.
    let turn = json!({"tool_calls": (0..5)
        .map(|i| json!({"name": "mcp__fx__echo", "arguments": {"i": i}}))
        .collect::<Vec<_>>()});
    let script: Vec<_> = std::iter::repeat_n(turn, 400).collect();
    let script_file = world.path("model.json");
    std::fs::write(&script_file, serde_json::to_string(&script).unwrap()).unwrap();
    let model = format!("scripted:{}", script_file.display());
    let child = world
        .warden(&[
            "--ci",
            "--model",
            &model,
            "--max-turns",
            "1000",
            "--max-tool-calls",
            "5000",
            "run",
            "--task",
            "burst",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warden");
    let enough = eventually(30.0, || {
        audit_lines(&audit)
            .iter()
            .filter(|r| r["event"] == "tool_call")
            .count()
            >= 50
    });
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("kill -9");
    let output = child.wait_with_output().expect("wait");
    assert!(enough, "too few calls before the kill: {}", stderr(&output));
    let verify = world.run(&["audit", "verify", audit.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&verify.stdout).into_owned() + &stderr(&verify);
    match verify.status.code() {
        Some(0) => unknown_outcomes_are_listed(&world, &audit, &text),
        // A line torn by the kill is reported as such, never as tampering,
        // and everything before it verifies.
        Some(1) => assert!(text.contains("torn"), "{text}"),
        other => panic!("verify exited {other:?}: {text}"),
    }
    assert!(
        eventually(8.0, || world.leftover_processes().is_empty()),
        "servers left behind: {:?}",
        world.leftover_processes()
    );
}

/// The calls in flight at the kill have a pending record and no result:
/// `verify` lists exactly those (a warning: the exit code stays 0).
fn unknown_outcomes_are_listed(world: &World, audit: &std::path::Path, text: &str) {
    let records = audit_lines(audit);
    let ended: std::collections::HashSet<&str> = records
        .iter()
        .filter(|r| r["event"] == "tool_result")
        .filter_map(|r| r["call_id"].as_str())
        .collect();
    let expected: Vec<&str> = records
        .iter()
        .filter(|r| r["event"] == "tool_call" && r["outcome"] == "pending")
        .filter_map(|r| r["call_id"].as_str())
        .filter(|id| !ended.contains(id))
        .collect();
    let output = world.run(&["--json", "audit", "verify", audit.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one object");
    let listed: Vec<&str> = report["unfinished"]["calls"]
        .as_array()
        .expect("unfinished calls")
        .iter()
        .filter_map(|c| c["call_id"].as_str())
        .collect();
    assert_eq!(listed, expected, "{report}");
    assert_eq!(report["unfinished"]["count"], expected.len());
    if let Some(first) = expected.first() {
        assert!(
            text.contains("no recorded outcome") && text.contains(first),
            "{text}"
        );
    }
}

#[test]
fn kill_9_mid_burst_every_record() {
    burst("every_record");
}

#[test]
fn kill_9_mid_burst_batch() {
    burst("batch");
}

#[test]
fn kill_9_mid_burst_never() {
    burst("never");
}
