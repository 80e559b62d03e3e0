//! `warden mcp status --json` and `mcp list`: the documents of CONTRACT §2,
//! with servers that work, fail, hang or are not admitted, side by side.

mod cli_support;

use cli_support::{WARDEN, World, audit_lines, stderr, stdout_json};
use serde_json::{Value, json};

fn server<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no server {name} in {doc}"))
}

#[test]
fn status_shows_each_server_as_it_is() {
    let world = World::new();
    let mut silent = world.fixture();
    silent["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("--silent"));
    silent["timeout"] = json!(1.5);
    let mut off = world.notes("off");
    off["disabled"] = json!(true);
    let mut blocked = world.notes("blocked");
    blocked["trust"] = json!("blocked");
    world.write_config(&json!({
        "mcpServers": {
            "fx": world.fixture(),
            "silent": silent,
            "off": off,
            "blocked": blocked,
            "broken": {"command": WARDEN, "args": ["example-server", "no-such-server"]},
        },
        "permissions": {"deny": ["mcp__fx__crash"]},
    }));
    let started = std::time::Instant::now();
    let out = world.run(&["mcp", "status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        started.elapsed().as_secs_f64() < 10.0,
        "a hanging server blocked the others"
    );
    let doc = stdout_json(&out);

    let fx = server(&doc, "fx");
    for key in [
        "name",
        "state",
        "transport",
        "protocol",
        "error",
        "sandbox",
        "tools",
        "skipped_tools",
    ] {
        assert!(fx.get(key).is_some(), "{key} missing from {fx}");
    }
    assert_eq!(fx["state"], "connected");
    assert_eq!(fx["transport"], "stdio");
    assert!(fx["protocol"].as_str().is_some_and(|p| p.starts_with("20")));
    assert_eq!(fx["sandbox"]["enabled"], true);
    let tools = fx["tools"].as_array().unwrap();
    let echo = tools
        .iter()
        .find(|t| t["name"] == "echo")
        .expect("echo listed");
    assert_eq!(echo["qualified"], "mcp__fx__echo");
    assert!(echo.get("description").is_some() && echo.get("annotations").is_some());
    // Denied without conditions: never shown.
    assert!(!tools.iter().any(|t| t["name"] == "crash"));
    let skipped: Vec<&str> = fx["skipped_tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        skipped.contains(&"a.b") && skipped.contains(&"a_b"),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|n| n.starts_with("a_tool_name_that_is_long")),
        "{skipped:?}"
    );

    let silent = server(&doc, "silent");
    assert_eq!(silent["state"], "error");
    assert!(silent["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(server(&doc, "off")["state"], "disabled");
    assert_eq!(server(&doc, "blocked")["state"], "blocked");
    assert_eq!(server(&doc, "broken")["state"], "error");
    // A call to the disabled one names its state as status does.
    let out = world.run(&["call", "off", "list_notes"]);
    assert_ne!(out.status.code(), Some(0));
    let said = stderr(&out);
    assert!(said.contains("is not available: disabled"), "{said}");
    assert!(world.leftover_processes().is_empty());
}

#[test]
fn project_servers_wait_for_approval_of_their_exact_config() {
    let world = World::new();
    // No --config: the project file in the workspace is found and its
    // server needs approval before it starts.
    let project = json!({"mcpServers": {"proj": world.notes("proj")}});
    std::fs::write(world.workspace.join(".mcp.json"), project.to_string()).unwrap();
    let status = |world: &World| {
        let out = std::process::Command::new(WARDEN)
            .args(["mcp", "status", "--json", "--workspace"])
            .arg(&world.workspace)
            .env("WARDEN_CONFIG_DIR", &world.config_dir)
            .env("HOME", &world.home)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout_json(&out)
    };
    assert_eq!(server(&status(&world), "proj")["state"], "pending_approval");
    // A call to it says what to run, once.
    let out = std::process::Command::new(WARDEN)
        .args(["call", "proj", "list_notes", "--workspace"])
        .arg(&world.workspace)
        .env("WARDEN_CONFIG_DIR", &world.config_dir)
        .env("HOME", &world.home)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let said = stderr(&out);
    assert_eq!(said.matches("warden mcp approve proj").count(), 1, "{said}");
    let out = std::process::Command::new(WARDEN)
        .args(["mcp", "approve", "proj", "--yes", "--workspace"])
        .arg(&world.workspace)
        .env("WARDEN_CONFIG_DIR", &world.config_dir)
        .env("HOME", &world.home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(server(&status(&world), "proj")["state"], "connected");
    // A different `proj` (other arguments) is not covered by that approval.
    let changed = json!({"mcpServers": {"proj": world.notes("proj2")}});
    std::fs::write(world.workspace.join(".mcp.json"), changed.to_string()).unwrap();
    assert_eq!(server(&status(&world), "proj")["state"], "pending_approval");
}

#[test]
fn concurrent_approvals_lose_nothing() {
    let world = World::new();
    let names: Vec<String> = (0..6).map(|i| format!("p{i}")).collect();
    let servers: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.clone(), world.notes(n))).collect();
    std::fs::write(
        world.workspace.join(".mcp.json"),
        json!({"mcpServers": servers}).to_string(),
    )
    .unwrap();
    let children: Vec<_> = names
        .iter()
        .map(|name| {
            std::process::Command::new(WARDEN)
                .args(["mcp", "approve", name, "--yes", "--workspace"])
                .arg(&world.workspace)
                .env("WARDEN_CONFIG_DIR", &world.config_dir)
                .env("HOME", &world.home)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let out = std::process::Command::new(WARDEN)
        .args(["mcp", "list", "--json", "--workspace"])
        .arg(&world.workspace)
        .env("WARDEN_CONFIG_DIR", &world.config_dir)
        .env("HOME", &world.home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let approvals = std::fs::read_to_string(world.config_dir.join("approvals.json")).unwrap();
    for name in &names {
        assert!(
            approvals.contains(&format!("\"{name}\"")),
            "{name} lost: {approvals}\n{text}"
        );
    }
}

/// The attack: `mcp approve` when the audit log cannot take the record
/// (here `--audit /dev/full`, refused as no regular file; a full disk or a
/// read-only log alike). The approval was saved first and the failure
/// reported after ("the approval change was made but could not be
/// recorded"): the project server then ran in later sessions with no
/// approval anywhere in the log. The record is written first now; an
/// approval that cannot be recorded is not made. (A revocation still is:
/// it only takes a permission away.)
#[test]
fn an_approval_that_cannot_be_recorded_is_not_made() {
    let world = World::new();
    let project = json!({"mcpServers": {"proj": world.notes("proj")}});
    std::fs::write(world.workspace.join(".mcp.json"), project.to_string()).unwrap();
    let warden = |args: &[&str]| {
        std::process::Command::new(WARDEN)
            .args(args)
            .arg("--workspace")
            .arg(&world.workspace)
            .env("WARDEN_CONFIG_DIR", &world.config_dir)
            .env("HOME", &world.home)
            .env_remove("WARDEN_AUDIT_KEY")
            .output()
            .unwrap()
    };
    let state = || {
        let out = warden(&["mcp", "status", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        server(&stdout_json(&out), "proj")["state"].clone()
    };
    let out = warden(&[
        "--audit",
        "/dev/full",
        "--json",
        "mcp",
        "approve",
        "proj",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = stdout_json(&out);
    assert_eq!(report["outcome"], "audit_failed", "{report}");
    assert_eq!(state(), "pending_approval", "approved, unrecorded");

    let out = warden(&["mcp", "approve", "proj", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(state(), "connected");
    let log = world.config_dir.join("audit.jsonl");
    let approvals: Vec<Value> = audit_lines(&log)
        .into_iter()
        .filter(|r| r["event"] == "approval" && r["server"] == "proj")
        .collect();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0]["action"], "approved");
}
