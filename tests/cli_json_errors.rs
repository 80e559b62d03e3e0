//! `--json`: every command prints exactly one JSON object on stdout for
//! every outcome, errors included (CONTRACT §2). `call` keeps its shape
//! with `outcome` naming what happened and `error` the message stderr
//! carries; every other command prints its usual fields (null where they
//! do not apply) plus `error: {"kind", "message"}`. One case per error path
//! per command, with the real binary.

mod cli_support;

use std::process::Output;

use cli_support::{World, stderr};
use serde_json::{Value, json};

/// The usual top-level fields of each command's object.
fn fields(command: &str) -> &'static [&'static str] {
    match command {
        "call" => &[
            "server",
            "tool",
            "decision",
            "outcome",
            "result",
            "error",
            "duration_ms",
        ],
        "run" => &[
            "final_text",
            "status",
            "turns",
            "tool_calls",
            "denied_calls",
            "usage",
            "calls",
            "session",
        ],
        "mcp list" => &["servers"],
        "mcp status" => &["servers", "audit"],
        "mcp approve" | "mcp revoke" => &["server", "action", "config_sha256"],
        "pin list" => &["file", "pins"],
        "pin reset" => &["file", "server", "removed"],
        "sandbox check" => &["kernel", "default_profile", "unsupported"],
        "policy check" => &["ok", "rules", "policies", "policy_sha256"],
        "policy eval" => &["effect", "stage", "reasons", "stages", "policy_sha256"],
        "policy test" => &["results"],
        "audit verify" => &["ok", "file", "count", "last_hash", "mode", "heads"],
        "audit show" => &["file", "records"],
        "audit head" => &["file", "seq", "hash", "spec", "keyed"],
        _ => &[],
    }
}

/// stdout is exactly one JSON object.
fn one_object(output: &Output) -> Value {
    let mut values = serde_json::Deserializer::from_slice(&output.stdout).into_iter::<Value>();
    let first = values.next();
    let rest = values.count();
    match first {
        Some(Ok(value @ Value::Object(_))) if rest == 0 => value,
        _ => panic!(
            "stdout is not exactly one JSON object:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            stderr(output)
        ),
    }
}

