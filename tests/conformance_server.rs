//! The official MCP conformance suite's server scenarios
//! (npm `@modelcontextprotocol/conformance`, `conformance server`) run
//! against `warden gateway --listen --no-prefix` in front of the Python
//! fixture server `tests/python/conformance_fixture_server.py` (PyPI `mcp`,
//! venv of tests/python/setup-venv.sh).
//!
//! The suite is the one scripts/test-deps.sh installs in tests/conformance
//! (with a Node 22 binary beside it), or the `conformance` executable
//! `WARDEN_CONFORMANCE_BIN` names. Where neither is there, or no Node ≥ 22
//! is found, it prints SKIPPED and passes.
//!
//! Every scenario passes: warden asks the fixture for 2025-11-25, so its
//! elicitation and sampling reach the suite's client (sampling allowed by
//! the rule `sampling__fx`) and it takes `resources/subscribe`.
//! `KNOWN_FAILURES` lists scenarios expected to fail (none today), checked
//! so that a change shows up.

mod gateway_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gateway_support::{World, eventually, gateway_command, interpreter_prefix, python_venv};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

/// Scenarios that do not pass today, and why.
const KNOWN_FAILURES: &[&str] = &[];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_conformance_server_scenarios_through_the_gateway() {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance/node_modules/.bin/conformance");
    let suite = std::env::var_os("WARDEN_CONFORMANCE_BIN")
        .map(PathBuf::from)
        .or_else(|| installed.exists().then_some(installed));
    let Some(suite) = suite else {
        eprintln!(
            "SKIPPED: the conformance suite is not installed (scripts/test-deps.sh, or set \
             WARDEN_CONFORMANCE_BIN)"
        );
        return;
    };
    let bin_dir = suite.parent().map(Path::to_path_buf).unwrap_or_default();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let node = std::process::Command::new("node")
        .arg("--version")
        .env("PATH", &path)
        .output()
        .expect("node");
    let version = String::from_utf8_lossy(&node.stdout);
    let major: u32 = version
        .trim()
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 22 {
        eprintln!("SKIPPED: the conformance suite needs Node 22 (found {version})");
        return;
    }
    let world = World::new();
    let venv = python_venv();
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    world.write_config(&json!({
        "mcpServers": {"fx": {
            "command": venv.join("bin/python"),
            "args": [scripts.join("conformance_fixture_server.py"), "--marker", world.marker],
            "timeout": 30,
            "sandbox": {"read": [venv, interpreter_prefix(&venv), scripts]}
        }},
        "permissions": {"allow": ["mcp__fx__*", "resource__fx", "prompt__fx__*", "sampling__fx"]},
        "audit": {"path": world.path("audit.jsonl")}
    }));
    let mut child = gateway_command(
        &world,
        &["--listen", "127.0.0.1:0", "--no-prefix", "--no-auth"],
    )
    .spawn()
    .expect("spawn gateway");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = line.strip_prefix("warden gateway: listening on ") {
                return url.trim().to_string();
            }
        }
        panic!("the gateway never said where it listens");
    })
    .await
    .expect("listening in time");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let out = world.path("conformance");
    let run = tokio::time::timeout(
        Duration::from_secs(600),
        tokio::process::Command::new(&suite)
            .args(["server", "--url", &url, "--suite", "all", "-o"])
            .arg(&out)
            .env("PATH", &path)
            .env("HOME", &world.home)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the suite finishes")
    .expect("run the suite");
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
    let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;

    // scenario → (passed, first failure)
    let mut results: BTreeMap<String, (bool, String)> = BTreeMap::new();
    for entry in std::fs::read_dir(&out).expect("results folder").flatten() {
        let checks = entry.path().join("checks.json");
        let Ok(text) = std::fs::read_to_string(&checks) else {
            continue;
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        let name = name
            .strip_prefix("server-")
            .unwrap_or(&name)
            .split("-20")
            .next()
            .unwrap_or(&name)
            .to_string();
        let checks: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        let failure = checks
            .iter()
            .find(|c| c["status"] == "FAILURE")
            .map(|c| c["errorMessage"].as_str().unwrap_or_default().to_string());
        results.insert(name, (failure.is_none(), failure.unwrap_or_default()));
    }
    assert!(
        results.len() >= 30,
        "too few scenarios ran: {results:?}\n{}",
        String::from_utf8_lossy(&run.stdout)
    );
    let unexpected: Vec<_> = results
        .iter()
        .filter(|(name, (passed, _))| !passed && !KNOWN_FAILURES.contains(&name.as_str()))
        .collect();
    assert!(unexpected.is_empty(), "failed: {unexpected:?}");
    let fixed: Vec<_> = results
        .iter()
        .filter(|(name, (passed, _))| *passed && KNOWN_FAILURES.contains(&name.as_str()))
        .map(|(name, _)| name)
        .collect();
    assert!(
        fixed.is_empty(),
        "now passing, take them off KNOWN_FAILURES: {fixed:?}"
    );
    for name in [
        "tools-call-elicitation",
        "tools-call-sampling",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "resources-subscribe",
        "resources-unsubscribe",
        "resources-read-text",
        "prompts-get-with-args",
        "tools-call-with-progress",
    ] {
        assert!(results.contains_key(name), "{name} did not run");
    }
    assert!(
        eventually(10.0, || world.leftover_processes().is_empty()),
        "left behind: {:?}",
        world.leftover_processes()
    );
}
