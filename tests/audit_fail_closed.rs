//! Fail closed, with real processes and a server that counts the calls it
//! receives: when the audit log cannot take the pending record, the call is
//! not sent (`audit_failed`, exit 1) and the server never sees it; a
//! session whose `session_start` cannot be written does not start.
//! `audit.on_failure: "continue"` sends calls anyway, says so, and records
//! the gap once the log takes writes again. A gateway (stdio, HTTP) or
//! repl whose log lost records while it ran exits 1, saying how many and
//! that `warden audit verify` shows where, even after the log recovered:
//! the session's record has a gap, as for `call` and `run`.
//!
//! A log that fails in the middle of a session is made with `prlimit`:
//! warden runs with SIGXFSZ ignored, and its file size limit is lowered to
//! the log's current size, so the next write fails with EFBIG.

mod gateway_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gateway_support::cli_support::{audit_lines, calls_received, exec_within, stderr};
use gateway_support::{StdioGateway, World, eventually, is_error, text_of};
use serde_json::{Value, json};

fn counting_world(audit: Value) -> (World, PathBuf) {
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": audit,
    }));
    (world, counter)
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            stderr(output)
        )
    })
}

/// One message on stderr, the one `--json`'s `error` carries.
fn assert_one_message(output: &Output, needle: &str) {
    let err = stderr(output);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one clear message, got:\n{err}");
    assert!(
        lines[0].starts_with("warden: ") && lines[0].contains(needle),
        "{err}"
    );
}