/// The error object of `command`: its fields, `error.kind`, the message
/// stderr also carries, and the exit code.
fn assert_error(output: &Output, command: &str, kind: &str, code: i32) -> Value {
    let value = one_object(output);
    assert_eq!(output.status.code(), Some(code), "{command}: {value}");
    for field in fields(command) {
        assert!(
            value.get(*field).is_some(),
            "{command}: `{field}` missing in {value}"
        );
    }
    let message = if command == "call" {
        assert_eq!(value["outcome"], kind, "{value}");
        value["error"].as_str().expect("error message").to_string()
    } else {
        assert_eq!(value["outcome"], kind, "{command}: {value}");
        value["error"].as_str().expect("message").to_string()
    };
    assert!(!message.is_empty());
    let err = stderr(output);
    let first_line = message.lines().next().unwrap_or_default();
    assert!(
        err.contains(first_line),
        "stderr does not carry `{message}`:\n{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    value
}

fn world() -> World {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {
            "fx": world.fixture(),
            "gone": {"command": "/bin/false"},
        },
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    world
}

fn bad_config(world: &World) {
    std::fs::write(
        world.path("warden.json"),
        r#"{"mcpServers": {"fx": {"command": "x", "bogus": 1}}}"#,
    )
    .unwrap();
}

#[test]
fn command_line_errors_are_one_object_once_json_is_given() {
    let world = world();
    for (args, command) in [
        (&["--json"][..], ""),
        (&["--json", "bogus"][..], "bogus"),
        (&["--json", "call"][..], "call"),
        (&["--json", "mcp", "status", "--nope"][..], "mcp status"),
        (&["--json", "audit", "verify"][..], "audit verify"),
        (
            &["--max-turns", "many", "--json", "run", "--task", "t"][..],
            "run",
        ),
    ] {
        let output = world.run(args);
        assert_error(&output, command, "usage_error", 2);
    }
    // `call` with its words known keeps them.
    let output = world.run(&["--json", "call", "fx", "echo", "--bogus"]);
    let value = assert_error(&output, "call", "usage_error", 2);
    assert_eq!(
        (value["server"].as_str(), value["tool"].as_str()),
        (Some("fx"), Some("echo"))
    );
    // Help is not an error, and still one object.
    let output = world.run(&["--json", "--help"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        one_object(&output)["help"]
            .as_str()
            .is_some_and(|h| h.contains("Usage"))
    );
}

#[test]
fn call_prints_one_object_for_every_outcome() {
    let world = world();
    let output = world.run(&["--json", "call", "fx", "echo", "--args", "[1]"]);
    assert_error(&output, "call", "usage_error", 2);
    let output = world.run(&[
        "--json",
        "call",
        "fx",
        "echo",
        "--args",
        "@/nonexistent.json",
    ]);
    assert_error(&output, "call", "usage_error", 2);
    let output = world.run(&["--json", "call", "nobody", "echo"]);
    assert_error(&output, "call", "unknown_server", 2);
    let output = world.run(&["--json", "call", "fx", "nope"]);
    assert_error(&output, "call", "unknown_tool", 2);
    let output = world.run(&["--json", "call", "gone", "echo"]);
    assert_error(&output, "call", "server_unavailable", 1);
    let output = world.run(&["--json", "--audit", "/dev/full", "call", "fx", "echo"]);
    assert_error(&output, "call", "audit_failed", 1);
    let output = world.run(&[
        "--json",
        "--ci",
        "call",
        "fx",
        "sleep",
        "--args",
        r#"{"ms": "x"}"#,
    ]);
    let value = assert_error(&output, "call", "denied", 3);
    assert_eq!(value["decision"]["stage"], "schema");
    bad_config(&world);
    let output = world.run(&["--json", "call", "fx", "echo"]);
    let value = assert_error(&output, "call", "config_error", 2);
    assert!(value["error"].as_str().unwrap().contains("bogus"));
}

#[test]
fn run_prints_one_object_for_every_outcome() {
    let world = world();
    let output = world.run(&["--json", "run", "--task", "t"]);
    assert_error(&output, "run", "usage_error", 2);
    let output = world.run(&["--json", "--model", "nonsense", "run", "--task", "t"]);
    assert_error(&output, "run", "usage_error", 2);
    // One turn, then the script runs out: a model error mid-run.
    let script = world.path("short.json");
    std::fs::write(
        &script,
        json!([{"tool_calls": [{"name": "mcp__fx__echo", "arguments": {}}]}]).to_string(),
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    let output = world.run(&["--json", "--model", &model, "run", "--task", "t"]);
    let value = assert_error(&output, "run", "model_error", 1);
    assert_eq!(value["status"], "model_error");
    let output = world.run(&[
        "--json",
        "--audit",
        "/dev/full",
        "--model",
        &model,
        "run",
        "--task",
        "t",
    ]);
    assert_error(&output, "run", "audit_failed", 1);
    bad_config(&world);
    let output = world.run(&["--json", "--model", &model, "run", "--task", "t"]);
    assert_error(&output, "run", "config_error", 2);
}

#[test]
fn mcp_commands_print_one_object_for_every_outcome() {
    let world = world();
    let output = world.run(&["--json", "mcp", "status"]);
    assert_eq!(output.status.code(), Some(0));
    let value = one_object(&output);
    assert_eq!(value["error"], Value::Null);
    assert_eq!(value["audit"]["on_failure"], "fail_closed");
    let output = world.run(&["--json", "--audit", "/dev/full", "mcp", "status"]);
    assert_error(&output, "mcp status", "audit_failed", 1);
    let output = world.run(&["--json", "mcp", "list"]);
    let value = one_object(&output);
    assert_eq!(value["servers"].as_array().map(Vec::len), Some(2));
    assert_eq!(value["error"], Value::Null);
    let output = world.run(&["--json", "mcp", "approve", "nobody", "--yes"]);
    assert_error(&output, "mcp approve", "usage_error", 2);
    let output = world.run(&["--json", "mcp", "approve", "fx", "--yes"]);
    assert_eq!(one_object(&output)["action"], "not_needed");
    let output = world.run(&["--json", "mcp", "revoke", "fx"]);
    assert_eq!(one_object(&output)["action"], "not_approved");
    bad_config(&world);
    for command in [
        &["mcp", "status"][..],
        &["mcp", "list"],
        &["mcp", "approve", "fx"],
        &["mcp", "revoke", "fx"],
    ] {
        let mut args = vec!["--json"];
        args.extend_from_slice(command);
        let output = world.run(&args);
        assert_error(&output, &command[..2].join(" "), "config_error", 2);
    }
}

#[test]
fn pin_sandbox_and_policy_commands_print_one_object_for_every_outcome() {
    let world = world();
    let output = world.run(&["--json", "pin", "reset"]);
    let value = one_object(&output);
    assert_eq!(
        (value["removed"].as_u64(), &value["error"]),
        (Some(0), &Value::Null)
    );
    std::fs::write(world.config_dir.join("pins.json"), "not json").unwrap();
    let output = world.run(&["--json", "pin", "list"]);
    assert_error(&output, "pin list", "config_error", 2);
    let output = world.run(&["--json", "pin", "reset"]);
    assert_error(&output, "pin reset", "config_error", 2);

    let output = world.run(&["--json", "sandbox", "check", "--server", "nobody"]);
    assert_error(&output, "sandbox check", "unknown_server", 2);
    let output = world.run(&["--json", "sandbox", "exec", "--", "/bin/true"]);
    assert_error(&output, "sandbox exec", "usage_error", 2);

    let bad = world.path("bad.rego");
    std::fs::write(&bad, "package warden\nthis is not rego\n").unwrap();
    let output = world.run(&[
        "--json",
        "--policy",
        bad.to_str().unwrap(),
        "policy",
        "check",
    ]);
    assert_error(&output, "policy check", "config_error", 2);
    let output = world.run(&["--json", "policy", "eval", "--input", "/nonexistent.json"]);
    assert_error(&output, "policy eval", "usage_error", 2);
    let output = world.run(&["--json", "policy", "test", "/nonexistent/folder"]);
    assert_error(&output, "policy test", "usage_error", 2);
}

#[test]
fn audit_commands_print_one_object_for_every_outcome() {
    let world = world();
    let output = world.run(&["--json", "audit", "verify", "/nonexistent/audit.jsonl"]);
    assert_error(&output, "audit verify", "unreadable", 2);
    let output = world.run(&["--json", "audit", "show", "/nonexistent/audit.jsonl"]);
    assert_error(&output, "audit show", "unreadable", 2);
    let output = world.run(&["--json", "audit", "head", "/nonexistent/audit.jsonl"]);
    assert_error(&output, "audit head", "no_head", 1);
    let log = world.path("audit.jsonl");
    let output = world.run(&[
        "--json",
        "audit",
        "show",
        log.to_str().unwrap(),
        "--effect",
        "maybe",
    ]);
    assert_error(&output, "audit show", "usage_error", 2);
    // A keyed log without its key: exit 2, said in `error`.
    let output = world
        .warden(&["call", "fx", "echo"])
        .env("WARDEN_AUDIT_KEY", "a key of at least sixteen bytes")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let output = world.run(&["--json", "audit", "verify", log.to_str().unwrap()]);
    let value = assert_error(&output, "audit verify", "key_required", 2);
    assert_eq!(value["count"].as_u64().map(|c| c > 0), Some(true));
    // Verification failures are results, not errors: exit 1, error null.
    std::fs::write(&log, "not a record\n").unwrap();
    let output = world.run(&["--json", "audit", "verify", log.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let value = one_object(&output);
    assert_eq!(
        (value["ok"].as_bool(), &value["error"]),
        (Some(false), &Value::Null)
    );
}

#[test]
fn commands_whose_stdout_is_not_theirs_refuse_json_with_one_object() {
    let world = world();
    for (args, command) in [
        (&["--json", "repl"][..], "repl"),
        (&["--json", "gateway", "--stdio"][..], "gateway"),
    ] {
        let output = world.run(args);
        let value = assert_error(&output, command, "usage_error", 2);
        assert!(value["error"].as_str().unwrap().contains("--json"));
    }
}

/// Regression (#16): the rule `"mcp_"` once panicked while the
/// configuration was loaded. Every command that loads it now refuses it
/// with the rule error (exit 2), as text and as one JSON object, and never
/// panics (exit 101). Likewise for other rule texts that are prefixes of
/// the grammar.
#[test]
fn a_truncated_rule_is_a_load_error_never_a_panic() {
    let world = World::new();
    for rule in [
        "mcp_",
        "mcp",
        "m",
        "mcp__",
        "mcp__s__t(",
        "mcp__s__t(path:",
        "resource_",
    ] {
        world.write_config(&json!({
            "mcpServers": {"fx": world.fixture()},
            "permissions": {"deny": [rule]},
        }));
        for args in [
            &["mcp", "status"][..],
            &["--json", "mcp", "status"][..],
            &["policy", "check"][..],
        ] {
            let out = world.run(args);
            let err = stderr(&out);
            assert!(
                !err.contains("panicked") && out.status.code() != Some(101),
                "`{rule}` with {args:?}: a panic\n{err}"
            );
            assert_ne!(out.status.code(), Some(0), "`{rule}` with {args:?} loaded");
            if args[0] == "--json" {
                let v: Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("`{rule}`: not one JSON object ({e}): {err}"));
                assert!(
                    v["error"].is_object() || v["error"].is_string(),
                    "`{rule}`: {v}"
                );
            } else {
                assert!(
                    err.contains("permissions.deny[0]"),
                    "`{rule}` with {args:?}: {err}"
                );
            }
        }
    }
}
