//! `warden doctor`, `warden completions`, and the "Examples:" block of
//! every command's `--help`. Each test has its own HOME, config dir and
//! workspace in a temporary folder.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let dir = tempfile::Builder::new()
            .prefix("warden-doctor-test-")
            .tempdir()
            .expect("tempdir");
        for d in ["home", "config", "ws"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("mkdir");
        }
        World { dir }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `warden ARGS` in this world (its HOME, config dir and workspace).
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(WARDEN);
        command
            .args(args)
            .env("HOME", self.path("home"))
            .env("WARDEN_CONFIG_DIR", self.path("config"))
            .env("TMPDIR", self.dir.path())
            .env_remove("RUST_LOG")
            .env_remove("WARDEN_AUDIT_KEY")
            .current_dir(self.path("ws"));
        command
    }
    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run warden")
    }
    fn config(&self, value: &Value) -> String {
        let path = self.path("warden.json");
        std::fs::write(&path, serde_json::to_string_pretty(value).expect("json")).expect("write");
        path.display().to_string()
    }
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn check<'v>(doc: &'v Value, name: &str) -> &'v Value {
    doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == json!(name))
        .unwrap_or_else(|| panic!("no check {name}: {doc:#}"))
}

/// Exit 0 exactly when no check failed, and `ok` says the same.
fn exit_matches(output: &Output, doc: &Value) {
    let failed = doc["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .any(|c| c["status"] == json!("fail"));
    assert_eq!(doc["ok"], json!(!failed));
    assert_eq!(
        output.status.code(),
        Some(if failed { 1 } else { 0 }),
        "{doc:#}"
    );
    for c in doc["checks"].as_array().expect("checks") {
        assert!(["ok", "warn", "fail"].contains(&c["status"].as_str().unwrap_or("")));
        let reason = c["reason"].as_str().expect("reason");
        assert!(!reason.is_empty() && !reason.contains('\n'), "{c}");
    }
}

#[test]
fn doctor_reports_a_healthy_configuration_and_connects() {
    let world = World::new();
    let audit = world.path("logs/audit.jsonl");
    let config = world.config(&json!({
        "mcpServers": {"notes": {"command": WARDEN, "args": ["example-server", "notes"]}},
        "permissions": {"allow": ["mcp__notes__list_notes"]},
        "audit": {"path": audit},
    }));
    let output = world.run(&["--config", &config, "doctor", "--connect", "--json"]);
    let doc = json_of(&output);
    exit_matches(&output, &doc);
    for name in ["config", "server notes", "policies", "audit", "pins"] {
        assert_eq!(check(&doc, name)["status"], json!("ok"), "{doc:#}");
    }
    for name in ["kernel", "sandbox"] {
        check(&doc, name);
    }
    let connect = check(&doc, "connect notes");
    if check(&doc, "sandbox")["status"] == json!("ok") {
        assert_eq!(connect["status"], json!("ok"), "{doc:#}");
        assert!(connect["reason"].as_str().unwrap_or("").contains("tool(s)"));
    }
    // The log the connection wrote verifies on a second run.
    let output = world.run(&["--config", &config, "doctor"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("record(s) verify"), "{text}");
    assert!(
        text.lines()
            .all(|l| l.starts_with("ok  ") || l.starts_with("warn") || l.starts_with("FAIL")),
        "{text}"
    );
}

#[test]
fn doctor_names_what_is_broken() {
    let world = World::new();
    // A policy that does not compile, a tampered audit log, a bad pins file.
    let policy = world.path("bad.rego");
    std::fs::write(&policy, "package warden\ndeny contains msg if {\n").expect("write");
    let audit = world.path("audit.jsonl");
    std::fs::write(&audit, "{\"seq\": 1, \"not\": \"a record\"}\n").expect("write");
    std::fs::write(world.path("config/pins.json"), "not json").expect("write");
    let config = world.config(&json!({
        "mcpServers": {},
        "policy": [policy],
        "audit": {"path": audit},
    }));
    let output = world.run(&["--config", &config, "doctor", "--json"]);
    let doc = json_of(&output);
    exit_matches(&output, &doc);
    assert_eq!(output.status.code(), Some(1));
    for name in ["policies", "audit", "pins"] {
        assert_eq!(
            check(&doc, name)["status"],
            json!("fail"),
            "{name}: {doc:#}"
        );
    }
    assert!(
        check(&doc, "policies")["reason"]
            .as_str()
            .unwrap_or("")
            .contains("bad.rego")
    );
    assert_eq!(check(&doc, "servers")["status"], json!("warn"));

    // A configuration that does not load is one failed check, not a crash.
    std::fs::write(world.path("warden.json"), "{\"mcpServers\": {\"a b\": {}}}").expect("write");
    let output = world.run(&[
        "--config",
        &world.path("warden.json").display().to_string(),
        "doctor",
        "--json",
    ]);
    let doc = json_of(&output);
    exit_matches(&output, &doc);
    assert_eq!(check(&doc, "config")["status"], json!("fail"));
    assert!(
        check(&doc, "config")["reason"]
            .as_str()
            .unwrap_or("")
            .contains("warden.json")
    );
}

#[test]
fn doctor_without_configuration_warns_and_names_the_default_log() {
    let world = World::new();
    let output = world.run(&["doctor", "--json"]);
    let doc = json_of(&output);
    exit_matches(&output, &doc);
    assert_eq!(check(&doc, "config")["status"], json!("warn"));
    // No `audit.path`: the session's log is the config dir's own.
    assert_eq!(check(&doc, "audit")["status"], json!("ok"), "{doc}");
    let reason = check(&doc, "audit")["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.contains(
            &world
                .path("config")
                .join("audit.jsonl")
                .display()
                .to_string()
        ),
        "{reason}"
    );
}

#[test]
fn completions_name_the_commands() {
    let world = World::new();
    for shell in ["bash", "zsh", "fish"] {
        let output = world.run(&["completions", shell]);
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&output.stdout);
        let config_flag = if shell == "fish" {
            "-l config"
        } else {
            "--config"
        };
        for word in ["import", "doctor", "gateway", "mcp", "audit", config_flag] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
        assert!(
            !script.contains("example-server"),
            "{shell}: hidden command completed"
        );
    }
    let output = world.run(&["completions", "tcsh"]);
    assert_eq!(output.status.code(), Some(2));
    // Its stdout is the script: --json is refused with one object.
    let output = world.run(&["--json", "completions", "bash"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(json_of(&output)["outcome"], json!("usage_error"));
}

#[test]
fn every_help_has_examples() {
    let world = World::new();
    let commands: &[&[&str]] = &[
        &[],
        &["demo"],
        &["call"],
        &["run"],
        &["repl"],
        &["mcp"],
        &["mcp", "list"],
        &["mcp", "status"],
        &["mcp", "approve"],
        &["mcp", "revoke"],
        &["pin", "list"],
        &["pin", "reset"],
        &["sandbox", "check"],
        &["sandbox", "exec"],
        &["policy", "check"],
        &["policy", "eval"],
        &["policy", "test"],
        &["audit", "verify"],
        &["audit", "head"],
        &["audit", "show"],
        &["gateway"],
        &["import"],
        &["completions"],
        &["doctor"],
    ];
    for words in commands {
        let mut args = words.to_vec();
        args.push("--help");
        let output = world.run(&args);
        assert_eq!(output.status.code(), Some(0), "{words:?}");
        let help = String::from_utf8_lossy(&output.stdout);
        let examples = help
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("no Examples: in `warden {} --help`", words.join(" ")));
        let command = format!("warden {}", words.join(" "));
        assert!(
            examples.contains(command.trim_end()),
            "`{command} --help` examples do not show it: {examples}"
        );
    }
}

#[test]
fn doctor_warns_about_a_project_server_awaiting_approval() {
    let world = World::new();
    std::fs::write(
        world.path("ws/.mcp.json"),
        json!({"mcpServers": {"proj": {"command": WARDEN, "args": ["example-server", "notes"]}}})
            .to_string(),
    )
    .expect("write");
    let output = world.run(&["doctor", "--json"]);
    let doc = json_of(&output);
    exit_matches(&output, &doc);
    let server = check(&doc, "server proj");
    assert_eq!(server["status"], json!("warn"), "{doc:#}");
    assert!(
        server["reason"]
            .as_str()
            .unwrap_or("")
            .contains("warden mcp approve proj")
    );
    assert!(
        check(&doc, "config")["reason"]
            .as_str()
            .unwrap_or("")
            .contains(".mcp.json")
    );
}

/// A reader that stops early closes warden's stdout (`warden pin list |
/// head -1`): warden ends quietly, with SIGPIPE's status, and never with a
/// panic message.
#[test]
fn a_closed_stdout_ends_warden_quietly() {
    let world = World::new();
    for args in [&["pin", "list"][..], &["sandbox", "check"][..]] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let output = world
            .command(args)
            .env_remove("RUST_BACKTRACE")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run warden");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(141), "{args:?}: {stderr}");
    }
}
