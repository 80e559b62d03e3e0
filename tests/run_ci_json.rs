//! `warden run --ci --json`: the real binary, a scripted model and the notes
//! example server in its sandbox. The JSON report is parsed and checked
//! field by field, and every exit code of CONTRACT §2 for `run` is provoked:
//! 0 (done), 1 (a limit hit), 2 (a bad model spec), 3 (`--fail-on-deny`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const WARDEN: &str = env!("CARGO_BIN_EXE_warden");

/// A private HOME, config dir and workspace, a config with the notes
/// server, and an audit log; removed on drop.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::Builder::new()
            .prefix("warden-run-ci-")
            .tempdir()
            .expect("temp dir");
        for sub in ["home", "cfg", "ws"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        let config = json!({
            "mcpServers": {
                "notes": {"command": WARDEN, "args": ["example-server", "notes"]}
            },
            "permissions": {
                "allow": ["mcp__notes__list_notes", "mcp__notes__read_note"],
                "ask": ["mcp__notes__add_note"]
            },
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

    fn script(&self, name: &str, turns: Value) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, serde_json::to_vec(&turns).expect("json")).expect("write script");
        path
    }

    fn run(&self, extra: &[&str]) -> Output {
        let mut command = Command::new(WARDEN);
        command
            .args(["run", "--ci", "--json", "--config"])
            .arg(self.path("warden.json"))
            .args(extra)
            .current_dir(self.path("ws"))
            .env("HOME", self.path("home"))
            .env("WARDEN_CONFIG_DIR", self.path("cfg"))
            .env_remove("WARDEN_MODEL")
            .env_remove("RUST_LOG")
            .env_remove("WARDEN_AUDIT_KEY");
        command.output().expect("run warden")
    }
}

fn model_arg(script: &Path) -> String {
    format!("scripted:{}", script.display())
}

fn parse_report(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited, not killed")
}

