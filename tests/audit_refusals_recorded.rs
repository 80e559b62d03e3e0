//! Nothing a caller asked for goes unrecorded: calls refused before the
//! pipeline (unknown tool or server, a server that is not available) are
//! in the log; a blocked server's call is a `trust`-stage deny through the
//! pipeline (exit 3, the decision in the JSON); a tool whose pin cannot be
//! saved is treated as unpinned. Real processes, a server that counts
//! calls.

mod cli_support;

use cli_support::{World, audit_calls, audit_lines, calls_received, stderr};
use serde_json::{Value, json};

fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            stderr(output)
        )
    })
}

#[test]
fn every_refusal_kind_is_recorded_with_its_outcome() {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    let mut blocked = fixture.clone();
    blocked["trust"] = json!("blocked");
    world.write_config(&json!({
        "mcpServers": {
            "fx": fixture,
            "blk": blocked,
            // Exits at once: never connects.
            "gone": {"command": "/bin/false"},
        },
        "permissions": {"allow": ["mcp__fx__*", "mcp__blk__*", "mcp__gone__*"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    // (command line, exit code, outcome)
    let cases: [(&[&str], i32, &str); 4] = [
        (
            &["call", "fx", "nope", "--args", r#"{"a": 1}"#],
            2,
            "unknown_tool",
        ),
        (&["call", "nobody", "echo"], 2, "unknown_server"),
        (&["call", "blk", "echo"], 3, "denied"),
        (&["call", "gone", "echo"], 1, "server_unavailable"),
    ];
    for (args, code, outcome) in cases {
        let mut full = vec!["--json"];
        full.extend_from_slice(args);
        let output = world.run(&full);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            stderr(&output)
        );
        let report = json_of(&output);
        assert_eq!(report["outcome"], outcome, "{args:?}: {report}");
        assert_eq!(report["server"], args[1]);
        assert_eq!(report["tool"], args[2]);
        assert!(report["result"].is_null());
        let message = report["error"].as_str().expect("error message");
        assert!(stderr(&output).contains(message), "{}", stderr(&output));
        if outcome == "denied" {
            // Blocked: decided by the pipeline's trust stage.
            assert_eq!(report["decision"]["effect"], "deny", "{report}");
            assert_eq!(report["decision"]["stage"], "trust", "{report}");
        } else {
            assert!(report["decision"].is_null(), "{report}");
        }
    }
    assert!(
        calls_received(&counter).is_empty(),
        "no call reached a server"
    );

    let calls = audit_calls(&world.path("audit.jsonl"));
    let outcomes: Vec<&str> = calls
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "unknown_tool",
            "unknown_server",
            "denied",
            "server_unavailable"
        ]
    );
    for call in &calls {
        assert!(call["result"].is_null(), "a refusal has no result: {call}");
        assert_eq!(call["caller"], "cli");
        assert!(call["error"].is_string(), "{call}");
    }
    assert_eq!(calls[0]["qualified"], "mcp__fx__nope");
    assert_eq!(calls[0]["arguments"], json!({"a": 1}));
    assert_eq!(calls[1]["server"], "nobody");
    assert_eq!(calls[2]["decision"]["stage"], "trust");
    assert_eq!(calls[2]["qualified"], "mcp__blk__echo");
    // The blocked server was never started.
    let records = audit_lines(&world.path("audit.jsonl"));
    assert!(
        !records
            .iter()
            .any(|r| r["event"] == "server_start" && r["server"] == "blk")
    );
    let verify = world.run(&[
        "audit",
        "verify",
        world.path("audit.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}

#[test]
fn a_model_asking_for_an_unknown_tool_is_recorded() {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    let script = json!([
        {"tool_calls": [{"name": "mcp__fx__invented", "arguments": {"x": 1}}]},
        {"text": "done"}
    ]);
    let file = world.path("model.json");
    std::fs::write(&file, script.to_string()).unwrap();
    let model = format!("scripted:{}", file.display());
    let output = world.run(&["--ci", "--json", "--model", &model, "run", "--task", "t"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["calls"][0]["outcome"], "unknown_tool", "{report}");
    let calls = audit_calls(&world.path("audit.jsonl"));
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["outcome"], "unknown_tool");
    assert_eq!(calls[0]["qualified"], "mcp__fx__invented");
    assert_eq!(calls[0]["caller"], "model");
    assert!(calls[0]["server"].is_null());
    assert!(calls_received(&counter).is_empty());
}

#[test]
fn a_tool_whose_pin_cannot_be_saved_is_treated_as_unpinned() {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    // The pin file's lock cannot be created (a folder is in the way, which
    // stops root too): saving the first listing's pins fails.
    let blocker = world.config_dir.join("pins.json.lock");
    std::fs::create_dir_all(&blocker).unwrap();
    let output = world.run(&["--ci", "--json", "call", "fx", "echo"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["outcome"], "denied");
    assert_eq!(report["decision"]["stage"], "pinning", "{report}");
    let reasons = report["decision"]["reasons"].to_string();
    assert!(reasons.contains("could not be pinned"), "{reasons}");
    assert!(
        stderr(&output).contains("saving tool pins failed"),
        "{}",
        stderr(&output)
    );
    assert!(calls_received(&counter).is_empty());
    assert!(!world.config_dir.join("pins.json").exists());

    // Once pins can be saved, the tool is pinned and the call allowed.
    std::fs::remove_dir(&blocker).unwrap();
    let output = world.run(&["--ci", "--json", "call", "fx", "echo"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(calls_received(&counter), ["echo"]);
    assert!(world.config_dir.join("pins.json").exists());
}

#[test]
fn long_argument_values_are_recorded_shortened_with_the_digest_of_all() {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": world.path("audit.jsonl"), "max_value_bytes": 64},
    }));
    let long = "x".repeat(1000);
    let args = json!({"message": long, "short": "kept"});
    let output = world.run(&["call", "fx", "echo", "--args", &args.to_string()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(calls_received(&counter), ["echo"]);
    let calls = audit_calls(&world.path("audit.jsonl"));
    let recorded = &calls[0]["arguments"];
    assert_eq!(recorded["short"], "kept");
    assert_eq!(recorded["message"]["bytes"], 1000);
    assert_eq!(recorded["message"]["prefix"], "x".repeat(64));
    assert_eq!(
        recorded["message"]["sha256"],
        warden_core::digest::sha256_hex(long.as_bytes())
    );
    assert_eq!(
        calls[0]["args_sha256"],
        warden_core::digest::sha256_json(&args)
    );
    // A bad value is a configuration error naming the key.
    world.write_config(&json!({
        "mcpServers": {},
        "audit": {"max_value_bytes": 0},
    }));
    let output = world.run(&["mcp", "list"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("audit.max_value_bytes"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn arguments_refused_by_the_limits_are_recorded_by_size_and_digest_only() {
    // The red team's call: thousands of keys, each string under
    // `max_value_bytes`, more than 8 MiB of text in all. Refused by the
    // argument limits, and once recorded whole: a 24 MB record.
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    let log = world.path("audit.jsonl");
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": log},
    }));
    let args: serde_json::Map<String, Value> = (0..2200)
        .map(|i| (format!("k{i}"), Value::String("B".repeat(4000))))
        .collect();
    let args = Value::Object(args);
    let file = world.path("big.json");
    std::fs::write(&file, args.to_string()).unwrap();
    let output = world.run(&[
        "--json",
        "call",
        "fx",
        "echo",
        "--args",
        &format!("@{}", file.display()),
    ]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["outcome"], "denied", "{report}");
    assert!(calls_received(&counter).is_empty());

    let text = std::fs::read_to_string(&log).unwrap();
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 64 * 1024, "a record of {longest} bytes");
    let calls = audit_calls(&log);
    assert_eq!(calls.len(), 1);
    let digest = warden_core::digest::sha256_json(&args);
    assert_eq!(calls[0]["args_sha256"], digest);
    let recorded = &calls[0]["arguments"];
    assert_eq!(recorded["sha256"], digest, "{recorded}");
    assert_eq!(
        recorded["bytes"],
        warden_core::digest::canonical_json(&args).len(),
        "{recorded}"
    );
    assert!(
        recorded["omitted"]
            .as_str()
            .is_some_and(|why| why.contains("too large to record")),
        "{recorded}"
    );
    let verify = world.run(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}
