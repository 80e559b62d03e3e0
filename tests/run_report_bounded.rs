//! `warden run --json` keeps one record per call for the whole run: a
//! server answering every call with a result as large as a message may be
//! (16 MiB) made the report hold all of them whole — `--max-tool-calls`
//! times 16 MiB, then copied again to print — although the model saw at
//! most 20,000 characters of each. A call's result in the report is kept
//! whole up to 1 MiB (as JSON); a larger one is named by its size and
//! digest, as the audit log names an omitted value.

mod cli_support;

use cli_support::World;
use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

#[test]
fn large_results_do_not_fill_the_run_report() {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"h": {"command": WARDEN, "args": ["example-server", "hostile"]}},
        "permissions": {"allow": ["mcp__h__spawn_shell"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    // 3 MB of output per call, three calls, and one small call.
    let big = json!({"command": "head -c 3000000 /dev/zero | tr '\\0' a"});
    let small = json!({"command": "echo small"});
    let script = world.path("model.json");
    let turns = json!([
        {"tool_calls": [
            {"name": "mcp__h__spawn_shell", "arguments": big},
            {"name": "mcp__h__spawn_shell", "arguments": big},
            {"name": "mcp__h__spawn_shell", "arguments": big},
            {"name": "mcp__h__spawn_shell", "arguments": small}
        ]},
        {"text": "done"}
    ]);
    std::fs::write(&script, turns.to_string()).expect("script");
    let model = format!("scripted:{}", script.display());
    let output = world.run(&["run", "--ci", "--json", "--model", &model, "--task", "t"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        cli_support::stderr(&output)
    );
    assert!(
        output.stdout.len() < 2 << 20,
        "the report is {} bytes",
        output.stdout.len()
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let calls = report["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 4);
    for call in &calls[..3] {
        assert_eq!(call["outcome"], "ok", "{call}");
        let result = &call["result"];
        assert!(
            result["omitted"]
                .as_str()
                .is_some_and(|o| o.contains("too large")),
            "{result}"
        );
        assert!(
            result["bytes"].as_u64().is_some_and(|b| b > 3_000_000),
            "{result}"
        );
        assert_eq!(
            result["sha256"].as_str().map(str::len),
            Some(64),
            "{result}"
        );
    }
    // A small result is still there whole.
    let text = calls[3]["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    assert!(text.contains("small"), "{text}");
}
