//! The GitHub Actions example (`examples/github-actions/`) stays valid: its
//! config loads with warden's own loader, the workflow runs the command the
//! contract promises, and that command, run here as the workflow runs it
//! (scripted default model, `policies/ci.rego`, `--ci --fail-on-deny`),
//! completes without a denial and leaves an audit log that verifies.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use warden::config::{self, LoadOptions, Scope, Trust};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn example(name: &str) -> PathBuf {
    repo().join("examples/github-actions").join(name)
}

#[test]
fn the_ci_config_loads_with_the_loader() {
    let config_dir = tempfile::tempdir().expect("temp dir");
    let options = LoadOptions {
        config_file: Some(example("warden-ci.json")),
        workspace: repo().to_path_buf(),
        config_dir: config_dir.path().to_path_buf(),
    };
    let env = |name: &str| match name {
        "WARDEN_BIN" => Some(WARDEN.to_string()),
        other => std::env::var(other).ok(),
    };
    let loaded = config::load_with_env(&options, &env).expect("the example config is valid");
    let notes = loaded.servers.get("notes").expect("the notes server");
    assert_eq!(notes.scope, Scope::Explicit);
    assert_eq!(notes.trust, Trust::Untrusted);
    assert!(notes.sandbox.enabled);
    assert_eq!(loaded.rules.len(), 4);
    // `"policy": []`: the workflow passes policies/ci.rego alone.
    assert_eq!(loaded.policies.as_deref().map(<[_]>::len), Some(0));
    assert!(!loaded.default_policy);
    // Without WARDEN_BIN the command is `warden` on PATH: an empty PATH
    // makes that a clear error naming the key, not a silent skip.
    let bare = |name: &str| match name {
        "PATH" => Some(String::new()),
        _ => None,
    };
    let error = config::load_with_env(&options, &bare).expect_err("no warden on PATH");
    assert!(
        error.to_string().contains("mcpServers.notes.command"),
        "{error}"
    );
}

#[test]
fn the_workflow_runs_the_promised_command_and_keeps_the_audit_log() {
    let workflow =
        std::fs::read_to_string(example("warden-agent.yml")).expect("the workflow exists");
    for needle in [
        "cargo build --release --locked",
        "run --ci --json --fail-on-deny",
        "--config examples/github-actions/warden-ci.json",
        "--policy policies/ci.rego",
        "--model \"$MODEL\"",
        "--task \"$TASK\"",
        "audit verify \"$AUDIT_LOG\"",
        "actions/upload-artifact@v4",
        "scripted:examples/github-actions/scripted-task.json",
    ] {
        assert!(workflow.contains(needle), "the workflow lacks `{needle}`");
    }
    // Inputs reach the shell through env, never pasted into a script.
    for line in workflow.lines().filter(|l| l.contains("${{ inputs.")) {
        assert!(
            line.trim_start().starts_with("TASK:") || line.trim_start().starts_with("MODEL:"),
            "an input is used outside env: {line}"
        );
    }
    assert!(!workflow.contains('\t'), "YAML must not contain tabs");
}

#[test]
fn the_workflow_command_completes_under_the_ci_policy() {
    let tmp = tempfile::Builder::new()
        .prefix("warden-gha-")
        .tempdir()
        .expect("temp dir");
    let audit = tmp.path().join("warden-audit.jsonl");
    let output = Command::new(WARDEN)
        .args(["run", "--ci", "--json", "--fail-on-deny", "--config"])
        .arg(example("warden-ci.json"))
        .arg("--policy")
        .arg(repo().join("policies/ci.rego"))
        .arg("--audit")
        .arg(&audit)
        .args(["--max-turns", "20", "--max-tool-calls", "40"])
        .arg("--model")
        .arg(format!(
            "scripted:{}",
            example("scripted-task.json").display()
        ))
        .args(["--task", "Summarise the notes."])
        .current_dir(repo())
        .env("WARDEN_BIN", WARDEN)
        .env("WARDEN_CONFIG_DIR", tmp.path().join("cfg"))
        .env("HOME", tmp.path().join("home"))
        .env_remove("WARDEN_MODEL")
        .env_remove("WARDEN_AUDIT_KEY")
        .env_remove("RUST_LOG")
        .output()
        .expect("run warden");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON report");
    assert_eq!(report["status"], "completed");
    assert_eq!(report["denied_calls"], 0);
    assert_eq!(report["tool_calls"], 2);
    assert!(
        report["final_text"]
            .as_str()
            .is_some_and(|t| t.contains("two notes"))
    );
    for call in report["calls"].as_array().expect("calls") {
        assert_eq!(call["decision"]["effect"], "allow", "{call}");
        assert_eq!(call["outcome"], "ok", "{call}");
    }
    let verify = Command::new(WARDEN)
        .args(["audit", "verify"])
        .arg(&audit)
        .env_remove("WARDEN_AUDIT_KEY")
        .output()
        .expect("verify");
    assert_eq!(verify.status.code(), Some(0), "{verify:?}");
    assert!(String::from_utf8_lossy(&verify.stdout).contains("chain intact"));
}
