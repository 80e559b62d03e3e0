//! The official MCP Inspector CLI (npm `@modelcontextprotocol/inspector`)
//! as a client of `warden gateway --stdio`: it lists the enforced tools (a
//! tool denied outright is not among them) and a call warden would `ask`
//! about comes back, without `--ask-client`, as an error result naming the
//! denial (the Inspector's exit 5, `tool_is_error`).
//!
//! Runs only when the Inspector is installed: `WARDEN_TEST_INSPECTOR` (the
//! `mcp-inspector`/`inspector` executable), `tests/inspector/node_modules/
//! .bin/mcp-inspector` (installed by scripts/test-deps.sh), or
//! `mcp-inspector` on PATH; otherwise prints SKIPPED.
//! Temporary HOME and config dir only.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn inspector() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("WARDEN_TEST_INSPECTOR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let local = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/inspector/node_modules/.bin/mcp-inspector");
    if local.is_file() {
        return Some(local);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("mcp-inspector"))
        .find(|p| p.is_file())
}

fn run(inspector: &Path, dir: &Path, config: &Path, method: &[&str]) -> Output {
    // The Inspector's own folder first on PATH: a Node it ships wins.
    let mut path = vec![inspector.parent().unwrap_or(Path::new("/")).to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&p));
    }
    Command::new(inspector)
        .args(["--cli", "--format", "json", "-q"])
        // A stdio server gets only HOME, PATH, SHELL, TERM and these.
        .args([
            "-e",
            &format!("WARDEN_CONFIG_DIR={}", dir.join("config").display()),
        ])
        .args(["-e", &format!("TMPDIR={}", dir.display())])
        .args(method)
        .arg("--")
        .arg(WARDEN)
        .arg("--config")
        .arg(config)
        .args(["gateway", "--stdio"])
        .env("PATH", std::env::join_paths(path).expect("PATH"))
        .env("HOME", dir.join("home"))
        .current_dir(dir)
        .output()
        .expect("run the Inspector")
}

#[test]
fn inspector_lists_enforced_tools_and_sees_a_denial() {
    let Some(inspector) = inspector() else {
        println!("SKIPPED: the MCP Inspector CLI is not installed (set WARDEN_TEST_INSPECTOR)");
        return;
    };
    let tmp = tempfile::Builder::new()
        .prefix("warden-inspector-test-")
        .tempdir()
        .expect("tempdir");
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("home")).expect("mkdir");
    let config = dir.join("warden.json");
    let value = json!({
        "mcpServers": {"notes": {"command": WARDEN, "args": ["example-server", "notes"]}},
        "permissions": {
            "allow": ["mcp__notes__list_notes", "mcp__notes__read_note"],
            "deny": ["mcp__notes__delete_note"]
        }
    });
    std::fs::write(&config, value.to_string()).expect("write");

    let listed = run(&inspector, dir, &config, &["--method", "tools/list"]);
    assert_eq!(listed.status.code(), Some(0), "{listed:?}");
    let listed: Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    let mut names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["notes__add_note", "notes__list_notes", "notes__read_note"]
    );

    let allowed = run(
        &inspector,
        dir,
        &config,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "notes__read_note",
            "--tool-args-json",
            "{\"id\": 2}",
        ],
    );
    assert_eq!(allowed.status.code(), Some(0), "{allowed:?}");

    let asked = run(
        &inspector,
        dir,
        &config,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "notes__add_note",
            "--tool-args-json",
            "{\"title\": \"t\", \"body\": \"b\"}",
        ],
    );
    assert_eq!(asked.status.code(), Some(5), "{asked:?}");
    let result: Value = serde_json::from_slice(&asked.stdout).expect("JSON");
    assert_eq!(result["result"]["isError"], json!(true));
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Denied by warden"), "{text}");
    assert!(text.contains("no one could be asked"), "{text}");
}
