//! Fail closed at the other end of a call: when the audit log stops taking
//! writes while a call is in flight (a full disk, made with `prlimit` as
//! in tests/audit_fail_closed.rs), the call's result cannot be recorded.
//! `warden call` printed the result and exited 0, and the gateway passed
//! the result to its client: an unrecorded result reached the caller.
//! Now the caller gets an error naming the lost record (`audit_failed`,
//! exit 1 for `warden call`), and the next call is not sent while the log
//! cannot take it.

mod gateway_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use gateway_support::cli_support::{audit_lines, calls_received, exec_within, stderr};
use gateway_support::{StdioGateway, World, call, eventually, is_error, text_of};
use serde_json::{Value, json};

const SLEEP_MS: u64 = 4000;

fn world_with_log(fsync: &str) -> (World, PathBuf, PathBuf) {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    let log = world.path("audit.jsonl");
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": log, "fsync": fsync},
    }));
    (world, counter, log)
}

/// Lowers `pid`'s file size limit to the log's size once the sleep call
/// reached the server (its pending record is written): the result record
/// cannot be written.
fn fill_disk_during_the_call(pid: u32, counter: &Path, log: &Path) -> u64 {
    assert!(
        eventually(30.0, || calls_received(counter)
            .iter()
            .any(|c| c == "sleep")),
        "the call never reached the server"
    );
    let size = std::fs::metadata(log).map_or(0, |m| m.len());
    let status = Command::new("prlimit")
        .args([
            "--pid",
            &pid.to_string(),
            &format!("--fsize={size}:unlimited"),
        ])
        .status()
        .expect("run prlimit");
    assert!(status.success(), "prlimit failed");
    size
}

/// `warden call` with SIGXFSZ ignored, so a write over the limit fails
/// with EFBIG instead of killing warden.
fn call_under_limit(world: &World, counter: &Path, log: &Path, json: bool) -> std::process::Output {
    let args = json!({"ms": SLEEP_MS}).to_string();
    let mut argv = vec!["call", "fx", "sleep", "--args", &args];
    if json {
        argv.push("--json");
    }
    let warden = world.warden(&argv);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"trap "" XFSZ; exec "$0" "$@""#]);
    let child = exec_within(cmd, &warden)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warden");
    fill_disk_during_the_call(child.id(), counter, log);
    child.wait_with_output().expect("wait")
}

#[test]
fn warden_call_withholds_a_result_it_could_not_record() {
    for fsync in ["every_record", "batch"] {
        let (world, counter, log) = world_with_log(fsync);
        let output = call_under_limit(&world, &counter, &log, true);
        let err = stderr(&output);
        let report: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{fsync}: not one JSON object ({e}); stderr:\n{err}"));
        assert_eq!(output.status.code(), Some(1), "{fsync}: {report}\n{err}");
        assert_eq!(report["outcome"], "audit_failed", "{fsync}: {report}");
        assert!(report["result"].is_null(), "{fsync}: {report}");
        let error = report["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("could not record the result") && error.contains("too large"),
            "{fsync}: {error}"
        );
        assert!(!output.stdout.windows(5).any(|w| w == b"slept"), "{report}");
        // The log holds the pending record and nothing after the limit.
        let records = audit_lines(&log);
        assert!(
            records
                .iter()
                .any(|r| r["event"] == "tool_call" && r["outcome"] == "pending"),
            "{fsync}: {records:?}"
        );
        assert!(!records.iter().any(|r| r["event"] == "tool_result"));
    }
}

#[test]
fn warden_call_in_text_mode_prints_no_unrecorded_result() {
    let (world, counter, log) = world_with_log("every_record");
    let output = call_under_limit(&world, &counter, &log, false);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        output.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(err.contains("could not record the result"), "{err}");
}

/// The gateway's client gets an error for the call whose result could not
/// be recorded, and the next call is refused, unsent, while the log cannot
/// take it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_withholds_a_result_it_could_not_record() {
    let (world, counter, log) = world_with_log("batch");
    let warden = world.warden(&["gateway", "--stdio"]);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"trap "" XFSZ; exec "$0" "$@""#]);
    let mut cmd = tokio::process::Command::from(exec_within(cmd, &warden));
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let gateway = StdioGateway::spawn(cmd).await;
    let pid = gateway.child.id().expect("running");
    let in_flight = gateway
        .client
        .call_tool(call("fx__sleep", json!({"ms": SLEEP_MS})));
    let limit = tokio::task::spawn_blocking({
        let (counter, log) = (counter.clone(), log.clone());
        move || fill_disk_during_the_call(pid, &counter, &log)
    });
    let result = in_flight.await.expect("a result");
    let size = limit.await.expect("limit set");
    assert!(is_error(&result), "{result:?}");
    let text = text_of(&result);
    assert!(
        text.contains("audit_failed") && text.contains("could not record the result"),
        "{text}"
    );
    assert!(!text.contains("slept"), "{text}");

    let refused = gateway.echo("hi").await;
    assert!(is_error(&refused));
    assert!(
        text_of(&refused).contains("not sent"),
        "{}",
        text_of(&refused)
    );
    assert_eq!(calls_received(&counter), ["sleep"], "the echo was sent");
    assert_eq!(std::fs::metadata(&log).map_or(0, |m| m.len()), size);
    let (_, err) = gateway.finish().await;
    assert!(err.contains("withheld"), "{err}");
}
