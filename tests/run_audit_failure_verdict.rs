//! `warden run` when the audit log stops taking writes mid-run (a full
//! disk, made here with `prlimit` as tests/audit_fail_closed.rs does):
//! the calls that cannot be recorded are not sent (`audit_failed`), and
//! the run must not end as a success. It went on and, once the model
//! answered, ended `completed` with exit 0: a CI job passed although
//! warden could not record what was done in it.

mod cli_support;

use std::process::{Command, Stdio};

use cli_support::{World, audit_lines, calls_received, eventually};
use serde_json::{Value, json};

#[test]
fn a_run_whose_calls_cannot_be_audited_is_no_success() {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    let log = world.path("audit.jsonl");
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": log, "fsync": "every_record"},
    }));
    let script = world.path("model.json");
    let turns = json!([
        {"tool_calls": [{"name": "mcp__fx__sleep", "arguments": {"ms": 8000}}]},
        {"tool_calls": [{"name": "mcp__fx__echo", "arguments": {"x": 1}}]},
        {"text": "all done"}
    ]);
    std::fs::write(&script, turns.to_string()).expect("script");
    let model = format!("scripted:{}", script.display());
    // SIGXFSZ ignored, so a write over the limit fails with EFBIG instead
    // of killing warden.
    let warden = world.warden(&["run", "--ci", "--json", "--model", &model, "--task", "t"]);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"trap "" XFSZ; exec "$0" "$@""#]);
    let mut cmd = cli_support::exec_within(cmd, &warden);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warden");
    // The sleep call is under way (its pending record written): the disk
    // "fills up" now.
    assert!(
        eventually(30.0, || calls_received(&counter)
            .iter()
            .any(|c| c == "sleep")),
        "the call never reached the server"
    );
    let size = std::fs::metadata(&log).map_or(0, |m| m.len());
    let status = Command::new("prlimit")
        .args([
            "--pid",
            &child.id().to_string(),
            &format!("--fsize={size}:unlimited"),
        ])
        .status()
        .expect("run prlimit");
    assert!(status.success(), "prlimit failed");

    let output = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&output.stderr);
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not one JSON object ({e}); stderr:\n{err}"));
    assert_eq!(
        calls_received(&counter),
        ["sleep"],
        "the echo was sent unrecorded"
    );
    assert_eq!(report["status"], "audit_failed", "{report}\n{err}");
    assert_eq!(report["outcome"], "audit_failed", "{report}");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("audit")),
        "{report}"
    );
    assert_eq!(output.status.code(), Some(1), "{report}\n{err}");
    // Nothing was written after the limit (not even a part of a record).
    assert_eq!(std::fs::metadata(&log).map_or(0, |m| m.len()), size);
    assert!(!audit_lines(&log).is_empty());
}
