//! Every way a call can end is written to the audit log by the real call
//! path, one session after another into one file, and the chain verifies.

mod cli_support;

use cli_support::{World, audit_calls, audit_lines, stderr};
use serde_json::json;

#[test]
fn every_outcome_is_recorded_and_the_chain_spans_sessions() {
    let world = World::new();
    let audit = world.path("audit.jsonl");
    let mut slow = world.fixture();
    slow["timeout"] = json!(0.5);
    world.write_config(&json!({
        "mcpServers": {"fx": world.fixture(), "slow": slow},
        "permissions": {
            "allow": ["mcp__fx__*", "mcp__slow__*"],
            "deny": ["mcp__fx__echo(message: forbidden)"],
        },
        "audit": {"path": audit, "redact": ["/token"]},
    }));
    let calls: [(&[&str], &str, Option<&str>); 7] = [
        (
            &[
                "call",
                "fx",
                "echo",
                "--args",
                r#"{"message":"ok","token":"tok-123456"}"#,
            ],
            "ok",
            None,
        ),
        (&["call", "fx", "fail"], "tool_error", None),
        (&["call", "fx", "rpc_error"], "rpc_error", None),
        (
            &["call", "slow", "sleep", "--args", r#"{"ms": 3000}"#],
            "timeout",
            None,
        ),
        (
            &["call", "fx", "echo", "--args", r#"{"message":"forbidden"}"#],
            "denied",
            Some("rules"),
        ),
        (
            &["call", "fx", "sleep", "--args", r#"{"ms":"x"}"#],
            "denied",
            Some("schema"),
        ),
        (
            &["call", "fx", "read_secret_path_probe"],
            "unknown_tool",
            None,
        ),
    ];
    let mut expected = Vec::new();
    for (args, outcome, stage) in calls {
        let out = world.run(args);
        if outcome == "unknown_tool" {
            // Not a registered tool: a usage error, refused before the
            // pipeline, and recorded all the same.
            assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        }
        assert!(out.status.code().is_some(), "{}", stderr(&out));
        expected.push((outcome, stage));
    }
    let records = audit_lines(&audit);
    let tool_calls = audit_calls(&audit);
    assert_eq!(tool_calls.len(), expected.len(), "{records:#?}");
    for (record, (outcome, stage)) in tool_calls.iter().zip(&expected) {
        assert_eq!(record["outcome"], *outcome, "{record}");
        if let Some(stage) = stage {
            assert_eq!(record["decision"]["stage"], *stage, "{record}");
        }
        for key in [
            "call_id",
            "server",
            "tool",
            "qualified",
            "arguments",
            "args_sha256",
            "decision",
        ] {
            assert!(record.get(key).is_some(), "{key} missing in {record}");
        }
        match *outcome {
            // Refused before the pipeline: no decision, no result.
            "unknown_tool" => {
                assert!(record["decision"].is_null(), "{record}");
                assert!(record["result"].is_null(), "{record}");
            }
            // Denied: one record, the decision in it.
            "denied" => {
                assert_eq!(record["pending_outcome"], "denied", "{record}");
                assert!(record["result"].is_null(), "{record}");
            }
            // Sent: the pending record came first, the result after it.
            _ => {
                assert_eq!(record["pending_outcome"], "pending", "{record}");
                let result = &record["result"];
                assert!(result["seq"].as_u64() > record["seq"].as_u64(), "{record}");
                for key in ["duration_ms", "result_sha256", "error"] {
                    assert!(result.get(key).is_some(), "{key} missing in {result}");
                }
            }
        }
        if *outcome != "unknown_tool" {
            assert!(record["decision"]["policy_sha256"].is_string(), "{record}");
        }
    }
    // Redaction by pointer; the digest is of the real arguments.
    assert_eq!(tool_calls[0]["arguments"]["token"], "[REDACTED]");
    assert!(
        !std::fs::read_to_string(&audit)
            .unwrap()
            .contains("tok-123456")
    );
    // One session per command, seq continuing across them.
    let sessions: std::collections::BTreeSet<&str> = records
        .iter()
        .filter_map(|r| r["session"].as_str())
        .collect();
    assert!(sessions.len() >= expected.len());
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record["seq"], json!(i as u64 + 1));
    }
    for event in [
        "session_start",
        "server_start",
        "server_exit",
        "session_end",
    ] {
        assert!(records.iter().any(|r| r["event"] == event), "no {event}");
    }
    let verify = world.run(&["audit", "verify", audit.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}

#[test]
fn secrets_from_env_never_reach_the_log() {
    let world = World::new();
    let audit = world.path("audit.jsonl");
    let canary = format!("canary-{}", world.marker);
    let mut fx = world.fixture();
    fx["env"] = json!({"API_TOKEN": canary});
    world.write_config(&json!({
        "mcpServers": {"fx": fx},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": audit},
    }));
    // The model (here: the caller) echoes the secret in its arguments; the
    // log scrubs it whatever the redact pointers say.
    let args = json!({"message": format!("leak {canary}")}).to_string();
    let out = world.run(&["call", "fx", "echo", "--args", &args]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(log.contains("tool_call"));
    assert!(!log.contains(&canary), "the secret reached the audit log");
}

/// CONTRACT §6: only `on_failure: continue` runs unaudited. A configuration
/// without `audit.path` logs to the config dir's `audit.jsonl`, written
/// ahead and failing closed like a configured log.
#[test]
fn without_audit_path_the_config_dir_log_records_every_call() {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": {"allow": ["mcp__fx__*"]},
    }));
    let out = world.run(&["call", "fx", "echo", "--args", r#"{"message":"hi"}"#]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let audit = world.config_dir.join("audit.jsonl");
    let calls = audit_calls(&audit);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["qualified"], "mcp__fx__echo");
    assert_eq!(calls[0]["pending_outcome"], "pending");
    assert_eq!(calls[0]["outcome"], "ok");
    let verify = world.run(&["audit", "verify", audit.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    let status = world.run(&["mcp", "status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains(&audit.display().to_string()),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );

    // The default log cannot be written (its path is a folder): the call
    // is not sent, as with a configured log.
    std::fs::remove_file(&audit).unwrap();
    let _ = std::fs::remove_file(world.config_dir.join("audit.jsonl.head"));
    std::fs::create_dir(&audit).unwrap();
    let (counting, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": counting},
        "permissions": {"allow": ["mcp__fx__*"]},
    }));
    let out = world.run(&["call", "fx", "echo", "--args", r#"{"message":"hi"}"#]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !std::fs::read_to_string(&counter)
            .unwrap_or_default()
            .contains("echo"),
        "the call reached the server without a log"
    );
}
