//! The issue-11 end-to-end world: a scratch workspace with a public and a
//! secret file, a secret outside it, and the two resolving fixture servers
//! (Python: `tests/python/resolving_server.py` on the official SDK in the
//! test venv; Node: `tests/npm/resolving-server.mjs` on the official SDK
//! that `tests/npm` installs), launched by `warden` in its sandbox with
//! read access to the world. They resolve paths and `file:` URIs as real
//! servers do; each read answers `{"resolved", "content"|"error"}`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

#[path = "../cli_support/mod.rs"]
pub mod cli_support;

#[allow(unused_imports)]
pub use cli_support::{World, audit_lines, eventually, stderr, stdout_json};

pub const PUBLIC: &str = "PUBLIC-CONTENT";
pub const SECRET: &str = "SECRET-KEY-CONTENT";
pub const OUTSIDE: &str = "OUTSIDE-SECRET-CONTENT";

/// The two fixture servers, by the name they get in configurations.
pub const SERVERS: [&str; 2] = ["py", "node"];

pub fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn venv() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(manifest().join("tests/python/setup-venv.sh"))
        .output()
        .expect("run tests/python/setup-venv.sh");
    assert!(
        out.status.success(),
        "setup-venv.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Workspace files: `public/x`, `secrets/key`; outside it: `outside/secret`.
pub fn populate(world: &World) {
    let ws = &world.workspace;
    std::fs::create_dir_all(ws.join("public")).unwrap();
    std::fs::create_dir_all(ws.join("secrets")).unwrap();
    std::fs::write(ws.join("public/x"), PUBLIC).unwrap();
    std::fs::write(ws.join("secrets/key"), SECRET).unwrap();
    std::fs::create_dir_all(world.path("outside")).unwrap();
    std::fs::write(world.path("outside/secret"), OUTSIDE).unwrap();
}

pub fn root(world: &World) -> String {
    world.dir.path().to_string_lossy().into_owned()
}

pub fn ws(world: &World) -> String {
    world.workspace.to_string_lossy().into_owned()
}

/// A server entry for `name` (`py` or `node`), sandboxed, reading the world.
pub fn server(world: &World, name: &str) -> Value {
    let read = [root(world)];
    match name {
        "py" => {
            let venv = venv();
            json!({
                "command": venv.join("bin/python"),
                "args": [manifest().join("tests/python/resolving_server.py"), "--marker", world.marker],
                "sandbox": {"read": read.iter().cloned().chain([manifest().join("tests/python").to_string_lossy().into_owned()]).collect::<Vec<_>>()},
            })
        }
        "node" => json!({
            "command": "node",
            "args": [manifest().join("tests/npm/resolving-server.mjs"), "--marker", world.marker],
            "sandbox": {"read": read.iter().cloned().chain([manifest().join("tests/npm").to_string_lossy().into_owned()]).collect::<Vec<_>>()},
        }),
        other => panic!("unknown fixture server {other}"),
    }
}

/// `warden call SERVER TOOL --json --args ARGS`.
pub fn call(world: &World, server: &str, tool: &str, args: &Value) -> (Option<i32>, Value) {
    let out = world.run(&["call", server, tool, "--json", "--args", &args.to_string()]);
    (out.status.code(), stdout_json(&out))
}

/// The text the server answered, parsed (`{"resolved", "content"|"error"}`).
pub fn answer(report: &Value) -> Value {
    let text = report["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    serde_json::from_str(text).unwrap_or(Value::String(text.to_string()))
}

/// Whether the real server would open `secret` for these arguments: the
/// control run, with everything allowed, reads it.
pub fn control_reads(world: &World, server_name: &str, tool: &str, args: &Value, expect: &str) {
    world.write_config(&json!({
        "mcpServers": {server_name: server(world, server_name)},
        "permissions": {"allow": [format!("mcp__{server_name}__*")]},
        "policy": [],
    }));
    let (code, report) = call(world, server_name, tool, args);
    assert_eq!(code, Some(0), "{report}");
    let answer = answer(&report);
    assert!(
        answer.to_string().contains(expect),
        "control: {server_name} {tool} {args} should read `{expect}`, got {answer}"
    );
}

pub fn assert_denied(code: Option<i32>, report: &Value, fragment: &str) {
    assert_eq!(code, Some(3), "{report}");
    assert_eq!(report["decision"]["effect"], "deny", "{report}");
    assert_eq!(report["outcome"], "denied", "{report}");
    let reasons = report["decision"]["reasons"].to_string();
    assert!(reasons.contains(fragment), "`{fragment}` not in {reasons}");
    assert!(report["result"].is_null());
}

pub fn npm_ready() -> bool {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/npm/node_modules/@modelcontextprotocol/sdk")
        .exists()
}
