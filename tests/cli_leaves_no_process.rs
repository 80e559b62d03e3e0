//! Stopping warden — normally, on SIGTERM or SIGINT mid-call — leaves no
//! server process behind, and the interrupted call is audited (written ahead,
//! then `abandoned`: warden stopped waiting for it).

mod cli_support;

use std::process::Stdio;

use cli_support::{World, audit_lines, calls_received, eventually, stderr};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

fn world() -> World {
    world_counting().0
}

/// The world, and the file where `fx` notes each call as it receives it.
fn world_counting() -> (World, std::path::PathBuf) {
    let world = World::new();
    let audit = world.path("audit.jsonl");
    let (fixture, counter) = world.counting_fixture();
    world.write_config(&json!({
        "mcpServers": {"fx": fixture, "notes": world.notes("n")},
        "permissions": {"allow": ["mcp__fx__*"]},
        "audit": {"path": audit},
    }));
    (world, counter)
}

/// Waits until the server has received the `sleep` call.
fn wait_for_sleep_call(counter: &std::path::Path) {
    assert!(
        eventually(30.0, || calls_received(counter)
            .iter()
            .any(|c| c == "sleep")),
        "the call never reached the server"
    );
}

#[test]
fn normal_exit_leaves_nothing() {
    let world = world();
    let out = world.run(&["call", "fx", "echo", "--args", "{}"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        eventually(5.0, || world.leftover_processes().is_empty()),
        "left behind: {:?}",
        world.leftover_processes()
    );
    let out = world.run(&["mcp", "status"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(eventually(5.0, || world.leftover_processes().is_empty()));
}

fn interrupt_mid_call(signal: Signal) {
    let (world, counter) = world_counting();
    let mut child = world
        .warden(&["call", "fx", "sleep", "--args", r#"{"ms": 60000}"#])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn warden");
    // Wait until the call is under way: the server has received it.
    wait_for_sleep_call(&counter);
    assert!(
        !world.leftover_processes().is_empty(),
        "the server should be running"
    );
    kill(Pid::from_raw(child.id() as i32), signal).expect("signal warden");
    let status = child.wait().expect("wait");
    assert_ne!(status.code(), Some(0));
    assert!(
        eventually(8.0, || world.leftover_processes().is_empty()),
        "left behind after {signal}: {:?}",
        world.leftover_processes()
    );
    let records = audit_lines(&world.path("audit.jsonl"));
    // Written ahead (`pending`), then how it ended: warden gave up on it
    // as it exited, so `abandoned` (CONTRACT §6; HostOptions::exit).
    let call = records
        .iter()
        .find(|r| r["event"] == "tool_call")
        .expect("a tool_call record");
    assert_eq!(call["outcome"], "pending", "{call}");
    let result = records
        .iter()
        .find(|r| r["event"] == "tool_result" && r["call_id"] == call["call_id"])
        .expect("a tool_result record");
    assert_eq!(result["outcome"], "abandoned", "{result}");
    assert!(records.iter().any(|r| r["event"] == "session_end"));
    let verify = world.run(&[
        "audit",
        "verify",
        world.path("audit.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
}

#[test]
fn sigterm_mid_call_leaves_nothing_and_audits_abandoned() {
    interrupt_mid_call(Signal::SIGTERM);
}

#[test]
fn sigint_mid_call_leaves_nothing_and_audits_abandoned() {
    interrupt_mid_call(Signal::SIGINT);
}

/// SIGHUP (a CI runner cancelling the job, a closed terminal): its default
/// action killed warden outright, with the call never recorded as ended.
#[test]
fn sighup_mid_call_leaves_nothing_and_audits_abandoned() {
    interrupt_mid_call(Signal::SIGHUP);
}

#[test]
fn sigkill_of_warden_leaves_nothing() {
    let (world, counter) = world_counting();
    let mut child = world
        .warden(&["call", "fx", "sleep", "--args", r#"{"ms": 60000}"#])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn warden");
    wait_for_sleep_call(&counter);
    assert!(!world.leftover_processes().is_empty());
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).expect("kill -9");
    let _ = child.wait();
    assert!(
        eventually(8.0, || world.leftover_processes().is_empty()),
        "left behind after kill -9 of warden: {:?}",
        world.leftover_processes()
    );
}

#[test]
fn a_later_session_removes_what_a_killed_one_left_in_tmp() {
    let world = world();
    let dead = {
        let mut child = std::process::Command::new("/bin/true")
            .spawn()
            .expect("spawn");
        let pid = child.id();
        child.wait().expect("wait");
        pid
    };
    let stale = world.dir.path().join(format!("warden-session-{dead}-left"));
    std::fs::create_dir_all(stale.join("home")).unwrap();
    let live = world
        .dir
        .path()
        .join(format!("warden-session-{}-live", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    let out = world.run(&["call", "fx", "echo", "--args", "{}"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stale.exists(), "the dead session's folder was not removed");
    assert!(live.exists(), "a live process's folder must be left alone");
}
