//! `warden run --ci --json` stopped by a signal — SIGINT, SIGTERM, or
//! SIGHUP (a CI runner cancelling a job, a closed terminal or ssh session)
//! — while servers connect or mid-call: warden still ends on its own
//! (an exit code, not death by the signal), prints its one JSON object
//! with the honest status, audits the call in flight as `abandoned`,
//! closes the session in the audit log and leaves no server process.
//! `--timeout` ends it the same way, while servers connect included.

mod cli_support;

use std::process::{Child, Stdio};

use cli_support::{World, audit_lines, calls_received, eventually};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// A world whose `fx` counts the calls it receives, and `slow`, a server
/// that never answers anything (it is still connecting when signalled).
fn world(with_silent: bool) -> (World, std::path::PathBuf) {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    let mut servers = json!({"fx": fixture});
    if with_silent {
        let mut silent = world.fixture();
        if let Some(args) = silent["args"].as_array_mut() {
            args.push("--silent".into());
            args.push("--name".into());
            args.push(format!("silent-{}", world.marker).into());
        }
        servers["slow"] = silent;
    }
    world.write_config(&json!({
        "mcpServers": servers,
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    let script = world.path("model.json");
    let turns = json!([
        {"tool_calls": [{"name": "mcp__fx__sleep", "arguments": {"ms": 60000}}]},
        {"text": "slept"}
    ]);
    std::fs::write(&script, turns.to_string()).expect("script");
    (world, counter)
}

fn start(world: &World) -> Child {
    let model = format!("scripted:{}", world.path("model.json").display());
    world
        .warden(&[
            "run", "--ci", "--json", "--model", &model, "--task", "sleep",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warden")
}

/// Signals warden, then checks how it ended; returns its JSON object.
fn stop(world: &World, child: Child, signal: Signal) -> Value {
    kill(Pid::from_raw(child.id() as i32), signal).expect("signal warden");
    let output = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{signal}: warden must end with exit 1 (interrupted), not die: {:?}\n{err}",
        output.status
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{signal}: stdout is not one JSON object ({e}): {:?}\n{err}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    assert_eq!(report["status"], "cancelled", "{signal}: {report}");
    assert_eq!(report["outcome"], "cancelled", "{signal}: {report}");
    assert!(
        eventually(8.0, || world.leftover_processes().is_empty()),
        "{signal}: left behind: {:?}",
        world.leftover_processes()
    );
    let records = audit_lines(&world.path("audit.jsonl"));
    assert!(
        records.iter().any(|r| r["event"] == "session_end"),
        "{signal}: no session_end in {records:?}"
    );
    let verify = world.run(&[
        "audit",
        "verify",
        world.path("audit.jsonl").to_str().expect("utf-8 path"),
    ]);
    assert_eq!(verify.status.code(), Some(0), "{signal}: {verify:?}");
    report
}

fn mid_call(signal: Signal) {
    let (world, counter) = world(false);
    let child = start(&world);
    assert!(
        eventually(30.0, || calls_received(&counter)
            .iter()
            .any(|c| c == "sleep")),
        "the call never reached the server"
    );
    let report = stop(&world, child, signal);
    let call = &report["calls"][0];
    assert_eq!(call["qualified"], "mcp__fx__sleep", "{report}");
    assert_eq!(call["outcome"], "abandoned", "{report}");
    let records = audit_lines(&world.path("audit.jsonl"));
    let result = records
        .iter()
        .find(|r| r["event"] == "tool_result")
        .expect("a tool_result record");
    assert_eq!(result["outcome"], "abandoned", "{result}");
}

#[test]
fn sighup_mid_call_ends_the_run_honestly() {
    mid_call(Signal::SIGHUP);
}

#[test]
fn sigterm_mid_call_ends_the_run_honestly() {
    mid_call(Signal::SIGTERM);
}

/// Signalled while a server is still connecting (it never answers): the
/// run had not begun, and says so in its object, not with an empty stdout.
fn while_connecting(signal: Signal) {
    let (world, _) = world(true);
    let child = start(&world);
    let silent = format!("silent-{}", world.marker);
    assert!(
        eventually(30.0, || !cli_support::processes_with(&silent).is_empty()),
        "the silent server never started"
    );
    let report = stop(&world, child, signal);
    assert_eq!(report["turns"], 0, "{report}");
    assert_eq!(report["calls"], json!([]), "{report}");
}

#[test]
fn sigint_while_connecting_still_prints_the_report() {
    while_connecting(Signal::SIGINT);
}

#[test]
fn sighup_while_connecting_still_prints_the_report() {
    while_connecting(Signal::SIGHUP);
}

/// `--timeout` bounds the whole run: a call still running when it passes
/// is given up, audited as ended (`abandoned`), and the verdict is
/// `timeout` (exit 1), with its one JSON object.
#[test]
fn a_timeout_mid_call_is_audited_and_reported() {
    let (world, _) = world(false);
    let model = format!("scripted:{}", world.path("model.json").display());
    let output = world.run(&[
        "run",
        "--ci",
        "--json",
        "--timeout",
        "3",
        "--model",
        &model,
        "--task",
        "sleep",
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["status"], "timeout", "{report}");
    let records = audit_lines(&world.path("audit.jsonl"));
    let call = records
        .iter()
        .find(|r| r["event"] == "tool_call")
        .expect("a tool_call record");
    assert!(
        records
            .iter()
            .any(|r| r["event"] == "tool_result" && r["call_id"] == call["call_id"]),
        "the call given up at the deadline has no tool_result: {records:?}"
    );
    assert!(records.iter().any(|r| r["event"] == "session_end"));
    assert!(
        eventually(8.0, || world.leftover_processes().is_empty()),
        "left behind: {:?}",
        world.leftover_processes()
    );
}

/// `--timeout` covers connecting too: a server that never answers its
/// `initialize` (its own timeout far longer) does not hold the job past
/// the deadline; the verdict is `timeout`, not a run without that server.
#[test]
fn a_timeout_while_connecting_ends_the_run() {
    let world = World::new();
    let mut silent = world.fixture();
    if let Some(args) = silent["args"].as_array_mut() {
        args.push("--silent".into());
    }
    silent["timeout"] = json!(30);
    world.write_config(&json!({
        "mcpServers": {"slow": silent},
        "audit": {"path": world.path("audit.jsonl")},
    }));
    let script = world.path("model.json");
    std::fs::write(&script, json!([{"text": "done"}]).to_string()).expect("script");
    let model = format!("scripted:{}", script.display());
    let output = world.run(&[
        "run",
        "--ci",
        "--json",
        "--timeout",
        "1",
        "--model",
        &model,
        "--task",
        "t",
    ]);
    let report: Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["status"], "timeout", "{report}");
    assert_eq!(report["turns"], 0, "{report}");
    assert_eq!(output.status.code(), Some(1));
    assert!(
        eventually(8.0, || world.leftover_processes().is_empty()),
        "left behind: {:?}",
        world.leftover_processes()
    );
}
