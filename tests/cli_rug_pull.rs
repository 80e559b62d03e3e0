//! A tool whose definition changes after it was pinned (a rug pull) is no
//! longer allowed silently: the pinning stage asks, with what changed, and
//! in CI that is a deny — even though a rule allows the tool.

mod cli_support;

use cli_support::{World, stderr, stdout_json};
use serde_json::json;

#[test]
fn a_changed_tool_definition_is_denied_in_ci_with_the_change_named() {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": {"allow": ["mcp__fx__*"]},
    }));
    let script = json!([
        {"tool_calls": [{"name": "mcp__fx__echo", "arguments": {"n": 1}}]},
        {"tool_calls": [{"name": "mcp__fx__rug_pull", "arguments": {}}]},
        // list_changed reaches warden on its own stream (a subscription
        // under 2026-07-28) and the re-listing is asynchronous: give it time.
        {"tool_calls": [{"name": "mcp__fx__sleep", "arguments": {"ms": 1500}}]},
        {"tool_calls": [{"name": "mcp__fx__echo", "arguments": {"n": 2}}]},
        {"text": "done"}
    ]);
    let file = world.path("model.json");
    std::fs::write(&file, script.to_string()).unwrap();
    let model = format!("scripted:{}", file.display());
    let out = world.run(&["--ci", "--json", "--model", &model, "run", "--task", "t"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = stdout_json(&out);
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["outcome"], "ok", "{}", calls[0]);
    assert_eq!(calls[1]["outcome"], "ok", "{}", calls[1]);
    let after = &calls[3];
    assert_eq!(after["outcome"], "denied", "{after}");
    assert_eq!(after["decision"]["stage"], "pinning", "{after}");
    let reasons = after["decision"]["reasons"].to_string();
    assert!(reasons.contains("description"), "{reasons}");

    // The pin survives the session: a fresh run sees the changed tool
    // only after the change, and `pin reset` forgets it.
    let out = world.run(&["pin", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout_json(&out)["pins"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    );
    let out = world.run(&["pin", "reset", "fx"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn locked_mode_denies_tools_missing_from_the_lock_file() {
    let world = World::new();
    world.write_config(&json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": {"allow": ["mcp__fx__*"]},
    }));
    let lock = world.path("warden.lock.json");
    let lock = lock.to_str().unwrap();
    let out = world.run(&[
        "--lock", lock, "--locked", "--json", "call", "fx", "echo", "--args", "{}",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["decision"]["stage"], "pinning");
    // Pin without --locked (writes the lock file), then --locked passes.
    let out = world.run(&["--lock", lock, "call", "fx", "echo", "--args", "{}"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = world.run(&[
        "--lock", lock, "--locked", "call", "fx", "echo", "--args", "{}",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// The attack: `warden pin reset` accepts whatever a server defines now
/// (a rug pull included; README: "accepts the new definitions"), yet it
/// left no trace in the audit log, where an `ask` answered for the same
/// change is an `approval`: an auditor saw calls to a changed tool that
/// nobody had approved. It is an `approval` (action `pins_reset`, the
/// server, or `*` for all) written before the pins are forgotten; one the
/// log cannot take forgets nothing.
#[test]
fn pin_reset_is_an_approval_recorded_before_the_pins_are_forgotten() {
    let world = World::new();
    let log = world.path("audit.jsonl");
    world.write_config(&json!({
        "mcpServers": {"fx": world.fixture()},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": log},
    }));
    let out = world.run(&["call", "fx", "echo", "--args", "{}"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let pins = |world: &World| {
        let out = world.run(&["pin", "list", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout_json(&out)["pins"].as_array().map_or(0, Vec::len)
    };
    let pinned = pins(&world);
    assert!(pinned > 0);

    let out = world.run(&["--audit", "/dev/full", "--json", "pin", "reset", "fx"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["outcome"], "audit_failed");
    assert_eq!(pins(&world), pinned, "forgotten, unrecorded");

    let out = world.run(&["pin", "reset", "fx"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(pins(&world), 0);
    let approvals: Vec<serde_json::Value> = cli_support::audit_lines(&log)
        .into_iter()
        .filter(|r| r["event"] == "approval")
        .collect();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0]["action"], "pins_reset");
    assert_eq!(approvals[0]["server"], "fx");
    assert_eq!(approvals[0]["subject"], "tool pins");
}
