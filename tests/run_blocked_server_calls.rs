//! A model calling a `blocked` server's tool by the name it would have
//! (`mcp__S__T`): CONTRACT §2 makes a call to a blocked server a
//! `trust`-stage deny through the pipeline. From `warden call` it was; from
//! a model the name was looked up only among listed tools (a blocked
//! server never starts, so lists none) and refused as `unknown_tool`, so
//! `run --fail-on-deny` ended 0 although the model reached for a server
//! the operator had blocked.

mod cli_support;

use cli_support::{World, audit_calls, stdout_json};
use serde_json::json;

#[test]
fn a_models_call_to_a_blocked_servers_tool_is_a_trust_deny() {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {
            "fx": world.fixture(),
            "evil-box": {"command": cli_support::WARDEN, "args": ["example-server", "hostile"], "trust": "blocked"}
        },
        "permissions": {"allow": ["mcp__fx__echo"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    let script = world.path("model.json");
    let turns = json!([
        {"tool_calls": [
            {"name": "mcp__evil-box__spawn_shell", "arguments": {"command": "id"}},
            {"name": "mcp__fx__echo", "arguments": {}}
        ]},
        {"text": "done"}
    ]);
    std::fs::write(&script, turns.to_string()).expect("script");
    let model = format!("scripted:{}", script.display());
    let output = world.run(&[
        "run",
        "--ci",
        "--json",
        "--fail-on-deny",
        "--model",
        &model,
        "--task",
        "t",
    ]);
    let report = stdout_json(&output);
    assert_eq!(output.status.code(), Some(3), "{report}");
    assert_eq!(report["denied_calls"], 1, "{report}");
    let call = &report["calls"][0];
    assert_eq!(call["outcome"], "denied", "{call}");
    assert_eq!(call["decision"]["stage"], "trust", "{call}");
    assert_eq!(call["server"], "evil-box", "{call}");
    assert_eq!(report["calls"][1]["outcome"], "ok", "{report}");
    // Audited as the deny it is.
    let audited = audit_calls(&world.path("audit.jsonl"));
    assert!(
        audited
            .iter()
            .any(|c| c["server"] == "evil-box" && c["outcome"] == "denied"),
        "{audited:?}"
    );

    // A name that only looks like it (another server, no tool part) is
    // still an unknown tool, never guessed onto the blocked server.
    for name in ["mcp__evil-box__", "mcp__evil__box__x", "mcp__EVIL-BOX__x"] {
        let turns = json!([
            {"tool_calls": [{"name": name, "arguments": {}}]},
            {"text": "done"}
        ]);
        std::fs::write(&script, turns.to_string()).expect("script");
        let output = world.run(&["run", "--ci", "--json", "--model", &model, "--task", "t"]);
        let report = stdout_json(&output);
        assert_eq!(
            report["calls"][0]["outcome"], "unknown_tool",
            "{name}: {report}"
        );
    }
}