#[test]
fn a_log_that_is_no_regular_file_refuses_the_call_and_the_server_never_sees_it() {
    // `/dev/full` fails every write; `/dev/null` took every record and
    // kept none (with `fsync: never` or `batch` the session ran, exit 0,
    // unaudited). Both, and a symlink to one, are refused by name.
    let (world, counter) = counting_world(json!({"fsync": "never"}));
    let output = world.run(&["--audit", "/dev/null", "--json", "call", "fx", "echo"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["outcome"], "audit_failed", "{report}");
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("/dev/null is not a regular file") && error.contains("does not start"),
        "{error}"
    );
    let link = world.path("audit-link.jsonl");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    for fsync in ["batch", "never"] {
        world.write_config(&json!({
            "mcpServers": {"fx": world.counting_fixture().0},
            "permissions": {"allow": ["mcp__fx__*"]},
            "audit": {"path": link, "fsync": fsync},
        }));
        let output = world.run(&["call", "fx", "echo"]);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{fsync}: {}",
            stderr(&output)
        );
        assert_one_message(&output, "is not a regular file");
        assert!(!world.path("audit-link.jsonl.head").exists());
    }
    assert!(calls_received(&counter).is_empty(), "the server saw a call");

    let output = world.run(&["--audit", "/dev/full", "--json", "call", "fx", "echo"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["outcome"], "audit_failed", "{report}");
    assert_eq!(report["server"], "fx");
    assert!(report["decision"].is_null() && report["result"].is_null());
    let error = report["error"].as_str().unwrap_or_default();
    assert!(error.contains("/dev/full is not a regular file"), "{error}");
    assert!(error.contains("does not start"), "{error}");
    assert_one_message(&output, "is not a regular file");
    assert!(
        calls_received(&counter).is_empty(),
        "the server saw the call"
    );
    // The session did not start: not even the server was launched.
    assert!(eventually(5.0, || world.leftover_processes().is_empty()));

    // Without --json: the same single message, exit 1, nothing on stdout.
    let output = world.run(&["--audit", "/dev/full", "call", "fx", "echo"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert_one_message(&output, "is not a regular file");
    // And `mcp status` does not run unaudited either.
    let output = world.run(&["--audit", "/dev/full", "--json", "mcp", "status"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(json_of(&output)["outcome"], "audit_failed");
    assert!(calls_received(&counter).is_empty());
    assert!(!Path::new("/dev/full.head").exists());
}

/// `warden ARGS…` with `log` read-only: for root (whom file modes do not
/// stop) a read-only bind mount in a private mount namespace; else mode
/// 0444.
fn with_read_only_log(world: &World, log: &Path, args: &[&str]) -> Output {
    let warden = world.warden(args);
    if !nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(log, std::fs::Permissions::from_mode(0o444)).unwrap();
        let mut warden = warden;
        return warden.output().expect("run warden");
    }
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "sh",
        "-c",
        r#"mount --bind -o ro "$0" "$0" && exec "$@""#,
    ])
    .arg(log);
    let mut cmd = exec_within(cmd, &warden);
    cmd.output().expect("run unshare")
}

#[test]
fn a_read_only_log_refuses_the_call_and_the_server_never_sees_it() {
    let (world, counter) = counting_world(json!({"path": "audit.jsonl"}));
    let log = world.workspace.join("audit.jsonl");
    // A first session writes the log (and the server counts its call).
    let output = world.run(&["call", "fx", "echo"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(calls_received(&counter), ["echo"]);
    let before = std::fs::read(&log).unwrap();

    let output = with_read_only_log(&world, &log, &["--json", "call", "fx", "echo"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["outcome"], "audit_failed", "{report}");
    let error = report["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("Read-only file system") || error.contains("Permission denied"),
        "{error}"
    );
    assert_eq!(
        calls_received(&counter),
        ["echo"],
        "the server saw the call"
    );
    assert_eq!(std::fs::read(&log).unwrap(), before, "the log changed");
    assert!(eventually(5.0, || world.leftover_processes().is_empty()));
}

/// The gateway of `world` with SIGXFSZ ignored (as a shell that traps it
/// would), so a file size limit is an error, not a signal.
async fn start(world: &World) -> StdioGateway {
    start_with(world, r#"trap "" XFSZ"#).await
}

/// The gateway of `world`, started by a shell that first runs `setup`
/// (e.g. `trap - XFSZ`: SIGXFSZ with its default action, which ends the
/// process).
async fn start_with(world: &World, setup: &str) -> StdioGateway {
    let warden = world.warden(&["gateway", "--stdio"]);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!(r#"{setup}; exec "$0" "$@""#)]);
    let mut cmd = tokio::process::Command::from(exec_within(cmd, &warden));
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    StdioGateway::spawn(cmd).await
}

/// Sets the running gateway's file size limit (`None`: unlimited), as
/// a full disk would stop its writes.
fn limit_file_size(gateway: &StdioGateway, bytes: Option<u64>) {
    let pid = gateway.child.id().expect("running").to_string();
    let limit = bytes.map_or("unlimited".to_string(), |b| format!("{b}:unlimited"));
    let status = Command::new("prlimit")
        .args(["--pid", &pid, &format!("--fsize={limit}")])
        .status()
        .expect("run prlimit");
    assert!(status.success(), "prlimit failed");
}

/// Disconnects; the gateway must have exited cleanly. Its stderr.
async fn finish(gateway: StdioGateway) -> String {
    let (status, stderr) = gateway.finish().await;
    assert!(
        status.success(),
        "gateway exit {status:?}; stderr:\n{stderr}"
    );
    stderr
}

/// Disconnects a gateway whose log lost records while it ran (fail-closed):
/// it exits 1, however its clients fared and though the log took writes
/// again, saying how many records were lost and how to find the gap. (It
/// exited 0, so a CI job running it never learned its log had a gap.)
async fn finish_after_loss(gateway: StdioGateway) -> String {
    let (status, stderr) = gateway.finish().await;
    assert_eq!(status.code(), Some(1), "stderr:\n{stderr}");
    assert_lost_said(&stderr);
    stderr
}

/// The message of a session that lost records, on stderr.
fn assert_lost_said(stderr: &str) {
    assert!(
        stderr.contains("the audit log lost")
            && stderr.contains("record(s)")
            && stderr.contains("warden audit verify"),
        "{stderr}"
    );
}

fn log_size(log: &Path) -> u64 {
    std::fs::metadata(log).map_or(0, |m| m.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_fails_mid_session_refuses_the_call_and_the_server_never_sees_it() {
    let (world, counter) = counting_world(json!({"path": "audit.jsonl", "fsync": "batch"}));
    let log = world.workspace.join("audit.jsonl");
    let gateway = start(&world).await;
    assert!(!is_error(&gateway.echo("hi").await));
    assert_eq!(calls_received(&counter), ["echo"]);
    // Everything so far is in the file; then the disk "fills up".
    assert!(eventually(10.0, || audit_lines(&log)
        .iter()
        .any(|r| r["event"] == "tool_result")));
    let size = log_size(&log);
    limit_file_size(&gateway, Some(size));

    let refused = gateway.echo("hi").await;
    assert!(is_error(&refused));
    let text = text_of(&refused);
    assert!(
        text.contains("audit_failed") && text.contains("not sent") && text.contains("too large"),
        "{text}"
    );
    assert_eq!(
        calls_received(&counter),
        ["echo"],
        "the server saw the call"
    );
    assert_eq!(
        log_size(&log),
        size,
        "nothing (not even a part) was written"
    );

    // The disk has room again: calls go through, and the log says what
    // it could not record meanwhile.
    limit_file_size(&gateway, None);
    assert!(!is_error(&gateway.echo("hi").await));
    assert_eq!(calls_received(&counter), ["echo", "echo"]);
    finish_after_loss(gateway).await;
    let records = audit_lines(&log);
    let gap = records
        .iter()
        .position(|r| r["event"] == "audit_gap")
        .expect("an audit_gap record");
    assert!(records[gap]["lost"].as_u64() >= Some(1), "{}", records[gap]);
    assert!(
        records[gap]["error"]
            .as_str()
            .is_some_and(|e| e.contains("too large")),
        "{}",
        records[gap]
    );
    let pending: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "tool_call" && r["outcome"] == "pending")
        .collect();
    assert_eq!(pending.len(), 2, "only the two calls that were sent");
    assert!(pending[1]["seq"].as_u64() > records[gap]["seq"].as_u64());
    let verify = world.run(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}

/// The attack: the log's next record crosses the file size limit
/// (`ulimit -f`, RLIMIT_FSIZE), with SIGXFSZ at its default action, as a
/// login shell leaves it. The kernel's answer to the write is that
/// signal, which ended warden mid-write (status 153): a torn record in the
/// log, no `audit_failed` and no JSON object for the call, a gateway gone
/// for every client, and the next session refusing the log until someone
/// cut the torn line. warden blocks SIGXFSZ, so the write fails (EFBIG)
/// and is refused, and cut back, like any failed write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_size_limit_refuses_the_call_instead_of_killing_warden() {
    let (world, counter) = counting_world(json!({"path": "audit.jsonl", "fsync": "batch"}));
    let log = world.workspace.join("audit.jsonl");
    let output = world.run(&["call", "fx", "echo"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let before = std::fs::read(&log).unwrap();

    // `warden call` whose session_start record only partly fits.
    let warden = world.warden(&["--json", "call", "fx", "echo"]);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"trap - XFSZ; exec prlimit --fsize="$0" -- "$@""#])
        .arg((before.len() + 100).to_string());
    let mut cmd = exec_within(cmd, &warden);
    let output = cmd.output().expect("run prlimit");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report = json_of(&output);
    assert_eq!(report["outcome"], "audit_failed", "{report}");
    assert_eq!(std::fs::read(&log).unwrap(), before, "a part was left");
    assert_eq!(
        calls_received(&counter),
        ["echo"],
        "the server saw the call"
    );

    // A gateway that reaches the limit mid-session stays up and refuses.
    let gateway = start_with(&world, "trap - XFSZ").await;
    assert!(!is_error(&gateway.echo("hi").await));
    assert!(eventually(10.0, || audit_lines(&log)
        .iter()
        .filter(|r| r["event"] == "tool_result")
        .count()
        == 2));
    let size = log_size(&log);
    limit_file_size(&gateway, Some(size + 100));
    let refused = gateway.echo("hi").await;
    assert!(is_error(&refused));
    assert!(
        text_of(&refused).contains("audit_failed"),
        "{}",
        text_of(&refused)
    );
    assert_eq!(calls_received(&counter), ["echo", "echo"]);
    assert_eq!(log_size(&log), size, "a part was left");
    limit_file_size(&gateway, None);
    assert!(!is_error(&gateway.echo("hi").await));
    assert_eq!(calls_received(&counter), ["echo", "echo", "echo"]);
    finish_after_loss(gateway).await;
    let verify = world.run(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_failure_continue_runs_unaudited_loudly_and_records_the_gap() {
    let (world, counter) = counting_world(json!({"path": "audit.jsonl", "on_failure": "continue"}));
    let log = world.workspace.join("audit.jsonl");

    // `mcp status` says so, in text and JSON.
    let status = world.run(&["mcp", "status"]);
    assert_eq!(status.status.code(), Some(0));
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("on_failure: continue") && text.contains("UNAUDITED"),
        "{text}"
    );
    assert!(
        stderr(&status).contains("on_failure is \"continue\""),
        "{}",
        stderr(&status)
    );
    let status = world.run(&["--json", "mcp", "status"]);
    let document: Value = serde_json::from_slice(&status.stdout).expect("json");
    assert_eq!(document["audit"]["on_failure"], "continue");
    assert_eq!(document["audit"]["state"], "ok");

    let gateway = start(&world).await;
    assert!(!is_error(&gateway.echo("hi").await));
    let size = log_size(&log);
    limit_file_size(&gateway, Some(size));
    // Not recorded, but sent: that is what `continue` means.
    assert!(!is_error(&gateway.echo("hi").await));
    assert_eq!(calls_received(&counter), ["echo", "echo"]);
    assert_eq!(log_size(&log), size);
    limit_file_size(&gateway, None);
    assert!(!is_error(&gateway.echo("hi").await));
    let stderr = finish(gateway).await;
    // Loud: at start, and when a call went out unrecorded.
    assert!(stderr.contains("on_failure is \"continue\""), "{stderr}");
    assert!(stderr.contains("sending it anyway"), "{stderr}");

    let records = audit_lines(&log);
    let gap = records
        .iter()
        .find(|r| r["event"] == "audit_gap")
        .expect("an audit_gap record");
    // The unrecorded call's pending record and its result.
    assert!(gap["lost"].as_u64() >= Some(2), "{gap}");
    assert_eq!(calls_received(&counter).len(), 3);
    let verify = world.run(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(0));

    // The default is fail-closed, and `mcp status` says that too.
    let (world, _) = counting_world(json!({"path": "audit.jsonl"}));
    let status = world.run(&["--json", "mcp", "status"]);
    let document: Value = serde_json::from_slice(&status.stdout).expect("json");
    assert_eq!(document["audit"]["on_failure"], "fail_closed");
    let status = world.run(&["mcp", "status"]);
    assert!(String::from_utf8_lossy(&status.stdout).contains("fail-closed"));
}

/// The same attack on every other kind of request a gateway client can
/// make (CONTRACT §8), straight after the gateway started, while records
/// of `batch` mode still waited in its queue: a resource read, a
/// subscription, a prompt and a completion are each refused and never
/// reach the server. That write took the queued records down with it, and
/// the log then refused every record for the rest of the session, the
/// disk free again or not, with nothing in it saying records were lost.
/// Now a failed write that left the file as it was (a full disk, a size
/// limit) loses only what it carried: the next write that succeeds starts
/// with an `audit_gap` record counting them, and the requests go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_kind_is_refused_when_its_record_cannot_be_written() {
    use rmcp::model::{
        ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, PromptReference,
        ReadResourceRequestParams, Reference, SubscribeRequestParams,
    };
    let world = World::new();
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture},
        "permissions": {"allow": [
            "mcp__fx__*", "resource__fx(uri: fixture://notes/**)", "prompt__fx__greet"
        ]},
        "audit": {"path": "audit.jsonl", "fsync": "batch"},
    }));
    let log = world.workspace.join("audit.jsonl");
    let gateway = start_with(&world, "trap - XFSZ").await;
    let client = &gateway.client;
    let uri = "fixture://notes/1";
    let requests = || async {
        let read = client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .map_err(|e| eprintln!("read: {e}"))
            .is_ok();
        #[allow(deprecated)] // the legacy request a 2025-11-25 client still sends
        let subscribed = client
            .subscribe(SubscribeRequestParams::new(uri))
            .await
            .map_err(|e| eprintln!("subscribe: {e}"))
            .is_ok();
        let prompt = client
            .get_prompt(GetPromptRequestParams::new("fx__greet").with_arguments(
                serde_json::Map::from_iter([("name".to_string(), json!("Ada"))]),
            ))
            .await
            .map_err(|e| eprintln!("prompt: {e}"))
            .is_ok();
        let completed = client
            .complete(CompleteRequestParams::new(
                Reference::Prompt(PromptReference::new("fx__greet")),
                ArgumentInfo::new("name", "A"),
            ))
            .await
            .map_err(|e| eprintln!("complete: {e}"))
            .is_ok();
        [read, subscribed, prompt, completed]
    };
    let size = log_size(&log);
    limit_file_size(&gateway, Some(size));
    assert_eq!(requests().await, [false; 4], "answered unrecorded");
    assert!(
        calls_received(&counter).is_empty(),
        "the server saw {:?}",
        calls_received(&counter)
    );
    assert_eq!(log_size(&log), size);
    limit_file_size(&gateway, None);
    assert_eq!(requests().await, [true; 4]);
    finish_after_loss(gateway).await;
    let verify = world.run(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    let records = audit_lines(&log);
    let lost: u64 = records
        .iter()
        .filter(|r| r["event"] == "audit_gap")
        .filter_map(|r| r["lost"].as_u64())
        .sum();
    // The four refused requests, and anything that waited with them.
    assert!(lost >= 4, "{records:?}");
    assert!(records.iter().any(|r| r["event"] == "session_end"));
}

/// `warden ARGS…` of `world` run by a shell that ignores SIGXFSZ (so a
/// file size limit is an error, not a signal), stdin and stderr piped.
fn spawn_ignoring_xfsz(world: &World, args: &[&str]) -> std::process::Child {
    let warden = world.warden(args);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"trap "" XFSZ; exec "$0" "$@""#]);
    exec_within(cmd, &warden)
        .current_dir(&world.workspace)
        .env_remove("WARDEN_MODEL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn warden")
}

/// Lowers `pid`'s file size limit to the log's size: its next record is
/// lost (a full disk).
fn fill_the_disk(pid: u32, log: &Path) {
    let status = Command::new("prlimit")
        .args([
            "--pid",
            &pid.to_string(),
            &format!("--fsize={}:unlimited", log_size(log)),
        ])
        .status()
        .expect("run prlimit");
    assert!(status.success(), "prlimit failed");
}

/// The exit status and stderr of `child`, which must end within 30 s.
fn wait_within(mut child: std::process::Child) -> (Option<i32>, String) {
    let mut stderr_pipe = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr_pipe, &mut text);
        text
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("warden did not end in time");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    (status.code(), reader.join().unwrap_or_default())
}

/// `warden gateway --listen`: the disk fills up while it serves (its
/// `session_end` is lost), then SIGTERM, its clean shutdown. Before the
/// fix it exited 0, as if its log were whole.
#[test]
fn the_http_gateway_exits_1_when_its_log_lost_records() {
    let (world, _) = counting_world(json!({"path": "audit.jsonl", "fsync": "every_record"}));
    let log = world.workspace.join("audit.jsonl");
    let mut child = spawn_ignoring_xfsz(&world, &["gateway", "--listen", "127.0.0.1:0"]);
    let mut stderr_lines = std::io::BufRead::lines(std::io::BufReader::new(
        child.stderr.take().expect("stderr"),
    ));
    let mut seen = Vec::new();
    for line in stderr_lines.by_ref() {
        let line = line.unwrap_or_default();
        let listening = line.contains("warden gateway: listening on ");
        seen.push(line);
        if listening {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains("listening on")),
        "{seen:?}"
    );
    assert!(eventually(10.0, || audit_lines(&log)
        .iter()
        .any(|r| r["event"] == "session_start")));
    fill_the_disk(child.id(), &log);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let rest = std::thread::spawn(move || stderr_lines.map_while(Result::ok).collect::<Vec<_>>());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stderr = rest.join().unwrap_or_default().join("\n");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_lost_said(&stderr);
    assert!(
        !audit_lines(&log)
            .iter()
            .any(|r| r["event"] == "session_end"),
        "the session_end was not lost after all"
    );
}

/// `warden repl`, input piped: the disk fills up during the session, then
/// `/quit`. Before the fix it exited 0.
#[test]
fn the_repl_exits_1_when_its_log_lost_records() {
    let (world, _) = counting_world(json!({"path": "audit.jsonl", "fsync": "every_record"}));
    let log = world.workspace.join("audit.jsonl");
    let script = world.path("model.json");
    std::fs::write(&script, json!([{"text": "hello"}]).to_string()).expect("script");
    let model = format!("scripted:{}", script.display());
    let mut child = spawn_ignoring_xfsz(&world, &["--model", &model, "repl"]);
    assert!(eventually(20.0, || audit_lines(&log)
        .iter()
        .any(|r| r["event"] == "server_start")));
    fill_the_disk(child.id(), &log);
    {
        let mut stdin = child.stdin.take().expect("stdin");
        std::io::Write::write_all(&mut stdin, b"/quit\n").expect("write stdin");
    }
    let (code, stderr) = wait_within(child);
    assert_eq!(code, Some(1), "{stderr}");
    assert_lost_said(&stderr);

    // The same session with nothing lost still ends with 0.
    let child = spawn_ignoring_xfsz(&world, &["--model", &model, "repl"]);
    let mut child = child;
    {
        let mut stdin = child.stdin.take().expect("stdin");
        std::io::Write::write_all(&mut stdin, b"/quit\n").expect("write stdin");
    }
    let (code, stderr) = wait_within(child);
    assert_eq!(code, Some(0), "{stderr}");
}