#[test]
fn a_completed_run_reports_every_call_with_its_decision_and_outcome() {
    let env = Env::new();
    let script = env.script(
        "ok.json",
        json!([
            {"text": "Listing.", "tool_calls": [
                {"name": "mcp__notes__list_notes", "arguments": {}},
                {"name": "mcp__notes__read_note", "arguments": {"id": 1}}
            ]},
            {"expect": ["Welcome", "shipped with warden"], "text": "Note 1 is the welcome note."}
        ]),
    );
    let output = env.run(&["--model", &model_arg(&script), "--task", "read note 1"]);
    assert_eq!(
        code(&output),
        0,
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = parse_report(&output);
    assert_eq!(report["status"], "completed");
    assert_eq!(report["final_text"], "Note 1 is the welcome note.");
    assert_eq!(report["error"], Value::Null);
    assert_eq!(report["turns"], 2);
    assert_eq!(report["tool_calls"], 2);
    assert_eq!(report["denied_calls"], 0);
    assert_eq!(
        report["usage"],
        json!({"input_tokens": 0, "output_tokens": 0})
    );
    assert!(report["session"].as_str().is_some_and(|s| s.len() == 36));
    let calls = report["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 2);
    for (call, tool) in calls.iter().zip(["list_notes", "read_note"]) {
        assert_eq!(call["server"], "notes");
        assert_eq!(call["tool"], tool);
        assert_eq!(call["qualified"], format!("mcp__notes__{tool}"));
        assert_eq!(call["decision"]["effect"], "allow", "{call}");
        assert_eq!(call["decision"]["stage"], "rules", "{call}");
        assert!(
            call["decision"]["reasons"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        );
        assert_eq!(call["outcome"], "ok");
        assert_eq!(call["error"], Value::Null);
        assert_eq!(call["result"]["isError"], false);
        assert!(call["duration_ms"].is_u64());
    }
    let text = calls[1]["result"]["content"][0]["text"]
        .as_str()
        .expect("text block");
    assert!(text.contains("Welcome"), "{text}");

    // The audit log holds both calls, and its chain verifies.
    let audit = std::fs::read_to_string(env.path("audit.jsonl")).expect("audit log");
    let calls: Vec<Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["caller"], "model");
    let verify = Command::new(WARDEN)
        .args(["audit", "verify"])
        .arg(env.path("audit.jsonl"))
        .env("HOME", env.path("home"))
        .env("WARDEN_CONFIG_DIR", env.path("cfg"))
        .env_remove("WARDEN_AUDIT_KEY")
        .output()
        .expect("verify");
    assert!(verify.status.success(), "{verify:?}");
}

#[test]
fn an_ask_becomes_a_denial_in_ci_and_fail_on_deny_exits_3() {
    let env = Env::new();
    let turns = json!([
        {"tool_calls": [{"name": "mcp__notes__add_note", "arguments": {"title": "t", "body": "b"}}]},
        {"expect": "denied", "text": "I could not add the note."}
    ]);
    let script = env.script("deny.json", turns);

    // Without --fail-on-deny a denial is part of a successful run.
    let output = env.run(&["--model", &model_arg(&script), "--task", "add a note"]);
    assert_eq!(
        code(&output),
        0,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = parse_report(&output);
    assert_eq!(report["status"], "completed");
    assert_eq!(report["denied_calls"], 1);
    let call = &report["calls"][0];
    assert_eq!(call["qualified"], "mcp__notes__add_note");
    assert_eq!(call["decision"]["effect"], "deny");
    assert_eq!(call["decision"]["stage"], "rules");
    let reasons = call["decision"]["reasons"].to_string();
    assert!(reasons.contains("ask"), "{reasons}");
    assert_eq!(call["outcome"], "denied");
    assert_eq!(call["result"], Value::Null);
    assert!(call["error"].as_str().is_some_and(|e| e.contains("denied")));

    // With it, the same run exits 3 and still prints the report.
    let output = env.run(&[
        "--fail-on-deny",
        "--model",
        &model_arg(&script),
        "--task",
        "add a note",
    ]);
    assert_eq!(
        code(&output),
        3,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(parse_report(&output)["denied_calls"], 1);
}

#[test]
fn max_turns_stops_the_run_with_exit_1() {
    let env = Env::new();
    let call = json!({"tool_calls": [{"name": "mcp__notes__list_notes", "arguments": {}}]});
    let script = env.script(
        "loop.json",
        json!([call.clone(), call.clone(), call.clone(), {"text": "done"}]),
    );
    let output = env.run(&[
        "--max-turns",
        "2",
        "--model",
        &model_arg(&script),
        "--task",
        "loop",
    ]);
    assert_eq!(
        code(&output),
        1,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = parse_report(&output);
    assert_eq!(report["status"], "max_turns");
    assert_eq!(report["turns"], 2);
    assert_eq!(report["tool_calls"], 2);
    assert!(
        report["calls"]
            .as_array()
            .expect("calls")
            .iter()
            .all(|c| c["outcome"] == "ok")
    );
}

#[test]
fn max_tool_calls_runs_only_the_budget_and_reports_the_rest_as_skipped() {
    let env = Env::new();
    let script = env.script(
        "many.json",
        json!([
            {"tool_calls": [
                {"name": "mcp__notes__read_note", "arguments": {"id": 1}},
                {"name": "mcp__notes__read_note", "arguments": {"id": 2}},
                {"name": "mcp__notes__list_notes", "arguments": {}}
            ]},
            {"text": "never reached"}
        ]),
    );
    let output = env.run(&[
        "--max-tool-calls",
        "2",
        "--model",
        &model_arg(&script),
        "--task",
        "read",
    ]);
    assert_eq!(
        code(&output),
        1,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = parse_report(&output);
    assert_eq!(report["status"], "max_tool_calls");
    assert_eq!(report["final_text"], Value::Null);
    let calls = report["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[0]["outcome"], "ok");
    assert_eq!(calls[1]["outcome"], "ok");
    assert_eq!(calls[2]["outcome"], "skipped");
    assert_eq!(calls[2]["tool"], "mcp__notes__list_notes");
    // The two calls that ran were sent; the one past the budget is in the
    // log too (CONTRACT §6: nothing a caller asked for goes unrecorded),
    // as `skipped`, with its arguments and no decision, and no result.
    let audit = std::fs::read_to_string(env.path("audit.jsonl")).expect("audit log");
    let records: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    let calls: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "tool_call")
        .collect();
    let outcomes: Vec<&str> = calls
        .iter()
        .map(|r| r["outcome"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(outcomes, ["pending", "pending", "skipped"], "{audit}");
    let skipped = calls[2];
    assert_eq!(skipped["qualified"], "mcp__notes__list_notes", "{skipped}");
    assert_eq!(skipped["server"], "notes", "{skipped}");
    assert_eq!(skipped["arguments"], json!({}), "{skipped}");
    assert!(skipped["decision"].is_null(), "{skipped}");
    assert!(
        skipped["error"]
            .as_str()
            .is_some_and(|e| e.contains("limit of 2 tool calls")),
        "{skipped}"
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r["event"] == "tool_result")
            .count(),
        2
    );
    let verify = Command::new(WARDEN)
        .args(["audit", "verify"])
        .arg(env.path("audit.jsonl"))
        .env("HOME", env.path("home"))
        .env_remove("WARDEN_AUDIT_KEY")
        .output()
        .expect("run warden audit verify");
    assert!(verify.status.success(), "{verify:?}");
}

#[test]
fn a_bad_model_spec_is_a_usage_error() {
    let env = Env::new();
    for spec in ["nonsense", "scripted:/nonexistent/script.json", "gpt:4"] {
        let output = env.run(&["--model", spec, "--task", "x"]);
        assert_eq!(code(&output), 2, "{spec}: {output:?}");
        // --json: one object on stdout, the run's fields null, the error in it.
        let report: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{spec}: stdout is not one JSON object ({e}): {output:?}"));
        assert_eq!(report["outcome"], "usage_error", "{spec}: {report}");
        assert!(
            report["status"].is_null() && report["calls"].is_null(),
            "{report}"
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("warden: "), "{spec}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert_eq!(
            report["error"].as_str().map(|m| format!("warden: {m}\n")),
            Some(stderr.into_owned()),
            "the JSON error is the message stderr carries"
        );
    }
    // No --model at all is the same kind of mistake.
    let output = env.run(&["--task", "x"]);
    assert_eq!(code(&output), 2);
    assert!(String::from_utf8_lossy(&output.stderr).contains("--model"));
}

/// `--timeout` beyond what a clock can count (`1e20` seconds) panicked
/// (exit 101, no JSON object); it is a usage error like `--timeout 0`.
#[test]
fn an_out_of_range_timeout_is_a_usage_error_with_its_object() {
    let env = Env::new();
    let script = env.script("t.json", json!([{"text": "done"}]));
    for timeout in ["1e20", "0", "NaN", "1e300"] {
        let output = env.run(&[
            "--timeout",
            timeout,
            "--model",
            &model_arg(&script),
            "--task",
            "t",
        ]);
        assert_eq!(code(&output), 2, "--timeout {timeout}: {output:?}");
        let report = parse_report(&output);
        assert_eq!(report["outcome"], "usage_error", "{report}");
        assert!(
            report["error"]
                .as_str()
                .is_some_and(|e| e.contains("--timeout")),
            "{report}"
        );
    }
}
