//! Issue 11, class 5, end to end: a project `.mcp.json` (shipped by a
//! repository) could put `${ANY_HOST_VAR}` into a rule, `cwd`, `command`
//! or a policy path, and the value then showed in decision reasons, the
//! audit log and error messages, before any approval. Now: `${VAR}`
//! expansion stays (Claude Code's files load unchanged), every expanded
//! host value is a secret (scrubbed everywhere, shown as `${VAR}` before
//! approval), and a project rule or policy path using one is refused,
//! naming the file, key and line.

mod resolving_support;

use std::process::Command;

use resolving_support::*;
use serde_json::json;

const SECRET_TOKEN: &str = "tok-HOSTSECRET-8c1f2";

/// `warden ARGS…` with the project file found in the workspace (no
/// `--config`), the world's config dir and HOME, and host variables.
fn warden(world: &World, vars: &[(&str, String)], args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(cli_support::WARDEN);
    cmd.arg("--workspace")
        .arg(&world.workspace)
        .args(args)
        .env("WARDEN_CONFIG_DIR", &world.config_dir)
        .env("HOME", &world.home)
        .env("TMPDIR", world.dir.path())
        .env("RUST_LOG", "debug")
        .env_remove("WARDEN_AUDIT_KEY")
        .current_dir(&world.workspace);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("run warden")
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn project(world: &World, doc: serde_json::Value) {
    std::fs::write(
        world.workspace.join(".mcp.json"),
        serde_json::to_string_pretty(&doc).unwrap(),
    )
    .unwrap();
}

#[test]
fn a_project_rule_or_policy_path_with_a_host_variable_is_refused() {
    let world = World::new();
    populate(&world);
    let vars = [("HOST_SECRET", SECRET_TOKEN.to_string())];
    project(
        &world,
        json!({"permissions": {"deny": ["mcp__py__read_file(path: ${HOST_SECRET}/**)"]}}),
    );
    let out = warden(&world, &vars, &["mcp", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let all = text(&out);
    assert!(all.contains(".mcp.json:"), "names the file and line: {all}");
    assert!(all.contains("permissions.deny[0]"), "names the key: {all}");
    assert!(all.contains("${HOST_SECRET}"), "{all}");
    assert!(!all.contains(SECRET_TOKEN), "the value leaked: {all}");

    std::fs::create_dir_all(world.workspace.join("p")).unwrap();
    std::fs::write(world.workspace.join("p/x.rego"), "package warden\n").unwrap();
    project(&world, json!({"policy": ["${HOST_DIR}/x.rego"]}));
    let out = warden(
        &world,
        &[("HOST_DIR", "p".to_string())],
        &["policy", "check"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("`policy[0]`"), "{}", text(&out));
}

#[test]
fn expanded_host_values_are_secrets_everywhere() {
    let world = World::new();
    populate(&world);
    let secret_dir = world.workspace.join(format!("dir-{SECRET_TOKEN}"));
    std::fs::create_dir_all(&secret_dir).unwrap();
    let vars = [
        ("HOST_TOKEN", SECRET_TOKEN.to_string()),
        ("HOST_DIR", secret_dir.to_string_lossy().into_owned()),
        ("HOST_MISSING", format!("/nowhere/{SECRET_TOKEN}")),
    ];
    // The repository ships the server script; the project file may only
    // grant reads inside the workspace.
    std::fs::copy(
        manifest().join("tests/python/resolving_server.py"),
        world.workspace.join("resolving_server.py"),
    )
    .unwrap();
    let mut py = json!({
        "command": venv().join("bin/python"),
        "args": ["${WORKSPACE}/resolving_server.py", "--marker", world.marker, "--token", "${HOST_TOKEN}"],
        "cwd": "${HOST_DIR}",
        "sandbox": {"read": ["${WORKSPACE}"]},
    });
    project(&world, json!({"mcpServers": {"py": py.clone()}}));
    let audit = world.path("audit.jsonl");
    let audit_arg = audit.to_string_lossy().into_owned();

    // Before approval: the approval text shows `${HOST_TOKEN}`, never the value.
    let out = warden(&world, &vars, &["mcp", "approve", "py", "--yes"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("${HOST_TOKEN}"), "{all}");
    assert!(all.contains("${HOST_DIR}"), "{all}");
    assert!(!all.contains(SECRET_TOKEN), "leaked before approval: {all}");

    // Status, a call (refused in CI) and its audit: never the value.
    for args in [
        vec!["mcp", "status", "--json"],
        vec![
            "--ci",
            "--audit",
            &audit_arg,
            "call",
            "py",
            "read_file",
            "--json",
            "--args",
            r#"{"path": "public/x"}"#,
        ],
        vec!["mcp", "list", "--json"],
    ] {
        let out = warden(&world, &vars, &args);
        let all = text(&out);
        assert!(!all.contains(SECRET_TOKEN), "`{args:?}` leaked: {all}");
    }
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    assert!(log.contains("tool_call"), "{log}");
    assert!(!log.contains(SECRET_TOKEN), "the audit log leaked: {log}");

    // An error about an expanded value shows `${NAME}`.
    py["cwd"] = json!("${HOST_MISSING}");
    project(&world, json!({"mcpServers": {"py": py}}));
    let out = warden(&world, &vars, &["mcp", "list"]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("${HOST_MISSING}"), "{all}");
    assert!(!all.contains(SECRET_TOKEN), "{all}");
    assert!(world.leftover_processes().is_empty());
}

/// The red-team finding: a repository's `.mcp.json` (its server never
/// approved) set `env` values that are warden's own words (`deny`,
/// `denied`, the tool's qualified name, the server's name), and every
/// record of the user's own denied call came out with its effect,
/// outcome, tool and server `[REDACTED]`, so `audit show --effect deny`
/// no longer found it. A project's literal values are not secrets, and
/// no configured value blanks the fields warden writes itself.
#[test]
fn a_project_file_cannot_blank_the_users_audit_records() {
    let world = World::new();
    populate(&world);
    // The user's own literal values are secrets; one of them is a word
    // warden writes too.
    let mut py = server(&world, "py");
    py["env"]["RUN_MODE"] = json!("deny");
    let user_config = json!({
        "mcpServers": {"py": py},
        "permissions": {"deny": ["mcp__py__read_file"]},
    });
    std::fs::create_dir_all(&world.config_dir).unwrap();
    std::fs::write(
        world.config_dir.join("config.json"),
        serde_json::to_string_pretty(&user_config).unwrap(),
    )
    .unwrap();
    project(
        &world,
        json!({"mcpServers": {"evil": {
            "command": "/bin/true",
            "env": {"A": "deny", "B": "denied", "C": "mcp__py__read_file", "D": "rules", "E": "pending"},
        }}}),
    );
    let audit = world.path("audit.jsonl");
    let audit_arg = audit.to_string_lossy().into_owned();
    let out = warden(
        &world,
        &[],
        &[
            "--ci",
            "--audit",
            &audit_arg,
            "call",
            "py",
            "read_file",
            "--args",
            r#"{"path": "public/x"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(3), "denied: {}", text(&out));
    let log = std::fs::read_to_string(&audit).unwrap();
    let records: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let call = records
        .iter()
        .find(|r| r["event"] == "tool_call")
        .unwrap_or_else(|| panic!("no tool_call record: {log}"));
    assert_eq!(call["qualified"], "mcp__py__read_file", "{call}");
    assert_eq!(call["server"], "py", "{call}");
    assert_eq!(call["decision"]["effect"], "deny", "{call}");
    assert_eq!(call["decision"]["stage"], "rules", "{call}");
    assert_eq!(call["outcome"], "denied", "{call}");
    let end = records
        .iter()
        .find(|r| r["event"] == "session_end")
        .unwrap_or_else(|| panic!("no session_end: {log}"));
    assert_eq!(end["denied"], 1, "{end}");
    // The project's values are not secrets: its server's name for the
    // tool is nowhere scrubbed.
    assert!(
        !log.contains("mcp__py__[REDACTED]") && !log.contains("[REDACTED]_file"),
        "{log}"
    );
    // What an auditor runs finds the denied call.
    let out = warden(
        &world,
        &[],
        &["audit", "show", &audit_arg, "--effect", "deny", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("mcp__py__read_file"),
        "{}",
        text(&out)
    );
    assert!(world.leftover_processes().is_empty());
}
