//! An argument left out is not nothing to the server: the official Python
//! SDK fills in the default its schema declares (`read_latest_note(id: int
//! = 2)` reads note 2 for `{}`). A `deny` on `id: 2` saw no `id` and let
//! the call through. Deny and ask rules see the schema's default of an
//! argument that is absent; an `allow` never holds on one.

mod resolving_support;

use resolving_support::*;
use serde_json::json;

const NOTE_TWO: &str = "the secret plan";

#[test]
fn a_deny_holds_for_the_default_the_server_fills_in() {
    let world = World::new();
    control_reads(&world, "py", "read_latest_note", &json!({}), NOTE_TWO);
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py")},
        "permissions": {
            "allow": ["mcp__py__read_latest_note"],
            "deny": ["mcp__py__read_latest_note(id: 2)"],
        },
        "policy": [],
    }));
    let (code, report) = call(&world, "py", "read_latest_note", &json!({"id": 1}));
    assert_eq!(code, Some(0), "{report}");
    assert!(answer(&report).to_string().contains("note one"), "{report}");
    let (code, report) = call(&world, "py", "read_latest_note", &json!({}));
    assert_denied(code, &report, "default");
    assert!(!report.to_string().contains(NOTE_TWO), "{report}");

    // The default is the server's word: it only ever restricts. An allow
    // on the value it has does not hold for a call that leaves it out.
    world.write_config(&json!({
        "mcpServers": {"py": server(&world, "py")},
        "permissions": {
            "allow": ["mcp__py__read_latest_note(id: 2)"],
        },
        "policy": [],
    }));
    let out = world.run(&[
        "--ci",
        "call",
        "py",
        "read_latest_note",
        "--json",
        "--args",
        "{}",
    ]);
    let report = stdout_json(&out);
    assert_eq!(out.status.code(), Some(3), "{report}");
    assert_eq!(report["decision"]["stage"], "default", "{report}");
}
