//! A CI job's log is read by a runner as well as by people: GitHub Actions
//! (and Gitea/Forgejo runners) act on a line that starts, after blanks,
//! with `::` (`::add-mask::`, `::set-output`, `::stop-commands::`,
//! `::error file=…::` …) and on `##[command]` anywhere in a line; Azure
//! Pipelines on `##vso[` anywhere. A model or a server that gets such a
//! line printed by `warden run`/`warden call` in CI masks the evidence,
//! forges annotations or outputs, or switches command processing off.
//! These tests make that attack with the real binary (a scripted model as
//! the hostile model, the fixture server's `say` as the hostile result, a
//! server's stderr) and check that nothing warden writes to stdout or
//! stderr could be taken for such a command, while `--json` keeps the
//! exact text for a parser.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

/// Lines a runner would act on, each after an innocuous first line, plus
/// escape sequences a log viewer renders.
const HOSTILE: &str = "All checks passed.\n::add-mask::denied\n  \t::set-output name=verdict::pass\n\u{3000}::stop-commands::xyz\nsee ##[set-output name=verdict]pass\nand ##VSO[task.setvariable variable=ok]true\n\u{1b}[32mPASS\u{1b}[0m";

/// No line of `stream` is a workflow command or carries an escape.
fn assert_inert(what: &str, stream: &[u8]) {
    let text = String::from_utf8_lossy(stream);
    assert!(!text.contains('\u{1b}'), "{what} carries ESC:\n{text}");
    assert_inert_commands(what, stream);
}

/// No line of `stream` is a workflow command.
fn assert_inert_commands(what: &str, stream: &[u8]) {
    let text = String::from_utf8_lossy(stream);
    // The runner reads lines as .NET's ReadLine does: CR, LF or CRLF.
    for line in text.split(['\n', '\r']) {
        assert!(
            !line.trim_start().starts_with("::"),
            "{what} has a workflow command line {line:?}:\n{text}"
        );
        assert!(!line.contains("##["), "{what} has `##[` in {line:?}");
        assert!(
            !line.to_ascii_lowercase().contains("##vso["),
            "{what} has `##vso[` in {line:?}"
        );
    }
}

/// A private HOME, config dir and workspace and a config with the fixture
/// server and `extra` servers; removed on drop.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new(extra: Value) -> Env {
        let dir = tempfile::Builder::new()
            .prefix("warden-ci-log-")
            .tempdir()
            .expect("temp dir");
        for sub in ["home", "cfg", "ws"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        let mut servers = json!({
            "fixture": {"command": WARDEN, "args": ["example-server", "fixture"]}
        });
        if let (Some(all), Value::Object(more)) = (servers.as_object_mut(), extra) {
            all.extend(more);
        }
        let config = json!({
            "mcpServers": servers,
            "permissions": {"allow": ["mcp__fixture__say"]},
            "audit": {"path": dir.path().join("audit.jsonl")}
        });
        std::fs::write(
            dir.path().join("warden.json"),
            serde_json::to_vec_pretty(&config).expect("json"),
        )
        .expect("write config");
        Env { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn script(&self, turns: Value) -> String {
        let path = self.path("model.json");
        std::fs::write(&path, serde_json::to_vec(&turns).expect("json")).expect("script");
        format!("scripted:{}", path.display())
    }

    /// `warden ARGS` with stdout and stderr piped, as a CI runner runs it;
    /// `vars` are set on top of a clean environment for warden's own.
    fn warden(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        let mut command = Command::new(WARDEN);
        command
            .args(args)
            .arg("--config")
            .arg(self.path("warden.json"))
            .current_dir(self.path("ws"))
            .env("HOME", self.path("home"))
            .env("WARDEN_CONFIG_DIR", self.path("cfg"))
            .env_remove("WARDEN_MODEL")
            .env_remove("RUST_LOG")
            .env_remove("WARDEN_AUDIT_KEY")
            .env_remove("GITHUB_ACTIONS")
            .env_remove("TF_BUILD");
        for (k, v) in vars {
            command.env(k, v);
        }
        command.output().expect("run warden")
    }
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_models_answer_cannot_issue_workflow_commands_in_a_ci_log() {
    let env = Env::new(json!({}));
    let model = env.script(json!([{"text": HOSTILE}]));
    // `--ci`: the log of a CI job, shown for a person.
    let output = env.warden(&["run", "--model", &model, "--task", "check", "--ci"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_inert("stdout", &output.stdout);
    assert_inert("stderr", &output.stderr);
    // The answer is still there for the person reading the log.
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(shown.contains("All checks passed."), "{shown}");
    assert!(shown.contains("add-mask::denied"), "{shown}");

    // A runner's log without `--ci` (GitHub Actions, Azure Pipelines): the
    // text stays exact but for the commands, which are broken.
    for var in [("GITHUB_ACTIONS", "true"), ("TF_BUILD", "True")] {
        let output = env.warden(&["run", "--model", &model, "--task", "check"], &[var]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_inert_commands("stdout", &output.stdout);
        assert_inert("stderr", &output.stderr);
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains("\u{1b}[32mPASS"), "{text}");
        assert!(text.contains(":\\:add-mask::denied"), "{text}");
    }
    // Any other pipe gets the text byte for byte.
    let output = env.warden(&["run", "--model", &model, "--task", "check"], &[]);
    assert_eq!(output.stdout, format!("{HOSTILE}\n").into_bytes());

    // `--json` is exact (a parser reads the same text) and inert as a log.
    let output = env.warden(
        &[
            "run", "--ci", "--json", "--model", &model, "--task", "check",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_inert("--json stdout", &output.stdout);
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["final_text"], HOSTILE);
}

#[test]
fn a_tool_result_cannot_issue_workflow_commands_in_a_ci_log() {
    let env = Env::new(json!({}));
    let args = json!({"text": HOSTILE}).to_string();
    let output = env.warden(&["call", "fixture", "say", "--args", &args, "--ci"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_inert("stdout", &output.stdout);
    assert_inert("stderr", &output.stderr);

    let output = env.warden(
        &["call", "fixture", "say", "--args", &args, "--ci", "--json"],
        &[],
    );
    assert_inert("--json stdout", &output.stdout);
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["result"]["content"][0]["text"], HOSTILE);
}

#[test]
fn a_servers_stderr_cannot_issue_workflow_commands_in_a_ci_log() {
    // A server that dies at start with a workflow command as its last
    // words: warden's warning quotes that line.
    let script = "printf '##[set-output name=verdict]pass\\n' >&2; \
                  printf '##vso[task.complete result=Succeeded]\\n' >&2; exit 3";
    let env = Env::new(json!({"dying": {"command": "/bin/sh", "args": ["-c", script]}}));
    let model = env.script(json!([{"text": "done"}]));
    let output = env.warden(
        &["run", "--ci", "-v", "--model", &model, "--task", "check"],
        &[],
    );
    let err = stderr(&output);
    assert!(err.contains("set-output name=verdict"), "{err}");
    assert_inert("stderr", &output.stderr);
    assert_inert("stdout", &output.stdout);
}
