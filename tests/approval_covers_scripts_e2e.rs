//! Issue 11, class 6, end to end: approval was bound to the configuration
//! text, so after a repository's server script was approved, changing the
//! script kept it approved and the new code ran. Now the approval covers
//! what runs from the workspace or repository (here: the Python script a
//! real MCP server runs from), by content digest; a change asks again, and
//! `mcp status` says which file changed.

mod resolving_support;

use std::process::Command;

use resolving_support::*;
use serde_json::json;

fn warden(world: &World, args: &[&str]) -> std::process::Output {
    Command::new(cli_support::WARDEN)
        .arg("--workspace")
        .arg(&world.workspace)
        .args(args)
        .env("WARDEN_CONFIG_DIR", &world.config_dir)
        .env("HOME", &world.home)
        .env("TMPDIR", world.dir.path())
        .env_remove("RUST_LOG")
        .env_remove("WARDEN_AUDIT_KEY")
        .current_dir(&world.workspace)
        .output()
        .expect("run warden")
}

fn status(world: &World) -> serde_json::Value {
    let out = warden(world, &["mcp", "status", "--json"]);
    let doc = stdout_json(&out);
    doc["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "py").cloned())
        .unwrap_or_else(|| panic!("no py in {doc}"))
}

#[test]
fn changing_an_approved_script_asks_again() {
    let world = World::new();
    populate(&world);
    let script = world.workspace.join("server.py");
    std::fs::copy(manifest().join("tests/python/resolving_server.py"), &script).unwrap();
    std::fs::write(
        world.workspace.join(".mcp.json"),
        serde_json::to_string_pretty(&json!({"mcpServers": {"py": {
            "command": venv().join("bin/python"),
            "args": ["server.py", "--marker", world.marker],
            "sandbox": {"read": ["${WORKSPACE}"]},
        }}}))
        .unwrap(),
    )
    .unwrap();

    let s = status(&world);
    assert_eq!(s["state"], "pending_approval", "{s}");
    assert!(
        s["error"].as_str().unwrap_or("").contains("never approved"),
        "{s}"
    );

    let out = warden(&world, &["mcp", "approve", "py", "--yes"]);
    let shown = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("server.py (sha256"),
        "the approval shows the script: {shown}"
    );
    let s = status(&world);
    assert_eq!(s["state"], "connected", "{s}");

    // The repository changes the script: the new code does not run.
    let mut text = std::fs::read_to_string(&script).unwrap();
    text.push_str("\nprint('new code')\n");
    std::fs::write(&script, text).unwrap();
    let s = status(&world);
    assert_eq!(s["state"], "pending_approval", "{s}");
    let why = s["error"].as_str().unwrap_or("");
    assert!(why.contains("server.py") && why.contains("changed"), "{s}");
    let out = warden(
        &world,
        &["call", "py", "read_note", "--args", r#"{"id": 1}"#],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("warden mcp approve py"));

    // Approving again (after looking) lets it run.
    let out = warden(&world, &["mcp", "approve", "py", "--yes"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(status(&world)["state"], "connected");

    // A configuration change is named as such.
    std::fs::write(
        world.workspace.join(".mcp.json"),
        serde_json::to_string_pretty(&json!({"mcpServers": {"py": {
            "command": venv().join("bin/python"),
            "args": ["server.py", "--marker", world.marker, "--extra"],
            "sandbox": {"read": ["${WORKSPACE}"]},
        }}}))
        .unwrap(),
    )
    .unwrap();
    let s = status(&world);
    assert_eq!(s["state"], "pending_approval", "{s}");
    assert!(
        s["error"]
            .as_str()
            .unwrap_or("")
            .contains("configuration changed"),
        "{s}"
    );
    assert!(eventually(10.0, || world.leftover_processes().is_empty()));
}
